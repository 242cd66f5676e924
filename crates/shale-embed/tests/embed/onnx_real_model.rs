//! The ONNX Runtime embedder on the real model (scripts/fetch-model.sh, which
//! scripts/test.sh runs first): the same vectors as sentence-transformers and as the candle
//! reference, unit length, independent of the batch, in input order, truncated past 256
//! tokens, and under the same model id as the reference.

use std::sync::OnceLock;

use shale_embed::{MiniLm, OnnxMiniLm, DIM};
use shale_search::semantic::Embedder;

fn onnx() -> &'static OnnxMiniLm {
    static MODEL: OnceLock<OnnxMiniLm> = OnceLock::new();
    MODEL.get_or_init(|| {
        OnnxMiniLm::from_env().unwrap_or_else(|e| {
            panic!("{e}\n(the real-model tests need scripts/fetch-model.sh run first)")
        })
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Vectors computed by sentence-transformers (testdata/make_reference.py). Measured: every
/// component within 3e-7 of ONNX Runtime's, as of candle's.
#[test]
fn vectors_match_sentence_transformers() {
    let json: serde_json::Value =
        serde_json::from_str(include_str!("testdata/reference.json")).unwrap();
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() >= 5);
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    let ours = onnx().embed(&texts).unwrap();
    for ((case, text), got) in cases.iter().zip(&texts).zip(&ours) {
        let want: Vec<f32> = case["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let cosine = dot(&want, got);
        let diff = max_abs_diff(&want, got);
        let head: String = text.chars().take(40).collect();
        assert!(
            cosine > 0.99999 && diff < 1e-5,
            "{head:?}: cosine {cosine}, max |diff| {diff}"
        );
    }
}

#[test]
fn same_model_id_and_vectors_as_the_candle_reference() {
    let candle = MiniLm::from_env().unwrap();
    assert_eq!(onnx().model_id(), candle.model_id());
    assert_eq!(onnx().dim(), DIM);
    let texts = [
        "",
        "a",
        "数据库",
        "A man is eating food.",
        "an embedded key-value store keeps a write-ahead log and sorted string tables",
    ];
    let a = onnx().embed(&texts).unwrap();
    let b = candle.embed(&texts).unwrap();
    for ((text, a), b) in texts.iter().zip(&a).zip(&b) {
        assert!(
            max_abs_diff(a, b) < 1e-5,
            "{text:?}: {}",
            max_abs_diff(a, b)
        );
    }
}

#[test]
fn every_vector_has_dim_components_and_unit_norm() {
    let texts = ["", " ", "a", "数据库", "🙂🙂🙂", "key=value;\t\n\u{0}"];
    for (text, v) in texts.iter().zip(onnx().embed(&texts).unwrap()) {
        assert_eq!(v.len(), DIM, "{text:?}");
        let norm = dot(&v, &v).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{text:?}: norm {norm}");
        assert!(v.iter().all(|x| x.is_finite()), "{text:?}");
    }
}

#[test]
fn empty_input_gives_no_vectors() {
    assert!(onnx().embed(&[]).unwrap().is_empty());
    assert!(onnx().embed_batch(&[]).unwrap().is_empty());
}

#[test]
fn a_vector_does_not_depend_on_its_batch() {
    let m = onnx();
    let short = "A man is eating food.";
    let alone = m.embed(&[short]).unwrap().pop().unwrap();
    let long = "An embedded key-value store keeps a write-ahead log, a memtable, and sorted \
                string tables that background compaction merges level by level.";
    let padded = m.embed_batch(&[short, long, long]).unwrap();
    assert!(max_abs_diff(&alone, &padded[0]) < 1e-5);
    let padded = m.embed_batch(&[long, short]).unwrap();
    assert!(max_abs_diff(&alone, &padded[1]) < 1e-5);
    assert_eq!(alone, m.embed(&[short]).unwrap().pop().unwrap());
}

#[test]
fn embed_keeps_input_order_whatever_the_batch_size() {
    let texts: Vec<String> = (0..70)
        .map(|i| format!("{} words in sentence {i}", "many ".repeat(i % 13)))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let one_by_one: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| onnx().embed(&[t]).unwrap().pop().unwrap())
        .collect();
    let mut m = OnnxMiniLm::from_env().unwrap();
    for batch_size in [1, 7, 32, 100] {
        m.set_batch_size(batch_size);
        let batched = m.embed(&texts).unwrap();
        assert_eq!(batched.len(), texts.len());
        for (i, (a, b)) in one_by_one.iter().zip(&batched).enumerate() {
            let diff = max_abs_diff(a, b);
            assert!(diff < 1e-5, "batch size {batch_size}, text {i}: {diff}");
        }
    }
}

#[test]
fn text_past_256_tokens_is_truncated_not_refused() {
    let head = "Compaction merges sorted runs to bound read amplification. ".repeat(40);
    let tail_a = format!("{head} The tail says one thing about cats.");
    let tail_b = format!("{head} An entirely different ending about finance.");
    let v = onnx().embed(&[&tail_a, &tail_b]).unwrap();
    assert!(max_abs_diff(&v[0], &v[1]) < 1e-6);
}

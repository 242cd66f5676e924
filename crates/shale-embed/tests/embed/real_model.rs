//! What an embedder of all-MiniLM-L6-v2 does on the real model (fetched by
//! `scripts/fetch-model.sh`, which `scripts/test.sh` runs first), checked for each of the
//! two: the candle one (`candle::`) and the ONNX Runtime one (`onnx::`). Vectors agree with
//! sentence-transformers and with each other under one model id, have `DIM` components of
//! unit length, do not depend on the batch they were computed in or its size, come in input
//! order, put related sentences closer than unrelated ones, and text past 256 tokens is cut.

use std::sync::OnceLock;

use shale::error::Result;
use shale_embed::{MiniLm, OnnxMiniLm, DIM};
use shale_search::semantic::Embedder;

/// An embedder under test: loaded from the real model files, once per test binary for
/// most checks, afresh where a check changes its batch size.
trait Model: Embedder + Sized + 'static {
    fn load() -> Self;
    fn shared() -> &'static Self;
    fn set_batch_size(&mut self, batch_size: usize);
    /// The texts in one padded forward pass.
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

fn loaded<T>(loaded: Result<T>) -> T {
    loaded.unwrap_or_else(|e| {
        panic!("{e}\n(the real-model tests need scripts/fetch-model.sh run first)")
    })
}

impl Model for MiniLm {
    fn load() -> Self {
        loaded(MiniLm::from_env())
    }
    fn shared() -> &'static Self {
        static MODEL: OnceLock<MiniLm> = OnceLock::new();
        MODEL.get_or_init(<Self as Model>::load)
    }
    fn set_batch_size(&mut self, batch_size: usize) {
        MiniLm::set_batch_size(self, batch_size);
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        MiniLm::embed_batch(self, texts)
    }
}

impl Model for OnnxMiniLm {
    fn load() -> Self {
        loaded(OnnxMiniLm::from_env())
    }
    fn shared() -> &'static Self {
        static MODEL: OnceLock<OnnxMiniLm> = OnceLock::new();
        MODEL.get_or_init(<Self as Model>::load)
    }
    fn set_batch_size(&mut self, batch_size: usize) {
        OnnxMiniLm::set_batch_size(self, batch_size);
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        OnnxMiniLm::embed_batch(self, texts)
    }
}

/// Each check below as a test, for the embedder `$model`.
macro_rules! checks_for {
    ($module:ident, $model:ty) => {
        mod $module {
            #[test]
            fn vectors_match_sentence_transformers() {
                super::vectors_match_sentence_transformers::<$model>();
            }
            #[test]
            fn same_model_id_and_vectors_as_the_other_embedder() {
                super::same_model_id_and_vectors_as_the_other_embedder::<$model>();
            }
            #[test]
            fn related_sentences_are_closer_than_unrelated_ones() {
                super::related_sentences_are_closer_than_unrelated_ones::<$model>();
            }
            #[test]
            fn every_vector_has_dim_components_and_unit_norm() {
                super::every_vector_has_dim_components_and_unit_norm::<$model>();
            }
            #[test]
            fn empty_input_gives_no_vectors() {
                super::empty_input_gives_no_vectors::<$model>();
            }
            #[test]
            fn a_vector_does_not_depend_on_its_batch() {
                super::a_vector_does_not_depend_on_its_batch::<$model>();
            }
            #[test]
            fn embed_keeps_input_order_whatever_the_batch_size() {
                super::embed_keeps_input_order_whatever_the_batch_size::<$model>();
            }
            #[test]
            fn text_past_256_tokens_is_truncated_not_refused() {
                super::text_past_256_tokens_is_truncated_not_refused::<$model>();
            }
        }
    };
}

checks_for!(candle, shale_embed::MiniLm);
checks_for!(onnx, shale_embed::OnnxMiniLm);

fn embed_one(model: &impl Model, text: &str) -> Vec<f32> {
    model.embed(&[text]).unwrap().pop().unwrap()
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

/// Vectors computed by sentence-transformers itself: see testdata/make_reference.py.
/// Measured when they were recorded: every component within 3e-7 of both embedders'
/// (cosine 1.0000000); the bound below leaves room for other CPUs' SIMD paths.
fn reference() -> Vec<(String, Vec<f32>)> {
    let json: serde_json::Value =
        serde_json::from_str(include_str!("testdata/reference.json")).unwrap();
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|case| {
            let text = case["text"].as_str().unwrap().to_string();
            let vector = case["vector"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            (text, vector)
        })
        .collect()
}

fn vectors_match_sentence_transformers<M: Model>() {
    let cases = reference();
    assert!(cases.len() >= 5);
    let texts: Vec<&str> = cases.iter().map(|(t, _)| t.as_str()).collect();
    let ours = M::shared().embed(&texts).unwrap();
    for ((text, want), got) in cases.iter().zip(&ours) {
        let cosine = dot(want, got);
        let diff = max_abs_diff(want, got);
        let head: String = text.chars().take(40).collect();
        assert!(
            cosine > 0.99999 && diff < 1e-5,
            "{head:?}: cosine {cosine}, max |diff| {diff}"
        );
    }
}

/// Vectors of one embedder can stand in an index built by the other: same id, same vectors.
fn same_model_id_and_vectors_as_the_other_embedder<M: Model>() {
    let (candle, onnx) = (MiniLm::shared(), OnnxMiniLm::shared());
    assert_eq!(candle.model_id(), onnx.model_id());
    assert_eq!(M::shared().model_id(), candle.model_id());
    let texts = [
        "",
        "a",
        "数据库",
        "A man is eating food.",
        "an embedded key-value store keeps a write-ahead log and sorted string tables",
    ];
    let a = candle.embed(&texts).unwrap();
    let b = onnx.embed(&texts).unwrap();
    for ((text, a), b) in texts.iter().zip(&a).zip(&b) {
        let diff = max_abs_diff(a, b);
        assert!(diff < 1e-5, "{text:?}: {diff}");
    }
}

fn related_sentences_are_closer_than_unrelated_ones<M: Model>() {
    let v = M::shared()
        .embed(&[
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "A man is riding a horse.",
            "The stock market fell sharply on Tuesday.",
        ])
        .unwrap();
    let related = dot(&v[0], &v[1]);
    let less = dot(&v[0], &v[2]);
    let unrelated = dot(&v[0], &v[3]);
    assert!(related > 0.5, "related {related}");
    assert!(
        related > less && less > unrelated,
        "related {related}, same subject {less}, unrelated {unrelated}"
    );
    assert!(unrelated < 0.2, "unrelated {unrelated}");
}

fn every_vector_has_dim_components_and_unit_norm<M: Model>() {
    let m = M::shared();
    assert_eq!(m.dim(), DIM);
    let texts = ["", " ", "a", "数据库", "🙂🙂🙂", "key=value;\t\n\u{0}"];
    for (text, v) in texts.iter().zip(m.embed(&texts).unwrap()) {
        assert_eq!(v.len(), DIM, "{text:?}");
        let norm = dot(&v, &v).sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{text:?}: norm {norm}");
        assert!(v.iter().all(|x| x.is_finite()), "{text:?}");
    }
}

fn empty_input_gives_no_vectors<M: Model>() {
    assert!(M::shared().embed(&[]).unwrap().is_empty());
    assert!(M::shared().embed_batch(&[]).unwrap().is_empty());
}

fn a_vector_does_not_depend_on_its_batch<M: Model>() {
    let m = M::shared();
    let short = "A man is eating food.";
    let alone = embed_one(m, short);
    // In one padded forward pass beside much longer texts, at the front and at the back.
    let long = "An embedded key-value store keeps a write-ahead log, a memtable, and sorted \
                string tables that background compaction merges level by level.";
    let padded = m.embed_batch(&[short, long, long]).unwrap();
    assert!(max_abs_diff(&alone, &padded[0]) < 1e-5);
    let padded = m.embed_batch(&[long, short]).unwrap();
    assert!(max_abs_diff(&alone, &padded[1]) < 1e-5);
    // And the same text computed twice is the same vector.
    assert_eq!(alone, embed_one(m, short));
}

fn embed_keeps_input_order_whatever_the_batch_size<M: Model>() {
    let texts: Vec<String> = (0..70)
        .map(|i| format!("{} words in sentence {i}", "many ".repeat(i % 13)))
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let one_by_one: Vec<Vec<f32>> = texts.iter().map(|t| embed_one(M::shared(), t)).collect();
    let mut m = M::load();
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

fn text_past_256_tokens_is_truncated_not_refused<M: Model>() {
    let head = "Compaction merges sorted runs to bound read amplification. ".repeat(40);
    let tail_a = format!("{head} The tail says one thing about cats.");
    let tail_b = format!("{head} An entirely different ending about finance.");
    let v = M::shared().embed(&[&tail_a, &tail_b]).unwrap();
    // Both are cut inside the shared head, so the differing tails are never seen.
    assert!(max_abs_diff(&v[0], &v[1]) < 1e-6);
}

//! The quality guard of the fast embedder: on WordNet, the exact top-10
//! neighbours found with ONNX Runtime's vectors overlap those found with the candle
//! reference's by >= 0.97 on average (|A ∩ B| / 10), and the vectors have cosine >= 0.99 to
//! the reference's on average. A faster embedder that loses quality does not pass.
//!
//! 1,000 queries (the first clause of the definition of every n-th gloss, as in
//! shale-bench's semantic-query) over 5,000 glosses spread evenly over WordNet; set
//! `SHALE_GUARD_GLOSSES=20000` for the full-size run. Needs the model
//! (scripts/fetch-model.sh) and WordNet (scripts/fetch-wordnet.sh); scripts/test.sh fetches
//! both. Run with `--nocapture` to see the figures.

use std::path::PathBuf;

use shale_embed::{MiniLm, OnnxMiniLm};
use shale_search::semantic::Embedder;
use shale_testkit::wordnet;

const QUERIES: usize = 1000;
const K: usize = 10;
const MIN_OVERLAP: f64 = 0.97;
const MIN_MEAN_COSINE: f64 = 0.99;

fn wordnet_dir() -> PathBuf {
    let cache = match std::env::var_os("SHALE_CACHE") {
        Some(c) if !c.is_empty() => PathBuf::from(c),
        _ => PathBuf::from(std::env::var_os("HOME").expect("HOME or SHALE_CACHE"))
            .join(".cache/shale"),
    };
    cache.join("wordnet")
}

/// The indexes of the `k` largest dot products of `query` with `docs`, best first.
fn top_k(query: &[f32], docs: &[Vec<f32>], k: usize) -> Vec<usize> {
    let mut scored: Vec<(f32, usize)> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| (query.iter().zip(d).map(|(a, b)| a * b).sum(), i))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().take(k).map(|(_, i)| i).collect()
}

#[test]
fn onnx_neighbours_match_the_reference() {
    let n_docs: usize = std::env::var("SHALE_GUARD_GLOSSES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5000);
    let dir = wordnet_dir();
    let glosses = wordnet::load(&dir)
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-wordnet.sh (scripts/test.sh does)"));
    let step = glosses.len() / n_docs;
    let docs: Vec<&str> = glosses
        .iter()
        .step_by(step)
        .take(n_docs)
        .map(|g| g.text.as_str())
        .collect();
    // Held out: glosses between the sampled ones.
    let queries: Vec<String> = glosses
        .iter()
        .skip(step / 2)
        .step_by(glosses.len() / QUERIES)
        .take(QUERIES)
        .map(|g| {
            let def = g.text.split_once(": ").map_or(g.text.as_str(), |(_, d)| d);
            def.split(';').next().unwrap_or(def).trim().to_string()
        })
        .collect();
    let queries: Vec<&str> = queries.iter().map(String::as_str).collect();
    assert_eq!((docs.len(), queries.len()), (n_docs, QUERIES));

    let reference = MiniLm::from_env().expect("scripts/fetch-model.sh");
    let fast = OnnxMiniLm::from_env().expect("scripts/fetch-model.sh");
    let (ref_docs, ref_queries) = (
        reference.embed(&docs).unwrap(),
        reference.embed(&queries).unwrap(),
    );
    let (fast_docs, fast_queries) = (fast.embed(&docs).unwrap(), fast.embed(&queries).unwrap());

    let mut overlap_sum = 0usize;
    let mut worst = K;
    for (rq, fq) in ref_queries.iter().zip(&fast_queries) {
        let want = top_k(rq, &ref_docs, K);
        let got = top_k(fq, &fast_docs, K);
        let common = got.iter().filter(|i| want.contains(i)).count();
        overlap_sum += common;
        worst = worst.min(common);
    }
    let overlap = overlap_sum as f64 / (QUERIES * K) as f64;
    let cosines: Vec<f64> = ref_docs
        .iter()
        .chain(&ref_queries)
        .zip(fast_docs.iter().chain(&fast_queries))
        .map(|(a, b)| f64::from(a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>()))
        .collect();
    let mean_cosine = cosines.iter().sum::<f64>() / cosines.len() as f64;
    let min_cosine = cosines.iter().copied().fold(f64::MAX, f64::min);
    println!(
        "quality guard, {QUERIES} queries over {n_docs} WordNet glosses: top-{K} overlap {overlap:.4} \
         (worst query {worst}/{K}), cosine to the reference mean {mean_cosine:.7} min {min_cosine:.7}"
    );
    assert!(
        overlap >= MIN_OVERLAP,
        "top-{K} overlap {overlap:.4} < {MIN_OVERLAP}"
    );
    assert!(
        mean_cosine >= MIN_MEAN_COSINE,
        "mean cosine {mean_cosine:.5} < {MIN_MEAN_COSINE}"
    );
}

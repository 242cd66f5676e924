//! Hybrid results against an oracle after every step of a random workload: no hit is a
//! deleted document, every hit's keyword score is the brute-force BM25 score of the
//! document's current text, and every document holding a query word is within reach of the
//! keyword side. The vector side uses the library's word-hashing embedder (128 dimensions):
//! the test is about consistency, not about meaning.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_rng::SplitMix64;
use shale_search::hybrid::{self, Fusion, HybridHit};
use shale_search::semantic::{HashEmbedder, VectorIndex, VectorIndexOptions};
use shale_search::{HybridOptions, Match, TextIndex, TextIndexOptions};
use support::brute_force;

const WORDS: &[&str] = &[
    "porter", "stemmer", "disk", "full", "enospc", "space", "cat", "dog", "sea", "quartz",
];

fn text(rng: &mut SplitMix64) -> String {
    let n = 1 + rng.below(8) as usize;
    (0..n)
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every hit is live in `oracle`, and a hit the keyword side found carries the oracle's
/// BM25 score for it. Returns the first violation.
fn violation(
    hits: &[HybridHit],
    oracle: &BTreeMap<Vec<u8>, String>,
    query: &str,
) -> Option<String> {
    let reference: BTreeMap<Vec<u8>, f64> = brute_force(oracle, query, Match::Any, usize::MAX)
        .into_iter()
        .collect();
    for h in hits {
        if !oracle.contains_key(&h.key) {
            return Some(format!("{:?} is deleted", String::from_utf8_lossy(&h.key)));
        }
        if let Some((_, score)) = h.keyword {
            if reference.get(&h.key) != Some(&score) {
                return Some(format!(
                    "{:?}: keyword score {score}, reference {:?}",
                    String::from_utf8_lossy(&h.key),
                    reference.get(&h.key)
                ));
            }
        }
    }
    None
}

#[test]
fn hybrid_hits_are_live_and_current_after_every_step() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(dir.path(), Options::default()).expect("open"));
    let vectors = VectorIndex::open(
        &db,
        "docs",
        VectorIndexOptions::text(Arc::new(HashEmbedder)).prefix("doc/"),
    )
    .expect("vector index");
    let words =
        TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("doc/")).expect("text index");
    let mut rng = SplitMix64::new(0x4b1d);
    let mut oracle: BTreeMap<Vec<u8>, String> = BTreeMap::new();
    let mut checked = 0;
    for step in 0..300 {
        let key = format!("doc/{:02}", rng.below(60)).into_bytes();
        match rng.below(10) {
            0..=5 => {
                let t = text(&mut rng);
                db.put(&key, &t).expect("put");
                oracle.insert(key, t);
            }
            6 | 7 => {
                db.delete(&key).expect("delete");
                oracle.remove(&key);
            }
            8 => {
                let mut b = WriteBatch::new();
                let t = text(&mut rng);
                b.put(&key, &t);
                let other = format!("doc/{:02}", rng.below(60)).into_bytes();
                b.delete(&other);
                db.write(b, WriteOptions::default()).expect("batch");
                oracle.insert(key.clone(), t);
                if other != key {
                    oracle.remove(&other);
                } else {
                    oracle.remove(&key);
                }
            }
            _ => {
                let mut txn = db.transaction();
                let t = text(&mut rng);
                txn.put(&key, &t);
                txn.commit().expect("commit");
                oracle.insert(key, t);
            }
        }
        let query = format!(
            "{} {}",
            WORDS[rng.below(WORDS.len() as u64) as usize],
            WORDS[rng.below(WORDS.len() as u64) as usize]
        );
        for fusion in [Fusion::default(), Fusion::MinMax] {
            let opts = HybridOptions::k(10).fusion(fusion);
            let hits = hybrid::search(&words, &vectors, &query, None, &opts).expect("hybrid");
            if let Some(v) = violation(&hits, &oracle, &query) {
                panic!("step {step}, {query:?}, {fusion:?}: {v}");
            }
            checked += hits.len();
        }
    }
    assert!(checked > 1000, "{checked} hits checked");
}

#[test]
fn the_check_catches_a_deleted_or_stale_hit() {
    // Negative control: hits fused from a ranking that still holds a deleted document, or
    // a keyword score of an older text, are flagged.
    let mut oracle = BTreeMap::new();
    oracle.insert(b"doc/1".to_vec(), "porter stemmer".to_owned());
    oracle.insert(b"doc/2".to_vec(), "porter".to_owned());
    let current = brute_force(&oracle, "porter", Match::Any, 10);
    let fused = hybrid::fuse(&current, &vec![], Fusion::default(), (1.0, 1.0), 10);
    assert_eq!(violation(&fused, &oracle, "porter"), None);
    let deleted = vec![(b"doc/3".to_vec(), 0.5)];
    let fused = hybrid::fuse(&current, &deleted, Fusion::default(), (1.0, 1.0), 10);
    assert!(violation(&fused, &oracle, "porter").is_some());
    let stale: Vec<(Vec<u8>, f64)> = current.iter().map(|(k, s)| (k.clone(), s * 1.5)).collect();
    let fused = hybrid::fuse(&stale, &vec![], Fusion::default(), (1.0, 1.0), 10);
    assert!(violation(&fused, &oracle, "porter").is_some());
}

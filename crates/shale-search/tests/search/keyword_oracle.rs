//! Keyword results against a brute-force oracle, after every step of a random workload.
//!
//! The workload puts, overwrites, deletes, range-deletes, writes batches and transactions,
//! flushes, compacts, reopens the database, and kills it (the kill -9 image of `MemFs`).
//! After every step, for a few random queries, the index's hits must equal, key for key and
//! score for score (bit-exact), those of a BM25 scorer written here over the oracle's
//! documents; the pruned top k must equal the exhaustive one; no hit may be a deleted or
//! replaced document. The seed is printed; `SHALE_ORACLE_SEED` replays one.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use shale::fs::{FileSystem, MemFs};
use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_rng::SplitMix64;
use shale_search::{KeywordOptions, Match, TextIndex, TextIndexOptions};
use support::{brute_force, hits};

const DIR: &str = "/db";
const PREFIX: &str = "doc/";

/// Words drawn for documents and queries: stems that meet ("stem", "stemming"), stop
/// words, codes, and rare words.
const WORDS: &[&str] = &[
    "stem",
    "stems",
    "stemming",
    "stemmed",
    "porter",
    "rfc",
    "9110",
    "enospc",
    "cat",
    "cats",
    "dog",
    "dogs",
    "run",
    "running",
    "ran",
    "engine",
    "engines",
    "search",
    "searching",
    "the",
    "of",
    "and",
    "a",
    "index",
    "indexes",
    "key",
    "value",
    "values",
    "disk",
    "flush",
    "quartz",
    "zephyr",
];

fn text(rng: &mut SplitMix64) -> String {
    let n = 1 + rng.below(12) as usize;
    (0..n)
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

fn key(rng: &mut SplitMix64) -> Vec<u8> {
    format!("{PREFIX}{:03}", rng.below(120)).into_bytes()
}

struct World {
    mem: MemFs,
    db: Arc<Db>,
    index: TextIndex,
    oracle: BTreeMap<Vec<u8>, String>,
}

fn open(mem: &MemFs) -> (Arc<Db>, TextIndex) {
    let opts = Options {
        fs: Arc::new(mem.clone()) as Arc<dyn FileSystem>,
        write_buffer_size: 64 << 10,
        ..Options::default()
    };
    let db = Arc::new(Db::open(DIR, opts).expect("open"));
    let index =
        TextIndex::open(&db, "docs", TextIndexOptions::new().prefix(PREFIX)).expect("index");
    (db, index)
}

fn check(w: &World, rng: &mut SplitMix64, step: usize, what: &str) {
    let stats = w.index.stats();
    assert_eq!(
        stats.documents,
        w.oracle.len() as u64,
        "step {step} ({what}): N"
    );
    for _ in 0..4 {
        let query = format!(
            "{} {}",
            WORDS[rng.below(WORDS.len() as u64) as usize],
            WORDS[rng.below(WORDS.len() as u64) as usize]
        );
        for mode in [Match::Any, Match::All] {
            let k = 1 + rng.below(12) as usize;
            let opts = KeywordOptions::k(k).mode(mode);
            let got = hits(&w.index, &query, &opts);
            let want = brute_force(&w.oracle, &query, mode, k);
            assert_eq!(got, want, "step {step} ({what}): {query:?} {mode:?} k={k}");
            if mode == Match::Any {
                let exhaustive = hits(&w.index, &query, &opts.clone().exhaustive());
                assert_eq!(got, exhaustive, "step {step}: pruned != exhaustive");
            }
        }
    }
}

fn step(w: &mut World, rng: &mut SplitMix64) -> &'static str {
    match rng.below(100) {
        0..=39 => {
            let (k, t) = (key(rng), text(rng));
            w.db.put(&k, &t).expect("put");
            w.oracle.insert(k, t);
            "put"
        }
        40..=54 => {
            let k = key(rng);
            w.db.delete(&k).expect("delete");
            w.oracle.remove(&k);
            "delete"
        }
        55..=59 => {
            let (a, b) = (key(rng), key(rng));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            w.db.delete_range(&lo, &hi).expect("delete_range");
            w.oracle.retain(|k, _| !(k >= &lo && k < &hi));
            "delete_range"
        }
        60..=69 => {
            let mut batch = WriteBatch::new();
            let mut next = w.oracle.clone();
            for _ in 0..1 + rng.below(6) {
                let k = key(rng);
                if rng.below(3) == 0 {
                    batch.delete(&k);
                    next.remove(&k);
                } else {
                    let t = text(rng);
                    batch.put(&k, &t);
                    next.insert(k, t);
                }
            }
            // Outside the prefix: plain data, never indexed.
            batch.put(b"other/1", b"\xff\xfe not text");
            w.db.write(batch, WriteOptions::default()).expect("batch");
            w.oracle = next;
            "batch"
        }
        70..=77 => {
            let mut txn = w.db.transaction();
            let (k, t) = (key(rng), text(rng));
            let old = txn.get(&k).expect("txn get");
            txn.put(&k, &t);
            let gone = key(rng);
            txn.delete(&gone);
            txn.commit().expect("commit");
            assert_eq!(
                old.map(|v| String::from_utf8(v).expect("utf8")),
                w.oracle.get(&k).cloned()
            );
            w.oracle.insert(k.clone(), t);
            if gone != k {
                w.oracle.remove(&gone);
            } else {
                w.oracle.remove(&k);
            }
            "transaction"
        }
        78..=82 => {
            w.db.flush().expect("flush");
            "flush"
        }
        83..=85 => {
            w.db.compact_range(None, None).expect("compact");
            "compact"
        }
        86..=92 => {
            w.db.close().expect("close");
            let (db, index) = open(&w.mem);
            w.db = db;
            w.index = index;
            "reopen"
        }
        _ => {
            // kill -9: what the process wrote to the OS survives, nothing else runs.
            let image = w.mem.process_crash();
            let (db, index) = open(&image);
            w.mem = image;
            w.db = db;
            w.index = index;
            "kill -9"
        }
    }
}

#[test]
fn keyword_hits_equal_brute_force_after_every_step() {
    let seed = std::env::var("SHALE_ORACLE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0054);
    println!("seed {seed:#x} (SHALE_ORACLE_SEED replays it)");
    let mut rng = SplitMix64::new(seed);
    let mem = MemFs::new();
    let (db, index) = open(&mem);
    let mut w = World {
        mem,
        db,
        index,
        oracle: BTreeMap::new(),
    };
    let mut kinds = BTreeMap::new();
    for i in 0..600 {
        let what = step(&mut w, &mut rng);
        *kinds.entry(what).or_insert(0) += 1;
        check(&w, &mut rng, i, what);
    }
    println!("steps: {kinds:?}");
    assert_eq!(kinds.len(), 9, "every kind of step ran: {kinds:?}");
}

#[test]
fn the_oracle_catches_a_wrong_score() {
    // Negative control: the comparison above fails when the index's scores are not the
    // reference's (here BM25 with b = 0.5 against the reference's 0.75).
    let (db, index) = open(&MemFs::new());
    let mut oracle = BTreeMap::new();
    for (i, t) in ["stem stem cat", "stemming dog dog dog dog", "cat"]
        .iter()
        .enumerate()
    {
        let k = format!("{PREFIX}{i}").into_bytes();
        db.put(&k, t).expect("put");
        oracle.insert(k, t.to_string());
    }
    let mut opts = KeywordOptions::k(10);
    opts.bm25.b = 0.5;
    let got = hits(&index, "stem cat", &opts);
    assert_ne!(got, brute_force(&oracle, "stem cat", Match::Any, 10));
    opts.bm25.b = 0.75;
    let got = hits(&index, "stem cat", &opts);
    assert_eq!(got, brute_force(&oracle, "stem cat", Match::Any, 10));
}

//! Document records survive every crash exactly as their values do.
//!
//! A workload (puts, overwrites, deletes, range deletes, some synced, flushes, a
//! compaction) runs on a `MemFs` planned to crash during its k-th mutating file-system
//! operation, for many k, each crash a power loss of another kind or a kill -9. The image
//! is opened again with the text index, which must find every record in place (no repair:
//! the records are written in the values' WAL records, so a crash keeps both or neither),
//! every synced write, and search results equal to a brute-force scorer over the values
//! that survived.

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use shale::fs::{CrashKind, FileSystem, MemFs, PowerLoss};
use shale::{Db, Options, WriteOptions};
use shale_rng::SplitMix64;
use shale_search::{KeywordOptions, Match, TextIndex, TextIndexOptions};
use support::{brute_force, hits};

const DIR: &str = "/db";
const STEPS: usize = 160;
const WORDS: &[&str] = &[
    "alpha", "beta", "gamma", "delta", "stem", "stems", "rare", "the",
];

fn options(mem: &MemFs) -> Options {
    Options {
        fs: Arc::new(mem.clone()) as Arc<dyn FileSystem>,
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
}

/// The values under the prefix after each write of the workload (`states[0]` is before the
/// first), and how many writes were synced and acknowledged before the crash.
struct Run {
    states: Vec<BTreeMap<Vec<u8>, String>>,
    synced: usize,
}

/// Run the workload until it ends or the file system crashes.
fn workload(mem: &MemFs, seed: u64) -> Run {
    let mut run = Run {
        states: vec![BTreeMap::new()],
        synced: 0,
    };
    let Ok(db) = Db::open(DIR, options(mem)) else {
        return run;
    };
    let db = Arc::new(db);
    let Ok(_ix) = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("d/")) else {
        return run;
    };
    let mut rng = SplitMix64::new(seed);
    for i in 0..STEPS {
        let key = format!("d/{:02}", rng.below(40)).into_bytes();
        let sync = rng.below(4) == 0;
        let opts = WriteOptions {
            sync,
            ..WriteOptions::default()
        };
        let mut batch = shale::WriteBatch::new();
        let mut next = run.states.last().cloned().unwrap_or_default();
        match rng.below(10) {
            0 => {
                batch.delete(&key);
                next.remove(&key);
            }
            1 => {
                let end = format!("d/{:02}", rng.below(40)).into_bytes();
                let (lo, hi) = if key <= end { (key, end) } else { (end, key) };
                batch.delete_range(&lo, &hi);
                next.retain(|k, _| !(k >= &lo && k < &hi));
            }
            _ => {
                let n = 1 + rng.below(20) as usize;
                let words: Vec<&str> = (0..n)
                    .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
                    .collect();
                let text = words.join(" ");
                batch.put(&key, &text);
                next.insert(key, text);
            }
        }
        // Attempted: the crash may keep it even if the call fails.
        run.states.push(next);
        if db.write(batch, opts).is_err() {
            return run;
        }
        if sync {
            run.synced = run.states.len() - 1;
        }
        let ok = match i % 50 {
            17 => db.flush().is_ok(),
            41 => db.compact_range(None, None).is_ok(),
            _ => true,
        };
        if !ok {
            return run;
        }
    }
    run
}

fn kind(i: u64, rng: &mut SplitMix64) -> CrashKind {
    match i % 4 {
        0 => CrashKind::PowerLoss(PowerLoss::default()),
        1 => CrashKind::PowerLoss(PowerLoss {
            tear_last_write: Some(rng.below(1500)),
            ..PowerLoss::default()
        }),
        2 => CrashKind::PowerLoss(PowerLoss {
            write_back: Some(rng.below(u64::MAX)),
            keep_dir_ops: rng.below(3) as usize,
            ..PowerLoss::default()
        }),
        _ => CrashKind::Process,
    }
}

#[test]
fn records_and_values_survive_every_crash_together() {
    let points: u64 = std::env::var("SHALE_CRASH_POINTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(160);
    // How many file-system operations the whole workload takes.
    let clean = MemFs::new();
    workload(&clean, 1);
    let total = clean.ops();
    assert!(total > 50, "the workload does file-system work: {total}");
    let mut rng = SplitMix64::new(0x54);
    let mut checked = 0;
    for i in 0..points {
        let k = 1 + rng.below(total);
        let mem = MemFs::new();
        mem.crash_at_op(k, kind(i, &mut rng));
        let run = workload(&mem, 1);
        let image = mem.crash_image().unwrap_or_else(|| mem.process_crash());
        let db = Arc::new(Db::open(DIR, options(&image)).expect("reopen after the crash"));
        let ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("d/"))
            .expect("index after the crash");
        let r = ix.recovery();
        if r.records_kept > 0 || r.documents_analyzed > 0 {
            // The index existed before the crash: every record is in place.
            assert_eq!(
                (r.documents_analyzed, r.records_deleted),
                (0, 0),
                "crash point {i} (op {k}): values and records disagree: {r:?}"
            );
        }
        let values: BTreeMap<Vec<u8>, String> = db
            .prefix("d/")
            .expect("scan")
            .map(|e| {
                let (k, v) = e.expect("entry");
                (k, String::from_utf8(v).expect("text"))
            })
            .collect();
        // A prefix of the writes, at least every synced one.
        assert!(
            run.states[run.synced..].contains(&values),
            "crash point {i} (op {k}): the values are no prefix of the writes from {}",
            run.synced
        );
        for q in ["alpha stem", "rare", "gamma delta beta"] {
            let o = KeywordOptions::k(10);
            assert_eq!(
                hits(&ix, q, &o),
                brute_force(&values, q, Match::Any, 10),
                "point {i}: {q}"
            );
        }
        checked += 1;
    }
    assert_eq!(checked, points);
}

#[test]
fn the_check_fails_when_values_are_written_without_their_records() {
    // Negative control: writes that bypass the hook (detached, as a database opened
    // without its index) leave values without records, and the reopened index reports
    // the repair the main test forbids.
    let mem = MemFs::new();
    let db = Arc::new(Db::open(DIR, options(&mem)).expect("open"));
    let _ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("d/")).expect("index");
    db.put("d/1", "alpha beta").expect("put");
    assert!(db.detach("text:docs").is_some());
    db.put("d/2", "gamma").expect("put without a record");
    let image = mem.process_crash();
    let db = Arc::new(Db::open(DIR, options(&image)).expect("reopen"));
    let ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("d/")).expect("index");
    let r = ix.recovery();
    assert_eq!((r.records_kept, r.documents_analyzed), (1, 1), "{r:?}");
}

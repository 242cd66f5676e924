//! A long model test: a seeded random workload of puts, deletes, batches, gets, snapshot
//! reads, bounded scans in both directions, flushes, range compactions and reopens, all
//! checked against a `BTreeMap`. CI runs 100,000 operations; set `SHALE_MODEL_OPS` for a
//! longer run (1,000,000 is the documented long mode). The seed is printed; set
//! `SHALE_MODEL_SEED` to replay one.

use std::collections::BTreeMap;

use shale::{Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};
use shale_rng::XorShift64Star as Rng;

const KEYS: u64 = 2_000;

fn key(k: u64) -> Vec<u8> {
    format!("k/{k:05}").into_bytes()
}

fn value(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(120) as usize;
    let b = rng.next_u64() as u8;
    (0..len).map(|i| b.wrapping_add(i as u8)).collect()
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        max_file_size: 64 << 10,
        max_bytes_for_level_base: 1 << 20,
        level0_compaction_trigger: 2,
        block_size: 512,
        ..Options::default()
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn scan(
    db: &Db,
    snap: Option<&Snapshot>,
    lo: u64,
    hi: u64,
    reverse: bool,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let opts = ReadOptions {
        snapshot: snap,
        lower_bound: Some(key(lo)),
        upper_bound: Some(key(hi)),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&opts).unwrap();
    if reverse {
        it.seek_to_last().unwrap();
    } else {
        it.seek_to_first().unwrap();
    }
    let mut out = Vec::new();
    while it.valid() && out.len() < 50 {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev().unwrap();
        } else {
            it.next().unwrap();
        }
    }
    out
}

fn scan_model(m: &Model, lo: u64, hi: u64, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let range = m
        .range(key(lo)..key(hi))
        .map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        range.rev().take(50).collect()
    } else {
        range.take(50).collect()
    }
}

#[test]
fn long_random_workload_matches_btreemap() {
    let ops: u64 = std::env::var("SHALE_MODEL_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let seed: u64 = std::env::var("SHALE_MODEL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    println!("model test: {ops} operations, SHALE_MODEL_SEED={seed}");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(dir.path(), options()).unwrap();
    let mut model = Model::new();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    let mut counts = [0u64; 10];
    // Stats count per open: add each instance's before it is replaced.
    let (mut flushes, mut compactions) = (0, 0);
    for step in 0..ops {
        let r = rng.below(1000);
        let kind = match r {
            0..=399 => 0,   // put
            400..=549 => 1, // delete
            550..=649 => 2, // batch
            650..=889 => 3, // get
            890..=939 => 4, // snapshot read
            940..=979 => 5, // scan
            980..=989 => 6, // take / drop snapshot
            990..=995 => 7, // flush
            996..=998 => 8, // compact a range
            _ => 9,         // reopen
        };
        counts[kind] += 1;
        match kind {
            0 => {
                let (k, v) = (rng.below(KEYS), value(&mut rng));
                db.put(key(k), &v).unwrap();
                model.insert(key(k), v);
            }
            1 => {
                let k = rng.below(KEYS);
                db.delete(key(k)).unwrap();
                model.remove(&key(k));
            }
            2 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.below(10) + 1 {
                    let k = rng.below(KEYS);
                    if rng.below(4) == 0 {
                        b.delete(key(k));
                        model.remove(&key(k));
                    } else {
                        let v = value(&mut rng);
                        b.put(key(k), &v);
                        model.insert(key(k), v);
                    }
                }
                db.write(b, WriteOptions::default()).unwrap();
            }
            3 => {
                let k = rng.below(KEYS + 10);
                assert_eq!(
                    db.get(key(k)).unwrap().as_ref(),
                    model.get(&key(k)),
                    "step {step} get {k}"
                );
            }
            4 => {
                if !snaps.is_empty() {
                    let (snap, old) = &snaps[rng.below(snaps.len() as u64) as usize];
                    let k = rng.below(KEYS);
                    let got = db.get_opt(key(k), &ReadOptions::at(snap)).unwrap();
                    assert_eq!(
                        got.as_ref(),
                        old.get(&key(k)),
                        "step {step} snapshot get {k}"
                    );
                }
            }
            5 => {
                let lo = rng.below(KEYS);
                let hi = lo + rng.below(200);
                let reverse = rng.below(2) == 0;
                let pick = rng.below(snaps.len() as u64 + 1) as usize;
                match snaps.get(pick) {
                    Some((snap, old)) => assert_eq!(
                        scan(&db, Some(snap), lo, hi, reverse),
                        scan_model(old, lo, hi, reverse),
                        "step {step} snapshot scan"
                    ),
                    None => assert_eq!(
                        scan(&db, None, lo, hi, reverse),
                        scan_model(&model, lo, hi, reverse),
                        "step {step} scan"
                    ),
                }
            }
            6 => {
                if snaps.len() >= 3 || (rng.below(2) == 0 && !snaps.is_empty()) {
                    snaps.remove(rng.below(snaps.len() as u64) as usize);
                } else {
                    snaps.push((db.snapshot(), model.clone()));
                }
            }
            7 => db.flush().unwrap(),
            8 => {
                let lo = rng.below(KEYS);
                let hi = lo + rng.below(500);
                db.compact_range(Some(&key(lo)), Some(&key(hi))).unwrap();
            }
            _ => {
                snaps.clear();
                let s = db.stats();
                (flushes, compactions) = (flushes + s.flushes, compactions + s.compactions);
                drop(db);
                db = Db::open(dir.path(), options()).unwrap();
                for k in (0..KEYS).step_by(37) {
                    assert_eq!(
                        db.get(key(k)).unwrap().as_ref(),
                        model.get(&key(k)),
                        "after reopen {k}"
                    );
                }
            }
        }
    }
    snaps.clear();
    let all: Vec<_> = db.range::<&[u8]>(..).unwrap().map(|r| r.unwrap()).collect();
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(all == want, "final full scan differs");
    let s = db.stats();
    let (flushes, compactions) = (flushes + s.flushes, compactions + s.compactions);
    println!("ops by kind {counts:?}; flushes {flushes} compactions {compactions}");
    assert!(compactions > 0, "the workload never compacted");
}

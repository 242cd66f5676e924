//! Model test: random sequences of put / delete / batch / get / multi-get / flush /
//! reopen against a `BTreeMap`, checked key by key after every step that can lose or
//! reorder data.

use std::collections::BTreeMap;

use proptest::prelude::*;
use shale::{Db, Options, ReadOptions, Snapshot, WriteBatch, WriteOptions};

#[derive(Debug, Clone)]
enum Op {
    Put(u8, Vec<u8>),
    Delete(u8),
    Batch(Vec<(u8, Option<Vec<u8>>)>),
    Get(u8),
    /// Read several keys (repeats allowed) in one call, optionally through a snapshot.
    MultiGet(Vec<u8>, Option<usize>),
    Flush,
    Reopen,
    /// Take a snapshot (keeping at most a few).
    TakeSnapshot,
    /// Read a key through the snapshot `i % live`.
    ReadSnapshot(usize, u8),
    /// Scan `[lo, hi)` forward or reverse, optionally through a snapshot.
    Scan(u8, u8, bool, Option<usize>),
    /// Seek a cursor, then walk a few steps in mixed directions.
    Cursor(u8, Vec<bool>),
}

fn key(k: u8) -> Vec<u8> {
    // Keys share long prefixes to exercise prefix compression.
    format!("user/profile/{k:03}").into_bytes()
}

fn op() -> impl Strategy<Value = Op> {
    let value = proptest::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        10 => (any::<u8>(), value.clone()).prop_map(|(k, v)| Op::Put(k % 64, v)),
        4 => any::<u8>().prop_map(|k| Op::Delete(k % 64)),
        3 => proptest::collection::vec((any::<u8>(), proptest::option::of(value)), 1..8)
            .prop_map(|ops| Op::Batch(ops.into_iter().map(|(k, v)| (k % 64, v)).collect())),
        6 => any::<u8>().prop_map(|k| Op::Get(k % 64)),
        3 => (proptest::collection::vec(any::<u8>(), 0..12), proptest::option::of(any::<usize>()))
            .prop_map(|(ks, s)| Op::MultiGet(ks.into_iter().map(|k| k % 66).collect(), s)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
        2 => Just(Op::TakeSnapshot),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, k)| Op::ReadSnapshot(i, k % 64)),
        3 => (any::<u8>(), any::<u8>(), any::<bool>(), proptest::option::of(any::<usize>()))
            .prop_map(|(a, b, r, s)| Op::Scan(a % 66, b % 66, r, s)),
        2 => (any::<u8>(), proptest::collection::vec(any::<bool>(), 0..12))
            .prop_map(|(k, steps)| Op::Cursor(k % 66, steps)),
    ]
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        block_size: 256,
        block_restart_interval: 4,
        ..Options::default()
    }
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for k in 0..64u8 {
        assert_eq!(
            db.get(key(k)).unwrap().as_ref(),
            model.get(&key(k)),
            "key {k}"
        );
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn scan_model(model: &Model, lo: u8, hi: u8, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut v: Vec<_> = model
        .range(key(lo)..key(hi.max(lo)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if reverse {
        v.reverse();
    }
    v
}

fn scan_db(
    db: &Db,
    lo: u8,
    hi: u8,
    reverse: bool,
    snap: Option<&Snapshot>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let opts = ReadOptions {
        snapshot: snap,
        lower_bound: Some(key(lo)),
        upper_bound: Some(key(hi.max(lo))),
        ..ReadOptions::default()
    };
    let mut it = db.iter(&opts).unwrap();
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last().unwrap();
    } else {
        it.seek_to_first().unwrap();
    }
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if reverse {
            it.prev().unwrap();
        } else {
            it.next().unwrap();
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn matches_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open(dir.path(), options()).unwrap();
        let mut model = BTreeMap::new();
        let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    db.put(key(k), &v).unwrap();
                    model.insert(key(k), v);
                }
                Op::Delete(k) => {
                    db.delete(key(k)).unwrap();
                    model.remove(&key(k));
                }
                Op::Batch(entries) => {
                    let mut b = WriteBatch::new();
                    for (k, v) in entries {
                        match v {
                            Some(v) => {
                                b.put(key(k), &v);
                                model.insert(key(k), v);
                            }
                            None => {
                                b.delete(key(k));
                                model.remove(&key(k));
                            }
                        }
                    }
                    db.write(b, WriteOptions::default()).unwrap();
                }
                Op::Get(k) => {
                    let got = db.get(key(k)).unwrap();
                    prop_assert_eq!(got.as_ref(), model.get(&key(k)));
                }
                Op::MultiGet(ks, snap) => {
                    let keys: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
                    let chosen = snap.and_then(|i| snapshots.get(i % snapshots.len().max(1)));
                    let (opts, view) = match chosen {
                        Some((s, old)) => (ReadOptions::at(s), old),
                        None => (ReadOptions::default(), &model),
                    };
                    let got = db.multi_get(&keys, &opts).unwrap();
                    let want: Vec<Option<Vec<u8>>> =
                        keys.iter().map(|k| view.get(k).cloned()).collect();
                    prop_assert_eq!(got, want);
                }
                Op::Flush => {
                    db.flush().unwrap();
                    check_all(&db, &model);
                }
                Op::TakeSnapshot => {
                    if snapshots.len() >= 4 {
                        snapshots.remove(0);
                    }
                    snapshots.push((db.snapshot(), model.clone()));
                }
                Op::ReadSnapshot(i, k) => {
                    if let Some((snap, old)) = snapshots.get(i % snapshots.len().max(1)) {
                        let got = db.get_opt(key(k), &ReadOptions::at(snap)).unwrap();
                        prop_assert_eq!(got.as_ref(), old.get(&key(k)));
                    }
                }
                Op::Scan(lo, hi, reverse, snap) => {
                    let chosen = snap.and_then(|i| snapshots.get(i % snapshots.len().max(1)));
                    let (want, got) = match chosen {
                        Some((s, old)) => (scan_model(old, lo, hi, reverse), scan_db(&db, lo, hi, reverse, Some(s))),
                        None => (scan_model(&model, lo, hi, reverse), scan_db(&db, lo, hi, reverse, None)),
                    };
                    prop_assert_eq!(got, want);
                }
                Op::Cursor(k, steps) => {
                    let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    let mut pos = all.partition_point(|(x, _)| *x < key(k));
                    let mut it = db.iter(&ReadOptions::default()).unwrap();
                    it.seek(key(k)).unwrap();
                    for forward in steps {
                        prop_assert_eq!(it.valid(), pos < all.len());
                        if pos >= all.len() {
                            break;
                        }
                        prop_assert_eq!(it.key(), all[pos].0.as_slice());
                        prop_assert_eq!(it.value(), all[pos].1.as_slice());
                        if forward {
                            it.next().unwrap();
                            pos += 1;
                        } else if pos > 0 {
                            it.prev().unwrap();
                            pos -= 1;
                        } else {
                            break;
                        }
                    }
                }
                Op::Reopen => {
                    // Snapshots do not survive a reopen.
                    snapshots.clear();
                    drop(db);
                    db = Db::open(dir.path(), options()).unwrap();
                    check_all(&db, &model);
                }
            }
        }
        check_all(&db, &model);
    }
}

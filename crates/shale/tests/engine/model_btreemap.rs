//! Model test: random sequences of put / delete / range delete / batch / get / multi-get /
//! flush / compaction / reopen, transactions, and writes, scans and drops of a second
//! keyspace (with options of its own) against a `BTreeMap` per keyspace, checked key by key
//! after every step that can lose or reorder data. A transaction's commit must fail whenever a key it read or
//! wrote was written since it began, and otherwise either commit its writes or fail (a
//! flush may leave it no memtable history to check against).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use shale::{
    Compression, Db, Error, Keyspace, KeyspaceOptions, Options, ReadOptions, Snapshot, Transaction,
    WriteBatch, WriteOptions,
};

#[derive(Debug, Clone)]
enum Op {
    Put(u8, Vec<u8>),
    Delete(u8),
    Batch(Vec<(u8, Option<Vec<u8>>)>),
    /// `delete_range(key(lo), key(hi))`, then the puts and deletes, in one batch.
    RangeBatch(u8, u8, Vec<(u8, Option<Vec<u8>>)>),
    Get(u8),
    /// Read several keys (repeats allowed) in one call, optionally through a snapshot.
    MultiGet(Vec<u8>, Option<usize>),
    Flush,
    /// Compact the whole key space (range tombstones meet what they cover, and go).
    Compact,
    Reopen,
    /// Take a snapshot (keeping at most a few).
    TakeSnapshot,
    /// Read a key through the snapshot `i % live`.
    ReadSnapshot(usize, u8),
    /// Scan `[lo, hi)` forward or reverse, optionally through a snapshot.
    Scan(u8, u8, bool, Option<usize>),
    /// Seek a cursor, then walk a few steps in mixed directions.
    Cursor(u8, Vec<bool>),
    /// Begin a transaction (if none is open).
    TxnBegin,
    TxnGet(u8),
    /// Put (`Some`) or delete (`None`) in the open transaction.
    TxnWrite(u8, Option<Vec<u8>>),
    TxnCommit,
    /// One batch over both keyspaces: `true` writes the second keyspace.
    Side(Vec<(bool, u8, Option<Vec<u8>>)>),
    /// `delete_range(key(lo), key(hi))` in the second keyspace.
    SideRangeDelete(u8, u8),
    /// Scan `[lo, hi)` of the second keyspace, forward or reverse.
    SideScan(u8, u8, bool),
    /// Drop the second keyspace and make it again, empty.
    DropSide,
}

/// The open transaction and what the model expects of it.
struct OpenTxn {
    txn: Transaction,
    /// The model as the transaction began.
    view: Model,
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Keys read or written: checked at commit.
    tracked: BTreeSet<Vec<u8>>,
    /// Keys written outside the transaction since it began.
    written_since: BTreeSet<Vec<u8>>,
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
        3 => (any::<u8>(), any::<u8>(), proptest::collection::vec((any::<u8>(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))), 0..3))
            .prop_map(|(a, b, ops)| {
                let (lo, hi) = ((a % 66).min(b % 66), (a % 66).max(b % 66));
                Op::RangeBatch(lo, hi, ops.into_iter().map(|(k, v)| (k % 64, v)).collect())
            }),
        6 => any::<u8>().prop_map(|k| Op::Get(k % 64)),
        3 => (proptest::collection::vec(any::<u8>(), 0..12), proptest::option::of(any::<usize>()))
            .prop_map(|(ks, s)| Op::MultiGet(ks.into_iter().map(|k| k % 66).collect(), s)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        2 => Just(Op::TakeSnapshot),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(i, k)| Op::ReadSnapshot(i, k % 64)),
        3 => (any::<u8>(), any::<u8>(), any::<bool>(), proptest::option::of(any::<usize>()))
            .prop_map(|(a, b, r, s)| Op::Scan(a % 66, b % 66, r, s)),
        2 => (any::<u8>(), proptest::collection::vec(any::<bool>(), 0..12))
            .prop_map(|(k, steps)| Op::Cursor(k % 66, steps)),
        2 => Just(Op::TxnBegin),
        3 => any::<u8>().prop_map(|k| Op::TxnGet(k % 64)),
        3 => (any::<u8>(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)))
            .prop_map(|(k, v)| Op::TxnWrite(k % 64, v)),
        2 => Just(Op::TxnCommit),
        4 => proptest::collection::vec((any::<bool>(), any::<u8>(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300))), 1..6)
            .prop_map(|ops| Op::Side(ops.into_iter().map(|(s, k, v)| (s, k % 64, v)).collect())),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::SideRangeDelete((a % 66).min(b % 66), (a % 66).max(b % 66))),
        2 => (any::<u8>(), any::<u8>(), any::<bool>()).prop_map(|(a, b, r)| Op::SideScan(a % 66, b % 66, r)),
        1 => Just(Op::DropSide),
    ]
}

/// The second keyspace: small blocks, no compression, its own write buffer.
fn side(db: &Db) -> Keyspace {
    let opts = KeyspaceOptions {
        write_buffer_size: 96 << 10,
        block_size: 512,
        filter_bits_per_key: 0,
        compression: Compression::None,
    };
    db.keyspace_with("side", opts).unwrap()
}

fn check_side(side: &Keyspace, model: &Model) {
    for k in 0..64u8 {
        assert_eq!(
            side.get(key(k)).unwrap().as_ref(),
            model.get(&key(k)),
            "side key {k}"
        );
    }
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        block_size: 256,
        block_restart_interval: 4,
        ..Options::default()
    }
}

/// Add puts (`Some`) and deletes (`None`) to `b`, and apply them to `model`.
fn add_entries(b: &mut WriteBatch, model: &mut Model, entries: Vec<(u8, Option<Vec<u8>>)>) {
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
        let mut side_ks = side(&db);
        let mut side_model = Model::new();
        let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
        let mut open_txn: Option<OpenTxn> = None;
        for op in ops {
            // Keys this op writes outside the transaction.
            let written: Vec<Vec<u8>> = match &op {
                Op::Put(k, _) | Op::Delete(k) => vec![key(*k)],
                Op::Batch(entries) => entries.iter().map(|(k, _)| key(*k)).collect(),
                Op::RangeBatch(lo, hi, entries) => (*lo..*hi)
                    .chain(entries.iter().map(|(k, _)| *k))
                    .map(key)
                    .collect(),
                Op::Side(entries) => entries
                    .iter()
                    .filter(|(in_side, _, _)| !in_side)
                    .map(|(_, k, _)| key(*k))
                    .collect(),
                _ => Vec::new(),
            };
            if let Some(t) = open_txn.as_mut() {
                t.written_since.extend(written);
            }
            match op {
                Op::TxnBegin => {
                    if open_txn.is_none() {
                        open_txn = Some(OpenTxn {
                            txn: db.transaction(),
                            view: model.clone(),
                            writes: BTreeMap::new(),
                            tracked: BTreeSet::new(),
                            written_since: BTreeSet::new(),
                        });
                    }
                }
                Op::TxnGet(k) => {
                    if let Some(t) = open_txn.as_mut() {
                        let want = match t.writes.get(&key(k)) {
                            Some(w) => w.clone(),
                            None => t.view.get(&key(k)).cloned(),
                        };
                        prop_assert_eq!(t.txn.get(key(k)).unwrap(), want);
                        t.tracked.insert(key(k));
                    }
                }
                Op::TxnWrite(k, v) => {
                    if let Some(t) = open_txn.as_mut() {
                        match &v {
                            Some(v) => t.txn.put(key(k), v),
                            None => t.txn.delete(key(k)),
                        }
                        t.writes.insert(key(k), v);
                        t.tracked.insert(key(k));
                    }
                }
                Op::TxnCommit => {
                    if let Some(t) = open_txn.take() {
                        let must_conflict = !t.writes.is_empty()
                            && t.tracked.iter().any(|k| t.written_since.contains(k));
                        match t.txn.commit() {
                            Ok(()) => {
                                prop_assert!(!must_conflict, "committed over a conflicting write");
                                for (k, v) in t.writes {
                                    match v {
                                        Some(v) => model.insert(k, v),
                                        None => model.remove(&k),
                                    };
                                }
                            }
                            Err(Error::Conflict(_)) => {}
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
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
                    add_entries(&mut b, &mut model, entries);
                    db.write(b, WriteOptions::default()).unwrap();
                }
                Op::RangeBatch(lo, hi, entries) => {
                    let mut b = WriteBatch::new();
                    b.delete_range(key(lo), key(hi));
                    let doomed: Vec<Vec<u8>> =
                        model.range(key(lo)..key(hi)).map(|(k, _)| k.clone()).collect();
                    for k in doomed {
                        model.remove(&k);
                    }
                    add_entries(&mut b, &mut model, entries);
                    db.write(b, WriteOptions::default()).unwrap();
                }
                Op::Compact => {
                    db.compact_range(None, None).unwrap();
                    side_ks.compact_range(None, None).unwrap();
                    check_all(&db, &model);
                    check_side(&side_ks, &side_model);
                }
                Op::Side(entries) => {
                    let mut b = WriteBatch::new();
                    for (in_side, k, v) in entries {
                        let (ks, m) = match in_side {
                            true => (side_ks.id(), &mut side_model),
                            false => (shale::KeyspaceId::DEFAULT, &mut model),
                        };
                        match v {
                            Some(v) => {
                                b.put_in(ks, key(k), &v);
                                m.insert(key(k), v);
                            }
                            None => {
                                b.delete_in(ks, key(k));
                                m.remove(&key(k));
                            }
                        }
                    }
                    db.write(b, WriteOptions::default()).unwrap();
                }
                Op::SideRangeDelete(lo, hi) => {
                    side_ks.delete_range(key(lo), key(hi)).unwrap();
                    side_model.retain(|k, _| *k < key(lo) || *k >= key(hi));
                }
                Op::SideScan(lo, hi, reverse) => {
                    let range = side_ks.range(key(lo)..key(hi.max(lo))).unwrap();
                    let got: Vec<_> = match reverse {
                        true => range.rev().map(|p| p.unwrap()).collect(),
                        false => range.map(|p| p.unwrap()).collect(),
                    };
                    prop_assert_eq!(got, scan_model(&side_model, lo, hi, reverse));
                }
                Op::DropSide => {
                    db.drop_keyspace("side").unwrap();
                    side_ks = side(&db);
                    side_model.clear();
                    check_side(&side_ks, &side_model);
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
                    check_side(&side_ks, &side_model);
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
                    // Snapshots and transactions do not survive a reopen.
                    snapshots.clear();
                    open_txn = None;
                    drop(side_ks);
                    drop(db);
                    db = Db::open(dir.path(), options()).unwrap();
                    side_ks = side(&db);
                    check_all(&db, &model);
                    check_side(&side_ks, &side_model);
                }
            }
        }
        check_all(&db, &model);
        check_side(&side_ks, &side_model);
    }
}

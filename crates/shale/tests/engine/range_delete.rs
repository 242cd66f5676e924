//! Range deletes: one entry hides a whole key range in every source (memtables, L0, the
//! levels, files cut by compaction), at every snapshot, across flushes, compactions and
//! reopens; compaction then drops what the range covers, and the range itself at the
//! bottom.

use shale::{Compression, Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

/// Small buffers and files, so that a few MB make a tree of several levels and many files.
fn options() -> Options {
    Options {
        write_buffer_size: 128 << 10,
        max_file_size: 64 << 10,
        max_bytes_for_level_base: 1 << 20,
        compression: Compression::None,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i}-{round}-").into_bytes();
    v.resize(100, b'v');
    v
}

/// Every key's expected value: `live(i)` says whether key `i` exists.
fn check(db: &Db, n: u32, round: u32, live: impl Fn(u32) -> bool, opts: &ReadOptions<'_>) {
    for i in (0..n).step_by(7) {
        let want = live(i).then(|| value(i, round));
        assert_eq!(db.get_opt(key(i), opts).unwrap(), want, "get key {i}");
    }
    let forward: Vec<Vec<u8>> = db
        .range_opt::<Vec<u8>>(.., opts)
        .unwrap()
        .map(|kv| kv.unwrap().0)
        .collect();
    let want: Vec<Vec<u8>> = (0..n).filter(|&i| live(i)).map(key).collect();
    assert_eq!(forward.len(), want.len());
    assert!(forward == want, "forward scan");
    let mut backward: Vec<Vec<u8>> = db
        .range_opt::<Vec<u8>>(.., opts)
        .unwrap()
        .rev()
        .map(|kv| kv.unwrap().0)
        .collect();
    backward.reverse();
    assert!(backward == want, "reverse scan");
}

#[test]
fn a_range_delete_hides_its_keys_in_every_source_and_at_every_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let n = 30_000u32;
    let mut db = Db::open(dir.path(), options()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.wait_idle().unwrap();
    assert!(
        db.level_file_counts().iter().skip(1).sum::<usize>() > 4,
        "a tree of many files: {:?}",
        db.level_file_counts()
    );
    let before = db.snapshot();
    db.delete_range(key(5_000), key(20_000)).unwrap();
    let deleted = |i: u32| (5_000..20_000).contains(&i);
    // A key written after the range delete is back.
    db.put(key(10_000), value(10_000, 0)).unwrap();
    let live = |i: u32| !deleted(i) || i == 10_000;

    check(&db, n, 0, live, &ReadOptions::default());
    check(&db, n, 0, |_| true, &ReadOptions::at(&before));
    db.flush().unwrap();
    check(&db, n, 0, live, &ReadOptions::default());
    check(&db, n, 0, |_| true, &ReadOptions::at(&before));
    db.compact_range(None, None).unwrap();
    check(&db, n, 0, live, &ReadOptions::default());
    check(&db, n, 0, |_| true, &ReadOptions::at(&before));
    drop(before);

    drop(db);
    db = Db::open(dir.path(), options()).unwrap();
    check(&db, n, 0, live, &ReadOptions::default());

    // Unflushed, replayed from the WAL.
    db.delete_range(key(0), key(1_000)).unwrap();
    drop(db);
    db = Db::open(dir.path(), options()).unwrap();
    check(
        &db,
        n,
        0,
        |i| live(i) && i >= 1_000,
        &ReadOptions::default(),
    );
}

#[test]
fn compaction_drops_what_a_range_covers_and_then_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000u32;
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let full = db.sst_bytes();
    db.delete_range(key(0), key(n - 2_000)).unwrap();
    db.compact_range(None, None).unwrap();
    let after = db.sst_bytes();
    assert!(
        after * 5 < full,
        "{after} bytes left of {full}: the covered entries were kept"
    );
    check(&db, n, 0, |i| i >= n - 2_000, &ReadOptions::default());

    // Everything deleted: nothing is left, the tombstone included.
    db.delete_range(key(0), key(n)).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.sst_bytes(), 0, "files: {:?}", db.level_file_counts());
    assert_eq!(db.range::<Vec<u8>>(..).unwrap().count(), 0);
}

#[test]
fn a_snapshot_keeps_what_a_later_range_delete_covers_through_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let n = 10_000u32;
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let snap = db.snapshot();
    db.delete_range(key(0), key(n)).unwrap();
    db.compact_range(None, None).unwrap();
    check(&db, n, 0, |_| true, &ReadOptions::at(&snap));
    check(&db, n, 0, |_| false, &ReadOptions::default());
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.sst_bytes(), 0);
}

#[test]
fn a_range_delete_in_a_batch_orders_with_the_batch_s_other_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let mut b = WriteBatch::new();
    b.put(key(10), value(10, 1)); // before the range delete: gone
    b.delete_range(key(0), key(50));
    b.put(key(20), value(20, 1)); // after it: kept
    db.write(b, WriteOptions::default()).unwrap();
    assert_eq!(db.get(key(10)).unwrap(), None);
    assert_eq!(db.get(key(20)).unwrap(), Some(value(20, 1)));
    assert_eq!(db.get(key(50)).unwrap(), Some(value(50, 0)));
    // An empty range removes nothing; an inverted one is refused.
    db.delete_range(key(60), key(60)).unwrap();
    assert_eq!(db.get(key(60)).unwrap(), Some(value(60, 0)));
    let err = db.delete_range(key(70), key(60)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn a_transaction_that_read_a_key_a_range_delete_covers_conflicts() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"a/1", b"x").unwrap();
    let mut txn = db.transaction();
    assert_eq!(txn.get(b"a/1").unwrap(), Some(b"x".to_vec()));
    txn.put(b"b", b"y");
    db.delete_range(b"a/", b"a0").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict(_))));
    // Control: a range delete elsewhere does not conflict.
    db.put(b"a/1", b"x").unwrap();
    let mut txn = db.transaction();
    txn.get(b"a/1").unwrap();
    txn.put(b"b", b"y");
    db.delete_range(b"c", b"d").unwrap();
    txn.commit().unwrap();
}

#[test]
fn compaction_keeps_one_tombstone_per_stripe_of_a_sliding_window() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let n = 400u32;
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let old = db.snapshot();
    // delete_range(0, cutoff) with a growing cutoff: fragment i lies under n - i ranges.
    for cutoff in 1..n {
        db.delete_range(key(0), key(cutoff)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let stored: u64 = db
        .live_files()
        .iter()
        .map(|f| shale::inspect::open_table(&f.path).unwrap())
        .filter_map(|t| t.properties().range_dels.map(|(_, count)| count))
        .sum();
    // Uncollapsed, the fragments would carry n * (n - 1) / 2 = 79,800 sequence numbers.
    assert!(stored < 2 * u64::from(n), "{stored} tombstones stored");
    check(&db, n, 0, |i| i == n - 1, &ReadOptions::default());
    check(&db, n, 0, |_| true, &ReadOptions::at(&old));
}

/// Regression (the model test, with a second keyspace): a memtable holding only an empty
/// range delete has nothing to write, and its flush failed ("refusing to finish an empty
/// SSTable"), so the reopen after it failed.
#[test]
fn a_memtable_holding_only_an_empty_range_delete_flushes_to_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let ks = db.keyspace("side").unwrap();
    ks.delete_range("s", "s").unwrap();
    db.flush().unwrap();
    db.delete_range("a", "a").unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.flush().unwrap();
    assert_eq!(db.live_files().len(), 0);
    assert_eq!(db.range::<&[u8]>(..).unwrap().count(), 0);
}

//! `TtlDb`: values that expire on a clock, hidden from reads at once and removed by
//! compaction; a TTL database and a plain one kept apart.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shale::ttl::Clock;
use shale::{Db, Error, Options, TtlDb, WriteOptions};

/// A clock the test moves by hand.
fn manual_clock(start: u64) -> (Arc<AtomicU64>, Clock) {
    let now = Arc::new(AtomicU64::new(start));
    let read = Arc::clone(&now);
    (now, Arc::new(move || read.load(Ordering::Relaxed)))
}

#[test]
fn an_expired_value_is_hidden_at_once_and_removed_by_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let (now, clock) = manual_clock(1_000_000);
    let db = TtlDb::open_with_clock(dir.path(), Options::default(), clock.clone()).unwrap();
    db.put("forever", "a").unwrap();
    db.put_with_ttl("short", "b", Duration::from_secs(10))
        .unwrap();
    db.put_with_ttl("long", "c", Duration::from_secs(100))
        .unwrap();
    db.write(
        &[(b"batch", Some(b"d")), (b"forever2", Some(b"e"))],
        WriteOptions::default(),
    )
    .unwrap();
    assert_eq!(db.get("short").unwrap().as_deref(), Some(&b"b"[..]));

    now.store(1_000_000 + 10_000, Ordering::Relaxed); // "short" expires now
    assert_eq!(db.get("short").unwrap(), None);
    assert_eq!(db.get("long").unwrap().as_deref(), Some(&b"c"[..]));
    let keys: Vec<Vec<u8>> = db
        .range::<&[u8]>(..)
        .unwrap()
        .map(|kv| kv.unwrap().0)
        .collect();
    assert_eq!(keys, [&b"batch"[..], b"forever", b"forever2", b"long"]);
    // Still stored until a compaction rewrites it.
    assert!(db.db().get("short").unwrap().is_some());
    db.db().flush().unwrap();
    db.db().compact_range(None, None).unwrap();
    assert_eq!(db.db().get("short").unwrap(), None);
    assert!(db.db().get("long").unwrap().is_some());

    now.store(1_000_000 + 100_000, Ordering::Relaxed);
    assert_eq!(db.get("long").unwrap(), None);
    assert_eq!(db.get("forever").unwrap().as_deref(), Some(&b"a"[..]));
    db.close().unwrap();
    drop(db);
    let db = TtlDb::open_with_clock(dir.path(), Options::default(), clock).unwrap();
    assert_eq!(db.get("long").unwrap(), None);
    assert_eq!(db.get("forever2").unwrap().as_deref(), Some(&b"e"[..]));
}

#[test]
fn a_plain_database_does_not_open_as_a_ttl_one() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .put("k", "v")
        .unwrap();
    assert!(matches!(
        TtlDb::open(dir.path(), Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    let ttl_dir = dir.path().join("ttl");
    TtlDb::open(&ttl_dir, Options::default())
        .unwrap()
        .put("k", "v")
        .unwrap();
    assert!(ttl_dir.join(shale::ttl::TTL_MARKER).exists());
    let db = TtlDb::open(&ttl_dir, Options::default()).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

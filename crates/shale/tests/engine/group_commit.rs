//! Group commit: concurrent sync writers share fsyncs, and every acknowledged write is
//! readable.

use std::sync::Arc;

use shale::{Db, Options, WriteBatch, WriteOptions};

#[test]
fn concurrent_sync_writers_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
    let threads = 8;
    let per_thread = 200;
    std::thread::scope(|s| {
        for t in 0..threads {
            let db = Arc::clone(&db);
            s.spawn(move || {
                for i in 0..per_thread {
                    let mut b = WriteBatch::new();
                    b.put(format!("t{t}-{i}"), format!("v{t}-{i}"));
                    db.write(b, WriteOptions::sync()).unwrap();
                }
            });
        }
    });
    let stats = db.stats();
    assert_eq!(stats.writes, threads * per_thread);
    assert!(
        stats.wal_syncs < stats.writes,
        "every write paid its own fsync: {stats:?}"
    );
    for t in 0..threads {
        for i in 0..per_thread {
            assert_eq!(
                db.get(format!("t{t}-{i}")).unwrap(),
                Some(format!("v{t}-{i}").into_bytes())
            );
        }
    }
}

#[test]
fn wal_off_writes_survive_a_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..1000 {
            let mut b = WriteBatch::new();
            b.put(format!("k{i}"), format!("v{i}"));
            db.write(b, WriteOptions::no_wal()).unwrap();
        }
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..1000 {
        assert_eq!(
            db.get(format!("k{i}")).unwrap(),
            Some(format!("v{i}").into_bytes())
        );
    }
}

#[test]
fn limits_and_options_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let bad = Options {
        block_size: 1,
        write_buffer_size: 0,
        ..Options::default()
    };
    match Db::open(dir.path(), bad) {
        Err(shale::Error::InvalidOptions(problems)) => assert_eq!(problems.len(), 2),
        other => panic!("expected InvalidOptions, got {other:?}"),
    }
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let big_key = vec![0u8; shale::options::MAX_KEY_BYTES + 1];
    assert!(matches!(
        db.put(&big_key, b"v"),
        Err(shale::Error::InvalidArgument(_))
    ));
    assert_eq!(db.get(&big_key).unwrap(), None);
    // A synced write without the WAL would sync nothing: refused, and nothing written.
    let mut batch = WriteBatch::new();
    batch.put(b"unsynced", b"v");
    let both = WriteOptions {
        sync: true,
        disable_wal: true,
    };
    assert!(matches!(
        db.write(batch, both),
        Err(shale::Error::InvalidArgument(_))
    ));
    assert_eq!(db.get(b"unsynced").unwrap(), None);
    // A second handle on the same directory is refused.
    assert!(matches!(
        Db::open(dir.path(), Options::default()),
        Err(shale::Error::Locked(_))
    ));
    db.close().unwrap();
    assert!(matches!(db.put(b"k", b"v"), Err(shale::Error::Closed)));
    // Closing released the lock, though the handle is still alive.
    Db::open(dir.path(), Options::default()).unwrap();
}

#[test]
fn perf_context_times_the_stages_of_a_write_and_a_get() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..2000 {
        db.put(format!("k{i:05}"), vec![7u8; 100]).unwrap();
    }
    db.flush().unwrap();
    shale::perf::enable(true);
    let _ = shale::perf::take();
    db.put("fresh", "v").unwrap();
    let w = shale::perf::take();
    assert!(w.write_wal_nanos > 0 && w.write_memtable_nanos > 0, "{w:?}");
    assert_eq!(db.get("k00042").unwrap(), Some(vec![7u8; 100]));
    let g = shale::perf::take();
    assert!(g.get_memtable_nanos > 0 && g.get_filter_nanos > 0, "{g:?}");
    assert!(
        g.get_block_read_nanos > 0 && g.block_cache_misses == 1,
        "{g:?}"
    );
    assert_eq!(db.get("k00042").unwrap(), Some(vec![7u8; 100]));
    assert_eq!(shale::perf::take().block_cache_hits, 1);
    assert_eq!(db.get("absent").unwrap(), None);
    let s = db.stats();
    assert!(s.bytes_read >= 200, "{s:?}");
    shale::perf::enable(false);
}

/// `close` racing writers, `flush` and `wait_idle` in other threads, under back-pressure
/// (L0 at its stop trigger): every call returns (before, a writer stalled after the
/// background threads had stopped waited for ever), a write either succeeds or fails with
/// `Closed`, and every write that succeeded, with or without the WAL, is there after a
/// reopen.
#[test]
fn close_racing_writers_neither_hangs_nor_loses_acknowledged_writes() {
    use std::sync::mpsc;
    use std::time::Duration;
    for round in 0..4u64 {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            write_buffer_size: 64 << 10,
            level0_compaction_trigger: 2,
            level0_slowdown_trigger: 3,
            level0_stop_trigger: 4,
            ..Options::default()
        };
        let db = Arc::new(Db::open(dir.path(), opts.clone()).unwrap());
        let (done, finished) = mpsc::channel();
        let mut acked = Vec::new();
        for t in 0..4u64 {
            let (db, done) = (Arc::clone(&db), done.clone());
            let (ack, acks) = mpsc::channel();
            acked.push(acks);
            std::thread::spawn(move || {
                let value = vec![b'v'; 512];
                for i in 0.. {
                    let key = format!("{t}-{i:08}");
                    let mut batch = WriteBatch::new();
                    batch.put(&key, &value);
                    let wal = if i % 2 == 0 {
                        WriteOptions::default()
                    } else {
                        WriteOptions::no_wal()
                    };
                    let result = if t == 3 && i % 64 == 0 {
                        db.flush().and_then(|()| db.wait_idle())
                    } else {
                        db.write(batch, wal).map(|()| {
                            let _ = ack.send(key);
                        })
                    };
                    match result {
                        Ok(()) => {}
                        Err(shale::Error::Closed) => break,
                        Err(e) => {
                            let _ = done.send(Err(format!("thread {t}: unexpected error {e}")));
                            return;
                        }
                    }
                }
                let _ = done.send(Ok(()));
            });
        }
        // Close once writes are flowing (the first acknowledgement), then a little later.
        let Ok(first) = acked[0].recv_timeout(Duration::from_secs(30)) else {
            let why = finished.recv_timeout(Duration::from_secs(30));
            panic!("no write acknowledged; a writer ended with {why:?}");
        };
        std::thread::sleep(Duration::from_millis(5 + 10 * round));
        db.close().unwrap();
        for _ in 0..4 {
            finished
                .recv_timeout(Duration::from_secs(30))
                .expect("a thread still blocked 30 s after close")
                .unwrap();
        }
        drop(db);
        let db = Db::open(dir.path(), opts).unwrap();
        assert!(
            db.get(&first).unwrap().is_some(),
            "acknowledged {first} lost"
        );
        for acks in acked {
            for key in acks.try_iter() {
                assert!(db.get(&key).unwrap().is_some(), "acknowledged {key} lost");
            }
        }
    }
}

/// Two threads closing one database: neither returns before the close is complete (the
/// WAL-less writes flushed, the threads joined, the directory released), so an open right
/// after either returns finds every write. Before, the second caller returned at once and
/// released the directory while the first's flush still ran.
#[test]
fn concurrent_closes_both_wait_for_the_close() {
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Db::open(dir.path(), Options::default()).unwrap());
        for i in 0..2_000u32 {
            let mut batch = WriteBatch::new();
            batch.put(i.to_be_bytes(), [7u8; 64]);
            db.write(batch, WriteOptions::no_wal()).unwrap();
        }
        let other = Arc::clone(&db);
        let closer = std::thread::spawn(move || other.close());
        db.close().unwrap();
        // Whichever returned first, the close is complete now.
        let reopened = Db::open(dir.path(), Options::default()).unwrap();
        assert!(reopened.get(1_999u32.to_be_bytes()).unwrap().is_some());
        drop(reopened);
        closer.join().unwrap().unwrap();
    }
}

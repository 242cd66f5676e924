//! Keyspaces: separate trees in one database, one WAL between them.

use std::sync::Arc;

use shale::fs::{CrashKind, FileSystem, MemFs, PowerLoss};
use shale::{
    Compression, Db, Error, KeyspaceOptions, Options, ReadOptions, WriteBatch, WriteOptions,
};

fn small(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        fs,
        write_buffer_size: 64 << 10,
        max_file_size: 16 << 10,
        block_size: 1024,
        level0_compaction_trigger: 2,
        max_bytes_for_level_base: 1 << 20,
        ..Options::default()
    }
}

fn pairs(iter: shale::RangeIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|p| p.unwrap()).collect()
}

#[test]
fn keyspaces_hold_their_own_keys_and_survive_a_reopen() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let db = Db::open("/db", small(Arc::clone(&fs))).unwrap();
    let users = db.keyspace("users").unwrap();
    let log = db
        .keyspace_with(
            "log",
            KeyspaceOptions {
                write_buffer_size: 128 << 10,
                block_size: 4096,
                filter_bits_per_key: 0,
                compression: Compression::None,
            },
        )
        .unwrap();
    db.put("k", "default").unwrap();
    users.put("k", "users").unwrap();
    log.put("k", "log").unwrap();
    assert_eq!(db.get("k").unwrap().unwrap(), b"default");
    assert_eq!(users.get("k").unwrap().unwrap(), b"users");
    assert_eq!(log.get("k").unwrap().unwrap(), b"log");
    assert_eq!(db.keyspace_names(), ["default", "users", "log"]);
    assert_eq!(db.keyspace("users").unwrap().id(), users.id());
    assert_eq!(
        db.keyspace("default").unwrap().get("k").unwrap().unwrap(),
        b"default"
    );

    // Enough to flush and compact each tree several times.
    for i in 0..3000u32 {
        let key = format!("key{i:05}");
        users.put(&key, vec![b'u'; 100]).unwrap();
        if i % 2 == 0 {
            log.put(&key, vec![b'l'; 100]).unwrap();
        }
    }
    users.delete("key00007").unwrap();
    log.delete_range("key00100", "key00200").unwrap();
    db.wait_idle().unwrap();
    assert!(
        users.live_files().len() > 1,
        "{:?}",
        users.level_file_counts()
    );
    assert!(log.live_files().iter().all(|f| f.keyspace == "log"));
    assert_eq!(pairs(db.range::<&[u8]>(..).unwrap()).len(), 1);
    drop((users, log));
    db.close().unwrap();

    let db = Db::open("/db", small(Arc::clone(&fs))).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "users", "log"]);
    let users = db.keyspace("users").unwrap();
    let log = db.keyspace("log").unwrap();
    assert_eq!(log.options().compression, Compression::None);
    assert_eq!(log.options().write_buffer_size, 128 << 10);
    assert_eq!(users.options(), KeyspaceOptions::from_db(db.options()));
    assert_eq!(pairs(users.range::<&[u8]>(..).unwrap()).len(), 2999 + 1);
    assert_eq!(users.get("key00007").unwrap(), None);
    assert_eq!(pairs(log.prefix("key").unwrap()).len(), 1500 - 50);
    assert_eq!(log.get("key00150").unwrap(), None);
    assert_eq!(log.get("k").unwrap().unwrap(), b"log");
    assert_eq!(db.get("k").unwrap().unwrap(), b"default");

    // New options for an existing keyspace: logged, used by its next tables, kept.
    let lz4 = KeyspaceOptions {
        compression: Compression::Lz4,
        block_size: 1024,
        ..log.options()
    };
    let log = db.keyspace_with("log", lz4).unwrap();
    assert_eq!(log.options(), lz4);
    log.put("after", "change").unwrap();
    db.flush().unwrap();
    let default_opts = KeyspaceOptions {
        block_size: 512,
        ..KeyspaceOptions::from_db(db.options())
    };
    assert!(matches!(
        db.keyspace_with("default", default_opts),
        Err(Error::InvalidArgument(_))
    ));
    drop(log);
    db.close().unwrap();
    let db = Db::open("/db", small(fs)).unwrap();
    let log = db.keyspace("log").unwrap();
    assert_eq!(log.options(), lz4);
    assert_eq!(log.get("after").unwrap().unwrap(), b"change");
    assert_eq!(log.get("k").unwrap().unwrap(), b"log");
}

#[test]
fn a_batch_across_keyspaces_is_atomic_and_one_snapshot_covers_them() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let db = Db::open("/db", small(fs)).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&a, "x", "1");
    batch.put_in(&b, "x", "2");
    batch.put("x", "0");
    db.write(batch, WriteOptions::default()).unwrap();
    let snap = db.snapshot();
    a.put("x", "changed").unwrap();
    b.delete("x").unwrap();
    let at = ReadOptions::at(&snap);
    assert_eq!(a.get_opt("x", &at).unwrap().unwrap(), b"1");
    assert_eq!(b.get_opt("x", &at).unwrap().unwrap(), b"2");
    assert_eq!(b.get("x").unwrap(), None);
    assert_eq!(
        a.multi_get(&["x", "y"], &ReadOptions::default()).unwrap(),
        [Some(b"changed".to_vec()), None]
    );
}

/// Every crash point of a workload of cross-keyspace batches, a flush, a keyspace made and
/// one dropped: the recovered keyspaces always agree (each batch wrote the same value to
/// all three), and a sync-acknowledged batch is there.
#[test]
fn cross_keyspace_batches_recover_whole_after_power_loss() {
    for k in 1.. {
        let mem = MemFs::new();
        mem.crash_at_op(k, CrashKind::PowerLoss(PowerLoss::default()));
        let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
        let mut synced = 0;
        let mut run = || -> shale::Result<()> {
            let db = Db::open("/db", small(Arc::clone(&fs)))?;
            let doomed = db.keyspace("doomed")?;
            doomed.put("x", "y")?;
            let a = db.keyspace("a")?;
            let b = db.keyspace("b")?;
            for i in 0..40u32 {
                let mut batch = WriteBatch::new();
                let value = format!("v{i}");
                batch.put_in(&a, "n", &value);
                batch.put_in(&b, "n", &value);
                batch.put("n", &value);
                let sync = i % 4 == 3;
                let opts = if sync {
                    WriteOptions::sync()
                } else {
                    WriteOptions::default()
                };
                db.write(batch, opts)?;
                if sync {
                    synced = i + 1;
                }
                if i == 20 {
                    db.flush()?;
                    db.drop_keyspace("doomed")?;
                    synced = i + 1;
                }
            }
            db.close()
        };
        let result = run();
        if !mem.crashed() {
            result.unwrap();
            assert!(k > 21, "only {} crash points", k - 1);
            return;
        }
        let image = mem.crash_image().unwrap();
        let db = Db::open("/db", small(Arc::new(image))).unwrap();
        let names = db.keyspace_names();
        let value = |ks: &str| -> Option<Vec<u8>> {
            match names.iter().any(|n| n == ks) {
                true => db.keyspace(ks).unwrap().get("n").unwrap(),
                false => None,
            }
        };
        let (d, a, b) = (db.get("n").unwrap(), value("a"), value("b"));
        if names.iter().any(|n| n == "b") {
            assert_eq!((&d, &a), (&b, &b), "crash point {k}: keyspaces disagree");
        }
        let recovered = d.map_or(0, |v| {
            String::from_utf8(v).unwrap()[1..].parse::<u32>().unwrap() + 1
        });
        assert!(
            recovered >= synced,
            "crash point {k}: {recovered} < {synced} synced"
        );
        if synced > 21 {
            assert!(
                !names.iter().any(|n| n == "doomed"),
                "crash point {k}: drop lost"
            );
        }
    }
}

#[test]
fn a_dropped_keyspace_is_gone_with_its_files_and_its_handles_refuse() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let db = Db::open("/db", small(Arc::clone(&fs))).unwrap();
    let tmp = db.keyspace("tmp").unwrap();
    for i in 0..2000u32 {
        tmp.put(format!("key{i:05}"), vec![7u8; 100]).unwrap();
    }
    db.flush().unwrap();
    // Written after the flush: only in the WAL when the keyspace is dropped.
    tmp.put("late", "x").unwrap();
    let files: Vec<_> = tmp.live_files().into_iter().map(|f| f.path).collect();
    assert!(!files.is_empty());
    let live_iter = tmp.range::<&[u8]>(..).unwrap();
    db.drop_keyspace("tmp").unwrap();
    assert!(matches!(tmp.get("late"), Err(Error::InvalidArgument(_))));
    assert!(matches!(tmp.put("a", "b"), Err(Error::InvalidArgument(_))));
    let mut batch = WriteBatch::new();
    batch.put_in(&tmp, "a", "b");
    assert!(matches!(
        db.write(batch, WriteOptions::default()),
        Err(Error::InvalidArgument(_))
    ));
    // An iterator opened before the drop reads on; the files go when it is dropped.
    assert_eq!(live_iter.count(), 2001);
    db.wait_idle().unwrap();
    assert!(files.iter().all(|p| !fs.exists(p)), "files left: {files:?}");
    assert_eq!(db.keyspace_names(), ["default"]);
    assert!(matches!(
        db.drop_keyspace("tmp"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.drop_keyspace("default"),
        Err(Error::InvalidArgument(_))
    ));
    // A new keyspace of the same name is a new, empty one; the WAL's old entries stay out.
    let again = db.keyspace("tmp").unwrap();
    assert_ne!(again.id(), tmp.id());
    assert_eq!(again.get("late").unwrap(), None);
    drop(again);
    db.close().unwrap();
    let db = Db::open("/db", small(fs)).unwrap();
    assert_eq!(db.keyspace("tmp").unwrap().get("late").unwrap(), None);
    assert_eq!(
        db.keyspace("tmp")
            .unwrap()
            .range::<&[u8]>(..)
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn names_and_options_are_checked() {
    let db = Db::open("/db", small(Arc::new(MemFs::new()))).unwrap();
    assert!(matches!(db.keyspace(""), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        db.keyspace(&"x".repeat(256)),
        Err(Error::InvalidArgument(_))
    ));
    let bad = KeyspaceOptions {
        block_size: 1,
        ..KeyspaceOptions::from_db(db.options())
    };
    assert!(matches!(
        db.keyspace_with("x", bad),
        Err(Error::InvalidOptions(_))
    ));
    assert_eq!(db.keyspace_names(), ["default"]);
}

#[test]
fn a_read_only_open_and_a_checkpoint_see_every_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    ks.put("flushed", "1").unwrap();
    db.flush().unwrap();
    ks.put("in-wal", "2").unwrap();
    let copy = dir.path().join("copy");
    db.checkpoint(&copy).unwrap();
    let ro = Db::open(
        &path,
        Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    let ks_ro = ro.keyspace("ks").unwrap();
    assert_eq!(ks_ro.get("flushed").unwrap().unwrap(), b"1");
    assert_eq!(ks_ro.get("in-wal").unwrap().unwrap(), b"2");
    assert!(matches!(ro.keyspace("new"), Err(Error::InvalidArgument(_))));
    drop((ks, db));
    let copied = Db::open(&copy, Options::default()).unwrap();
    let ks = copied.keyspace("ks").unwrap();
    assert_eq!(ks.get("flushed").unwrap().unwrap(), b"1");
    assert_eq!(ks.get("in-wal").unwrap().unwrap(), b"2");
}

#[test]
fn repair_refuses_a_database_with_keyspaces_and_changes_nothing() {
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let db = Db::open("/db", small(Arc::clone(&fs))).unwrap();
    db.keyspace("ks").unwrap().put("k", "v").unwrap();
    db.close().unwrap();
    let before = fs.list(std::path::Path::new("/db")).unwrap();
    let refused = Db::repair("/db", &small(Arc::clone(&fs))).unwrap_err();
    assert!(matches!(refused, Error::InvalidArgument(_)), "{refused}");
    assert_eq!(fs.list(std::path::Path::new("/db")).unwrap(), before);
    let db = Db::open("/db", small(fs)).unwrap();
    assert_eq!(db.keyspace("ks").unwrap().get("k").unwrap().unwrap(), b"v");
}

/// Each keyspace's compactions ask its own filter (`Options::keyspace_compaction_filters`),
/// the default keyspace `Options::compaction_filter`; a keyspace without one keeps all.
#[test]
fn each_keyspace_compacts_with_its_own_filter() {
    struct DropPrefix(&'static [u8]);
    impl shale::CompactionFilter for DropPrefix {
        fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> shale::FilterDecision {
            match key.starts_with(self.0) {
                true => shale::FilterDecision::Remove,
                false => shale::FilterDecision::Keep,
            }
        }
    }
    let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    let opts = || Options {
        compaction_filter: Some(Arc::new(DropPrefix(b"a"))),
        keyspace_compaction_filters: vec![("log".into(), Arc::new(DropPrefix(b"b")))],
        ..small(Arc::clone(&fs))
    };
    let db = Db::open("/db", opts()).unwrap();
    let log = db.keyspace("log").unwrap();
    let plain = db.keyspace("plain").unwrap();
    for k in ["a1", "b1", "c1"] {
        db.put(k, "v").unwrap();
        log.put(k, "v").unwrap();
        plain.put(k, "v").unwrap();
    }
    db.compact_range(None, None).unwrap();
    log.compact_range(None, None).unwrap();
    plain.compact_range(None, None).unwrap();
    let keys = |it: shale::RangeIter| -> Vec<Vec<u8>> { it.map(|p| p.unwrap().0).collect() };
    assert_eq!(
        keys(db.range::<&[u8]>(..).unwrap()),
        [b"b1".to_vec(), b"c1".to_vec()]
    );
    assert_eq!(
        keys(log.range::<&[u8]>(..).unwrap()),
        [b"a1".to_vec(), b"c1".to_vec()]
    );
    assert_eq!(keys(plain.range::<&[u8]>(..).unwrap()).len(), 3);
    // The default keyspace's filter is `compaction_filter`, not a second one.
    let bad = Options {
        keyspace_compaction_filters: vec![("default".into(), Arc::new(DropPrefix(b"x")))],
        ..small(Arc::new(MemFs::new()))
    };
    assert!(matches!(
        Db::open("/other", bad),
        Err(Error::InvalidOptions(_))
    ));
}

/// Writers, readers, flushes and compactions run while another thread makes and drops a
/// keyspace again and again: a drop lands while that keyspace's tables are being flushed
/// and compacted. Nothing may fail but a write to a dropped keyspace, the stable keyspace
/// must hold every write, and the manifest must replay at the next open.
#[test]
fn keyspaces_made_and_dropped_under_load_leave_a_consistent_database() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        write_buffer_size: 64 << 10,
        max_file_size: 16 << 10,
        block_size: 1024,
        level0_compaction_trigger: 2,
        ..Options::default()
    };
    let db = Arc::new(Db::open(dir.path(), opts()).unwrap());
    let stable = db.keyspace("stable").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut rounds = 0;
            while !stop.load(Ordering::Relaxed) {
                let ks = db.keyspace("churn").unwrap();
                // Past its 64 KiB write buffer: each round freezes and flushes it.
                for i in 0..500u32 {
                    ks.put(format!("k{i:04}"), [7u8; 200]).unwrap();
                }
                db.drop_keyspace("churn").unwrap();
                rounds += 1;
            }
            rounds
        })
    };
    let writer = {
        let (db, stable) = (Arc::clone(&db), stable.clone());
        std::thread::spawn(move || {
            for i in 0..6000u32 {
                let mut batch = WriteBatch::new();
                batch.put_in(&stable, format!("s{i:05}"), [1u8; 100]);
                batch.put(format!("d{i:05}"), [2u8; 100]);
                // A write to the churning keyspace may find it dropped: refused, whole.
                if let Ok(churn) = db.keyspace("churn") {
                    batch.put_in(&churn, format!("c{i:05}"), [3u8; 100]);
                }
                match db.write(batch, WriteOptions::default()) {
                    Ok(()) | Err(Error::InvalidArgument(_)) => {}
                    Err(e) => panic!("write {i}: {e}"),
                }
            }
        })
    };
    writer.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    let rounds = churn.join().unwrap();
    assert!(rounds > 0);
    // The writer makes "churn" again when it finds it dropped (`Db::keyspace` opens or
    // makes), and may have done so after the churn thread's last drop.
    if db.keyspace_names().iter().any(|n| n == "churn") {
        db.drop_keyspace("churn").unwrap();
    }
    db.wait_idle().unwrap();
    let in_stable = stable.range::<&[u8]>(..).unwrap().count();
    let in_default = db.range::<&[u8]>(..).unwrap().count();
    assert_eq!(in_stable, in_default, "a batch landed in one keyspace only");
    drop(stable);
    Arc::try_unwrap(db).unwrap().close().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "stable"]);
    let stable = db.keyspace("stable").unwrap();
    assert_eq!(stable.range::<&[u8]>(..).unwrap().count(), in_stable);
    assert_eq!(db.range::<&[u8]>(..).unwrap().count(), in_default);
}

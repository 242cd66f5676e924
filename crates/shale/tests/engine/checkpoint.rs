//! `Db::checkpoint`: a copy as of one moment that opens like any database, made while
//! writes go on; and, under injected I/O errors at every step or a power loss at any step,
//! a copy that never opens as a wrong database. (A semantic index that comes along:
//! `crates/shale-search/tests/search/semantic_engine.rs`.)

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale::fs::{CrashKind, Errno, Fault, FaultFs, FileSystem, MemFs, OpKind, PowerLoss};
use shale::{Db, Error, Options, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn small() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
}

fn contents(db: &Db) -> Model {
    db.range::<&[u8]>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn write(db: &Db, model: &mut Model, rng: &mut common::Rng, n: usize, round: u32) {
    for _ in 0..n {
        let key = format!("key{:05}", rng.below(5_000)).into_bytes();
        if rng.percent(20) {
            db.delete(&key).unwrap();
            model.remove(&key);
        } else {
            let value = format!("{round}-{}", rng.next_u64()).into_bytes();
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
    }
}

/// The source database of the fault tests on `fs`: 300 writes flushed, 100 more in the
/// memtable; no background compaction, so that a fault or crash hits the checkpoint's own
/// steps. Returns the database, its options and what it holds.
fn source(fs: Arc<dyn FileSystem>, seed: u64) -> (Db, Options, Model) {
    let opts = Options {
        level0_compaction_trigger: 8,
        ..common::options(fs)
    };
    let db = Db::open(common::DIR, opts.clone()).unwrap();
    let mut model = Model::new();
    let mut rng = common::Rng::new(seed);
    write(&db, &mut model, &mut rng, 300, 0);
    db.flush().unwrap();
    write(&db, &mut model, &mut rng, 100, 1);
    (db, opts, model)
}

#[test]
fn a_checkpoint_holds_exactly_the_writes_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let (src, copy) = (dir.path().join("db"), dir.path().join("copy"));
    let db = Db::open(&src, small()).unwrap();
    let mut rng = common::Rng::new(7);
    let mut model = Model::new();
    // SSTables on several levels and a memtable that is not flushed yet.
    for round in 0..4 {
        write(&db, &mut model, &mut rng, 8_000, round);
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    write(&db, &mut model, &mut rng, 3_000, 4);
    let at_checkpoint = model.clone();
    db.checkpoint(&copy).unwrap();

    // The source goes on, and compaction deletes files the copy links to.
    write(&db, &mut model, &mut rng, 8_000, 5);
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), model);

    let cp = Db::open(&copy, small()).unwrap();
    assert_eq!(contents(&cp), at_checkpoint);
    // The copy is a database of its own: it takes writes, and the source does not see them.
    cp.put("only-in-copy", "x").unwrap();
    cp.compact_range(None, None).unwrap();
    assert_eq!(db.get("only-in-copy").unwrap(), None);
    drop(cp);
    let cp = Db::open(&copy, small()).unwrap();
    assert_eq!(cp.get("only-in-copy").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(contents(&db), model);
}

#[test]
fn a_checkpoint_refuses_a_directory_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), small()).unwrap();
    db.put("k", "v").unwrap();
    let existing = dir.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    assert!(matches!(
        db.checkpoint(&existing),
        Err(Error::InvalidArgument(_))
    ));
    assert!(std::fs::read_dir(&existing).unwrap().next().is_none());
}

/// A writer puts keys 0, 1, 2, ... one at a time while checkpoints are taken: each copy
/// holds a prefix of them (no hole), at least every key acknowledged before its call.
#[test]
fn checkpoints_under_concurrent_writes_hold_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("db"), small()).unwrap());
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicU64::new(0));
    let writer = {
        let (db, acked, stop) = (Arc::clone(&db), Arc::clone(&acked), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while stop.load(Ordering::Acquire) == 0 && i < 2_000_000 {
                db.put(format!("seq{i:08}"), i.to_le_bytes()).unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    for c in 0..5 {
        while acked.load(Ordering::Acquire) < (c + 1) * 20_000 {
            std::thread::yield_now();
        }
        let before = acked.load(Ordering::Acquire);
        let copy = dir.path().join(format!("copy{c}"));
        db.checkpoint(&copy).unwrap();
        let after = acked.load(Ordering::Acquire);
        let cp = Db::open(&copy, small()).unwrap();
        let keys: Vec<Vec<u8>> = cp.prefix("seq").unwrap().map(|kv| kv.unwrap().0).collect();
        let held = keys.len() as u64;
        assert!(
            (before..=after + 1).contains(&held),
            "copy {c}: {held} keys, {before} acknowledged before the call, {after} after"
        );
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(
                key,
                format!("seq{i:08}").as_bytes(),
                "copy {c}: a hole at {i}"
            );
        }
    }
    stop.store(1, Ordering::Release);
    writer.join().unwrap();
}

/// Every write, sync and directory step of a checkpoint fails in turn: the call returns
/// the error, the source keeps every write, and the directory either does not open
/// (no CURRENT yet) or opens with exactly the checkpoint's contents (the failure came after
/// CURRENT, at the parent directory's sync).
#[test]
fn a_failed_checkpoint_never_opens_as_a_wrong_database() {
    let kinds = [
        OpKind::Create,
        OpKind::Write,
        OpKind::Sync,
        OpKind::SyncDir,
        OpKind::Rename,
    ];
    let mut failures = 0;
    for kind in kinds {
        for at in 1.. {
            let mem = MemFs::new();
            let faulty = FaultFs::new(Arc::new(mem.clone()));
            let (db, opts, model) = source(Arc::new(faulty.clone()), at);
            faulty.arm(Fault {
                at,
                kinds: vec![kind],
                persistent: false,
                errno: Errno::Eio,
            });
            let copy = Path::new("/copy");
            let result = db.checkpoint(copy);
            let injected = faulty.injected();
            faulty.disarm();
            if injected == 0 {
                result.unwrap();
                assert_eq!(contents(&Db::open(copy, opts).unwrap()), model);
                break;
            }
            if result.is_ok() {
                // The fault hit a step that may fail (a manifest roll tried again later).
                assert_eq!(contents(&Db::open(copy, opts).unwrap()), model);
                continue;
            }
            failures += 1;
            // Its own steps fail with the I/O error; its flush with `Poisoned` (a failed
            // flush poisons the database, whoever asked for it).
            assert!(
                matches!(result, Err(Error::Io { .. } | Error::Poisoned(_))),
                "{kind:?} #{at}: {result:?}"
            );
            let reopened = Db::open(
                copy,
                Options {
                    create_if_missing: false,
                    ..opts.clone()
                },
            );
            if mem.exists(&copy.join("CURRENT")) {
                let cp = reopened.unwrap_or_else(|e| panic!("{kind:?} #{at}: {e}"));
                assert_eq!(contents(&cp), model, "{kind:?} #{at}");
            } else {
                assert!(reopened.is_err(), "{kind:?} #{at}: opened without CURRENT");
            }
            // A failed flush poisons the source (as any failed flush does); otherwise it
            // goes on taking writes.
            match db.put("after", "x") {
                Ok(()) => assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"x"[..])),
                Err(e) => assert!(matches!(e, Error::Poisoned(_)), "{kind:?} #{at}: {e}"),
            }
            drop(db);
            let db = Db::open(common::DIR, common::options(Arc::new(mem))).unwrap();
            let mut reopened = contents(&db);
            reopened.remove(&b"after"[..]);
            assert_eq!(reopened, model, "{kind:?} #{at}: the source lost data");
            let mut batch = WriteBatch::new();
            batch.put("k", "v");
            db.write(batch, WriteOptions::sync()).unwrap();
        }
    }
    assert!(failures > 10, "only {failures} faults injected");
}

/// A power loss at every step of a checkpoint (dropping all unsynced bytes and directory
/// entries, or keeping some of them in order): the copy either does not open (no durable
/// CURRENT) or opens with exactly the checkpoint's contents, and once the call returned it
/// always opens.
#[test]
fn a_checkpoint_survives_a_power_loss_at_any_step() {
    let losses = [
        PowerLoss::default(),
        PowerLoss {
            keep_dir_ops: 3,
            write_back: Some(7),
            ..PowerLoss::default()
        },
    ];
    let copy = Path::new("/copy");
    let mut crashes = 0;
    for loss in losses {
        for k in 1.. {
            let mem = MemFs::new();
            let (db, _, model) = source(Arc::new(mem.clone()), k);
            db.flush().unwrap();
            mem.crash_at_op(mem.ops() + k, CrashKind::PowerLoss(loss));
            let result = db.checkpoint(copy);
            let image = mem.crash_image().unwrap_or_else(|| mem.power_loss(loss));
            let done = !mem.crashed();
            if done {
                result.unwrap();
            }
            drop(db);
            let opts = Options {
                create_if_missing: false,
                ..common::options(Arc::new(image.clone()))
            };
            match Db::open(copy, opts) {
                Ok(cp) => assert_eq!(contents(&cp), model, "{loss:?} at {k}"),
                Err(e) => assert!(
                    !done && !image.exists(&copy.join("CURRENT")),
                    "{loss:?} at {k}: {e}"
                ),
            }
            if done {
                break;
            }
            crashes += 1;
        }
    }
    assert!(crashes > 10, "only {crashes} crash points");
}

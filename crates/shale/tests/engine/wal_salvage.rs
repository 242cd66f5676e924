//! The opt-in salvage mode for a damaged WAL (`WalRecovery::PointInTime`): the default
//! refuses to open and names the file and offset; salvage keeps exactly the writes before the
//! damage (a prefix: no holes, batches whole), drops the rest for good, and counts what it
//! dropped.

use std::path::{Path, PathBuf};

use shale::{Db, Error, Options, WalRecovery, WriteBatch, WriteOptions};

const WRITES: usize = 200;

fn key(i: usize) -> String {
    format!("key{i:04}")
}

/// Each write a batch of two keys, so a salvage that split a batch would show.
fn fill(dir: &Path) {
    let db = Db::open(dir, Options::default()).unwrap();
    for i in 0..WRITES {
        let mut batch = WriteBatch::new();
        batch.put(
            key(2 * i),
            format!("value {i} of a batch, long enough to matter"),
        );
        batch.put(key(2 * i + 1), format!("value {i}, second half"));
        db.write(batch, WriteOptions::default()).unwrap();
    }
    // Close without a flush: the writes are only in the WAL.
}

fn the_wal(dir: &Path) -> PathBuf {
    let wals: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    assert_eq!(wals.len(), 1, "{wals:?}");
    wals.into_iter().next().unwrap()
}

fn salvage_options() -> Options {
    Options {
        wal_recovery: WalRecovery::PointInTime,
        ..Options::default()
    }
}

/// The batches a database holds, checking they form a prefix of whole batches.
fn surviving_batches(db: &Db) -> usize {
    let mut n = 0;
    while n < WRITES && db.get(key(2 * n)).unwrap().is_some() {
        assert!(db.get(key(2 * n + 1)).unwrap().is_some(), "batch {n} split");
        n += 1;
    }
    for i in n..WRITES {
        assert_eq!(
            db.get(key(2 * i)).unwrap(),
            None,
            "hole: batch {i} after {n}"
        );
        assert_eq!(
            db.get(key(2 * i + 1)).unwrap(),
            None,
            "hole: batch {i} after {n}"
        );
    }
    n
}

#[test]
fn strict_refuses_and_salvage_keeps_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let wal = the_wal(dir.path());
    let mut bytes = std::fs::read(&wal).unwrap();
    let damaged_at = bytes.len() / 2;
    bytes[damaged_at] ^= 0x10;
    std::fs::write(&wal, &bytes).unwrap();

    // Strict (the default): a typed error naming the WAL and an offset near the damage.
    let err = Db::open(dir.path(), Options::default()).unwrap_err();
    match &err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, &wal, "{err}");
            assert!(
                *offset <= damaged_at as u64 && damaged_at as u64 - *offset < 32 * 1024,
                "{err}"
            );
        }
        other => panic!("expected Corruption, got {other}"),
    }
    assert_eq!(
        std::fs::read(&wal).unwrap(),
        bytes,
        "strict open changed the WAL"
    );

    // Salvage: a prefix of whole batches, about half of them, and the loss counted.
    let db = Db::open(dir.path(), salvage_options()).unwrap();
    let kept = surviving_batches(&db);
    assert!(kept > 0 && kept < WRITES, "kept {kept} of {WRITES}");
    let stats = db.stats();
    assert_eq!(stats.wal_salvages, 1, "{stats:?}");
    // Dropped: from the damaged record (at most one record before the flipped byte) to
    // the end of the log.
    let dropped = stats.wal_salvaged_bytes;
    let after_damage = (bytes.len() - damaged_at) as u64;
    assert!(
        dropped > after_damage && dropped < after_damage + 1024,
        "{stats:?}"
    );
    db.put("after", "salvage").unwrap();
    drop(db);

    // The salvage is persistent: a strict open now succeeds with the same prefix, and
    // writes made after the salvage are there.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(surviving_batches(&db), kept);
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"salvage"[..]));
    assert_eq!(db.stats().wal_salvages, 0);
}

#[test]
fn salvage_of_an_intact_wal_drops_nothing() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path());
    let db = Db::open(dir.path(), salvage_options()).unwrap();
    assert_eq!(surviving_batches(&db), WRITES);
    let stats = db.stats();
    assert_eq!((stats.wal_salvages, stats.wal_salvaged_bytes), (0, 0));
}

#[test]
fn salvage_still_tolerates_a_torn_tail_silently() {
    for opts in [Options::default(), salvage_options()] {
        let dir = tempfile::tempdir().unwrap();
        fill(dir.path());
        let wal = the_wal(dir.path());
        let bytes = std::fs::read(&wal).unwrap();
        std::fs::write(&wal, &bytes[..bytes.len() - 7]).unwrap();
        let db = Db::open(dir.path(), opts).unwrap();
        assert_eq!(surviving_batches(&db), WRITES - 1);
        let stats = db.stats();
        assert_eq!(stats.wal_salvages, 0);
        assert!(stats.wal_torn_tail_bytes > 0);
    }
}

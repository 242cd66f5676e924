//! `Db::repair`: a database whose CURRENT, MANIFEST, SSTable blocks or WAL records are
//! damaged is rebuilt from what can still be read. What survives is exactly what was
//! written (no wrong value, no deleted key back), what is lost is what the damage covered
//! and nothing more, and the report counts it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use shale::fs::{CrashKind, FileSystem, MemFs, PowerLoss};
use shale::inspect::{open_table, table_index};
use shale::{Db, Error, Options, WriteBatch, WriteOptions, LOST_DIR};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Small buffers and files, so a few thousand writes make several tables and compactions.
fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        max_file_size: 64 << 10,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Overwrites and deletes across flushes and compactions, the last writes left in the WAL.
fn fill_with_history(dir: &Path) -> Model {
    fill_with_history_opts(dir, options())
}

fn fill_with_history_opts(dir: &Path, opts: Options) -> Model {
    let db = Db::open(dir, opts).unwrap();
    let mut model = Model::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for round in 0..6u64 {
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = key(x % 3_000);
            if x.is_multiple_of(5) {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("round {round} value {x:x}").repeat(1 + (x % 4) as usize);
                db.put(&k, &v).unwrap();
                model.insert(k, v.into_bytes());
            }
        }
        if round < 5 {
            db.flush().unwrap();
        }
    }
    db.close().unwrap();
    model
}

/// Every key written once, all flushed into tables.
fn fill_unique(dir: &Path, n: u64) -> Model {
    let db = Db::open(dir, options()).unwrap();
    let mut model = Model::new();
    for i in 0..n {
        let v = format!("value of key {i}, unique").into_bytes();
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.flush().unwrap();
    db.close().unwrap();
    model
}

fn contents(dir: &Path) -> shale::Result<Model> {
    contents_opts(dir, options())
}

fn contents_opts(dir: &Path, opts: Options) -> shale::Result<Model> {
    let db = Db::open(dir, opts)?;
    let model = db.range::<&[u8]>(..)?.collect::<shale::Result<Model>>()?;
    db.close()?;
    Ok(model)
}

fn files_with_extension(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    files.sort();
    files
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

fn manifest(dir: &Path) -> PathBuf {
    shale::inspect::live_manifest_path(dir).unwrap()
}

#[test]
fn a_healthy_database_comes_back_unchanged() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fill_with_history(tmp.path());
    let report = Db::repair(tmp.path(), &options()).unwrap();
    assert!(report.problems.is_empty(), "{report}");
    assert!(
        report.manifest_used && report.moved_to_lost.is_empty(),
        "{report}"
    );
    assert_eq!(report.entries_written, model.len() as u64, "{report}");
    assert_eq!(contents(tmp.path()).unwrap(), model);
    // Nothing of the old files is left but the repaired set; a second repair is a no-op.
    assert!(!tmp.path().join(LOST_DIR).exists());
    let again = Db::repair(tmp.path(), &options()).unwrap();
    assert_eq!(again.entries_read, model.len() as u64, "{again}");
    assert_eq!(contents(tmp.path()).unwrap(), model);
}

#[test]
fn a_lost_current_or_damaged_manifest_is_rebuilt_from_tables_and_wals() {
    for damage in ["remove CURRENT", "flip the manifest"] {
        let tmp = tempfile::tempdir().unwrap();
        let model = fill_with_history(tmp.path());
        let old_manifest = manifest(tmp.path());
        match damage {
            "remove CURRENT" => std::fs::remove_file(tmp.path().join("CURRENT")).unwrap(),
            _ => flip(&old_manifest, 9),
        }
        assert!(
            matches!(contents(tmp.path()), Err(Error::Corruption { .. })),
            "{damage}: open should refuse"
        );

        let report = Db::repair(tmp.path(), &options()).unwrap();
        assert!(!report.manifest_used, "{damage}: {report}");
        assert_eq!(
            report.blocks_dropped + report.tables_unreadable,
            0,
            "{report}"
        );
        assert_eq!(contents(tmp.path()).unwrap(), model, "{damage}");
        if damage == "flip the manifest" {
            let name = old_manifest.file_name().unwrap();
            assert!(tmp.path().join(LOST_DIR).join(name).exists(), "{report}");
        }
    }
}

/// Regression: without a manifest, repair took the new `last_seq` from the WALs alone.
/// With every write flushed (an empty WAL), the repaired database read at sequence 0 and
/// looked empty, and new writes got numbers below the kept entries, which then shadowed
/// them.
#[test]
fn repair_without_a_manifest_keeps_sequence_numbers_above_the_tables() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fill_unique(tmp.path(), 500);
    std::fs::remove_file(tmp.path().join("CURRENT")).unwrap();
    let report = Db::repair(tmp.path(), &options()).unwrap();
    assert!(!report.manifest_used, "{report}");
    assert_eq!(contents(tmp.path()).unwrap(), model);
    let db = Db::open(tmp.path(), options()).unwrap();
    db.put(key(7), "after the repair").unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.get(key(7)).unwrap().as_deref(),
        Some(&b"after the repair"[..])
    );
}

#[test]
fn a_damaged_data_block_loses_its_keys_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fill_unique(tmp.path(), 5_000);
    let table = files_with_extension(tmp.path(), "sst")[1].clone();
    let index = table_index(&open_table(&table).unwrap()).unwrap();
    // The block's user keys lie after the previous block's last key, up to its own.
    let user = |ikey: &[u8]| ikey[..ikey.len() - 8].to_vec();
    let (after, upto) = (user(&index[1].last_key), user(&index[2].last_key));
    flip(&table, index[2].handle.offset + 5);
    assert!(
        matches!(contents(tmp.path()), Err(Error::Corruption { .. })),
        "a full scan should hit the damaged block"
    );

    let report = Db::repair(tmp.path(), &options()).unwrap();
    assert_eq!(report.blocks_dropped, 1, "{report}");
    assert_eq!(report.problems.len(), 1, "{report}");
    assert_eq!(report.problems[0].file, table);
    assert_eq!(report.problems[0].offset, index[2].handle.offset);
    let lost = tmp.path().join(LOST_DIR).join(table.file_name().unwrap());
    assert_eq!(report.moved_to_lost, vec![lost.clone()]);
    assert!(lost.exists());

    let repaired = contents(tmp.path()).unwrap();
    let expected: Model = model
        .into_iter()
        .filter(|(k, _)| !(*k > after && *k <= upto))
        .collect();
    assert!(!expected.is_empty() && repaired.len() < 5_000);
    assert_eq!(repaired, expected);
}

#[test]
fn an_unreadable_table_is_set_aside_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fill_unique(tmp.path(), 5_000);
    let tables = files_with_extension(tmp.path(), "sst");
    let victim = tables[0].clone();
    let keys_in_victim = open_table(&victim).unwrap().properties().entries;
    let len = std::fs::metadata(&victim).unwrap().len();
    // Cut the footer off.
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..(len / 2) as usize]).unwrap();
    assert!(contents(tmp.path()).is_err());

    let report = Db::repair(tmp.path(), &options()).unwrap();
    assert_eq!(report.tables_unreadable, 1, "{report}");
    assert_eq!(report.tables_read, tables.len() as u64 - 1, "{report}");
    let repaired = contents(tmp.path()).unwrap();
    assert_eq!(repaired.len() as u64, model.len() as u64 - keys_in_victim);
    for (k, v) in &repaired {
        assert_eq!(model.get(k), Some(v), "a value that was never written");
    }
}

#[test]
fn a_damaged_wal_keeps_the_whole_batches_before_the_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), options()).unwrap();
    for i in 0..300u64 {
        let mut batch = WriteBatch::new();
        batch.put(key(2 * i), format!("first half of batch {i}"));
        batch.put(key(2 * i + 1), format!("second half of batch {i}"));
        db.write(batch, WriteOptions::default()).unwrap();
    }
    drop(db); // the writes are only in the WAL
    let wal = files_with_extension(tmp.path(), "wal").pop().unwrap();
    let len = std::fs::metadata(&wal).unwrap().len();
    flip(&wal, len / 2);
    assert!(matches!(
        contents(tmp.path()),
        Err(Error::Corruption { .. })
    ));

    let report = Db::repair(tmp.path(), &options()).unwrap();
    assert!(
        report.wal_bytes_dropped > 0 && report.wal_batches > 0,
        "{report}"
    );
    assert_eq!(report.problems.len(), 1, "{report}");
    assert!(tmp
        .path()
        .join(LOST_DIR)
        .join(wal.file_name().unwrap())
        .exists());
    // A prefix of whole batches (some flushed to a table before, the rest from the WAL):
    // keys 0..2b, each with its value, for some b short of all 300.
    let repaired = contents(tmp.path()).unwrap();
    let batches = repaired.len() as u64 / 2;
    assert!(batches > 0 && batches < 300, "{report}");
    let expected: Model = (0..batches)
        .flat_map(|i| {
            [
                (key(2 * i), format!("first half of batch {i}").into_bytes()),
                (
                    key(2 * i + 1),
                    format!("second half of batch {i}").into_bytes(),
                ),
            ]
        })
        .collect();
    assert!(
        repaired == expected,
        "not a prefix of whole batches: {report}"
    );
}

/// Repair crashed at each of its file-system operations, by a process crash or a power
/// loss: running repair again on what the crash left rebuilds what an uncrashed repair
/// does, and an uncrashed repair syncs every file before it is renamed or named by CURRENT.
/// Two kinds of damage: CURRENT lost (repair reads every file), and a flipped data block
/// (repair reads the manifest's files).
#[test]
fn a_crash_anywhere_in_repair_leaves_a_database_repair_can_finish() {
    const DIR: &str = "/db";
    let dir = Path::new(DIR);
    let on = |mem: &MemFs| Options {
        fs: Arc::new(mem.clone()),
        ..options()
    };
    for damage in ["remove CURRENT", "flip a data block"] {
        let pristine = MemFs::new();
        let model = fill_with_history_opts(dir, on(&pristine));
        if damage == "remove CURRENT" {
            pristine.remove(&dir.join("CURRENT")).unwrap();
            pristine.sync_dir(dir).unwrap();
        } else {
            let table = pristine
                .files()
                .into_iter()
                .find(|p| p.extension().is_some_and(|x| x == "sst"))
                .unwrap();
            let mut bytes = pristine.read_all(&table).unwrap();
            bytes[5] ^= 0x20;
            pristine.overwrite(&table, bytes).unwrap();
        }

        let clean = pristine.process_crash();
        let before = clean.ops();
        Db::repair(DIR, &on(&clean)).unwrap();
        let repair_ops = clean.ops() - before;
        assert!(clean.violations().is_empty(), "{:?}", clean.violations());
        let repaired = contents_opts(dir, on(&clean)).unwrap();
        if damage == "remove CURRENT" {
            assert_eq!(repaired, model);
        }

        let mut crashes = 0;
        for k in 1..=repair_ops {
            for kind in [
                CrashKind::Process,
                CrashKind::PowerLoss(PowerLoss::default()),
            ] {
                let image = pristine.process_crash();
                image.crash_at_op(image.ops() + k, kind);
                let _ = Db::repair(DIR, &on(&image));
                let after = image
                    .crash_image()
                    .expect("repair crashed at its k-th operation");
                crashes += 1;
                let report = Db::repair(DIR, &on(&after))
                    .unwrap_or_else(|e| panic!("{damage}, op {k} {kind:?}: second repair: {e}"));
                let got = contents_opts(dir, on(&after))
                    .unwrap_or_else(|e| panic!("{damage}, op {k} {kind:?}: open: {e}"));
                assert!(
                    got == repaired,
                    "{damage}, op {k} {kind:?}: not what a clean repair gives\n{report}"
                );
            }
        }
        println!("{damage}: {crashes} crash points over {repair_ops} operations");
        assert!(crashes >= 20, "only {crashes} crash points");
    }
}

#[test]
fn repair_refuses_an_open_database_and_an_empty_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), options()).unwrap();
    assert!(matches!(
        Db::repair(tmp.path(), &options()),
        Err(Error::Locked { .. })
    ));
    drop(db);
    let empty = tempfile::tempdir().unwrap();
    for dir in [empty.path().to_owned(), empty.path().join("missing")] {
        assert!(matches!(
            Db::repair(&dir, &options()),
            Err(Error::InvalidArgument(_))
        ));
    }
    assert!(!empty.path().join("missing").exists());
}

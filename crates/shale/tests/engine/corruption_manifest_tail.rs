//! Regression tests from the corruption matrix (`corruption_matrix.rs`): damage to the end
//! of the MANIFEST, or to CURRENT's digits, must be a `Corruption` error, not silent loss.

use shale::inspect::wal::LogReader;
use shale::{Db, Error, Options};

/// Cutting (or flipping a byte in) the manifest's last edit looks like a torn write, and
/// the log reader drops it. Before the fix, open then went on from the older edits: the
/// flush that edit installed was forgotten (its SSTable deleted as garbage, its WAL long
/// gone), and a key deleted in that flush came back with its old value. The WAL the
/// remaining edits name as the oldest live one is missing, which no crash can cause: open
/// now fails with `Corruption` naming the manifest, and deletes nothing.
#[test]
fn lost_manifest_edit_is_corruption_not_a_resurrected_key() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put("k", "old").unwrap();
        db.flush().unwrap();
        db.delete("k").unwrap();
        db.flush().unwrap();
        db.close().unwrap();
    }
    let manifest = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    let data = std::fs::read(&manifest).unwrap();
    let mut reader = LogReader::new(&data, &manifest);
    let mut last_start = 0;
    while let Some((offset, _)) = reader.next_record().unwrap() {
        last_start = offset;
    }
    assert!(last_start > 0, "the manifest has more than one record");
    std::fs::write(&manifest, &data[..last_start as usize]).unwrap();
    let files_before = std::fs::read_dir(dir.path()).unwrap().count();

    match Db::open(dir.path(), Options::default()) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, manifest);
            assert_eq!(offset, last_start);
        }
        Err(e) => panic!("expected Corruption, got {e}"),
        Ok(db) => panic!("opened; k = {:?}", db.get("k").unwrap()),
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), files_before);
}

/// A flipped digit in CURRENT names a manifest that does not exist: `Corruption` in
/// CURRENT, not an I/O error about a file nobody wrote.
#[test]
fn current_naming_a_missing_manifest_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    let current = dir.path().join("CURRENT");
    let mut data = std::fs::read(&current).unwrap();
    data[9] ^= 0x02; // '0' -> '2'
    std::fs::write(&current, data).unwrap();
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Corruption { file, .. }) => assert_eq!(file, current),
        other => panic!("expected Corruption in CURRENT, got {other:?}"),
    }
}

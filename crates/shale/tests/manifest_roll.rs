//! The MANIFEST is replaced by a fresh one (a snapshot of the live files) once it passes
//! `max_manifest_file_size`, while the database runs: one short manifest stays, and a
//! reopen finds every key.

use std::collections::BTreeMap;
use std::path::Path;

use shale::{Db, Options};

/// The manifests in `dir`, with their lengths.
fn manifests(dir: &Path) -> Vec<(String, u64)> {
    let mut found: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with("MANIFEST-"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    found.sort();
    found
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        max_file_size: 64 << 10,
        level0_compaction_trigger: 2,
        max_bytes_for_level_base: 1 << 20,
        max_manifest_file_size: 4 << 10,
        ..Options::default()
    }
}

#[test]
fn the_manifest_rolls_while_flushes_and_compactions_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    let db = Db::open(dir.path(), options()).unwrap();
    let at_open = manifests(dir.path());
    assert_eq!(at_open.len(), 1);
    let mut seen = vec![at_open[0].0.clone()];
    for round in 0..60u32 {
        for i in 0..500u32 {
            let key = format!("key{:05}", (i * 7 + round * 131) % 9000);
            let value = format!("{round}-{i}-").repeat(10);
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        db.flush().unwrap();
        let now = manifests(dir.path());
        // One manifest at a time (a roll deletes the old one once CURRENT names the new).
        assert_eq!(now.len(), 1, "{now:?}");
        if seen.last() != Some(&now[0].0) {
            seen.push(now[0].0.clone());
        }
        assert!(now[0].1 <= 16 << 10, "{now:?}");
    }
    db.close().unwrap();
    assert!(
        seen.len() >= 4,
        "the manifest rolled {} times",
        seen.len() - 1
    );

    let db = Db::open(dir.path(), options()).unwrap();
    for (key, value) in &model {
        assert_eq!(
            db.get(key).unwrap().as_deref(),
            Some(value.as_bytes()),
            "{key}"
        );
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> =
        db.range::<&str>(..).unwrap().map(|r| r.unwrap()).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .into_iter()
        .map(|(k, v)| (k.into_bytes(), v.into_bytes()))
        .collect();
    assert!(
        scanned == want,
        "a scan after the reopen differs from the model"
    );
}

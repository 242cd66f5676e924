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
        // A roll runs inside whichever flush or compaction installs the edit that makes
        // the manifest too long, and both manifests exist until CURRENT names the new
        // one: look once the background work is done, when exactly one must be left.
        db.wait_idle().unwrap();
        let now = manifests(dir.path());
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

/// A roll whose switch of CURRENT fails (every rename fails) leaves the flush that set it
/// off installed, but refuses writes from then on, as a failed manifest write does; a
/// reopen on a healthy file system finds every acknowledged write.
#[test]
fn a_failed_switch_of_current_refuses_later_writes() {
    use shale::fs::{Errno, Fault, FaultFs, MemFs, OpKind};
    use std::sync::Arc;

    let mem = MemFs::new();
    let faulty = FaultFs::new(Arc::new(mem.clone()));
    let opts = |fs: Arc<dyn shale::fs::FileSystem>| Options {
        fs,
        max_manifest_file_size: 1,
        level0_compaction_trigger: 100, // no compactions: only flushes install
        level0_slowdown_trigger: 100,
        level0_stop_trigger: 100,
        ..options()
    };
    let db = Db::open("/db", opts(Arc::new(faulty.clone()))).unwrap();
    faulty.arm(Fault {
        at: 1,
        kinds: vec![OpKind::Rename],
        persistent: true,
        errno: Errno::Eio,
    });
    let mut acknowledged = Vec::new();
    let mut refused = false;
    for round in 0..20u32 {
        let key = format!("k{round:02}");
        match db.put(&key, "v") {
            Ok(()) => acknowledged.push(key),
            Err(shale::Error::Poisoned(_)) => {
                refused = true;
                break;
            }
            Err(e) => panic!("{e}"),
        }
        if db.flush().is_ok() {
            assert_eq!(
                faulty.injected(),
                0,
                "a roll failed, and its flush said nothing"
            );
        } else {
            // The flush installed, but its roll poisoned the database.
            assert!(matches!(
                db.put("after", "x"),
                Err(shale::Error::Poisoned(_))
            ));
            refused = true;
            break;
        }
    }
    assert!(refused, "no roll failed in 20 flushes");
    assert!(faulty.injected() > 0);
    drop(db);
    let db = Db::open("/db", opts(Arc::new(mem))).unwrap();
    for key in &acknowledged {
        assert_eq!(db.get(key).unwrap().as_deref(), Some(&b"v"[..]), "{key}");
    }
    db.put("after", "x").unwrap();
}

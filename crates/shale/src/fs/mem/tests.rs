//! `MemFs` tests: what survives a power loss (synced bytes, synced names), what a process
//! crash keeps, the sync-order checker, planned crashes, and the lock.

use super::*;

fn write(fs: &MemFs, path: &Path, data: &[u8], sync: bool) {
    let mut f = fs.create(path).unwrap();
    f.append(data).unwrap();
    if sync {
        f.sync().unwrap();
    } else {
        f.flush().unwrap();
    }
}

#[test]
fn power_loss_keeps_only_synced_bytes_and_entries() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    write(&fs, &a, b"durable", true);
    fs.sync_dir(dir).unwrap();
    let mut log = fs.create_log(&dir.join("log")).unwrap();
    fs.sync_dir(dir).unwrap();
    write(&fs, &b, b"synced data, entry not", true);
    log.append(b"one").unwrap();
    log.sync().unwrap();
    log.append(b"two").unwrap();

    // kill -9: everything handed to the OS survives.
    let p = fs.process_crash();
    assert_eq!(p.read_all(&dir.join("log")).unwrap(), b"onetwo");
    assert!(p.exists(&dir.join("b")));

    let lost = fs.power_loss(PowerLoss::default());
    assert_eq!(lost.read_all(&a).unwrap(), b"durable");
    assert!(!lost.exists(&dir.join("b")), "entry was never synced");
    assert_eq!(lost.read_all(&dir.join("log")).unwrap(), b"one");

    let torn = fs.power_loss(PowerLoss {
        tear_last_write: Some(2),
        ..PowerLoss::default()
    });
    assert_eq!(torn.read_all(&dir.join("log")).unwrap(), b"onetw");
}

#[test]
fn write_back_keeps_a_prefix_of_each_file_independently() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let mut first = fs.create_log(&dir.join("first")).unwrap();
    let mut second = fs.create_log(&dir.join("second")).unwrap();
    fs.sync_dir(dir).unwrap();
    first.append(b"old-").unwrap();
    first.sync().unwrap();
    first.append(b"unsynced").unwrap();
    second.append(b"later").unwrap();

    let mut kept = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let image = fs.power_loss(PowerLoss {
            write_back: Some(seed),
            ..PowerLoss::default()
        });
        let a = image.read_all(&dir.join("first")).unwrap();
        let b = image.read_all(&dir.join("second")).unwrap();
        assert!(
            a.starts_with(b"old-") && b"old-unsynced".starts_with(&a[..]),
            "{a:?}"
        );
        assert!(b"later".starts_with(&b[..]), "{b:?}");
        kept.insert((a.len(), b.len()));
    }
    // The later file survives whole while the earlier one lost its tail: the case a
    // missing sync would turn into a hole.
    assert!(kept.iter().any(|&(a, b)| a < 12 && b == 5), "{kept:?}");
    assert!(
        kept.contains(&(4, 0)) && kept.contains(&(12, 5)),
        "{kept:?}"
    );
}

#[test]
fn rename_survives_only_after_sync_dir() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    write(&fs, &dir.join("CURRENT"), b"old", true);
    fs.sync_dir(dir).unwrap();
    write(&fs, &dir.join("tmp"), b"new", true);
    fs.rename(&dir.join("tmp"), &dir.join("CURRENT")).unwrap();
    let before = fs.power_loss(PowerLoss::default());
    assert_eq!(before.read_all(&dir.join("CURRENT")).unwrap(), b"old");
    // In order, the create of tmp and then the rename.
    let journaled = fs.power_loss(PowerLoss {
        keep_dir_ops: 2,
        ..PowerLoss::default()
    });
    assert_eq!(journaled.read_all(&dir.join("CURRENT")).unwrap(), b"new");
    fs.sync_dir(dir).unwrap();
    let after = fs.power_loss(PowerLoss::default());
    assert_eq!(after.read_all(&dir.join("CURRENT")).unwrap(), b"new");
    assert!(!after.exists(&dir.join("tmp")));
    assert!(fs.violations().is_empty(), "{:?}", fs.violations());
}

#[test]
fn removal_is_undone_without_sync_dir() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    write(&fs, &dir.join("x"), b"x", true);
    fs.sync_dir(dir).unwrap();
    fs.remove(&dir.join("x")).unwrap();
    assert!(!fs.exists(&dir.join("x")));
    assert!(fs.power_loss(PowerLoss::default()).exists(&dir.join("x")));
}

#[test]
fn checker_flags_rename_of_unsynced_file_and_sync_before_sync_dir() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    write(&fs, &dir.join("tmp"), b"not synced", false);
    fs.rename(&dir.join("tmp"), &dir.join("CURRENT")).unwrap();
    write(&fs, &dir.join("other"), b"x", true);
    let v = fs.violations();
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].contains("unsynced bytes"));
    assert!(v[1].contains("waits for sync_dir"));
}

/// Another thread's sync does not depend on a rename this thread has not made durable yet
/// (a writer syncing its WAL while a background thread switches CURRENT): not flagged.
#[test]
fn checker_ignores_another_threads_sync_before_sync_dir() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    write(&fs, &dir.join("tmp"), b"synced", true);
    fs.rename(&dir.join("tmp"), &dir.join("CURRENT")).unwrap();
    let other = fs.clone();
    std::thread::spawn(move || write(&other, Path::new("/db/wal"), b"x", true))
        .join()
        .unwrap();
    assert!(fs.violations().is_empty(), "{:?}", fs.violations());
    write(&fs, &dir.join("mine"), b"x", true);
    assert_eq!(fs.violations().len(), 1);
    fs.sync_dir(dir).unwrap();
}

#[test]
fn buffered_bytes_die_with_the_process() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let mut f = fs.create(&dir.join("t")).unwrap();
    f.append(b"buffered").unwrap();
    assert_eq!(fs.process_crash().read_all(&dir.join("t")).unwrap(), b"");
    f.flush().unwrap();
    assert_eq!(
        fs.process_crash().read_all(&dir.join("t")).unwrap(),
        b"buffered"
    );
}

#[test]
fn planned_crash_freezes_the_image_and_fails_later_operations() {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let mut log = fs.create_log(&dir.join("log")).unwrap(); // op 1
    fs.sync_dir(dir).unwrap(); // op 2
    log.append(b"abc").unwrap(); // op 3
    log.sync().unwrap(); // op 4
    fs.crash_at_op(
        5,
        CrashKind::PowerLoss(PowerLoss {
            tear_last_write: Some(1),
            ..PowerLoss::default()
        }),
    );
    assert!(log.append(b"def").is_err()); // op 5: torn, never acknowledged
    assert!(fs.crashed());
    assert!(log.append(b"ghi").is_err());
    let image = fs.crash_image().unwrap();
    assert_eq!(image.read_all(&dir.join("log")).unwrap(), b"abcd");
    // The image is a healthy file system.
    let mut again = image.create_log(&dir.join("log2")).unwrap();
    again.append(b"x").unwrap();
}

#[test]
fn lock_is_exclusive() {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/db")).unwrap();
    let first = fs.lock(Path::new("/db/LOCK")).unwrap();
    assert!(matches!(
        fs.lock(Path::new("/db/LOCK")),
        Err(Error::Locked(_))
    ));
    drop(first);
    fs.lock(Path::new("/db/LOCK")).unwrap();
}

//! The version set's manifest writes, rolls and their failures.

use super::*;
use crate::fs::{Errno, Fault, FaultFs, MemFs, OpKind};

/// Regression: after a manifest append failed half-way (the header written, the
/// payload not), the next edit was appended behind the partial record, and the next
/// open saw damage followed by a valid record: `Corruption`. Found by the I/O-error
/// sweep (once ENOSPC), where a flush installed its edit right after a compaction's
/// manifest write had failed.
#[test]
fn no_edit_is_logged_after_a_failed_manifest_write() {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let dir = Path::new("/db");
    fs.create_dir_all(dir).unwrap();
    let state = RecoveredManifest {
        manifest_id: FileId(1),
        next_file_number: FileId(2),
        ..RecoveredManifest::default()
    };
    let mut set =
        VersionSet::create(Arc::new(fs.clone()), dir, state, BTreeMap::new(), 64 << 20).unwrap();
    let edit = || VersionEdit {
        last_seq: Some(SeqNo(7)),
        ..VersionEdit::default()
    };
    set.log_and_apply(edit(), &[]).unwrap();
    // The second append of the next record (its payload) fails once.
    fs.arm(Fault {
        at: 2,
        kinds: vec![OpKind::Write],
        persistent: false,
        errno: Errno::Enospc,
    });
    assert!(set.log_and_apply(edit(), &[]).is_err());
    assert!(matches!(
        set.log_and_apply(edit(), &[]),
        Err(Error::Poisoned(_))
    ));
    let recovered = RecoveredManifest::load(&mem, dir).unwrap();
    assert_eq!(recovered.last_seq, SeqNo(7));
}

/// A set over `fs` in `/db` rolling its manifest past `limit` bytes.
fn rolling_set(fs: Arc<dyn FileSystem>, limit: u64) -> VersionSet {
    fs.create_dir_all(Path::new("/db")).unwrap();
    let state = RecoveredManifest {
        manifest_id: FileId(1),
        next_file_number: FileId(2),
        ..RecoveredManifest::default()
    };
    VersionSet::create(fs, Path::new("/db"), state, BTreeMap::new(), limit).unwrap()
}

/// An edit that adds table `id` to L1 and deletes table `id - 1`, at sequence `id`.
fn churn(set: &mut VersionSet) -> Result<()> {
    let id = set.new_file_id();
    let key = |k: &str| {
        crate::key::InternalKey::new(k.as_bytes(), SeqNo(id.0), crate::key::ValueKind::Put)
    };
    let meta = FileMeta {
        id,
        keyspace: crate::keyspace::KeyspaceId::DEFAULT,
        size: 1000 + id.0,
        smallest: key("a"),
        largest: key("z"),
        smallest_seq: SeqNo(id.0),
        largest_seq: SeqNo(id.0),
        range_dels: false,
    };
    let edit = VersionEdit {
        last_seq: Some(SeqNo(id.0)),
        new_files: vec![(Level(1), meta)],
        deleted_files: set.live_files().map(|f| (Level(1), f)).collect(),
        ..VersionEdit::default()
    };
    set.log_and_apply(edit, &[])
}

fn manifests(fs: &dyn FileSystem) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list(Path::new("/db"))
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("MANIFEST-"))
        .collect();
    names.sort();
    names
}

#[test]
fn the_manifest_rolls_past_its_limit_and_reloads_the_same_state() {
    let mem = MemFs::new();
    let mut set = rolling_set(Arc::new(mem.clone()), 4 << 10);
    let first = set.manifest_id();
    let mut rolls = 0;
    let mut last = set.manifest_id();
    for _ in 0..1000 {
        churn(&mut set).unwrap();
        if set.manifest_id() != last {
            rolls += 1;
            last = set.manifest_id();
            // The old manifest is gone; CURRENT names the new one.
            assert_eq!(manifests(&mem), vec![manifest_name(last)]);
        }
        assert!(
            set.manifest.len() <= (4 << 10) + 200,
            "{}",
            set.manifest.len()
        );
    }
    assert!(rolls >= 8, "{rolls} rolls");
    assert_ne!(first, set.manifest_id());
    let recovered = RecoveredManifest::load(&mem, Path::new("/db")).unwrap();
    assert_eq!(recovered.manifest_id, set.manifest_id());
    assert_eq!(recovered.files, set.files);
    assert_eq!(recovered.last_seq, set.last_seq());
    assert_eq!(recovered.next_file_number.0, set.next_file);
}

#[test]
fn a_large_snapshot_is_not_rolled_at_every_edit() {
    let mem = MemFs::new();
    let mut set = rolling_set(Arc::new(mem.clone()), 4 << 10);
    // 200 live files: a snapshot of more than the limit.
    for _ in 0..200 {
        let id = set.new_file_id();
        let key = |k: String| {
            crate::key::InternalKey::new(k.as_bytes(), SeqNo(1), crate::key::ValueKind::Put)
        };
        let meta = FileMeta {
            id,
            keyspace: crate::keyspace::KeyspaceId::DEFAULT,
            size: 1,
            smallest: key(format!("k{:06}", id.0)),
            largest: key(format!("k{:06}~", id.0)),
            smallest_seq: SeqNo(1),
            largest_seq: SeqNo(1),
            range_dels: false,
        };
        let edit = VersionEdit {
            new_files: vec![(Level(6), meta)],
            ..VersionEdit::default()
        };
        set.log_and_apply(edit, &[]).unwrap();
    }
    set.roll();
    let rolled = set.manifest_id();
    let snapshot = set.manifest.len();
    assert!(snapshot > 4 << 10, "{snapshot}");
    // Small edits: none rolls until they are as long as the snapshot.
    let mut before = snapshot;
    let mut edits = 0;
    while set.manifest_id() == rolled {
        edits += 1;
        assert!(edits < 10_000, "never rolled");
        before = set.manifest.len();
        let edit = VersionEdit {
            last_seq: Some(SeqNo(2)),
            ..VersionEdit::default()
        };
        set.log_and_apply(edit, &[]).unwrap();
    }
    assert!(
        before - snapshot + 64 > snapshot,
        "rolled at {before}, snapshot {snapshot}"
    );
    assert_eq!(
        RecoveredManifest::load(&mem, Path::new("/db"))
            .unwrap()
            .files,
        set.files
    );
}

#[test]
fn a_roll_that_fails_keeps_the_old_manifest_or_poisons() {
    // Fail the roll's first write (the new manifest's snapshot): the old manifest stays
    // live and complete, later edits go on into it, and the roll is tried again later.
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let mut set = rolling_set(Arc::new(fs.clone()), 4 << 10);
    let start = set.manifest_id();
    while set.manifest.len() + 300 < 4 << 10 {
        churn(&mut set).unwrap();
    }
    // The next edits reach the limit: an edit's own record is two writes (header and
    // payload), which succeed; the roll's first write, the third, fails.
    let mut roll_failed = false;
    for _ in 0..10 {
        fs.arm(Fault {
            at: 3,
            kinds: vec![OpKind::Write],
            persistent: false,
            errno: Errno::Enospc,
        });
        churn(&mut set).unwrap();
        fs.disarm();
        // A failed roll defers the next one to twice the manifest's length.
        if set.roll_at > 4 << 10 {
            roll_failed = true;
            break;
        }
    }
    assert!(roll_failed, "no roll was attempted");
    assert_eq!(set.manifest_id(), start, "a failed roll switched manifests");
    churn(&mut set).unwrap();
    let recovered = RecoveredManifest::load(&mem, Path::new("/db")).unwrap();
    assert_eq!(recovered.manifest_id, start);
    assert_eq!(recovered.files, set.files);

    // Fail the rename of CURRENT: the edit that triggered the roll stands, later edits
    // are refused, and whichever manifest CURRENT names holds the same state.
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let mut set = rolling_set(Arc::new(fs.clone()), 4 << 10);
    fs.arm(Fault {
        at: 0,
        kinds: vec![OpKind::Rename],
        persistent: true,
        errno: Errno::Eio,
    });
    let mut tries = 0;
    while set.failed.is_none() {
        churn(&mut set).unwrap();
        tries += 1;
        assert!(tries < 1000, "never rolled");
    }
    assert!(matches!(churn(&mut set), Err(Error::Poisoned(_))));
    fs.disarm();
    let recovered = RecoveredManifest::load(&mem, Path::new("/db")).unwrap();
    assert_eq!(recovered.files, set.files);
    assert_eq!(recovered.last_seq, set.last_seq());
}

/// Churn `set` with `fault` armed before each edit until a roll meets it; the set
/// after that roll.
fn roll_into(fault: Fault) -> (MemFs, VersionSet, FileId) {
    let mem = MemFs::new();
    let fs = FaultFs::new(Arc::new(mem.clone()));
    let mut set = rolling_set(Arc::new(fs.clone()), 4 << 10);
    let start = set.manifest_id();
    for _ in 0..1000 {
        fs.arm(fault.clone());
        let result = churn(&mut set);
        fs.disarm();
        result.unwrap();
        if set.roll_at > 4 << 10 || set.failed.is_some() {
            return (mem, set, start);
        }
    }
    panic!("no roll met the fault");
}

#[test]
fn a_roll_whose_current_file_fails_keeps_the_old_manifest() {
    // The roll's second create is CURRENT's temporary file (the first is the new
    // manifest); edits create nothing.
    let (mem, mut set, start) = roll_into(Fault {
        at: 2,
        kinds: vec![OpKind::Create],
        persistent: false,
        errno: Errno::Enospc,
    });
    assert!(
        set.failed.is_none(),
        "CURRENT was never touched: nothing to poison"
    );
    assert_eq!(set.manifest_id(), start);
    churn(&mut set).unwrap();
    let recovered = RecoveredManifest::load(&mem, Path::new("/db")).unwrap();
    assert_eq!(recovered.manifest_id, start);
    assert_eq!(recovered.files, set.files);
    assert_eq!(recovered.last_seq, set.last_seq());
}

#[test]
fn a_roll_whose_directory_sync_after_the_rename_fails_poisons() {
    // The roll syncs the directory twice: for the new manifest's entry, and after the
    // rename of CURRENT; edits do not. The second fails: CURRENT's switch may not be
    // durable, so no edit may follow into either manifest.
    let (mem, mut set, _) = roll_into(Fault {
        at: 2,
        kinds: vec![OpKind::SyncDir],
        persistent: false,
        errno: Errno::Eio,
    });
    assert!(set.failed.is_some());
    assert!(matches!(churn(&mut set), Err(Error::Poisoned(_))));
    let recovered = RecoveredManifest::load(&mem, Path::new("/db")).unwrap();
    assert_eq!(recovered.files, set.files);
    assert_eq!(recovered.last_seq, set.last_seq());
}

/// A keyspace whose stored options are out of their ranges is damage at load, not
/// something the open builds tables with.
#[test]
fn a_keyspace_with_options_out_of_range_is_corruption() {
    let mem = MemFs::new();
    let mut set = rolling_set(Arc::new(mem.clone()), 64 << 20);
    let options = crate::options::KeyspaceOptions {
        block_size: 0,
        ..crate::options::KeyspaceOptions::from_db(&crate::Options::default())
    };
    let edit = VersionEdit {
        keyspaces: vec![super::super::KeyspaceDef {
            id: KeyspaceId(1),
            name: "bad".into(),
            options,
        }],
        next_keyspace_id: Some(KeyspaceId(2)),
        ..VersionEdit::default()
    };
    set.log_and_apply(edit, &[]).unwrap();
    let err = RecoveredManifest::load(&mem, Path::new("/db")).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("block_size"), "{err}");
}

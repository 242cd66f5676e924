//! Applies, index definitions and snapshot installs on one state machine.

use super::*;
use crate::command::Op;
use crate::format::RESERVED_PREFIX;
use openraft::{CommittedLeaderId, Membership as RaftMembership};
use std::collections::BTreeSet;

pub(super) fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload,
    }
}

pub(super) fn put(key: &[u8], value: &[u8]) -> EntryPayload<TypeConfig> {
    normal(Command::Write(vec![Op {
        key: key.to_vec(),
        value: Some(value.to_vec()),
    }]))
}

pub(super) fn open(dir: &Path) -> StateMachineStore {
    StateMachineStore::open(dir, Options::default()).expect("open")
}

#[test]
fn one_apply_call_is_one_batch_that_sees_its_own_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sm = open(dir.path());
    let membership = RaftMembership::<NodeId, BasicNode>::new(vec![BTreeSet::from([1])], ());
    let replies = sm
        .apply_blocking(vec![
            entry(1, EntryPayload::Membership(membership.clone())),
            entry(2, put(b"k", b"1")),
            entry(
                3,
                normal(Command::CompareAndSet {
                    key: b"k".to_vec(),
                    expected: Some(b"1".to_vec()),
                    new_value: Some(b"2".to_vec()),
                }),
            ),
            entry(4, put(&[RESERVED_PREFIX, b'a'], b"forged")),
        ])
        .expect("apply");
    assert_eq!(
        replies.get(2),
        Some(&Response::CompareAndSet {
            swapped: true,
            current: Some(b"1".to_vec())
        })
    );
    assert!(
        matches!(replies.get(3), Some(Response::Refused(_))),
        "{replies:?}"
    );
    drop(sm);
    // Reopened, the data, the applied id and the membership agree.
    let sm = open(dir.path());
    assert_eq!(sm.db().get(b"k").expect("get"), Some(b"2".to_vec()));
    let (applied, m) = sm.applied();
    assert_eq!(
        applied.map(|a| a.index),
        Some(4),
        "the refused entry still counts as applied"
    );
    assert_eq!(m.log_id().map(|l| l.index), Some(1));
    assert_eq!(m.membership(), &membership);
}

#[test]
fn a_batch_applies_in_order_and_answers_each_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sm = open(dir.path());
    let write = Command::Write(vec![Op {
        key: b"k".to_vec(),
        value: Some(b"1".to_vec()),
    }]);
    let batch = Command::Batch(vec![write.clone(), cas(b"1", b"2"), cas(b"1", b"3")]);
    let forged = Command::Batch(vec![write, Command::Batch(vec![cas(b"2", b"4")])]);
    let replies = sm
        .apply_blocking(vec![entry(1, normal(batch)), entry(2, normal(forged))])
        .expect("apply");
    let swap = |swapped, current: &[u8]| Response::CompareAndSet {
        swapped,
        current: Some(current.to_vec()),
    };
    assert_eq!(
        replies.first(),
        Some(&Response::Batch(vec![
            Response::Written,
            swap(true, b"1"),
            swap(false, b"2"),
        ]))
    );
    // A batch in a batch is refused whole: its write does not land either.
    assert!(
        matches!(replies.get(1), Some(Response::Refused(_))),
        "{replies:?}"
    );
    assert_eq!(sm.db().get(b"k").expect("get"), Some(b"2".to_vec()));
}

#[test]
fn a_snapshot_installs_into_a_new_generation_and_leftovers_are_removed_at_open() {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let leader = open(leader_dir.path());
    let mut entries = vec![entry(1, EntryPayload::Blank)];
    for i in 0..300u64 {
        entries.push(entry(
            i + 2,
            put(format!("k{i:04}").as_bytes(), &[b'v'; 500]),
        ));
    }
    leader.apply_blocking(entries).expect("apply");
    let snap = leader.build_snapshot_blocking().expect("build");

    let dir = tempfile::tempdir().expect("tempdir");
    let follower = open(dir.path());
    follower
        .apply_blocking(vec![entry(1, put(b"stale", b"x"))])
        .expect("apply");
    follower
        .install_blocking(&snap.meta, &snap.snapshot)
        .expect("install");
    assert_eq!(
        follower.db().get(b"stale").expect("get"),
        None,
        "the old state is gone"
    );
    assert_eq!(
        follower.db().get(b"k0299").expect("get"),
        Some(vec![b'v'; 500])
    );
    assert_eq!(follower.applied().0, snap.meta.last_log_id);
    assert_eq!(
        read_generation(&shale::fs::PosixFs, dir.path()).expect("generation"),
        Some(1)
    );
    drop(follower);

    // A crash mid-install leaves a half-built generation and a partial copy behind.
    std::fs::create_dir_all(dir.path().join("sm-2")).expect("mkdir");
    std::fs::write(dir.path().join("sm-2").join("junk"), b"half").expect("write");
    std::fs::write(
        dir.path().join(SNAPSHOT_DIR).join("installing.tmp"),
        b"half",
    )
    .expect("write");
    let reopened = open(dir.path());
    assert!(!dir.path().join("sm-2").exists());
    assert!(!dir
        .path()
        .join(SNAPSHOT_DIR)
        .join("installing.tmp")
        .exists());
    assert!(
        !dir.path().join("sm-0").exists(),
        "the replaced generation is gone"
    );
    assert_eq!(
        reopened.db().get(b"k0000").expect("get"),
        Some(vec![b'v'; 500])
    );
    assert_eq!(reopened.applied().0, snap.meta.last_log_id);
}

#[test]
fn a_prepared_snapshot_is_switched_to_and_a_stale_one_dropped() {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let leader = open(leader_dir.path());
    leader
        .apply_blocking(vec![
            entry(1, EntryPayload::Blank),
            entry(2, put(b"a", b"1")),
        ])
        .expect("apply");
    let first = leader.build_snapshot_blocking().expect("build");
    leader
        .apply_blocking(vec![entry(3, put(b"b", b"2"))])
        .expect("apply");
    let second = leader.build_snapshot_blocking().expect("build");

    let dir = tempfile::tempdir().expect("tempdir");
    let follower = open(dir.path());
    // Prepared: written into sm-1, nothing switched yet.
    follower
        .prepare_install(&first.meta, &first.snapshot)
        .expect("prepare");
    assert!(dir.path().join("sm-1").exists());
    assert_eq!(
        read_generation(&shale::fs::PosixFs, dir.path()).expect("generation"),
        Some(0)
    );
    assert_eq!(follower.db().get(b"a").expect("get"), None);
    assert_eq!(follower.snapshot_writes().count(), 1);
    // openraft installs another snapshot than the one prepared: that one is dropped and
    // the other written and switched to.
    follower
        .install_blocking(&second.meta, &second.snapshot)
        .expect("install");
    assert_eq!(follower.snapshot_writes().count(), 2);
    assert_eq!(follower.db().get(b"b").expect("get"), Some(b"2".to_vec()));
    assert_eq!(
        read_generation(&shale::fs::PosixFs, dir.path()).expect("generation"),
        Some(1)
    );
    // Prepared, then installed: switched to without writing it again.
    follower
        .prepare_install(&second.meta, &second.snapshot)
        .expect("prepare");
    follower
        .install_blocking(&second.meta, &second.snapshot)
        .expect("install");
    assert_eq!(
        follower.snapshot_writes().count(),
        3,
        "one write, for the prepare"
    );
    assert_eq!(
        read_generation(&shale::fs::PosixFs, dir.path()).expect("generation"),
        Some(2)
    );
    assert_eq!(follower.applied().0, second.meta.last_log_id);
    // A prepare that is never installed goes with the close.
    follower
        .prepare_install(&first.meta, &first.snapshot)
        .expect("prepare");
    assert!(dir.path().join("sm-3").exists());
    follower.close().expect("close");
    assert!(!dir.path().join("sm-3").exists());
    drop(follower);
    let reopened = open(dir.path());
    assert_eq!(reopened.db().get(b"b").expect("get"), Some(b"2".to_vec()));
    assert_eq!(reopened.applied().0, second.meta.last_log_id);
}

/// A compare-and-set of key `k` from `expected` to `new`.
pub(super) fn cas(expected: &[u8], new: &[u8]) -> Command {
    Command::CompareAndSet {
        key: b"k".to_vec(),
        expected: Some(expected.to_vec()),
        new_value: Some(new.to_vec()),
    }
}

pub(super) fn normal(cmd: Command) -> EntryPayload<TypeConfig> {
    EntryPayload::Normal(Arc::new(cmd))
}

//! A group's shard on one state machine: writes of keys outside it refused whole on every
//! path a write takes, the shard kept across a restart and carried by snapshots.

use super::tests::{cas, entry, normal, open, put};
use super::*;
use crate::command::{Op, SessionSeq};

fn b_to_m(version: u64) -> Shard {
    Shard {
        start: b"b".to_vec(),
        end: Some(b"m".to_vec()),
        version,
    }
}

fn write(keys: &[&[u8]]) -> Command {
    Command::Write(
        keys.iter()
            .map(|k| Op {
                key: k.to_vec(),
                value: Some(b"v".to_vec()),
            })
            .collect(),
    )
}

/// A session's opening, then a write inside `["b", "m")`, and one of each path a write
/// takes with a key outside it (the end included), the last two in the session.
fn writes_in_and_out() -> Vec<Entry> {
    let session = SessionSeq {
        session: 1,
        seq: 1,
        lowest_awaited: 1,
    };
    let in_session = |cmd: Command| {
        normal(Command::InSession {
            at: session,
            cmd: Box::new(cmd),
        })
    };
    let cas_end = Command::CompareAndSet {
        key: b"m".to_vec(),
        expected: None,
        new_value: Some(b"v".to_vec()),
    };
    vec![
        entry(1, normal(Command::OpenSession)),
        entry(2, put(b"c", b"in")),
        entry(3, normal(write(&[b"d", b"z"]))),
        entry(
            4,
            normal(Command::Batch(vec![write(&[b"e"]), write(&[b"a"])])),
        ),
        entry(5, normal(cas_end)),
        entry(6, in_session(write(&[b"zz"]))),
        entry(7, in_session(cas(b"", b"x"))),
    ]
}

#[test]
fn writes_outside_the_shard_are_refused_whole_and_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sm = open(dir.path());
    assert_eq!(sm.shard(), Shard::whole());
    sm.claim_shard(b_to_m(3)).expect("claim");
    let replies = sm.apply_blocking(writes_in_and_out()).expect("apply");
    let wrong = Response::WrongShard(b_to_m(3));
    assert_eq!(replies.get(1), Some(&Response::Written));
    assert_eq!(
        replies.get(2),
        Some(&wrong),
        "one key outside refuses the write"
    );
    assert_eq!(
        replies.get(3),
        Some(&Response::Batch(vec![Response::Written, wrong.clone()])),
        "a batch answers each command"
    );
    assert_eq!(replies.get(4), Some(&wrong), "the end is outside");
    assert_eq!(replies.get(5), Some(&wrong), "in a session");
    // The refused write took no number in its session: the same number applies now.
    assert!(
        matches!(replies.get(6), Some(Response::CompareAndSet { .. })),
        "{replies:?}"
    );
    let db = sm.db();
    for (key, held) in [
        (&b"c"[..], true),
        (b"d", false),
        (b"z", false),
        (b"e", true),
    ] {
        assert_eq!(db.get(key).expect("get").is_some(), held, "{key:?}");
    }
    for key in [&b"a"[..], b"m", b"zz"] {
        assert_eq!(db.get(key).expect("get"), None, "{key:?}");
    }
}

#[test]
fn a_shard_is_claimed_before_anything_is_applied_and_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sm = open(dir.path());
    let backwards = Shard {
        start: b"m".to_vec(),
        end: Some(b"b".to_vec()),
        version: 1,
    };
    assert!(sm.claim_shard(backwards).is_err(), "ends before its start");
    sm.claim_shard(b_to_m(1)).expect("claim");
    sm.claim_shard(b_to_m(2))
        .expect("claimed again before any apply");
    sm.apply_blocking(vec![entry(1, EntryPayload::Blank)])
        .expect("apply");
    let err = sm.claim_shard(b_to_m(3)).expect_err("after an apply");
    assert!(
        err.to_string().contains("before the group applies"),
        "{err}"
    );
    drop(sm);
    assert_eq!(open(dir.path()).shard(), b_to_m(2), "kept across a restart");
}

#[test]
fn a_snapshot_carries_the_shard_to_the_replica_that_installs_it() {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let leader = open(leader_dir.path());
    leader.claim_shard(b_to_m(4)).expect("claim");
    leader
        .apply_blocking(vec![entry(1, put(b"c", b"1"))])
        .expect("apply");
    let snap = leader.build_snapshot_blocking().expect("build");
    let dir = tempfile::tempdir().expect("tempdir");
    let follower = open(dir.path());
    assert_eq!(follower.shard(), Shard::whole());
    follower
        .install_blocking(&snap.meta, &snap.snapshot)
        .expect("install");
    assert_eq!(follower.shard(), b_to_m(4));
    let replies = follower
        .apply_blocking(vec![entry(2, put(b"z", b"2"))])
        .expect("apply");
    assert_eq!(replies.first(), Some(&Response::WrongShard(b_to_m(4))));
    drop(follower);
    assert_eq!(open(dir.path()).shard(), b_to_m(4), "and keeps it");
}

//! Client sessions on one state machine: each write applied once, answers kept and
//! forgotten by the rules, sessions closed past the bound, all of it in snapshots.

use super::sessions::{MAX_ANSWERS_PER_SESSION, MAX_SESSIONS};
use super::tests::{cas, entry, normal, open, put};
use super::*;
use crate::command::{Op, SessionSeq};

/// The put of `key` = `value` as write `seq` of `session`, `lowest` the lowest awaited.
fn put_in(session: u64, seq: u64, lowest: u64, key: &[u8], value: &[u8]) -> Entry {
    let cmd = Command::Write(vec![Op {
        key: key.to_vec(),
        value: Some(value.to_vec()),
    }]);
    in_session(session, seq, lowest, cmd)
}

fn in_session(session: u64, seq: u64, lowest_awaited: u64, cmd: Command) -> Entry {
    let at = SessionSeq {
        session,
        seq,
        lowest_awaited,
    };
    // The index is set by `at_index`.
    entry(
        0,
        normal(Command::InSession {
            at,
            cmd: Box::new(cmd),
        }),
    )
}

fn at_index(mut e: Entry, index: u64) -> Entry {
    e.log_id.index = index;
    e
}

fn apply(sm: &StateMachineStore, first: u64, entries: Vec<Entry>) -> Vec<Response> {
    let entries = entries
        .into_iter()
        .zip(first..)
        .map(|(e, i)| at_index(e, i))
        .collect();
    sm.apply_blocking(entries).expect("apply")
}

fn opening() -> Entry {
    entry(0, normal(Command::OpenSession))
}

fn get(sm: &StateMachineStore, key: &[u8]) -> Option<Vec<u8>> {
    sm.db().get(key).expect("get")
}

fn repeated(index: u64, response: Response) -> Response {
    Response::Repeated {
        index,
        response: Box::new(response),
    }
}

#[test]
fn a_write_in_a_session_applies_once_and_a_retry_gets_its_first_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sm = open(dir.path());
    let replies = apply(
        &sm,
        1,
        vec![
            opening(),
            put_in(1, 1, 1, b"k", b"a"),
            at_index(entry(0, put(b"k", b"b")), 0),
            // A retry of write 1 in the same apply call, then a compare-and-set.
            put_in(1, 1, 1, b"k", b"a"),
            in_session(1, 2, 1, cas(b"b", b"c")),
        ],
    );
    assert_eq!(
        replies,
        vec![
            Response::SessionOpened(1),
            Response::Written,
            Response::Written,
            repeated(2, Response::Written),
            Response::CompareAndSet {
                swapped: true,
                current: Some(b"b".to_vec())
            },
        ]
    );
    assert_eq!(
        get(&sm, b"k"),
        Some(b"c".to_vec()),
        "the retry wrote nothing"
    );
    apply(&sm, 6, vec![at_index(entry(0, put(b"k", b"d")), 0)]);
    drop(sm);

    // Reopened, the answers are still there, and retries still change nothing.
    let sm = open(dir.path());
    let replies = apply(
        &sm,
        7,
        vec![
            in_session(1, 2, 1, cas(b"b", b"c")),
            put_in(1, 1, 1, b"k", b"a"),
        ],
    );
    assert_eq!(
        replies,
        vec![
            repeated(
                5,
                Response::CompareAndSet {
                    swapped: true,
                    current: Some(b"b".to_vec())
                }
            ),
            repeated(2, Response::Written),
        ]
    );
    assert_eq!(get(&sm, b"k"), Some(b"d".to_vec()));
}

#[test]
fn answers_below_the_lowest_awaited_are_forgotten_and_their_writes_never_apply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sm = open(dir.path());
    let replies = apply(
        &sm,
        1,
        vec![
            opening(),
            put_in(1, 1, 1, b"a", b"1"),
            // Write 3 arrives first; 2 is still awaited.
            put_in(1, 3, 2, b"c", b"3"),
            put_in(1, 2, 2, b"b", b"2"),
            // The client had every answer below 4: 1 to 3 are forgotten.
            put_in(1, 4, 4, b"d", b"4"),
            // A late copy of write 2 (a retry through another leader, say).
            put_in(1, 2, 2, b"b", b"again"),
            // A session never opened.
            put_in(99, 1, 1, b"e", b"5"),
        ],
    );
    assert!(
        matches!(replies.get(5), Some(Response::SessionExpired(_))),
        "{replies:?}"
    );
    assert!(
        matches!(replies.get(6), Some(Response::SessionExpired(_))),
        "{replies:?}"
    );
    assert_eq!(get(&sm, b"b"), Some(b"2".to_vec()));
    assert_eq!(get(&sm, b"e"), None);
    // Only write 4's answer is kept.
    let end = shale::prefix_successor(format::SM_SESSION_PREFIX).unwrap_or_default();
    let keys: Vec<Vec<u8>> = sm
        .db()
        .range(format::SM_SESSION_PREFIX.to_vec()..end)
        .expect("range")
        .map(|p| p.expect("pair").0)
        .collect();
    assert_eq!(
        keys,
        vec![
            format::SessionKey::Session(1).encode(),
            format::SessionKey::Answer { session: 1, seq: 4 }.encode(),
        ]
    );
}

#[test]
fn a_session_keeps_its_newest_answers_and_the_newest_sessions_stay_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sm = open(dir.path());
    // A client that never says what it had answered.
    let mut entries = vec![opening()];
    let writes = MAX_ANSWERS_PER_SESSION as u64 + 1;
    for seq in 1..=writes {
        entries.push(put_in(1, seq, 1, b"k", &seq.to_le_bytes()));
    }
    apply(&sm, 1, entries);
    let replies = apply(
        &sm,
        writes + 2,
        vec![
            put_in(1, 1, 1, b"k", b"again"),
            put_in(1, 2, 1, b"k", b"again"),
        ],
    );
    assert!(
        matches!(replies.first(), Some(Response::SessionExpired(_))),
        "{replies:?}"
    );
    assert_eq!(replies.get(1), Some(&repeated(3, Response::Written)));

    // MAX_SESSIONS more sessions: session 1, used least recently, is closed.
    let first = writes + 4;
    let openings = (0..MAX_SESSIONS).map(|_| opening()).collect();
    apply(&sm, first, openings);
    assert_eq!(sm.sessions_open(), MAX_SESSIONS);
    let replies = apply(
        &sm,
        first + MAX_SESSIONS as u64,
        vec![
            put_in(1, 2, 1, b"k", b"again"),
            put_in(first, 1, 1, b"n", b"1"),
        ],
    );
    assert!(
        matches!(replies.first(), Some(Response::SessionExpired(_))),
        "{replies:?}"
    );
    assert_eq!(replies.get(1), Some(&Response::Written));
    drop(sm);
    let sm = open(dir.path());
    assert_eq!(
        sm.sessions_open(),
        MAX_SESSIONS,
        "the same sessions reopened"
    );
}

#[test]
fn a_snapshot_carries_the_sessions_and_their_answers() {
    let leader_dir = tempfile::tempdir().expect("tempdir");
    let leader = open(leader_dir.path());
    apply(&leader, 1, vec![opening(), put_in(1, 1, 1, b"k", b"a")]);
    let snap = leader.build_snapshot_blocking().expect("build");

    let dir = tempfile::tempdir().expect("tempdir");
    let follower = open(dir.path());
    follower
        .install_blocking(&snap.meta, &snap.snapshot)
        .expect("install");
    let replies = apply(
        &follower,
        3,
        vec![
            at_index(entry(0, put(b"k", b"b")), 0),
            put_in(1, 1, 1, b"k", b"a"),
        ],
    );
    assert_eq!(replies.get(1), Some(&repeated(2, Response::Written)));
    assert_eq!(get(&follower, b"k"), Some(b"b".to_vec()));
}

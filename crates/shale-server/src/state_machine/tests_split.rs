//! A split on one state machine (`split.rs`): the parent keeps the keys below the split
//! key and a seeded child holds those from it, each half's indexes covering only its
//! keys; a stale or misplaced split changes nothing; a seed a crash interrupted is made
//! again and a finished one is not.

use super::split::{ready_record, READY_FILE, SEEDING_FILE};
use super::tests::{entry, normal, put};
use super::*;
use crate::command::{IndexModel, IndexSpec};
use crate::GroupId;
use openraft::Membership as RaftMembership;
use shale_search::semantic::SearchOptions;
use shale_search::text::KeywordOptions;
use std::collections::BTreeSet;

const DOCS: u32 = 40;

fn notes() -> IndexSpec {
    IndexSpec {
        name: "notes".into(),
        prefix: b"d/".to_vec(),
        dim: 128,
        metric: shale_search::vector::Metric::Cosine,
        model: IndexModel::Hash,
        keywords: Some(shale_search::Analyzer::English),
    }
}

fn split(at: &[u8], child: GroupId, version: u64) -> EntryPayload<TypeConfig> {
    normal(Command::Split {
        at: at.to_vec(),
        child,
        version,
    })
}

/// Group 1 of a node in `node`: a membership, the index, `DOCS` notes and a few other keys.
fn loaded(node: &Path) -> (StateMachineStore, u64) {
    let sm = StateMachineStore::open(&state_dir(node, 1), Options::default()).expect("open");
    sm.seed_groups_in(node, 1);
    let voters = BTreeSet::from([1, 2, 3]);
    let membership = RaftMembership::<NodeId, BasicNode>::new(vec![voters], ());
    let mut entries = vec![
        entry(1, EntryPayload::Membership(membership)),
        entry(2, normal(Command::DefineIndex(notes()))),
    ];
    for i in 0..DOCS {
        let text = format!("note {i} about the harbour and colour {}", i % 5);
        entries.push(entry(
            3 + u64::from(i),
            put(format!("d/{i:02}").as_bytes(), text.as_bytes()),
        ));
    }
    let next = 3 + u64::from(DOCS);
    entries.push(entry(next, put(b"a", b"below")));
    entries.push(entry(next + 1, put(b"z", b"above")));
    let replies = sm.apply_blocking(entries).expect("apply");
    assert_eq!(replies.get(1), Some(&Response::IndexDefined), "{replies:?}");
    (sm, next + 2)
}

fn user_keys(sm: &StateMachineStore) -> Vec<Vec<u8>> {
    sm.db()
        .range(Vec::new()..vec![crate::format::RESERVED_PREFIX])
        .expect("range")
        .map(|pair| pair.expect("pair").0)
        .collect()
}

/// The keys the index's meaning and keyword searches return, all of them asked for.
fn indexed(sm: &StateMachineStore) -> (BTreeSet<Vec<u8>>, BTreeSet<Vec<u8>>) {
    let index = sm.index("notes").expect("the index");
    let opts = SearchOptions {
        k: 100,
        exact: true,
        ..SearchOptions::default()
    };
    let meaning = index.vectors.search("harbour note", &opts).expect("search");
    let keywords = index.keywords.as_ref().expect("keywords");
    let opts = KeywordOptions {
        k: 100,
        ..KeywordOptions::default()
    };
    let words = keywords.search("harbour", &opts).expect("keywords");
    (
        meaning.into_iter().map(|h| h.key).collect(),
        words.into_iter().map(|h| h.key).collect(),
    )
}

#[test]
fn a_split_leaves_each_half_its_keys_and_indexes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sm, next) = loaded(dir.path());
    assert_eq!(sm.shard(), Shard::whole());
    let replies = sm
        .apply_blocking(vec![
            entry(next, split(b"d/20", 2, 0)),
            // Applied in the same call after the split: outside the shard now.
            entry(next + 1, put(b"d/30", b"late")),
            entry(next + 2, put(b"d/05", b"a harbour note, kept")),
        ])
        .expect("apply");
    let kept = Shard {
        start: Vec::new(),
        end: Some(b"d/20".to_vec()),
        version: 1,
    };
    let child_shard = Shard {
        start: b"d/20".to_vec(),
        end: None,
        version: 1,
    };
    assert_eq!(
        replies,
        vec![
            Response::Split {
                kept: kept.clone(),
                child: child_shard.clone()
            },
            Response::WrongShard(kept.clone()),
            Response::Written,
        ]
    );
    let below: Vec<Vec<u8>> = std::iter::once(b"a".to_vec())
        .chain((0..20).map(|i| format!("d/{i:02}").into_bytes()))
        .collect();
    let from: Vec<Vec<u8>> = (20..DOCS)
        .map(|i| format!("d/{i:02}").into_bytes())
        .chain(std::iter::once(b"z".to_vec()))
        .collect();
    assert_eq!(user_keys(&sm), below);
    let (meaning, words) = indexed(&sm);
    let docs_below: BTreeSet<Vec<u8>> = below.iter().skip(1).cloned().collect();
    assert_eq!(meaning, docs_below, "the parent's vector index");
    assert_eq!(words, docs_below, "the parent's keyword index");

    let child_dir = state_dir(dir.path(), 2);
    assert!(child_dir.join(READY_FILE).exists());
    let child = StateMachineStore::open(&child_dir, Options::default()).expect("open child");
    assert_eq!(child.shard(), child_shard);
    let (applied, membership) = child.applied();
    assert_eq!(applied.map(|l| l.index), Some(next), "the split's id");
    assert_eq!(membership, sm.applied().1, "the parent's membership");
    assert_eq!(user_keys(&child), from);
    let (meaning, words) = indexed(&child);
    let docs_from: BTreeSet<Vec<u8>> = from.iter().take(from.len() - 1).cloned().collect();
    assert_eq!(meaning, docs_from, "the child's vector index");
    assert_eq!(words, docs_from, "the child's keyword index");

    // The parent's state after a restart is the same.
    drop(sm);
    let sm =
        StateMachineStore::open(&state_dir(dir.path(), 1), Options::default()).expect("reopen");
    assert_eq!(sm.shard(), kept);
    assert_eq!(user_keys(&sm), below);
}

#[test]
fn a_stale_or_misplaced_split_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sm, next) = loaded(dir.path());
    let before = user_keys(&sm);
    let replies = sm
        .apply_blocking(vec![
            entry(next, split(b"d/20", 2, 7)),
            entry(next + 1, split(b"", 2, 0)),
            entry(
                next + 2,
                normal(Command::Batch(vec![Command::Split {
                    at: b"d/20".to_vec(),
                    child: 2,
                    version: 0,
                }])),
            ),
        ])
        .expect("apply");
    assert!(
        replies.iter().all(|r| match r {
            Response::Refused(_) => true,
            Response::Batch(inner) => matches!(inner.as_slice(), [Response::Refused(_)]),
            _ => false,
        }),
        "{replies:?}"
    );
    // The split at the shard's start: refused once the shard starts there.
    let replies = sm
        .apply_blocking(vec![
            entry(next + 3, split(b"m", 2, 0)),
            entry(next + 4, split(b"c", 3, 1)),
            entry(next + 5, split(b"m", 3, 1)),
        ])
        .expect("apply");
    assert!(matches!(replies[0], Response::Split { .. }), "{replies:?}");
    assert!(matches!(replies[1], Response::Split { .. }), "{replies:?}");
    assert!(
        matches!(&replies[2], Response::Refused(why) if why.contains("version")),
        "{replies:?}"
    );
    assert!(user_keys(&sm).len() < before.len());
    let shard = sm.shard();
    assert_eq!((shard.end.as_deref(), shard.version), (Some(&b"c"[..]), 2));
    // A child id whose directory holds another group's state (here the parent's own):
    // the apply fails, and neither directory is touched.
    let keys = user_keys(&sm);
    let err = sm
        .apply_blocking(vec![entry(next + 6, split(b"b", 1, 2))])
        .expect_err("a child id in use");
    assert!(err.to_string().contains("holds another state"), "{err}");
    assert_eq!((sm.shard(), user_keys(&sm)), (shard, keys));
}

#[test]
fn a_seed_a_crash_interrupted_is_made_again_and_a_finished_one_is_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (sm, next) = loaded(dir.path());
    // A half-made seed of group 2 (no READY): removed and made again.
    let two = state_dir(dir.path(), 2);
    std::fs::create_dir_all(two.join("sm-0")).expect("mkdir");
    std::fs::write(two.join(SEEDING_FILE), b"").expect("write");
    std::fs::write(two.join("sm-0").join("junk"), b"half").expect("write");
    // A finished seed of group 3: kept as it is (the split applied again after a crash).
    let three = state_dir(dir.path(), 3);
    std::fs::create_dir_all(&three).expect("mkdir");
    let three_shard = Shard {
        start: b"d/10".to_vec(),
        end: Some(b"d/20".to_vec()),
        version: 2,
    };
    let ready = ready_record(&three_shard, &entry(next + 1, EntryPayload::Blank).log_id);
    std::fs::write(three.join(READY_FILE), &ready).expect("write");
    std::fs::write(three.join("mine"), b"the child's").expect("write");
    let replies = sm
        .apply_blocking(vec![
            entry(next, split(b"d/20", 2, 0)),
            entry(next + 1, split(b"d/10", 3, 1)),
        ])
        .expect("apply");
    assert!(
        replies.iter().all(|r| matches!(r, Response::Split { .. })),
        "{replies:?}"
    );
    assert!(!two.join("sm-0").join("junk").exists());
    let child = StateMachineStore::open(&two, Options::default()).expect("open the child");
    assert_eq!(user_keys(&child).len(), 21, "d/20 to d/39 and z");
    assert!(three.join("mine").exists() && !three.join("sm-0").exists());
    assert_eq!(
        read_ready(&three).expect("read"),
        Some(entry(next + 1, EntryPayload::Blank).log_id)
    );

    // Another split naming group 3 finds a child that is not its own: the apply fails,
    // and nothing is touched.
    let keys = user_keys(&sm);
    let err = sm
        .apply_blocking(vec![entry(next + 2, split(b"d/05", 3, 2))])
        .expect_err("another split's child");
    assert!(err.to_string().contains("another split"), "{err}");
    assert!(three.join("mine").exists());
    assert_eq!(user_keys(&sm), keys);
}

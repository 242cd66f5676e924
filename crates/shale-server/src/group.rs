//! The Raft groups a node holds a replica of: each a [`Group`] (its `Raft`, its state
//! machine and its view of the node's log store), found by id in the node's [`Groups`].
//! The Raft service routes each peer's RPC to the group its header names. A node's groups
//! come from the keys its key space is split at ([`layout`]); each group's state machine
//! lives in a directory of its own ([`state_dir`]) and serves its shard.
//!
//! Thread safety: [`Groups`] is a registry behind a read-write lock, taken only to find,
//! add or list groups; a [`Group`] is cloned out of it (every part is a shared handle).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use shale::Options;

use crate::error::{Error, Result};
use crate::log_store::LogStore;
use crate::shard::Shard;
use crate::state_machine::StateMachineStore;
use crate::{GroupId, Raft, DEFAULT_GROUP};

/// One group's replica on this node.
#[derive(Clone)]
pub struct Group {
    pub id: GroupId,
    pub raft: Raft,
    pub sm: StateMachineStore,
    /// The group's view of the node's log store ([`LogStore::group`]).
    pub log: LogStore,
}

/// The groups of a node, by id. Cloning shares them.
#[derive(Clone, Default)]
pub struct Groups {
    live: Arc<RwLock<BTreeMap<GroupId, Group>>>,
}

impl Groups {
    /// Add `group`, or replace the group of its id.
    pub fn insert(&self, group: Group) {
        let mut live = self.live.write().unwrap_or_else(|e| e.into_inner());
        live.insert(group.id, group);
    }

    /// The group `id`, if this node holds a replica of it.
    pub fn get(&self, id: GroupId) -> Option<Group> {
        let live = self.live.read().unwrap_or_else(|e| e.into_inner());
        live.get(&id).cloned()
    }

    /// The ids of the groups held, ascending.
    pub fn ids(&self) -> Vec<GroupId> {
        let live = self.live.read().unwrap_or_else(|e| e.into_inner());
        live.keys().copied().collect()
    }
}

/// The most groups a node's splits may make.
pub const MAX_GROUPS: usize = 64;

/// The groups of `splits` (ascending keys) and the shard each serves: group 1 the keys
/// below the first split, group 2 those from the first split to the second, and so on.
/// Without splits, group 1 serves every key.
pub fn layout(splits: &[Vec<u8>]) -> Vec<(GroupId, Shard)> {
    if splits.is_empty() {
        return vec![(DEFAULT_GROUP, Shard::whole())];
    }
    let starts = std::iter::once(Vec::new()).chain(splits.iter().cloned());
    let ends = splits
        .iter()
        .cloned()
        .map(Some)
        .chain(std::iter::once(None));
    (DEFAULT_GROUP..)
        .zip(starts.zip(ends))
        .map(|(id, (start, end))| {
            let shard = Shard {
                start,
                end,
                version: 1,
            };
            (id, shard)
        })
        .collect()
}

/// What is wrong with `splits` as the keys a node's key space is split at.
pub fn split_problems(splits: &[Vec<u8>]) -> Vec<String> {
    let mut problems = Vec::new();
    if splits.len() >= MAX_GROUPS {
        problems.push(format!(
            "{} splits make more than {MAX_GROUPS} groups",
            splits.len()
        ));
    }
    if splits.iter().any(Vec::is_empty) {
        problems.push("a split may not be the empty key (it would leave group 1 no key)".into());
    }
    if let Some(bad) = splits
        .iter()
        .find(|k| crate::command::check_key(k).is_err())
    {
        problems.push(format!(
            "split {:?} is not a key a client may write",
            bad.escape_ascii().to_string()
        ));
    }
    if splits
        .iter()
        .zip(splits.iter().skip(1))
        .any(|(a, b)| a >= b)
    {
        problems.push("splits must be strictly ascending".into());
    }
    problems
}

pub use crate::state_machine::state_dir;

/// Open group `id`'s state machine in `data_dir`, serving `shard`: a new group claims it,
/// one with data must serve it already, or the part of it a split left the group
/// (the same start, an end no later, a later version).
///
/// # Errors
/// `Config` for a group whose data serves another shard (the node was started with other
/// splits than its data was made with); what opening the state machine fails with.
pub fn open_state(data_dir: &Path, id: GroupId, shard: &Shard) -> Result<StateMachineStore> {
    let dir = state_dir(data_dir, id);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("mkdir", &dir, e))?;
    let sm = StateMachineStore::open(&dir, Options::default())?;
    sm.seed_groups_in(data_dir, id);
    let have = sm.shard();
    if have == *shard || split_from(&have, shard) {
        return Ok(sm);
    }
    if sm.applied().0.is_none() {
        sm.claim_shard(shard.clone())?;
        return Ok(sm);
    }
    Err(Error::Config(vec![format!(
        "group {id} serves {have} in {}, not {shard}: start every node with the splits \
         its data was made with",
        dir.display()
    )]))
}

/// Whether `have` is what splits leave of `laid_out`: the same start, an end no later, a
/// later version.
fn split_from(have: &Shard, laid_out: &Shard) -> bool {
    let ends_within = match (&have.end, &laid_out.end) {
        (_, None) => true,
        (Some(h), Some(l)) => h <= l,
        (None, Some(_)) => false,
    };
    have.start == laid_out.start && have.version > laid_out.version && ends_within
}

/// The groups splits seeded in `data_dir` (`groups/<id>/state/` with a `READY` marker:
/// `state_machine/split.rs`), with each split's log id, ascending.
///
/// # Errors
/// `Io`; `Corruption` for a marker that does not decode.
pub fn seeded(data_dir: &Path) -> Result<Vec<crate::state_machine::Seeded>> {
    let root = data_dir.join("groups");
    if !root.exists() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(|e| Error::io("readdir", &root, e))? {
        let entry = entry.map_err(|e| Error::io("readdir", &root, e))?;
        let Ok(child) = entry.file_name().to_string_lossy().parse::<GroupId>() else {
            continue;
        };
        if let Some(split) = crate::state_machine::read_ready(&state_dir(data_dir, child))? {
            found.push(crate::state_machine::Seeded {
                child,
                parent: None,
                split,
            });
        }
    }
    found.sort_by_key(|s| s.child);
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_lay_out_groups_that_cover_every_key_once() {
        assert_eq!(layout(&[]), vec![(DEFAULT_GROUP, Shard::whole())]);
        let splits = [b"h".to_vec(), b"p".to_vec()];
        let groups = layout(&splits);
        let ids: Vec<GroupId> = groups.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [1, 2, 3]);
        for key in [&b""[..], b"a", b"h", b"oz", b"p", b"\xfe\xff"] {
            let holders = groups.iter().filter(|(_, s)| s.contains(key)).count();
            assert_eq!(holders, 1, "{key:?}");
        }
        assert!(split_problems(&splits).is_empty());
        let bad = [
            (vec![b"p".to_vec(), b"h".to_vec()], "ascending"),
            (vec![b"h".to_vec(), b"h".to_vec()], "ascending"),
            (vec![Vec::new()], "empty key"),
            (vec![vec![0xff, 1]], "not a key"),
            (
                (0..MAX_GROUPS as u32)
                    .map(|i| i.to_be_bytes().to_vec())
                    .collect(),
                "more than",
            ),
        ];
        for (splits, want) in bad {
            let problems = split_problems(&splits);
            assert!(
                problems.iter().any(|p| p.contains(want)),
                "{want}: {problems:?}"
            );
        }
    }

    #[test]
    fn a_group_serves_the_shard_its_data_was_made_with() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (id, shard) = layout(&[b"h".to_vec()]).remove(1);
        let sm = open_state(dir.path(), id, &shard).expect("a new group claims its shard");
        assert_eq!(sm.shard(), shard);
        assert!(state_dir(dir.path(), id).ends_with("groups/2/state"));
        let blank = crate::Entry {
            log_id: openraft::LogId::new(openraft::CommittedLeaderId::new(1, 1), 1),
            payload: openraft::EntryPayload::Blank,
        };
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let mut applying = sm.clone();
        runtime
            .block_on(openraft::storage::RaftStateMachine::apply(
                &mut applying,
                [blank],
            ))
            .expect("apply");
        drop((sm, applying));
        let other = layout(&[b"k".to_vec()]).remove(1).1;
        let err = open_state(dir.path(), id, &other).expect_err("another shard");
        assert!(
            err.to_string().contains("splits its data was made with"),
            "{err}"
        );
        assert_eq!(
            open_state(dir.path(), id, &shard)
                .expect("the same")
                .shard(),
            shard
        );
    }
}

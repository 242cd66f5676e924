//! The Raft groups a node holds a replica of: each a [`Group`] (its `Raft`, its state
//! machine and its view of the node's log store), found by id in the node's [`Groups`].
//! The Raft service routes each peer's RPC to the group its header names.
//!
//! Thread safety: [`Groups`] is a registry behind a read-write lock, taken only to find,
//! add or list groups; a [`Group`] is cloned out of it (every part is a shared handle).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::log_store::LogStore;
use crate::state_machine::StateMachineStore;
use crate::{GroupId, Raft};

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
    /// The registry of one group.
    pub fn of(group: Group) -> Groups {
        let groups = Groups::default();
        groups.insert(group);
        groups
    }

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

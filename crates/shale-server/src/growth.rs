//! How a node starts a group's Raft, at its own start and after: a split's child, seeded
//! by the parent's apply on this node (`state_machine/split.rs`), is started as soon as
//! the split is applied, and found on disk when the node starts again.
//!
//! A child's log starts after the split entry: it is purged up to that entry's log id and
//! holds a vote in the entry's term (as a restore seeds a log, `restore.rs`), both only
//! while the child's log holds no vote yet, so a child that ran is never set back. Its
//! state machine holds the split's id as its applied id and the parent's membership, so
//! its replicas (the parent's, on the same nodes) elect a leader in a later term; openraft
//! builds the child's first snapshot as it starts (the log is purged and none exists).
//!
//! Thread safety: one task receives the splits applied on the node, one at a time.

use std::path::PathBuf;
use std::sync::Arc;

use openraft::storage::RaftLogStorage;
use openraft::{Config, LogId, Vote};
use shale::Options;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::group::{state_dir, Group, Groups};
use crate::health::Health;
use crate::log_store::LogStore;
use crate::network::NetworkFactory;
use crate::retention::Retention;
use crate::state_machine::{Seeded, StateMachineStore};
use crate::{GroupId, NodeId, Raft};

/// What a node starts its groups with.
#[derive(Clone)]
pub(crate) struct Node {
    pub id: NodeId,
    pub data_dir: PathBuf,
    pub raft_config: Arc<Config>,
    /// The node's log store; each group has its view of it.
    pub log: LogStore,
    pub network: NetworkFactory,
    /// Where each group's state machine tells of the groups its splits seed.
    pub seeded: UnboundedSender<Seeded>,
}

impl Node {
    /// Start group `id`'s Raft over `sm`: its view of the node's log (purging only behind
    /// the state machine's durable snapshots), its RPCs sent naming it.
    pub(crate) async fn start_raft(&self, id: GroupId, sm: StateMachineStore) -> Result<Group> {
        sm.on_split(self.seeded.clone());
        let log = self.log.group(id).purging_behind(sm.durable_snapshots());
        let network = self.network.clone().for_group(id);
        let raft = Raft::new(
            self.id,
            Arc::clone(&self.raft_config),
            network,
            log.clone(),
            sm.clone(),
        )
        .await
        .map_err(|e| Error::Raft(e.to_string()))?;
        Ok(Group { id, raft, sm, log })
    }

    /// Open every group of the layout `splits` make and start its Raft, then every group
    /// splits seeded on this node. Every state machine of the layout is opened, and its
    /// shard checked, before any Raft starts. Returns the node's registry, and group 1.
    pub(crate) async fn start_groups(&self, splits: &[Vec<u8>]) -> Result<(Groups, Group)> {
        let mut opened = Vec::new();
        for (id, shard) in crate::group::layout(splits) {
            opened.push((id, crate::group::open_state(&self.data_dir, id, &shard)?));
        }
        let mut groups = Vec::new();
        for (id, sm) in opened {
            groups.push(self.start_raft(id, sm).await?);
        }
        for seeded in crate::group::seeded(&self.data_dir)? {
            if groups.iter().all(|g| g.id != seeded.child) {
                groups.push(self.start_child(seeded).await?);
            }
        }
        let registry = Groups::default();
        groups.iter().cloned().for_each(|g| registry.insert(g));
        let first = groups
            .into_iter()
            .next()
            .ok_or_else(|| Error::Config(vec!["a node holds at least one group".into()]))?;
        Ok((registry, first))
    }

    /// The tasks that tend the node's `groups`: the health service's (`helpers`, first),
    /// and each group's log retention and the start of the groups its splits seed, told
    /// by `seeds` (`keepers`, second).
    pub(crate) fn tend(
        self,
        groups: &Groups,
        reporter: tonic_health::server::HealthReporter,
        seeds: UnboundedReceiver<Seeded>,
        retention: Retention,
    ) -> (Vec<JoinHandle<()>>, Vec<JoinHandle<()>>) {
        let (health, helpers) = Health::follow(groups, reporter);
        let mut keepers = crate::retention::keep(groups, retention);
        keepers.push(grow(self, groups.clone(), health, retention, seeds));
        (helpers, keepers)
    }

    /// Start the child a split seeded on this node (module docs).
    pub(crate) async fn start_child(&self, seeded: Seeded) -> Result<Group> {
        let dir = state_dir(&self.data_dir, seeded.child);
        let sm = StateMachineStore::open(&dir, Options::default())?;
        sm.seed_groups_in(&self.data_dir, seeded.child);
        seed_log(self.log.group(seeded.child), seeded.split, self.id).await?;
        self.start_raft(seeded.child, sm).await
    }
}

/// Make `log` start after the split entry `split`, unless it holds a vote already.
async fn seed_log(mut log: LogStore, split: LogId<NodeId>, node: NodeId) -> Result<()> {
    let storage = |e: openraft::StorageError<NodeId>| Error::Raft(e.to_string());
    if log.read_vote().await.map_err(storage)?.is_some() {
        return Ok(());
    }
    // Purged first: a crash before the vote leaves a log that is seeded again.
    log.purge(split).await.map_err(storage)?;
    log.save_vote(&Vote::new(split.leader_id.term, node))
        .await
        .map_err(storage)
}

/// Start each child a split applied on this node seeds, as `seeded` tells of them, and add
/// it to `groups`, followed by `health` and its log kept by `retention`; until every
/// sender is gone (the node holds one: the task is aborted as the node stops). A child that fails to start is logged: the node serves the rest, and
/// the child's other replicas serve it.
pub(crate) fn grow(
    node: Node,
    groups: Groups,
    health: Health,
    retention: Retention,
    mut seeded: UnboundedReceiver<Seeded>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(s) = seeded.recv().await {
            if groups.get(s.child).is_some() {
                continue;
            }
            match node.start_child(s).await {
                Ok(group) => {
                    tracing::info!(group = s.child, "started: seeded by a split at {}", s.split);
                    groups.insert(group.clone());
                    // The parent's leader campaigns at once, as TiKV's does: the child's
                    // keys wait for its first leader, and this node's log is as long as
                    // any (the split is its last entry everywhere).
                    let parent = s.parent.and_then(|p| groups.get(p));
                    let leads = parent
                        .is_some_and(|p| p.raft.metrics().borrow().current_leader == Some(node.id));
                    if leads {
                        let _ = group.raft.trigger().elect().await;
                    }
                    // Both end with the child's Raft.
                    health.add(&group).await;
                    tokio::spawn(crate::retention::keep_group(group, retention));
                }
                Err(e) => tracing::error!(group = s.child, "a split's child did not start: {e}"),
            }
        }
    })
}

//! A new cluster from an online backup (`shale-server --restore FILE`; docs/replication.md,
//! "Backup and restore").
//!
//! The backup is a snapshot file covering log index `n` of the old cluster. A restore makes
//! one new node's data directory look as if that node had installed the snapshot as a
//! member of the new cluster: its state machine holds the backup's pairs and index files
//! with `n` applied, its current snapshot is the backup with the new cluster's membership
//! in its header, and its log is purged up to `n` (a new cluster id drawn, a vote in the
//! backup's term). Started with its peers, which start with empty directories, it is the
//! only node with a log, so it is elected, and each peer receives the snapshot before any
//! entry: the restored data reaches every replica through Raft, never beside it. A second
//! node restored from the same file draws another cluster id and is refused by the first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use openraft::storage::RaftLogStorage;
use openraft::{BasicNode, LogId, Membership, SnapshotMeta, StoredMembership, Vote};
use shale::Options;

use crate::error::{Error, Result};
use crate::format::{self, FrameKind, SnapshotHeader};
use crate::log_store::LogStore;
use crate::snapshot::{FrameSequence, RawFrameWriter, SnapshotData};
use crate::state_machine::StateMachineStore;
use crate::NodeId;

/// What a restore made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The last log id the backup covers: the new cluster's log continues after it.
    pub last_log_id: LogId<NodeId>,
    /// Pairs in the backup (users' keys, sessions, index definitions).
    pub pairs: u64,
    /// The new cluster's id.
    pub cluster: u128,
}

/// Make `data_dir` (which must not hold a node yet) node `node_id` of a new cluster of
/// `members` (id → `host:port`, `node_id` among them) whose state is the backup at
/// `backup`.
///
/// # Errors
/// `Config` for a directory that holds a node, or members without this node; `Corruption`
/// for a backup that is damaged or not a snapshot file (every frame is checked before
/// anything is switched to); `Io`, `Engine`.
pub async fn restore(
    data_dir: &Path,
    node_id: NodeId,
    members: BTreeMap<NodeId, String>,
    backup: &Path,
) -> Result<Restored> {
    let log_dir = data_dir.join("raft-log");
    let state_dir = data_dir.join("state");
    if log_dir.exists() || state_dir.exists() {
        return Err(Error::Config(vec![format!(
            "{} holds a node already: a restore makes a new one",
            data_dir.display()
        )]));
    }
    let restored = restore_into(&log_dir, &state_dir, node_id, members, backup).await;
    if restored.is_err() {
        // Nothing half made stays behind: the restore can be run again.
        let _ = std::fs::remove_dir_all(&state_dir);
        let _ = std::fs::remove_dir_all(&log_dir);
    }
    restored
}

async fn restore_into(
    log_dir: &Path,
    state_dir: &Path,
    node_id: NodeId,
    members: BTreeMap<NodeId, String>,
    backup: &Path,
) -> Result<Restored> {
    if !members.contains_key(&node_id) {
        return Err(Error::Config(vec![format!(
            "node {node_id} is not among the members {:?}",
            members.keys().collect::<Vec<_>>()
        )]));
    }
    for addr in members.values() {
        crate::network::check_peer_addr(addr).map_err(|e| Error::Config(vec![e]))?;
    }
    let source = SnapshotData::open(backup)?;
    let old = source.header()?;
    let Some(last_log_id) = old.last_log_id else {
        return Err(Error::corruption(
            backup.display().to_string(),
            "a backup of a cluster that never applied an entry",
        ));
    };
    let voters: BTreeSet<NodeId> = members.keys().copied().collect();
    let nodes: BTreeMap<NodeId, BasicNode> = members
        .into_iter()
        .map(|(id, addr)| (id, BasicNode::new(addr)))
        .collect();
    let membership = StoredMembership::new(Some(last_log_id), Membership::new(vec![voters], nodes));
    let header = SnapshotHeader {
        last_log_id: Some(last_log_id),
        membership: membership.clone(),
        snapshot_id: format!("restored-{}", old.snapshot_id),
    };

    std::fs::create_dir_all(state_dir).map_err(|e| Error::io("mkdir", state_dir, e))?;
    let sm = StateMachineStore::open(state_dir, Options::default())?;
    let rewritten = sm.receive_path();
    let pairs = rewrite_header(&source, &header, &rewritten)?;
    let meta = SnapshotMeta {
        last_log_id: Some(last_log_id),
        last_membership: membership,
        snapshot_id: header.snapshot_id.clone(),
    };
    let installed = sm.install(&meta, &SnapshotData::open(&rewritten)?);
    let _ = std::fs::remove_file(&rewritten);
    installed?;
    sm.close()?;

    let mut log = LogStore::open(log_dir, Options::default())?;
    log.claim(node_id)?;
    let cluster = crate::server::new_cluster_id();
    log.join_cluster(cluster)?;
    let storage = |e: openraft::StorageError<NodeId>| Error::Raft(e.to_string());
    log.save_vote(&Vote::new(last_log_id.leader_id.term, node_id))
        .await
        .map_err(storage)?;
    log.purge(last_log_id).await.map_err(storage)?;
    log.close()?;
    Ok(Restored {
        last_log_id,
        pairs,
        cluster,
    })
}

/// Copy the snapshot file `source` to `to` with `header` in place of its own, checking
/// every frame on the way; returns the pairs it holds.
fn rewrite_header(source: &SnapshotData, header: &SnapshotHeader, to: &Path) -> Result<u64> {
    let mut frames = source.frames()?;
    let mut seq = FrameSequence::default();
    let mut out = RawFrameWriter::create(to)?;
    while let Some(frame) = frames.next_frame()? {
        let first = matches!(seq.accept(&frame)?, crate::snapshot::Accepted::Header(_));
        if first {
            let mut new = Vec::new();
            format::encode_frame(
                FrameKind::Header,
                &format::encode_snapshot_header(header),
                &mut new,
            )?;
            out.write(&new)?;
        } else {
            out.write(&frame)?;
        }
    }
    if !seq.is_complete() {
        return Err(Error::corruption("backup", "no end frame"));
    }
    let pairs = seq.pairs();
    out.finish()?;
    Ok(pairs)
}

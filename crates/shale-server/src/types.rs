//! The types openraft runs with ([`TypeConfig`]), and the names the crate gives them.
//!
//! Thread safety: types only.

use crate::command::{Command, Response};

/// A replica's id: unique in the cluster, never reused for a replica with other data.
pub type NodeId = u64;

/// A Raft group: one range of keys, replicated by a `Raft` instance of its own on each of
/// its replicas' nodes. Group 0 is kept for the placement metadata; data groups count
/// from [`DEFAULT_GROUP`].
pub type GroupId = u64;

/// The group of a cluster that is not split into shards, and the group a Raft RPC without
/// a group header is for (one from a node that predates groups).
pub const DEFAULT_GROUP: GroupId = 1;

openraft::declare_raft_types!(
    /// The types openraft runs with: Shale commands in the log (shared, so that an entry
    /// read back from the log store's cache costs no copy), snapshot files as snapshot
    /// data, replicas addressed by `host:port`.
    pub TypeConfig:
        D = std::sync::Arc<Command>,
        R = Response,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = crate::snapshot::SnapshotData,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// The Raft node of this crate.
pub type Raft = openraft::Raft<TypeConfig>;

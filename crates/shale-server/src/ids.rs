//! The ids of replicas and of Raft groups.
//!
//! Thread safety: types only.

/// A replica's id: unique in the cluster, never reused for a replica with other data.
pub type NodeId = u64;

/// A Raft group: one range of keys, replicated by a `Raft` instance of its own on each of
/// its replicas' nodes. Group 0 is kept for the placement metadata; data groups count
/// from [`DEFAULT_GROUP`].
pub type GroupId = u64;

/// The group of a cluster that is not split into shards, and the group a Raft RPC without
/// a group header is for (one from a node that predates groups).
pub const DEFAULT_GROUP: GroupId = 1;

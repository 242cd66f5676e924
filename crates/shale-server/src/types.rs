//! The types openraft runs with ([`TypeConfig`]), and the names the crate gives them.
//!
//! Thread safety: types only.

use crate::command::{Command, Response};

use crate::ids::NodeId;

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

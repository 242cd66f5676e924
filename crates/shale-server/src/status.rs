//! The statuses a client's call ends with ([`crate::service`] lists them, and
//! docs/replication.md, "Client API"), and the node's role, which decides whether a failed
//! write may have been proposed.
//!
//! Thread safety: free functions over their arguments; [`role`] reads the Raft metrics.

use openraft::error::ForwardToLeader;
use openraft::{BasicNode, ServerState};
use tonic::metadata::MetadataValue;
use tonic::Status;

use crate::command::Response as Applied;
use crate::shard::Shard;
use crate::{GroupId, NodeId, Raft};
use shale_client::wire::{LEADER_HEADER, RETRY_HEADER, SESSION_HEADER, SHARD_HEADER};

/// What a proposal answers one caller: the log index it committed at and its response.
pub(crate) type Outcome = Result<(u64, Applied), Status>;

/// The outcome of a command applied at `index`, for its caller: a refusal, an expired
/// session or a key outside the group's shard as errors, a repeated write as its first answer, at the index it applied at.
pub(crate) fn answered(index: u64, applied: Applied) -> Outcome {
    match applied {
        Applied::Refused(msg) => Err(Status::invalid_argument(msg)),
        Applied::SessionExpired(msg) => {
            let mut status = Status::failed_precondition(msg);
            status
                .metadata_mut()
                .insert(SESSION_HEADER, MetadataValue::from_static("expired"));
            Err(status)
        }
        Applied::WrongShard(shard) => Err(wrong_shard(&shard)),
        Applied::Repeated { index, response } => answered(index, *response),
        applied => Ok((index, applied)),
    }
}

/// A request with a key outside the group's `shard`: nothing was applied or read, and
/// the request may go to the group that serves the key.
pub(crate) fn wrong_shard(shard: &Shard) -> Status {
    moved(format!(
        "a key is outside this group's shard {shard}: nothing was applied or read"
    ))
}

/// A request for group `group`, of which node `node` holds no replica.
pub(crate) fn group_not_here(group: GroupId, node: NodeId) -> Status {
    moved(format!("node {node} holds no replica of group {group}"))
}

/// A request the client routes again from the current shard map: `FAILED_PRECONDITION`,
/// safe to retry, marked with [`SHARD_HEADER`].
fn moved(msg: String) -> Status {
    let mut status = retry_safe(Status::failed_precondition(msg));
    status
        .metadata_mut()
        .insert(SHARD_HEADER, MetadataValue::from_static("moved"));
    status
}

/// What this node is to the group when a request comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A voter that leads: what it is asked to write may be proposed.
    Leader,
    /// The leader of a membership (in its log, perhaps not yet committed) that no longer
    /// counts it as a voter. It leads until that membership is applied, then steps down,
    /// and the others elect a leader only after an election timeout: a write proposed here
    /// in between would be likely to fail with its outcome unknown, so none is proposed.
    Leaving,
    /// Anything else: openraft refuses a write with a redirect before it reaches the log.
    Other,
}

/// This node's role, from its own server state. The vote alone cannot say it: a leader
/// that stepped down after its removal still names itself in its committed vote.
pub(crate) fn role(raft: &Raft, node_id: NodeId) -> Role {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    if m.state != ServerState::Leader {
        Role::Other
    } else if m
        .membership_config
        .membership()
        .voter_ids()
        .any(|v| v == node_id)
    {
        Role::Leader
    } else {
        Role::Leaving
    }
}

/// Whether this node is a voter that leads: what it proposes may commit.
pub(crate) fn leads(raft: &Raft, node_id: NodeId) -> bool {
    role(raft, node_id) == Role::Leader
}

/// `status`, marked safe to retry: nothing was proposed.
pub(crate) fn retry_safe(mut status: Status) -> Status {
    status
        .metadata_mut()
        .insert(RETRY_HEADER, MetadataValue::from_static("safe"));
    status
}

/// The redirect for `fwd`; `proposed` when this node may have put the request in its log.
pub(crate) fn not_leader(fwd: &ForwardToLeader<NodeId, BasicNode>, proposed: bool) -> Status {
    match (&fwd.leader_id, &fwd.leader_node) {
        (Some(id), Some(node)) => {
            let mut status = Status::failed_precondition(format!(
                "not the leader; node {id} at {} is",
                node.addr
            ));
            if let Ok(v) = node.addr.parse() {
                status.metadata_mut().insert(LEADER_HEADER, v);
            }
            if proposed {
                status
            } else {
                retry_safe(status)
            }
        }
        _ if proposed => {
            Status::unavailable("leadership lost after proposing; the write may still apply")
        }
        _ => retry_safe(Status::unavailable("no leader is known")),
    }
}

/// An engine's failure to read.
pub(crate) fn engine(e: shale::Error) -> Status {
    // A read that raced with a snapshot install meets the replaced, closed database.
    Status::unavailable(format!("engine: {e}"))
}

//! One group as the client service serves it: the group's replica, the proposer that puts
//! its writes in its log, and its leadership handover. A request names its group
//! (`shale-group`), and everything it does, from the shard check to the read barrier, is
//! that group's.
//!
//! Thread safety: a [`Lane`] is shared by the requests of its group; the proposer and the
//! handover take their own locks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::BasicNode;
use tonic::{Request, Response, Status};

use super::transfer::Handover;
use crate::access::{named_group, WriteGrant};
use crate::command::{Command, Response as Applied};
use crate::group::{Group, Groups};
use crate::pb;
use crate::proposer::Proposer;
use crate::status::{group_not_here, not_leader, retry_safe, role, wrong_shard, Role};
use crate::{GroupId, NodeId};

/// The guarantee a node's reads (`Get`, `Scan`, `Search`) give: chosen when the node is
/// configured ([`crate::ServerConfig::read_consistency`]), the same for every read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReadConsistency {
    /// The leader confirms with a quorum that it still leads (read index) and has applied
    /// up to the commit index of that moment before it reads: a read sees every write
    /// that completed before it began. Other nodes redirect to the leader.
    #[default]
    Linearizable,
    /// Any node reads what it has applied, at once, with no quorum round (etcd's
    /// serializable reads): a committed prefix of the log, but perhaps an old one, so a
    /// read may miss writes that completed before it began, the client's own included,
    /// and a later read at another node may see less than an earlier one.
    Serializable,
}

/// How a node serves its groups' requests: the same for every group.
#[derive(Clone, Copy)]
pub(super) struct Serving {
    pub(super) node_id: NodeId,
    /// The longest a write waits to commit, or a read for its barrier.
    pub(super) timeout: Duration,
    /// Whether the leader embeds the texts of a write under a model index, so that the
    /// log carries their vectors (`state_machine/carried.rs`).
    pub(super) embed_once: bool,
    pub(super) reads: ReadConsistency,
}

/// One group's replica as the client service serves it.
pub(super) struct Lane {
    pub(super) group: Group,
    proposer: Proposer,
    pub(super) handover: Handover,
    serving: Serving,
}

/// The lanes of a node's groups, each made at its group's first request.
pub(super) struct Lanes {
    groups: Groups,
    serving: Serving,
    open: Mutex<HashMap<GroupId, Arc<Lane>>>,
}

impl Lanes {
    pub(super) fn new(groups: Groups, serving: Serving) -> Lanes {
        Lanes {
            groups,
            serving,
            open: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn groups(&self) -> &Groups {
        &self.groups
    }

    pub(super) fn serving(&self) -> Serving {
        self.serving
    }

    /// The lane of the group `req` names, started now (its proposer on the current tokio
    /// runtime) if this is the group's first request.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for a malformed group; a group this node holds no replica of is
    /// answered as a key outside the shard, so the client routes the request again.
    pub(super) fn of<T>(&self, req: &Request<T>) -> Result<Arc<Lane>, Status> {
        self.of_group(named_group(req)?)
    }

    /// The lane of group `id`, as [`Lanes::of`].
    ///
    /// # Errors
    /// As [`Lanes::of`].
    pub(super) fn of_group(&self, id: GroupId) -> Result<Arc<Lane>, Status> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lane) = open.get(&id) {
            return Ok(lane.clone());
        }
        let group = self
            .groups
            .get(id)
            .ok_or_else(|| group_not_here(id, self.serving.node_id))?;
        let embedder = self.serving.embed_once.then(|| group.sm.clone());
        let lane = Arc::new(Lane {
            proposer: Proposer::spawn(group.raft.clone(), self.serving.node_id, embedder),
            group,
            handover: Handover::default(),
            serving: self.serving,
        });
        open.insert(id, lane.clone());
        Ok(lane)
    }
}

impl Lane {
    /// Validate `cmd`, then have the proposer put it in the log (with whatever other
    /// writes arrive meanwhile) and wait for its outcome.
    pub(super) async fn propose(
        &self,
        _: WriteGrant,
        cmd: Command,
    ) -> Result<(u64, Applied), Status> {
        cmd.validate()
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.group
            .sm
            .check_indexes(&cmd)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.check_shard(cmd.keys())?;
        self.handover.check()?;
        tokio::time::timeout(self.serving.timeout, self.proposer.propose(cmd))
            .await
            .map_err(|_| Status::deadline_exceeded("the write did not commit in time"))?
    }

    /// Refuse a request with one of `keys` outside the group's shard (the apply refuses
    /// a write that gets past this alike, should the shard change in between).
    pub(super) fn check_shard<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> Result<(), Status> {
        let shard = self.group.sm.shard();
        match shard.first_outside(keys.into_iter()) {
            Some(_) => Err(wrong_shard(&shard)),
            None => Ok(()),
        }
    }

    /// Wait until this node may serve a read with the guarantee it was configured for.
    pub(super) async fn before_read(&self) -> Result<(), Status> {
        match self.serving.reads {
            ReadConsistency::Linearizable => self.read_barrier().await.map(|_| ()),
            ReadConsistency::Serializable => Ok(()),
        }
    }

    /// Wait until this node may serve a linearizable read: it is the leader, a quorum
    /// confirmed it after the read arrived, and it applied up to the commit index then.
    /// Returns the log index reads may then see up to.
    pub(super) async fn read_barrier(&self) -> Result<u64, Status> {
        self.handover.check()?;
        let check =
            tokio::time::timeout(self.serving.timeout, self.group.raft.ensure_linearizable())
                .await
                .map_err(|_| retry_safe(Status::unavailable("leadership not confirmed in time")))?;
        match check {
            Ok(read) => Ok(read.map_or(0, |id| id.index)),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(not_leader(&f, false))
            }
            Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e))) => {
                Err(retry_safe(Status::unavailable(e.to_string())))
            }
            Err(RaftError::Fatal(e)) => Err(Status::unavailable(e.to_string())),
        }
    }

    /// Whether node `id` is a member of the group (voter or learner) reached at `addr`.
    pub(super) fn member_at(&self, id: NodeId, addr: &str) -> bool {
        let metrics = self.group.raft.metrics();
        let m = metrics.borrow();
        let node = m.membership_config.membership().get_node(&id).cloned();
        node.is_some_and(|n| n.addr == addr)
    }

    /// The group's membership as this node knows it now.
    pub(super) fn membership_now(&self) -> pb::MembershipResponse {
        let metrics = self.group.raft.metrics();
        let m = metrics.borrow();
        let config = &m.membership_config;
        pb::MembershipResponse {
            index: config.log_id().map_or(0, |l| l.index),
            voters: config.membership().voter_ids().collect(),
            learners: config.membership().learner_ids().collect(),
        }
    }

    /// Wait until learner `id` holds the whole log this leader had when the call began.
    /// openraft's blocking `add_learner` returns once the learner is within
    /// `replication_lag_threshold` entries (5,000) of the leader, which for a short log is
    /// at once, before anything reached it; a voter made of it then would count for a
    /// quorum it cannot serve. Unbounded here: the caller's deadline bounds it.
    ///
    /// # Errors
    /// `UNAVAILABLE` (safe to retry) if this node stops leading meanwhile.
    pub(super) async fn learner_caught_up(&self, id: NodeId) -> Result<(), Status> {
        let target = self.group.raft.metrics().borrow().last_log_index;
        let done = |m: &openraft::RaftMetrics<NodeId, BasicNode>| match &m.replication {
            None => true,
            Some(r) => r
                .get(&id)
                .is_some_and(|matched| matched.map(|l| l.index) >= target),
        };
        let waited = self
            .group
            .raft
            .wait(None)
            .metrics(done, "the learner holds the leader's log")
            .await
            .map_err(|e| retry_safe(Status::unavailable(e.to_string())))?;
        match waited.replication {
            Some(_) => Ok(()),
            None => Err(retry_safe(Status::unavailable(
                "this node stopped leading while the learner caught up",
            ))),
        }
    }

    /// Whether this node leads the group (or is leaving it): a membership change it
    /// starts may be in its log when it fails.
    pub(super) fn leads(&self) -> bool {
        role(&self.group.raft, self.serving.node_id) != Role::Other
    }

    /// Answer a membership change's outcome; `was_leader` as [`Lane::leads`] said before
    /// the change.
    pub(super) fn membership(
        &self,
        _: WriteGrant,
        result: Result<
            openraft::raft::ClientWriteResponse<crate::TypeConfig>,
            RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
        >,
        was_leader: bool,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        match result {
            Ok(resp) => {
                let (voters, learners) = match &resp.membership {
                    Some(m) => (m.voter_ids().collect(), m.learner_ids().collect()),
                    None => (Vec::new(), Vec::new()),
                };
                Ok(Response::new(pb::MembershipResponse {
                    index: resp.log_id.index,
                    voters,
                    learners,
                }))
            }
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                Err(not_leader(&f, was_leader))
            }
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                Err(Status::invalid_argument(e.to_string()))
            }
            Err(RaftError::Fatal(e)) => Err(Status::unavailable(e.to_string())),
        }
    }
}

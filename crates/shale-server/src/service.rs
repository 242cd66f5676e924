//! The gRPC services a node serves: [`RaftService`] for peers, [`KvService`] for clients,
//! The checks in front of both are [`crate::access`]'s.
//!
//! Client errors, as clients see them (docs/replication.md, "Client API"):
//! - `FAILED_PRECONDITION` with metadata `shale-leader: host:port`: not the leader; retry
//!   there. With `shale-retry: safe` nothing was proposed (the node was not the leader when
//!   the request came); without it the node lost its leadership after proposing, and the
//!   write may still be applied by a later leader.
//! - `UNAVAILABLE` with metadata `shale-retry: safe`: no leader known, the leader could
//!   not confirm its leadership with a quorum, or the leader is leaving the group (its
//!   removal from the voters is in its log); nothing was proposed, retry later.
//! - `UNAVAILABLE` without it: the node stopped or failed mid-request; a write may or may
//!   not have been applied.
//! - `INVALID_ARGUMENT`: refused before proposing (reserved key, size limits); never retry.
//! - `DEADLINE_EXCEEDED`: the server's request timeout passed; as ambiguous as the above.
//! - `UNAUTHENTICATED`: no valid client token; `PERMISSION_DENIED`: a read-only token on
//!   a call that writes or changes the membership.
//! - `FAILED_PRECONDITION` with metadata `shale-session: expired`: a write in a session
//!   that is closed, or whose answer was forgotten; nothing changed now, and whether an
//!   earlier try applied cannot be said.
//!
//! A write in a session (`OpenSession`) applies once however often it is retried, so
//! every failure above is safe to retry for it, with the same session and number.
//!
//! Thread safety: tonic runs each call in its own task; the services hold `Arc`s only.

mod query;
mod raft;
mod transfer;

pub use query::{MAX_SEARCH_HITS, MAX_SEARCH_TEXT_BYTES};
pub use raft::RaftService;

use std::time::Duration;

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{BasicNode, ServerState};
use tonic::{Request, Response, Status};

use crate::access::WriteGrant;
use crate::command::{self, Command, IndexModel, IndexSpec, Op, Response as Applied, SessionSeq};
use crate::network::NetworkFactory;
use crate::pb;
use crate::proposer::Proposer;
use crate::state_machine::StateMachineStore;
use crate::status::{engine, not_leader, retry_safe, role, wrong_shard, Role};
use crate::{NodeId, Raft};
use query::Query;
use shale_search::vector::Metric;
use shale_search::Analyzer;
use transfer::Handover;

/// `cmd` in the session `at`, if the request names one.
fn in_session(cmd: Command, at: Option<pb::SessionSeq>) -> Command {
    match at {
        None => cmd,
        Some(at) => Command::InSession {
            at: SessionSeq {
                session: at.session,
                seq: at.seq,
                lowest_awaited: at.lowest_awaited,
            },
            cmd: Box::new(cmd),
        },
    }
}

/// The leader this node knows of, if that is not itself after stepping down.
fn known_leader(m: &openraft::RaftMetrics<NodeId, BasicNode>, node_id: NodeId) -> Option<NodeId> {
    m.current_leader
        .filter(|&id| id != node_id || m.state == ServerState::Leader)
}

pub use shale_client::wire::{LEADER_HEADER, RETRY_HEADER, SESSION_HEADER};
/// The most pairs one scan call returns.
pub const MAX_SCAN_PAIRS: u32 = 10_000;
/// A scan page is closed once its keys and values pass this many bytes (the first pair
/// always goes in): a page stays far below the message limit.
pub const MAX_SCAN_BYTES: usize = 16 * 1024 * 1024;

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

/// The key-value API for clients.
pub struct KvService {
    raft: Raft,
    sm: StateMachineStore,
    node_id: NodeId,
    timeout: Duration,
    proposer: Proposer,
    /// How this node reaches its peers: a leader transfer sends `TimeoutNow`.
    peers: NetworkFactory,
    handover: Handover,
    reads: ReadConsistency,
}

impl KvService {
    /// The service of node `node_id`; starts its proposer on the current tokio runtime.
    /// With `embed_once`, the leader embeds the texts of a write under a model index and
    /// the log carries their vectors (`state_machine/carried.rs`). Reads give `reads`.
    pub fn new(
        raft: Raft,
        sm: StateMachineStore,
        node_id: NodeId,
        timeout: Duration,
        embed_once: bool,
        peers: NetworkFactory,
        reads: ReadConsistency,
    ) -> Self {
        let embedder = embed_once.then(|| sm.clone());
        KvService {
            proposer: Proposer::spawn(raft.clone(), node_id, embedder),
            raft,
            sm,
            node_id,
            timeout,
            peers,
            handover: Handover::default(),
            reads,
        }
    }

    /// Validate `cmd`, then have the proposer put it in the log (with whatever other
    /// writes arrive meanwhile) and wait for its outcome.
    async fn propose(&self, _: WriteGrant, cmd: Command) -> Result<(u64, Applied), Status> {
        cmd.validate()
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.sm
            .check_indexes(&cmd)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.check_shard(cmd.keys())?;
        self.handover.check()?;
        tokio::time::timeout(self.timeout, self.proposer.propose(cmd))
            .await
            .map_err(|_| Status::deadline_exceeded("the write did not commit in time"))?
    }

    /// Refuse a request with one of `keys` outside the group's shard (the apply refuses
    /// a write that gets past this alike, should the shard change in between).
    fn check_shard<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>) -> Result<(), Status> {
        let shard = self.sm.shard();
        match shard.first_outside(keys.into_iter()) {
            Some(_) => Err(wrong_shard(&shard)),
            None => Ok(()),
        }
    }

    /// Wait until this node may serve a read with the guarantee it was configured for.
    async fn before_read(&self) -> Result<(), Status> {
        match self.reads {
            ReadConsistency::Linearizable => self.read_barrier().await.map(|_| ()),
            ReadConsistency::Serializable => Ok(()),
        }
    }

    /// Wait until this node may serve a linearizable read: it is the leader, a quorum
    /// confirmed it after the read arrived, and it applied up to the commit index then.
    /// Returns the log index reads may then see up to.
    async fn read_barrier(&self) -> Result<u64, Status> {
        self.handover.check()?;
        let check = tokio::time::timeout(self.timeout, self.raft.ensure_linearizable())
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
}

impl KvService {
    /// Answer a membership change's outcome; `was_leader` as in [`KvService::propose`].
    fn membership(
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

fn written(index: u64) -> Response<pb::WriteResponse> {
    Response::new(pb::WriteResponse { index })
}

#[tonic::async_trait]
impl pb::kv_server::Kv for KvService {
    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        let key = req.into_inner().key;
        command::check_key(&key).map_err(|e| Status::invalid_argument(e.to_string()))?;
        self.before_read().await?;
        self.check_shard([key.as_slice()])?;
        let value = self.sm.db().get(&key).map_err(engine)?;
        Ok(Response::new(pb::GetResponse { value }))
    }

    async fn put(
        &self,
        req: Request<pb::PutRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let r = req.into_inner();
        let put = Command::Write(vec![Op {
            key: r.key,
            value: Some(r.value),
        }]);
        let (index, _) = self.propose(grant, in_session(put, r.session)).await?;
        Ok(written(index))
    }

    async fn delete(
        &self,
        req: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let r = req.into_inner();
        let delete = Command::Write(vec![Op {
            key: r.key,
            value: None,
        }]);
        let (index, _) = self.propose(grant, in_session(delete, r.session)).await?;
        Ok(written(index))
    }

    async fn batch(
        &self,
        req: Request<pb::BatchRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let r = req.into_inner();
        let ops = r
            .ops
            .into_iter()
            .map(|op| Op {
                key: op.key,
                value: op.value,
            })
            .collect();
        let write = Command::Write(ops);
        let (index, _) = self.propose(grant, in_session(write, r.session)).await?;
        Ok(written(index))
    }

    async fn compare_and_set(
        &self,
        req: Request<pb::CompareAndSetRequest>,
    ) -> Result<Response<pb::CompareAndSetResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let r = req.into_inner();
        let cas = Command::CompareAndSet {
            key: r.key,
            expected: r.expected,
            new_value: r.new_value,
        };
        let (index, applied) = self.propose(grant, in_session(cas, r.session)).await?;
        match applied {
            Applied::CompareAndSet { swapped, current } => {
                Ok(Response::new(pb::CompareAndSetResponse {
                    swapped,
                    current,
                    index,
                }))
            }
            other => Err(Status::internal(format!(
                "compare-and-set applied as {other:?}"
            ))),
        }
    }

    async fn scan(
        &self,
        req: Request<pb::ScanRequest>,
    ) -> Result<Response<pb::ScanResponse>, Status> {
        let r = req.into_inner();
        let limit = match r.limit {
            0 => MAX_SCAN_PAIRS,
            n => n.min(MAX_SCAN_PAIRS),
        };
        // The user key space ends where the reserved prefix starts.
        let reserved = vec![crate::format::RESERVED_PREFIX];
        let end = match r.end {
            Some(end) if end < reserved => end,
            _ => reserved,
        };
        self.before_read().await?;
        let mut pairs = Vec::new();
        let mut next_start = None;
        let mut bytes = 0usize;
        if r.start < end {
            for pair in self.sm.db().range(r.start..end).map_err(engine)? {
                let (key, value) = pair.map_err(engine)?;
                if pairs.len() >= limit as usize || (!pairs.is_empty() && bytes >= MAX_SCAN_BYTES) {
                    next_start = Some(key);
                    break;
                }
                bytes = bytes.saturating_add(key.len() + value.len());
                pairs.push(pb::Pair { key, value });
            }
        }
        Ok(Response::new(pb::ScanResponse { pairs, next_start }))
    }

    async fn define_index(
        &self,
        req: Request<pb::DefineIndexRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let r = req.into_inner();
        let metric = match pb::Metric::try_from(r.metric) {
            Ok(pb::Metric::Cosine) => Metric::Cosine,
            Ok(pb::Metric::Dot) => Metric::Dot,
            Ok(pb::Metric::L2) => Metric::L2,
            Err(_) => return Err(Status::invalid_argument(format!("metric {}", r.metric))),
        };
        let model = match pb::Model::try_from(r.model) {
            Ok(pb::Model::Vectors) => IndexModel::Vectors,
            Ok(pb::Model::Hash) => IndexModel::Hash,
            Ok(pb::Model::Minilm) => IndexModel::MiniLm,
            Err(_) => return Err(Status::invalid_argument(format!("model {}", r.model))),
        };
        // A model this replica cannot load is refused here, not at apply.
        if let Err(e) = crate::state_machine::embedder(model) {
            return Err(Status::failed_precondition(e.to_string()));
        }
        let keywords = match pb::Analyzer::try_from(r.keywords) {
            Ok(pb::Analyzer::NoKeywords) => None,
            Ok(pb::Analyzer::Simple) => Some(Analyzer::Simple),
            Ok(pb::Analyzer::English) => Some(Analyzer::English),
            Ok(pb::Analyzer::Cjk) => Some(Analyzer::Cjk),
            Err(_) => return Err(Status::invalid_argument(format!("analyzer {}", r.keywords))),
        };
        let spec = IndexSpec {
            name: r.name,
            prefix: r.prefix,
            dim: r.dim,
            metric,
            model,
            keywords,
        };
        let (index, _) = self.propose(grant, Command::DefineIndex(spec)).await?;
        Ok(written(index))
    }

    async fn search(
        &self,
        req: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        let r = req.into_inner();
        let query = Query::parse(&r)?;
        self.before_read().await?;
        let index = self
            .sm
            .index(&r.index)
            .ok_or_else(|| Status::not_found(format!("no index {:?}", r.index)))?;
        // A search waits for the index to take in every write applied before it.
        let hits = tokio::task::spawn_blocking(move || query.run(&index, r))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(pb::SearchResponse { hits }))
    }

    async fn add_learner(
        &self,
        req: Request<pb::AddLearnerRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        self.handover.check()?;
        let r = req.into_inner();
        crate::network::check_peer_addr(&r.addr).map_err(Status::invalid_argument)?;
        let was_leader = role(&self.raft, self.node_id) != Role::Other;
        // Blocking: the call returns once the learner has caught up, which may take a
        // snapshot; the client's deadline bounds it.
        let result = self
            .raft
            .add_learner(r.node_id, BasicNode::new(r.addr), true)
            .await;
        self.membership(grant, result, was_leader)
    }

    async fn change_voters(
        &self,
        req: Request<pb::ChangeVotersRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        self.handover.check()?;
        let r = req.into_inner();
        let change = match (r.add.is_empty(), r.remove.is_empty()) {
            (false, true) => openraft::ChangeMembers::AddVoterIds(r.add.into_iter().collect()),
            (true, false) => openraft::ChangeMembers::RemoveVoters(r.remove.into_iter().collect()),
            _ => {
                return Err(Status::invalid_argument(
                    "name voters to add or voters to remove, not both, not neither",
                ))
            }
        };
        let was_leader = role(&self.raft, self.node_id) != Role::Other;
        let result = self.raft.change_membership(change, false).await;
        self.membership(grant, result, was_leader)
    }

    async fn set_address(
        &self,
        req: Request<pb::SetAddressRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        self.handover.check()?;
        let r = req.into_inner();
        crate::network::check_peer_addr(&r.addr).map_err(Status::invalid_argument)?;
        let membership = self.raft.metrics().borrow().membership_config.clone();
        let nodes = membership.membership();
        if nodes.get_node(&r.node_id).is_none() {
            return Err(Status::invalid_argument(format!(
                "node {} is not a member",
                r.node_id
            )));
        }
        // Two members at one address could each gather a quorum with the other's votes
        // (openraft's "brain split" of `SetNodes`); a node also refuses RPCs meant for
        // another id (`TARGET_HEADER`).
        if let Some((other, _)) = nodes
            .nodes()
            .find(|(id, n)| **id != r.node_id && n.addr == r.addr)
        {
            return Err(Status::invalid_argument(format!(
                "node {other} is at {}",
                r.addr
            )));
        }
        let was_leader = role(&self.raft, self.node_id) != Role::Other;
        let change = openraft::ChangeMembers::SetNodes(
            [(r.node_id, BasicNode::new(r.addr))].into_iter().collect(),
        );
        let result = self.raft.change_membership(change, false).await;
        self.membership(grant, result, was_leader)
    }

    async fn transfer_leader(
        &self,
        req: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderResponse>, Status> {
        WriteGrant::of(&req)?;
        let to = req.into_inner().node_id;
        let term = transfer::transfer(
            &self.raft,
            self.node_id,
            &self.peers,
            &self.handover,
            to,
            self.timeout,
        )
        .await?;
        Ok(Response::new(pb::TransferLeaderResponse { term }))
    }

    type BackupStream = tokio_stream::wrappers::ReceiverStream<Result<pb::BackupFrame, Status>>;

    async fn backup(
        &self,
        req: Request<pb::BackupRequest>,
    ) -> Result<Response<Self::BackupStream>, Status> {
        // An operator's call: it makes the leader build a snapshot, and confirms the
        // leadership first whatever the reads' consistency.
        WriteGrant::of(&req)?;
        let upto = self.read_barrier().await?;
        let covered = |m: &openraft::RaftMetrics<NodeId, BasicNode>| {
            m.snapshot.map_or(0, |id| id.index) >= upto
        };
        if !covered(&self.raft.metrics().borrow()) {
            self.raft
                .trigger()
                .snapshot()
                .await
                .map_err(|e| Status::unavailable(format!("a snapshot for the backup: {e}")))?;
            self.raft
                .wait(Some(self.timeout))
                .metrics(covered, "a snapshot for the backup")
                .await
                .map_err(|e| Status::unavailable(format!("a snapshot for the backup: {e}")))?;
        }
        let sm = self.sm.clone();
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        tokio::task::spawn_blocking(move || {
            let stream = || -> crate::Result<()> {
                let Some((data, _)) = sm.current_snapshot()? else {
                    return Err(crate::Error::Raft("no snapshot to back up".into()));
                };
                let mut frames = data.frames()?;
                while let Some(frame) = frames.next_frame()? {
                    if tx.blocking_send(Ok(pb::BackupFrame { frame })).is_err() {
                        break; // the client went away
                    }
                }
                Ok(())
            };
            if let Err(e) = stream() {
                let _ = tx.blocking_send(Err(Status::internal(format!("backup: {e}"))));
            }
        });
        Ok(Response::new(tokio_stream::wrappers::ReceiverStream::new(
            rx,
        )))
    }

    async fn open_session(
        &self,
        req: Request<pb::OpenSessionRequest>,
    ) -> Result<Response<pb::OpenSessionResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        match self.propose(grant, Command::OpenSession).await? {
            (_, Applied::SessionOpened(session)) => {
                Ok(Response::new(pb::OpenSessionResponse { session }))
            }
            (_, other) => Err(Status::internal(format!(
                "a session's opening applied as {other:?}"
            ))),
        }
    }

    async fn status(
        &self,
        _req: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let metrics = self.raft.metrics().borrow().clone();
        let leader_id = known_leader(&metrics, self.node_id);
        let leader_addr = leader_id.and_then(|id| {
            metrics
                .membership_config
                .membership()
                .get_node(&id)
                .map(|n| n.addr.clone())
        });
        Ok(Response::new(pb::StatusResponse {
            node_id: self.node_id,
            leader_id,
            leader_addr,
            applied_index: metrics.last_applied.map_or(0, |l| l.index),
            term: metrics.current_term,
            indexing_backlog: self.sm.indexing_backlog(),
        }))
    }
}

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

mod fanout;
mod lane;
mod query;
mod raft;
mod transfer;

pub use fanout::ShardSearch;
pub use query::{MAX_SEARCH_HITS, MAX_SEARCH_TEXT_BYTES};
pub use raft::RaftService;

use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, ServerState};
use tonic::{Request, Response, Status};

use crate::access::WriteGrant;
use crate::command::{self, Command, IndexModel, IndexSpec, Op, Response as Applied, SessionSeq};
use crate::group::Groups;
use crate::network::NetworkFactory;
use crate::pb;
use crate::status::{engine, wrong_shard};
use crate::NodeId;
use fanout::Fanout;
pub use lane::ReadConsistency;
use lane::{Lanes, Serving};
use query::Query;
use shale_search::vector::Metric;
use shale_search::Analyzer;

/// How long a split's answer waits for the child to start on the node that proposed it.
const CHILD_START: Duration = Duration::from_secs(10);

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

/// Where member `id` of the group `m` describes is reached.
fn address(m: &openraft::RaftMetrics<NodeId, BasicNode>, id: NodeId) -> Option<String> {
    m.membership_config
        .membership()
        .get_node(&id)
        .map(|n| n.addr.clone())
}

pub use shale_client::wire::{
    LEADER_HEADER, MAX_SCAN_BYTES, MAX_SCAN_PAIRS, RETRY_HEADER, SESSION_HEADER,
};

/// The key-value API for clients: each request is served by the group it names
/// (`service/lane.rs`).
pub struct KvService {
    lanes: Arc<Lanes>,
    /// Searches over the node's shards, when it holds more than one.
    fanout: Arc<Fanout>,
    /// How this node reaches its peers: a leader transfer sends `TimeoutNow`.
    peers: NetworkFactory,
    node_id: NodeId,
    timeout: Duration,
}

impl KvService {
    /// The service of node `node_id` over its `groups`; each group's proposer starts on
    /// the current tokio runtime at the group's first request. With `embed_once`, the
    /// leader embeds the texts of a write under a model index and the log carries their
    /// vectors (`state_machine/carried.rs`). Reads give `reads`.
    pub fn new(
        groups: Groups,
        node_id: NodeId,
        timeout: Duration,
        embed_once: bool,
        peers: NetworkFactory,
        reads: ReadConsistency,
    ) -> Self {
        let serving = Serving {
            node_id,
            timeout,
            embed_once,
            reads,
        };
        let lanes = Arc::new(Lanes::new(groups, serving));
        KvService {
            fanout: Arc::new(Fanout::new(Arc::clone(&lanes), peers.clone())),
            lanes,
            peers,
            node_id,
            timeout,
        }
    }
}

impl KvService {
    /// The shards this node's groups serve, in key order, each with its leader's address
    /// when known.
    fn shards(&self) -> Vec<pb::ShardInfo> {
        let groups = self.lanes.groups();
        let mut shards = groups
            .ids()
            .into_iter()
            .filter_map(|id| groups.get(id))
            .map(|group| {
                let shard = group.sm.shard();
                let metrics = group.raft.metrics().borrow().clone();
                let leader_addr =
                    known_leader(&metrics, self.node_id).and_then(|id| address(&metrics, id));
                pb::ShardInfo {
                    group: group.id,
                    start: shard.start,
                    end: shard.end,
                    version: shard.version,
                    leader_addr,
                }
            })
            .collect::<Vec<_>>();
        // In key order: a split's child has a higher id than groups after it.
        shards.sort_by(|a, b| a.start.cmp(&b.start));
        shards
    }

    /// What the node's [`RaftService`] answers a root's per-shard calls with.
    pub fn shard_search(&self) -> ShardSearch {
        self.fanout.shards()
    }
}

fn written(index: u64) -> Response<pb::WriteResponse> {
    Response::new(pb::WriteResponse { index })
}

#[tonic::async_trait]
impl pb::kv_server::Kv for KvService {
    async fn get(&self, req: Request<pb::GetRequest>) -> Result<Response<pb::GetResponse>, Status> {
        let lane = self.lanes.of(&req)?;
        let key = req.into_inner().key;
        command::check_key(&key).map_err(|e| Status::invalid_argument(e.to_string()))?;
        lane.before_read().await?;
        lane.check_shard([key.as_slice()])?;
        let value = lane.group.sm.db().get(&key).map_err(engine)?;
        Ok(Response::new(pb::GetResponse { value }))
    }

    async fn put(
        &self,
        req: Request<pb::PutRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
        let r = req.into_inner();
        let put = Command::Write(vec![Op {
            key: r.key,
            value: Some(r.value),
        }]);
        let (index, _) = lane.propose(grant, in_session(put, r.session)).await?;
        Ok(written(index))
    }

    async fn delete(
        &self,
        req: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
        let r = req.into_inner();
        let delete = Command::Write(vec![Op {
            key: r.key,
            value: None,
        }]);
        let (index, _) = lane.propose(grant, in_session(delete, r.session)).await?;
        Ok(written(index))
    }

    async fn batch(
        &self,
        req: Request<pb::BatchRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
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
        let (index, _) = lane.propose(grant, in_session(write, r.session)).await?;
        Ok(written(index))
    }

    async fn compare_and_set(
        &self,
        req: Request<pb::CompareAndSetRequest>,
    ) -> Result<Response<pb::CompareAndSetResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
        let r = req.into_inner();
        let cas = Command::CompareAndSet {
            key: r.key,
            expected: r.expected,
            new_value: r.new_value,
        };
        let (index, applied) = lane.propose(grant, in_session(cas, r.session)).await?;
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
        let lane = self.lanes.of(&req)?;
        let r = req.into_inner();
        let limit = match r.limit {
            0 => MAX_SCAN_PAIRS,
            n => n.min(MAX_SCAN_PAIRS),
        };
        // The user key space ends where the reserved prefix starts.
        let reserved = vec![crate::format::RESERVED_PREFIX];
        let mut end = match r.end {
            Some(end) if end < reserved => end,
            _ => reserved,
        };
        lane.before_read().await?;
        let shard = lane.group.sm.shard();
        if !shard.contains(&r.start) {
            return Err(wrong_shard(&shard));
        }
        // A page stops at the shard's end; the next starts there, in the next shard.
        let mut shard_end = None;
        if let Some(e) = shard.end.filter(|e| *e < end) {
            end = e.clone();
            shard_end = Some(e);
        }
        let mut pairs = Vec::new();
        let mut next_start = None;
        let mut bytes = 0usize;
        if r.start < end {
            for pair in lane.group.sm.db().range(r.start..end).map_err(engine)? {
                let (key, value) = pair.map_err(engine)?;
                if pairs.len() >= limit as usize || (!pairs.is_empty() && bytes >= MAX_SCAN_BYTES) {
                    next_start = Some(key);
                    break;
                }
                bytes = bytes.saturating_add(key.len() + value.len());
                pairs.push(pb::Pair { key, value });
            }
        }
        let next_start = next_start.or(shard_end);
        Ok(Response::new(pb::ScanResponse { pairs, next_start }))
    }

    async fn define_index(
        &self,
        req: Request<pb::DefineIndexRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
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
        let (index, _) = lane.propose(grant, Command::DefineIndex(spec)).await?;
        Ok(written(index))
    }

    async fn search(
        &self,
        req: Request<pb::SearchRequest>,
    ) -> Result<Response<pb::SearchResponse>, Status> {
        if self.lanes.groups().ids().len() > 1 {
            let hits = self.fanout.search(req.into_inner()).await?;
            return Ok(Response::new(pb::SearchResponse { hits }));
        }
        let lane = self.lanes.of(&req)?;
        let r = req.into_inner();
        let query = Query::parse(&r)?;
        lane.before_read().await?;
        let index = lane
            .group
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
        let lane = self.lanes.of(&req)?;
        lane.handover.check()?;
        let r = req.into_inner();
        crate::network::check_peer_addr(&r.addr).map_err(Status::invalid_argument)?;
        let was_leader = lane.leads();
        // A node that is a member at that address already is not added again: a new
        // membership entry would restart the replication to it, and with it a snapshot
        // being streamed to it (a move's catch-up, tried again after the node's limit on
        // a call's time ended the try before).
        if lane.leads() && lane.member_at(r.node_id, &r.addr) {
            lane.learner_caught_up(r.node_id).await?;
            return Ok(Response::new(lane.membership_now()));
        }
        // The call returns once the learner has caught up, which may take a snapshot; the
        // client's deadline bounds it.
        let result = lane
            .group
            .raft
            .add_learner(r.node_id, BasicNode::new(r.addr), true)
            .await;
        if result.is_ok() {
            lane.learner_caught_up(r.node_id).await?;
        }
        lane.membership(grant, result, was_leader)
    }

    async fn change_voters(
        &self,
        req: Request<pb::ChangeVotersRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
        lane.handover.check()?;
        let r = req.into_inner();
        let change = match (r.add.is_empty(), r.remove.is_empty()) {
            (false, true) => openraft::ChangeMembers::AddVoterIds(r.add.into_iter().collect()),
            (true, false) => openraft::ChangeMembers::RemoveVoters(r.remove.into_iter().collect()),
            (false, false) => {
                let voters = lane.group.raft.metrics().borrow().membership_config.clone();
                let mut now: std::collections::BTreeSet<NodeId> =
                    voters.membership().voter_ids().collect();
                now.retain(|id| !r.remove.contains(id));
                now.extend(r.add);
                openraft::ChangeMembers::ReplaceAllVoters(now)
            }
            (true, true) => {
                return Err(Status::invalid_argument(
                    "name voters to add, voters to remove, or both",
                ))
            }
        };
        let was_leader = lane.leads();
        let result = lane.group.raft.change_membership(change, false).await;
        lane.membership(grant, result, was_leader)
    }

    async fn set_address(
        &self,
        req: Request<pb::SetAddressRequest>,
    ) -> Result<Response<pb::MembershipResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
        lane.handover.check()?;
        let r = req.into_inner();
        crate::network::check_peer_addr(&r.addr).map_err(Status::invalid_argument)?;
        let membership = lane.group.raft.metrics().borrow().membership_config.clone();
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
        let was_leader = lane.leads();
        let change = openraft::ChangeMembers::SetNodes(
            [(r.node_id, BasicNode::new(r.addr))].into_iter().collect(),
        );
        let result = lane.group.raft.change_membership(change, false).await;
        lane.membership(grant, result, was_leader)
    }

    async fn transfer_leader(
        &self,
        req: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderResponse>, Status> {
        WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
        let to = req.into_inner().node_id;
        let peers = self.peers.clone().for_group(lane.group.id);
        let term = transfer::transfer(
            &lane.group.raft,
            self.node_id,
            &peers,
            &lane.handover,
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
        if self.lanes.groups().ids().len() > 1 {
            return Err(Status::failed_precondition(
                "a backup of a key space split into shards is not built yet",
            ));
        }
        let lane = self.lanes.of(&req)?;
        let upto = lane.read_barrier().await?;
        let raft = &lane.group.raft;
        let covered = |m: &openraft::RaftMetrics<NodeId, BasicNode>| {
            m.snapshot.map_or(0, |id| id.index) >= upto
        };
        if !covered(&raft.metrics().borrow()) {
            raft.trigger()
                .snapshot()
                .await
                .map_err(|e| Status::unavailable(format!("a snapshot for the backup: {e}")))?;
            raft.wait(Some(self.timeout))
                .metrics(covered, "a snapshot for the backup")
                .await
                .map_err(|e| Status::unavailable(format!("a snapshot for the backup: {e}")))?;
        }
        let sm = lane.group.sm.clone();
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
        let lane = self.lanes.of(&req)?;
        match lane.propose(grant, Command::OpenSession).await? {
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
        req: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let lane = self.lanes.of(&req)?;
        let metrics = lane.group.raft.metrics().borrow().clone();
        let leader_id = known_leader(&metrics, self.node_id);
        let leader_addr = leader_id.and_then(|id| address(&metrics, id));
        Ok(Response::new(pb::StatusResponse {
            node_id: self.node_id,
            leader_id,
            leader_addr,
            applied_index: metrics.last_applied.map_or(0, |l| l.index),
            term: metrics.current_term,
            indexing_backlog: lane.group.sm.indexing_backlog(),
            purged_index: metrics.purged.map_or(0, |l| l.index),
        }))
    }

    async fn shard_map(
        &self,
        _req: Request<pb::ShardMapRequest>,
    ) -> Result<Response<pb::ShardMapResponse>, Status> {
        // Between a split's apply here and its child's start, the parent's range has
        // shrunk and no group serves the rest: wait the start out (a bounded time), so
        // the map answered covers every key.
        let started = std::time::Instant::now();
        loop {
            let shards = self.shards();
            let whole = shards.first().is_some_and(|s| s.start.is_empty())
                && shards.last().is_some_and(|s| s.end.is_none())
                && shards
                    .iter()
                    .zip(shards.iter().skip(1))
                    .all(|(a, b)| a.end.as_ref() == Some(&b.start));
            if whole || started.elapsed() > CHILD_START {
                return Ok(Response::new(pb::ShardMapResponse { shards }));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn split(
        &self,
        req: Request<pb::SplitRequest>,
    ) -> Result<Response<pb::SplitResponse>, Status> {
        let grant = WriteGrant::of(&req)?;
        let lane = self.lanes.of(&req)?;
        let r = req.into_inner();
        let groups = self.lanes.groups();
        if groups.get(r.child).is_some() {
            return Err(Status::invalid_argument(format!(
                "group {} exists: a split names a new group",
                r.child
            )));
        }
        let split = Command::Split {
            at: r.at,
            child: r.child,
            version: lane.group.sm.shard().version,
        };
        let (kept, child) = match lane.propose(grant, split).await? {
            (_, Applied::Split { kept, child }) => (kept, child),
            (_, other) => {
                return Err(Status::internal(format!("a split applied as {other:?}")));
            }
        };
        // Answered once this node serves the child too, so the caller's next map has it.
        let started = std::time::Instant::now();
        while groups.get(r.child).is_none() {
            if started.elapsed() > CHILD_START {
                return Err(Status::unavailable(format!(
                    "the split is applied; group {} has not started here within {CHILD_START:?}",
                    r.child
                )));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let info = |group, shard: crate::shard::Shard| pb::ShardInfo {
            group,
            start: shard.start,
            end: shard.end,
            version: shard.version,
            leader_addr: None,
        };
        Ok(Response::new(pb::SplitResponse {
            kept: Some(info(lane.group.id, kept)),
            child: Some(info(r.child, child)),
        }))
    }
}

//! The Raft RPCs from peers: each checked for its target node, its group and its cluster,
//! then handed to openraft; a snapshot stream checked frame by frame, bounded, and written into the
//! state machine's next generation before openraft switches to it.

use std::path::Path;

use openraft::{Snapshot, SnapshotMeta, Vote};
use tonic::{Request, Response, Status, Streaming};

use super::fanout::ShardSearch;
use crate::convert;
use crate::format::SnapshotHeader;
use crate::group::{Group, Groups};
use crate::log_store::LogStore;
use crate::network::{CLUSTER_HEADER, TARGET_HEADER};
use crate::pb;
use crate::snapshot::{Accepted, FrameSequence, RawFrameWriter, SnapshotData};
use crate::state_machine::StateMachineStore;
use crate::NodeId;

/// Raft RPCs from peers, each handed to the group it names.
pub struct RaftService {
    groups: Groups,
    /// The shards' side of searches over shards.
    shards: ShardSearch,
    node_id: NodeId,
    max_snapshot_bytes: u64,
}

impl RaftService {
    /// The service of node `node_id` for its `groups`, taking snapshot streams of at most
    /// `max_snapshot_bytes` (and what the disk allows: [`crate::limits::snapshot_budget`]),
    /// answering searches over shards with `shards` ([`super::KvService::shard_search`]).
    pub fn new(
        groups: Groups,
        node_id: NodeId,
        max_snapshot_bytes: u64,
        shards: ShardSearch,
    ) -> Self {
        RaftService {
            groups,
            shards,
            node_id,
            max_snapshot_bytes,
        }
    }

    /// The checks at the door of every Raft RPC: its target node, then its group, then
    /// its cluster (which an RPC that `joins` may set, see [`Self::check_cluster`]); the
    /// group the RPC is for.
    fn admit<T>(&self, req: &Request<T>, joins: bool) -> Result<Group, Status> {
        self.check_target(req)?;
        let group = self.check_group(req)?;
        self.check_cluster(&group.log, req, joins)?;
        Ok(group)
    }

    /// The group the RPC names, or `NOT_FOUND` if this node holds no replica of it (the
    /// sender's map of the group's replicas is out of date). An RPC without a group header
    /// is for [`crate::DEFAULT_GROUP`].
    fn check_group<T>(&self, req: &Request<T>) -> Result<Group, Status> {
        let id = crate::access::named_group(req)?;
        self.groups.get(id).ok_or_else(|| {
            Status::not_found(format!(
                "node {} holds no replica of group {id}",
                self.node_id
            ))
        })
    }

    /// Refuse an RPC that names another node (or none): the sender has this address down
    /// for a node that is not here any more. Unavailable, so the sender backs off.
    fn check_target<T>(&self, req: &Request<T>) -> Result<(), Status> {
        let target = req
            .metadata()
            .get(TARGET_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<NodeId>().ok());
        match target {
            Some(id) if id == self.node_id => Ok(()),
            Some(id) => Err(Status::unavailable(format!(
                "this is node {}, not node {id}",
                self.node_id
            ))),
            None => Err(Status::invalid_argument(format!(
                "a raft request must name its target node ({TARGET_HEADER})"
            ))),
        }
    }
}

impl RaftService {
    /// Refuse an RPC from another cluster (`FAILED_PRECONDITION`): a node holds one
    /// cluster's data, and an address reused or mistyped must not mix two. A node that has
    /// no cluster id yet takes the sender's when `joins` (an append or a snapshot, which
    /// only a leader sends), synced before the RPC goes on. An RPC without an id (from a
    /// node whose data predates cluster ids) passes.
    fn check_cluster<T>(
        &self,
        log: &LogStore,
        req: &Request<T>,
        joins: bool,
    ) -> Result<(), Status> {
        let Some(sent) = req.metadata().get(CLUSTER_HEADER) else {
            return Ok(());
        };
        let sent = sent
            .to_str()
            .ok()
            .and_then(|v| u128::from_str_radix(v, 16).ok())
            .ok_or_else(|| Status::invalid_argument(format!("{CLUSTER_HEADER}: not an id")))?;
        match log.cluster_id() {
            Some(have) if have == sent => Ok(()),
            Some(have) => Err(Status::failed_precondition(format!(
                "node {} belongs to cluster {have:032x}, not {sent:032x}",
                self.node_id
            ))),
            None if joins => log.join_cluster(sent).map_err(|e| match e {
                crate::Error::Config(_) => Status::failed_precondition(e.to_string()),
                e => Status::internal(e.to_string()),
            }),
            None => Ok(()),
        }
    }
}

impl RaftService {
    /// Receive a snapshot stream into the file at `path`, every frame checked as it
    /// arrives and written by a blocking task, a few at a time (the snapshot is never
    /// whole in memory), within the bytes this node takes: the sender's vote and the
    /// snapshot's header.
    async fn receive_snapshot(
        &self,
        mut stream: Streaming<pb::SnapshotFrame>,
        path: &Path,
    ) -> Result<(Vote<NodeId>, SnapshotHeader), Status> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
        let writer_path = path.to_path_buf();
        let writer = tokio::task::spawn_blocking(move || -> crate::Result<()> {
            let mut w = RawFrameWriter::create(&writer_path)?;
            while let Some(frame) = rx.blocking_recv() {
                w.write(&frame)?;
            }
            w.finish()
        });
        let dir = path.parent().unwrap_or(path);
        let budget = crate::limits::snapshot_budget(self.max_snapshot_bytes, dir)
            .map_err(|e| Status::internal(format!("free space in {}: {e}", dir.display())))?;
        let mut received = 0u64;
        let mut seq = FrameSequence::default();
        let mut vote = None;
        let mut header = None;
        while let Some(msg) = stream.message().await? {
            received = received.saturating_add(msg.frame.len() as u64);
            if received > budget {
                return Err(Status::resource_exhausted(format!(
                    "the snapshot stream passed {received} bytes; this node takes {budget} \
                     (its limit, or half its free disk beyond a reserve)"
                )));
            }
            if vote.is_none() {
                vote = Some(convert::vote_from_pb(msg.vote)?);
            }
            match seq
                .accept(&msg.frame)
                .map_err(|e| Status::invalid_argument(e.to_string()))?
            {
                Accepted::Header(h) => header = Some(h),
                Accepted::Pairs(_) | Accepted::IndexFile(_) | Accepted::End => {}
            }
            if tx.send(msg.frame).await.is_err() {
                break;
            }
        }
        drop(tx);
        writer
            .await
            .map_err(|e| Status::internal(format!("snapshot writer task: {e}")))?
            .map_err(|e| Status::internal(e.to_string()))?;
        let (Some(vote), Some(header)) = (vote, header) else {
            return Err(Status::invalid_argument("an empty snapshot stream"));
        };
        if !seq.is_complete() {
            return Err(Status::invalid_argument(
                "the snapshot stream ended before its end frame",
            ));
        }
        Ok((vote, header))
    }

    /// Write the snapshot received at `path` into a new generation, here, outside Raft's
    /// loop, which then only switches to it ([`StateMachineStore::prepare_install`]).
    async fn prepare_install(
        &self,
        sm: &StateMachineStore,
        path: &Path,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
    ) -> Result<SnapshotData, Status> {
        let data = SnapshotData::open(path).map_err(|e| Status::internal(e.to_string()))?;
        let (sm, meta) = (sm.clone(), meta.clone());
        tokio::task::spawn_blocking(move || sm.prepare_install(&meta, &data).map(|()| data))
            .await
            .map_err(|e| Status::internal(format!("snapshot install task: {e}")))?
            .map_err(|e| match e {
                crate::Error::Corruption { .. } => Status::invalid_argument(e.to_string()),
                e => Status::internal(e.to_string()),
            })
    }
}

/// Removes a received snapshot file however the call ends (the install copies it).
struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tonic::async_trait]
impl pb::raft_server::Raft for RaftService {
    async fn append_entries(
        &self,
        req: Request<pb::AppendEntriesRequest>,
    ) -> Result<Response<pb::AppendEntriesResponse>, Status> {
        let group = self.admit(&req, true)?;
        let rpc = convert::append_request_from_pb(req.into_inner())?;
        let resp = group
            .raft
            .append_entries(rpc)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(convert::append_response_to_pb(&resp)))
    }

    async fn vote(
        &self,
        req: Request<pb::VoteRequest>,
    ) -> Result<Response<pb::VoteResponse>, Status> {
        let group = self.admit(&req, false)?;
        let rpc = convert::vote_request_from_pb(req.into_inner())?;
        let resp = group
            .raft
            .vote(rpc)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(convert::vote_response_to_pb(&resp)))
    }

    async fn shard_corpus(
        &self,
        req: Request<pb::ShardCorpusRequest>,
    ) -> Result<Response<pb::CorpusStats>, Status> {
        let group = self.admit(&req, false)?;
        let stats = self.shards.corpus(group.id, req.into_inner()).await?;
        Ok(Response::new(stats))
    }

    async fn search_shard(
        &self,
        req: Request<pb::SearchShardRequest>,
    ) -> Result<Response<pb::SearchShardResponse>, Status> {
        let group = self.admit(&req, false)?;
        let part = self.shards.part(group.id, req.into_inner()).await?;
        Ok(Response::new(part))
    }

    async fn timeout_now(
        &self,
        req: Request<pb::TimeoutNowRequest>,
    ) -> Result<Response<pb::Empty>, Status> {
        let group = self.admit(&req, false)?;
        let from = convert::vote_from_pb(req.into_inner().vote)?;
        {
            let metrics = group.raft.metrics();
            let m = metrics.borrow();
            let sender = from.leader_id.node_id;
            if m.current_leader != Some(sender) || m.current_term != from.leader_id.term {
                return Err(Status::failed_precondition(format!(
                    "node {sender} in term {} is not the leader here (node {:?}, term {})",
                    from.leader_id.term, m.current_leader, m.current_term
                )));
            }
            if !m
                .membership_config
                .membership()
                .voter_ids()
                .any(|v| v == self.node_id)
            {
                return Err(Status::failed_precondition(format!(
                    "node {} is not a voter",
                    self.node_id
                )));
            }
        }
        tracing::info!(
            "node {} hands its leadership here: standing for election",
            from.leader_id.node_id
        );
        group
            .raft
            .trigger()
            .elect()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(pb::Empty {}))
    }

    async fn install_snapshot(
        &self,
        req: Request<Streaming<pb::SnapshotFrame>>,
    ) -> Result<Response<pb::SnapshotResponse>, Status> {
        let group = self.admit(&req, true)?;
        let path = group.sm.receive_path();
        let _cleanup = RemoveOnDrop(path.clone());
        let (vote, header) = self.receive_snapshot(req.into_inner(), &path).await?;
        let meta = SnapshotMeta {
            last_log_id: header.last_log_id,
            last_membership: header.membership,
            snapshot_id: header.snapshot_id,
        };
        let data = self.prepare_install(&group.sm, &path, &meta).await?;
        let snapshot = Snapshot {
            meta,
            snapshot: Box::new(data),
        };
        let resp = group
            .raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        Ok(Response::new(pb::SnapshotResponse {
            vote: Some(convert::vote_to_pb(&resp.vote)),
        }))
    }
}

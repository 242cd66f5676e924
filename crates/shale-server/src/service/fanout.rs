//! A search over a key space split into shards. The node that receives it (the root)
//! asks each shard's leader for its part and merges the parts as one index over every
//! shard would rank them (docs/replication.md, "Search over shards"):
//!
//! ```text
//!   Search ──► root ──ShardCorpus──► every shard's leader: N, tokens, df of the query's terms
//!               │   (keywords, hybrid)            summed ──┐
//!               └────SearchShard (sums) ──► the leaders of the shards the range overlaps:
//!                          each retriever's ranking, unfused, with documents
//!                                   merged per retriever (score, then key) ──► fused ──► k
//! ```
//!
//! Keyword scores use the sums of every shard's statistics, so they are the scores of one
//! index; each retriever's merged window is the window one index would return, and the
//! fusion runs once: an exact search answers what a single node holding the same data
//! answers. Each part passes its own shard's read barrier, so a search over shards is
//! linearizable shard by shard, not as a whole. A root that leads a shard, or a node
//! serving serializable reads, reads that shard's replica in place.
//!
//! Thread safety: [`Fanout`] is shared by the node's searches; its cache of peer
//! clients takes a lock for a lookup.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::BasicNode;
use shale_client::wire::{LEADER_HEADER, SHARD_HEADER};
use tonic::{Code, Status};

use super::lane::{Lanes, ReadConsistency};
use super::query::{corpus_of, corpus_sum, corpus_to_pb, Query};
use crate::network::{NetworkFactory, PeerClient};
use crate::pb;
use crate::status::retry_safe;
use crate::{GroupId, NodeId};

/// A shard's side of a search over shards: what [`crate::service::RaftService`] serves
/// to a root, and a root to itself.
#[derive(Clone)]
pub struct ShardSearch {
    lanes: Arc<Lanes>,
}

impl ShardSearch {
    pub(super) fn new(lanes: Arc<Lanes>) -> ShardSearch {
        ShardSearch { lanes }
    }

    /// Group `group`'s statistics of a keyword query, after its read barrier.
    ///
    /// # Errors
    /// As a `Search`'s read: not the leader, no quorum, no such index.
    pub async fn corpus(
        &self,
        group: GroupId,
        r: pb::ShardCorpusRequest,
    ) -> Result<pb::CorpusStats, Status> {
        let lane = self.lanes.of_group(group)?;
        lane.before_read().await?;
        let index = lane
            .group
            .sm
            .index(&r.index)
            .ok_or_else(|| no_index(&r.index, group))?;
        tokio::task::spawn_blocking(move || corpus_of(&index, &r.index, &r.text))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
    }

    /// Group `group`'s part of a search, after its read barrier.
    ///
    /// # Errors
    /// As [`ShardSearch::corpus`], and a search's invalid options.
    pub async fn part(
        &self,
        group: GroupId,
        r: pb::SearchShardRequest,
    ) -> Result<pb::SearchShardResponse, Status> {
        let search = r
            .search
            .ok_or_else(|| Status::invalid_argument("a shard's search needs its request"))?;
        let mut query = Query::parse(&search)?;
        if let Some(c) = r.corpus {
            query = query.with_corpus(corpus_sum([c]));
        }
        let lane = self.lanes.of_group(group)?;
        lane.before_read().await?;
        let index = lane
            .group
            .sm
            .index(&search.index)
            .ok_or_else(|| no_index(&search.index, group))?;
        tokio::task::spawn_blocking(move || query.part(&index, search))
            .await
            .map_err(|e| Status::internal(e.to_string()))?
    }
}

fn no_index(name: &str, group: GroupId) -> Status {
    Status::not_found(format!("no index {name:?} in group {group}"))
}

/// The root's side: finds each shard's leader, asks it, merges.
pub(super) struct Fanout {
    shards: ShardSearch,
    peers: NetworkFactory,
    node_id: NodeId,
    timeout: Duration,
    /// A client per group and leader, kept for the next search.
    clients: Mutex<HashMap<(GroupId, NodeId, String), Arc<PeerClient>>>,
}

/// Where a group's part is read.
enum Reader {
    Here,
    Peer(Arc<PeerClient>),
}

impl Fanout {
    pub(super) fn new(lanes: Arc<Lanes>, peers: NetworkFactory) -> Fanout {
        let serving = lanes.serving();
        Fanout {
            shards: ShardSearch::new(lanes),
            peers,
            node_id: serving.node_id,
            timeout: serving.timeout,
            clients: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn shards(&self) -> ShardSearch {
        self.shards.clone()
    }

    /// The hits of `r` over every shard its range overlaps.
    ///
    /// # Errors
    /// A shard's error; `UNAVAILABLE` (safe to retry) for a shard with no leader known or
    /// one that could not answer as leader.
    pub(super) async fn search(
        self: &Arc<Self>,
        r: pb::SearchRequest,
    ) -> Result<Vec<pb::SearchHit>, Status> {
        let mut query = Query::parse(&r)?;
        let groups = self.shards.lanes.groups();
        let all = groups.ids();
        if query.mode() != pb::SearchMode::Meaning {
            let ask = pb::ShardCorpusRequest {
                index: r.index.clone(),
                text: r.text.clone().unwrap_or_default(),
            };
            let parts = self.each(&all, move |this, group| {
                let ask = ask.clone();
                async move { this.corpus_of(group, ask).await }
            });
            query = query.with_corpus(corpus_sum(parts.await?));
        }
        let overlapping: Vec<GroupId> = all
            .into_iter()
            .filter(|&g| groups.get(g).is_some_and(|g| overlaps(&g.sm.shard(), &r)))
            .collect();
        let ask = pb::SearchShardRequest {
            corpus: query.corpus().map(corpus_to_pb),
            search: Some(r),
        };
        let parts = self.each(&overlapping, move |this, group| {
            let ask = ask.clone();
            async move { this.part_of(group, ask).await }
        });
        Ok(query.merge(parts.await?))
    }

    /// `call` on every group of `groups` at once; the answers in order, or the first
    /// error.
    async fn each<T, F, Fut>(
        self: &Arc<Self>,
        groups: &[GroupId],
        call: F,
    ) -> Result<Vec<T>, Status>
    where
        T: Send + 'static,
        F: Fn(Arc<Self>, GroupId) -> Fut,
        Fut: std::future::Future<Output = Result<T, Status>> + Send + 'static,
    {
        let tasks: Vec<_> = groups
            .iter()
            .map(|&g| tokio::spawn(call(Arc::clone(self), g)))
            .collect();
        let mut out = Vec::with_capacity(tasks.len());
        for task in tasks {
            out.push(task.await.map_err(|e| Status::internal(e.to_string()))??);
        }
        Ok(out)
    }

    async fn corpus_of(
        &self,
        group: GroupId,
        ask: pb::ShardCorpusRequest,
    ) -> Result<pb::CorpusStats, Status> {
        match self.reader(group)? {
            Reader::Here => self.shards.corpus(group, ask).await,
            Reader::Peer(peer) => peer
                .shard_corpus(ask, self.timeout)
                .await
                .map_err(|e| from_shard(group, e)),
        }
    }

    async fn part_of(
        &self,
        group: GroupId,
        ask: pb::SearchShardRequest,
    ) -> Result<pb::SearchShardResponse, Status> {
        match self.reader(group)? {
            Reader::Here => self.shards.part(group, ask).await,
            Reader::Peer(peer) => peer
                .search_shard(ask, self.timeout)
                .await
                .map_err(|e| from_shard(group, e)),
        }
    }

    /// This node, if it may read the group's replica (it leads the group, or reads are
    /// serializable), else a client of the leader it knows.
    fn reader(&self, group: GroupId) -> Result<Reader, Status> {
        let lane = self.shards.lanes.of_group(group)?;
        let serializable = self.shards.lanes.serving().reads == ReadConsistency::Serializable;
        if serializable || lane.leads() {
            return Ok(Reader::Here);
        }
        let metrics = lane.group.raft.metrics().borrow().clone();
        let leader = metrics.current_leader.filter(|&id| id != self.node_id);
        let target = leader.and_then(|id| {
            let node = metrics.membership_config.membership().get_node(&id)?;
            Some((id, node.addr.clone()))
        });
        let Some((id, addr)) = target else {
            return Err(retry_safe(Status::unavailable(format!(
                "group {group} knows no leader"
            ))));
        };
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let key = (group, id, addr);
        if let Some(client) = clients.get(&key) {
            return Ok(Reader::Peer(Arc::clone(client)));
        }
        let node = BasicNode::new(key.2.clone());
        let client = Arc::new(self.peers.clone().for_group(group).peer(id, &node));
        clients.insert(key, Arc::clone(&client));
        Ok(Reader::Peer(client))
    }
}

/// Whether `shard` holds keys of `r`'s range.
fn overlaps(shard: &crate::shard::Shard, r: &pb::SearchRequest) -> bool {
    let below_end = match (&shard.end, &r.from) {
        (Some(end), Some(from)) => from < end,
        _ => true,
    };
    let above_start =
        r.to.as_ref()
            .is_none_or(|to| shard.start.as_slice() < to.as_slice());
    below_end && above_start
}

/// A shard's error as the root answers it: a refusal of the request itself as it is; the
/// shard's leadership, quorum or reachability as `UNAVAILABLE`, safe to retry (a search
/// changes nothing).
fn from_shard(group: GroupId, e: Status) -> Status {
    match e.code() {
        Code::InvalidArgument | Code::NotFound => e,
        Code::FailedPrecondition
            if e.metadata().get(LEADER_HEADER).is_none()
                && e.metadata().get(SHARD_HEADER).is_none() =>
        {
            e
        }
        _ => retry_safe(Status::unavailable(format!(
            "group {group}: {}",
            e.message()
        ))),
    }
}

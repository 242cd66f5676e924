//! The Raft RPCs to peers, over gRPC: openraft's `RaftNetworkFactory` and `RaftNetwork`.
//!
//! Appends and votes are unary calls. A snapshot is a client stream: a blocking task reads
//! the snapshot file frame by frame into a channel of four frames, so a snapshot of any
//! size is sent in bounded memory. HTTP/2 keep-alives break a stream to a dead peer;
//! openraft's cancel future ends one it no longer wants.
//!
//! Every RPC's outcome is noted in [`Reachability`], which logs each peer's changes once:
//! openraft logs every failed RPC, several times a second while a peer is down, and
//! [`crate::logging`] drops those lines.
//!
//! Thread safety: openraft owns each `PeerClient` (one per target) from one task;
//! [`Reachability`] is shared by all of them behind a mutex.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use openraft::error::{
    Fatal, InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError,
    ReplicationClosed, StreamingError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{AnyError, BasicNode, Snapshot, StorageError, StorageIOError, Vote};
use tonic::transport::{Channel, ClientTlsConfig};

use crate::convert;
use crate::pb;
use crate::pb::raft_client::RaftClient;
use crate::{GroupId, NodeId, TypeConfig, DEFAULT_GROUP};

pub use shale_client::wire::{
    endpoint, with_token, MAX_MESSAGE_BYTES, MAX_REQUEST_BYTES, TOKEN_HEADER,
};

/// An `AppendEntries` request is cut at about this many bytes: openraft is told the
/// payload is too large and sends fewer entries (at least one). It must be sent, written
/// and fsynced within one heartbeat interval (see [`crate::command::MAX_COMMAND_BYTES`]).
pub const MAX_APPEND_BYTES: usize = 1024 * 1024;

/// An `AppendEntries` request holds at most this many entries (cut as for
/// [`MAX_APPEND_BYTES`]), within [`crate::codec::MAX_FIELDS`].
pub const MAX_APPEND_ENTRIES: usize = 8_192;

/// How many appends this process cut for [`MAX_APPEND_BYTES`] or [`MAX_APPEND_ENTRIES`]
/// (for tests and metrics).
pub static APPENDS_CUT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The metadata entry that names the node a Raft RPC is for. A node refuses RPCs meant
/// for another: after a replica is replaced by a new id on the same address, the leader's
/// stream to the old id must not reach the new one (openraft would see that follower's
/// log go backwards).
pub const TARGET_HEADER: &str = "shale-target-node";
/// Metadata entry of every Raft RPC from a node that knows its cluster's id (32 hex
/// digits): a node of another cluster refuses the RPC (`format::Identity`).
pub const CLUSTER_HEADER: &str = "shale-cluster";
/// The metadata entry that names the Raft group an RPC is for (decimal): a node refuses
/// RPCs for a group it holds no replica of. Absent: [`crate::DEFAULT_GROUP`].
pub use shale_client::wire::GROUP_HEADER;

/// What RPCs to a peer showed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Every RPC so far failed: the peer may still be starting.
    NotYetReached,
    /// An RPC was answered, and none failed since, or for less than [`LOST_AFTER`].
    Reachable,
    /// RPCs have failed for [`LOST_AFTER`] since the last one answered.
    Lost,
}

/// How long RPCs to a reachable peer must fail before it counts as lost: ten heartbeats.
/// A single timeout does not (a peer that resumes after a pause answers some of the
/// requests that queued and times out on others for a moment).
pub const LOST_AFTER: Duration = Duration::from_secs(1);

/// Each peer's [`Link`], from the outcomes of this node's RPCs to it. A change is logged
/// once: the first failure at INFO (peers start in any order), a loss at WARN, a recovery
/// at INFO. Metrics show the current links.
#[derive(Debug, Default)]
pub struct Reachability {
    peers: Mutex<BTreeMap<NodeId, (Link, Instant)>>,
}

impl Reachability {
    /// Note an RPC's outcome: `Err` carries why it failed.
    pub fn record(&self, peer: NodeId, outcome: Result<(), &dyn std::fmt::Display>) {
        self.record_at(peer, outcome, Instant::now());
    }

    fn record_at(&self, peer: NodeId, outcome: Result<(), &dyn std::fmt::Display>, now: Instant) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        let before = peers.get(&peer).copied();
        let after = match (before, outcome) {
            (None, Err(e)) => {
                tracing::info!("peer {peer} not reachable yet: {e}");
                (Link::NotYetReached, now)
            }
            (Some((Link::Reachable, answered)), Err(e)) => {
                if now.duration_since(answered) < LOST_AFTER {
                    return;
                }
                tracing::warn!("peer {peer} lost: {e}");
                (Link::Lost, answered)
            }
            (Some(_), Err(_)) => return,
            (None | Some((Link::NotYetReached, _)), Ok(())) => {
                tracing::info!("peer {peer} reachable");
                (Link::Reachable, now)
            }
            (Some((Link::Lost, _)), Ok(())) => {
                tracing::info!("peer {peer} reachable again");
                (Link::Reachable, now)
            }
            (Some((Link::Reachable, _)), Ok(())) => (Link::Reachable, now),
        };
        peers.insert(peer, after);
    }

    /// Every peer an RPC was sent to, with its link.
    pub fn links(&self) -> Vec<(NodeId, Link)> {
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        peers.iter().map(|(&id, &(link, _))| (id, link)).collect()
    }
}

/// Builds a [`PeerClient`] per peer.
#[derive(Clone, Debug, Default)]
pub struct NetworkFactory {
    token: Option<Arc<str>>,
    /// Mutual TLS to peers ([`crate::tls::Tls::peer`]), if the cluster uses TLS.
    tls: Option<ClientTlsConfig>,
    /// The cluster's id, sent with every RPC once known.
    cluster: Arc<OnceLock<u128>>,
    /// The group whose `Raft` sends through this factory.
    group: GroupId,
    reachability: Arc<Reachability>,
    /// The most bytes per second a snapshot is sent at (0: unbounded).
    snapshot_rate: u64,
}

impl NetworkFactory {
    /// Peers reached with the peer token over plaintext, or over mutual TLS with `tls`
    /// (then no token is sent: replicas authenticate by certificate).
    pub fn new(token: Option<Arc<str>>, tls: Option<ClientTlsConfig>) -> Self {
        NetworkFactory {
            token: if tls.is_some() { None } else { token },
            tls,
            cluster: Arc::default(),
            group: DEFAULT_GROUP,
            reachability: Arc::default(),
            snapshot_rate: 0,
        }
    }

    /// Send snapshots at most `bytes_per_sec` (0: unbounded).
    #[must_use]
    pub fn with_snapshot_rate(mut self, bytes_per_sec: u64) -> Self {
        self.snapshot_rate = bytes_per_sec;
        self
    }

    /// Name `group` in every RPC (the default is [`DEFAULT_GROUP`]).
    #[must_use]
    pub fn for_group(mut self, group: GroupId) -> Self {
        self.group = group;
        self
    }

    /// Send the id in `cluster` (the log store's [`crate::log_store::LogStore::cluster_cell`])
    /// with every RPC once it is set.
    #[must_use]
    pub fn with_cluster(mut self, cluster: Arc<OnceLock<u128>>) -> Self {
        self.cluster = cluster;
        self
    }

    /// The links its clients record.
    pub fn reachability(&self) -> Arc<Reachability> {
        Arc::clone(&self.reachability)
    }
}

/// The channel to one peer, connected lazily (and again after a failure) by tonic.
pub struct PeerClient {
    target: NodeId,
    group: GroupId,
    client: Result<RaftClient<Channel>, String>,
    token: Option<Arc<str>>,
    cluster: Arc<OnceLock<u128>>,
    reachability: Arc<Reachability>,
    snapshot_rate: u64,
}

/// Check that `addr` is a replica's address as membership records it: `host:port`, the
/// host an IPv4 address, an IPv6 address in brackets, or a DNS name (resolved when the
/// peer is reached, so a replica's address survives a change of IP).
///
/// # Errors
/// What is wrong with it, as text.
pub fn check_peer_addr(addr: &str) -> Result<(), String> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("{addr:?}: expected HOST:PORT"))?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(format!("{addr:?}: port {port:?} is not 1 to 65535")),
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<std::net::Ipv6Addr>()
            .map(drop)
            .map_err(|e| format!("{addr:?}: {e}"));
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return Ok(());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.len() <= 253 && host.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(format!(
            "{addr:?}: {host:?} is not an IP address or a DNS name"
        ))
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        self.peer(target, node)
    }
}

impl NetworkFactory {
    /// A client of peer `target` at `node`'s address, connected at its first call.
    pub fn peer(&self, target: NodeId, node: &BasicNode) -> PeerClient {
        let client = endpoint(&node.addr, self.tls.as_ref()).map(|e| {
            RaftClient::new(e.connect_lazy())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES)
        });
        PeerClient {
            target,
            group: self.group,
            client,
            token: self.token.clone(),
            cluster: Arc::clone(&self.cluster),
            reachability: Arc::clone(&self.reachability),
            snapshot_rate: self.snapshot_rate,
        }
    }
}

/// Sleep until `sent` bytes since `started` are within `bytes_per_sec` (0: unbounded).
fn pace(started: Instant, sent: u64, bytes_per_sec: u64) {
    let wait = pace_wait(started.elapsed(), sent, bytes_per_sec);
    if !wait.is_zero() {
        std::thread::sleep(wait);
    }
}

/// How much longer than `elapsed` sending `sent` bytes at `bytes_per_sec` takes.
fn pace_wait(elapsed: Duration, sent: u64, bytes_per_sec: u64) -> Duration {
    if bytes_per_sec == 0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(sent as f64 / bytes_per_sec as f64).saturating_sub(elapsed)
}

#[derive(Debug)]
struct Text(String);

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Text {}

fn rpc_error<E: std::error::Error>(status: &tonic::Status) -> RPCError<NodeId, BasicNode, E> {
    match status.code() {
        tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
            RPCError::Unreachable(Unreachable::new(status))
        }
        _ => RPCError::Network(NetworkError::new(status)),
    }
}

impl PeerClient {
    /// `msg` with the token, the target node, the group and the cluster's id (once known)
    /// attached.
    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut req = with_token(msg, self.token.as_deref());
        let metadata = req.metadata_mut();
        metadata.insert(
            TARGET_HEADER,
            tonic::metadata::MetadataValue::from(self.target),
        );
        metadata.insert(
            GROUP_HEADER,
            tonic::metadata::MetadataValue::from(self.group),
        );
        if let Some(cluster) = self.cluster.get() {
            if let Ok(v) = format!("{cluster:032x}").parse() {
                req.metadata_mut().insert(CLUSTER_HEADER, v);
            }
        }
        req
    }

    fn client<E: std::error::Error>(
        &self,
    ) -> Result<RaftClient<Channel>, RPCError<NodeId, BasicNode, E>> {
        self.client.clone().map_err(|e| {
            RPCError::Unreachable(Unreachable::new(&Text(format!(
                "node {}: {e}",
                self.target
            ))))
        })
    }

    /// `call` within `ttl`: a peer that does not answer is unreachable.
    async fn timed<T, E: std::error::Error>(
        &self,
        ttl: Duration,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, RPCError<NodeId, BasicNode, E>> {
        match tokio::time::timeout(ttl, call).await {
            Ok(Ok(resp)) => {
                self.record(Ok(()));
                Ok(resp.into_inner())
            }
            Ok(Err(status)) => {
                self.record(Err(&status));
                Err(rpc_error(&status))
            }
            Err(_) => {
                let e = Text(format!("no answer within {ttl:?}"));
                self.record(Err(&e));
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
        }
    }

    /// Note an RPC's outcome in [`Reachability`]: a failure as its status's message and
    /// the innermost cause (`tcp connect error: Connection refused (os error 111)`).
    fn record(&self, outcome: Result<(), &(dyn std::error::Error + 'static)>) {
        let why = outcome.map_err(|e| {
            let mut innermost = e.source();
            while let Some(next) = innermost.and_then(std::error::Error::source) {
                innermost = Some(next);
            }
            let top = match e.downcast_ref::<tonic::Status>() {
                Some(status) => format!("{:?}, {}", status.code(), status.message()),
                None => e.to_string(),
            };
            match innermost {
                Some(cause) => Text(format!("{top}: {cause}")),
                None => Text(top),
            }
        });
        self.reachability.record(
            self.target,
            why.as_ref()
                .map(|_| ())
                .map_err(|t| t as &dyn std::fmt::Display),
        );
    }
}

impl PeerClient {
    /// The peer's statistics of a keyword query, as its group's leader.
    ///
    /// # Errors
    /// The peer's status, or `UNAVAILABLE` if it did not answer within `ttl`.
    pub async fn shard_corpus(
        &self,
        r: pb::ShardCorpusRequest,
        ttl: Duration,
    ) -> Result<pb::CorpusStats, tonic::Status> {
        let mut client = self.status_client()?;
        let req = self.request(r);
        self.answer(ttl, client.shard_corpus(req)).await
    }

    /// The peer's part of a search, as its group's leader.
    ///
    /// # Errors
    /// As [`PeerClient::shard_corpus`].
    pub async fn search_shard(
        &self,
        r: pb::SearchShardRequest,
        ttl: Duration,
    ) -> Result<pb::SearchShardResponse, tonic::Status> {
        let mut client = self.status_client()?;
        let req = self.request(r);
        self.answer(ttl, client.search_shard(req)).await
    }

    fn status_client(&self) -> Result<RaftClient<Channel>, tonic::Status> {
        self.client
            .clone()
            .map_err(|e| tonic::Status::unavailable(format!("node {}: {e}", self.target)))
    }

    async fn answer<T>(
        &self,
        ttl: Duration,
        call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, tonic::Status> {
        match tokio::time::timeout(ttl, call).await {
            Ok(answer) => answer.map(tonic::Response::into_inner),
            Err(_) => Err(tonic::Status::unavailable(format!(
                "node {}: no answer within {ttl:?}",
                self.target
            ))),
        }
    }

    /// Ask the peer to stand for election at once (leader transfer), as the leader with
    /// `vote`; refused unless the peer follows that leader in that term and is a voter.
    ///
    /// # Errors
    /// The peer's refusal, or why it could not be reached within `ttl`.
    pub async fn timeout_now(&self, vote: &Vote<NodeId>, ttl: Duration) -> Result<(), String> {
        let mut client = self
            .client
            .clone()
            .map_err(|e| format!("node {}: {e}", self.target))?;
        let req = self.request(pb::TimeoutNowRequest {
            vote: Some(convert::vote_to_pb(vote)),
        });
        match tokio::time::timeout(ttl, client.timeout_now(req)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(status)) => Err(format!("node {}: {}", self.target, status.message())),
            Err(_) => Err(format!("node {}: no answer within {ttl:?}", self.target)),
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let mut client = self.client()?;
        let msg = convert::append_request_to_pb(&rpc);
        if msg.entries.len() > MAX_APPEND_ENTRIES
            || msg.entries.len() > 1 && prost::Message::encoded_len(&msg) > MAX_APPEND_BYTES
        {
            // How many entries fit; openraft retries with that many.
            APPENDS_CUT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut bytes = 0usize;
            let fit = msg
                .entries
                .iter()
                .take(MAX_APPEND_ENTRIES)
                .take_while(|e| {
                    bytes = bytes.saturating_add(e.len() + 8);
                    bytes <= MAX_APPEND_BYTES
                })
                .count()
                .max(1);
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(fit as u64),
            ));
        }
        let req = self.request(msg);
        let resp = self
            .timed(option.hard_ttl(), client.append_entries(req))
            .await?;
        convert::append_response_from_pb(resp).map_err(|s| RPCError::Network(NetworkError::new(&s)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let mut client = self.client()?;
        let req = self.request(convert::vote_request_to_pb(&rpc));
        let resp = self.timed(option.hard_ttl(), client.vote(req)).await?;
        convert::vote_response_from_pb(resp).map_err(|s| RPCError::Network(NetworkError::new(&s)))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote<NodeId>,
        snapshot: Snapshot<TypeConfig>,
        cancel: impl Future<Output = ReplicationClosed> + openraft::OptionalSend + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<NodeId>, StreamingError<TypeConfig, Fatal<NodeId>>> {
        let mut client = self
            .client::<RaftError<NodeId, InstallSnapshotError>>()
            .map_err(|_| {
                StreamingError::Unreachable(Unreachable::new(&Text(format!(
                    "node {}",
                    self.target
                ))))
            })?;
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::SnapshotFrame>(4);
        let data = snapshot.snapshot;
        let first_vote = convert::vote_to_pb(&vote);
        let rate = self.snapshot_rate;
        let reader = tokio::task::spawn_blocking(move || -> crate::Result<()> {
            let mut frames = data.frames()?;
            let mut vote = Some(first_vote);
            let (started, mut sent) = (Instant::now(), 0u64);
            while let Some(frame) = frames.next_frame()? {
                sent += frame.len() as u64;
                pace(started, sent, rate);
                let msg = pb::SnapshotFrame {
                    vote: vote.take(),
                    frame,
                };
                if tx.blocking_send(msg).is_err() {
                    break; // the call ended; its status says why
                }
            }
            Ok(())
        });
        let req = self.request(tokio_stream::wrappers::ReceiverStream::new(rx));
        let result = tokio::select! {
            closed = cancel => return Err(StreamingError::Closed(closed)),
            r = client.install_snapshot(req) => r,
        };
        let read = reader
            .await
            .map_err(|e| crate::Error::Raft(format!("snapshot reader task: {e}")))
            .and_then(|r| r);
        if let Err(e) = read {
            return Err(StreamingError::StorageError(StorageError::IO {
                source: StorageIOError::read_snapshot(None, AnyError::new(&e)),
            }));
        }
        self.record(
            result
                .as_ref()
                .map(|_| ())
                .map_err(|s| s as &(dyn std::error::Error + 'static)),
        );
        let resp = result.map_err(|s| match rpc_error::<Fatal<NodeId>>(&s) {
            RPCError::Unreachable(u) => StreamingError::Unreachable(u),
            _ => StreamingError::Network(NetworkError::new(&s)),
        })?;
        let vote = convert::vote_from_pb(resp.into_inner().vote)
            .map_err(|s| StreamingError::Network(NetworkError::new(&s)))?;
        Ok(SnapshotResponse::new(vote))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_addresses_are_ips_or_names_with_a_port() {
        for good in [
            "127.0.0.1:7001",
            "[::1]:7001",
            "localhost:7001",
            "node-2.shale.internal:443",
        ] {
            assert_eq!(check_peer_addr(good), Ok(()), "{good}");
        }
        for bad in [
            "localhost",
            "localhost:0",
            "localhost:70000",
            ":7001",
            "-bad.example:7001",
            "a..b:7001",
            "under_score:7001",
            "::1:7001",
            "[::1:7001",
            "host name:7001",
        ] {
            assert!(check_peer_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_snapshot_is_sent_no_faster_than_its_rate() {
        let mib = 1 << 20;
        assert_eq!(pace_wait(Duration::ZERO, 100 * mib, 0), Duration::ZERO);
        let second = Duration::from_secs(1);
        assert_eq!(pace_wait(Duration::ZERO, 16 * mib, 16 * mib), second);
        assert_eq!(pace_wait(second / 4, 16 * mib, 16 * mib), second * 3 / 4);
        assert_eq!(pace_wait(second * 2, 16 * mib, 16 * mib), Duration::ZERO);
    }

    #[test]
    fn a_peer_is_lost_after_failing_for_a_second_and_found_at_once() {
        let links = Reachability::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let failed: &dyn std::fmt::Display = &"refused";
        links.record_at(2, Err(failed), at(0));
        assert_eq!(links.links(), [(2, Link::NotYetReached)]);
        links.record_at(2, Ok(()), at(100));
        assert_eq!(links.links(), [(2, Link::Reachable)]);
        // Failures for less than LOST_AFTER since the last answer: still reachable.
        links.record_at(2, Err(failed), at(200));
        links.record_at(2, Err(failed), at(1_050));
        assert_eq!(links.links(), [(2, Link::Reachable)]);
        links.record_at(2, Err(failed), at(1_100));
        assert_eq!(links.links(), [(2, Link::Lost)]);
        links.record_at(2, Err(failed), at(5_000));
        assert_eq!(links.links(), [(2, Link::Lost)]);
        links.record_at(2, Ok(()), at(5_100));
        assert_eq!(links.links(), [(2, Link::Reachable)]);
        // An answer restarts the clock.
        links.record_at(2, Err(failed), at(6_000));
        assert_eq!(links.links(), [(2, Link::Reachable)]);
    }
}

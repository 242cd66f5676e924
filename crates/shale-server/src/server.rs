//! One node: its two stores, its Raft, and the gRPC server for peers and clients.
//!
//! Layout of a node's data directory:
//! ```text
//! <data>/raft-log/            the log store (a Shale database)
//! <data>/state/SM_CURRENT     names the state machine's current generation
//! <data>/state/sm-<n>/        the state machine (a Shale database)
//! <data>/state/snapshots/     current.snap, and *.tmp files while building or receiving
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config, SnapshotPolicy};
use shale::Options;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;

use crate::access::{client_check, replica_check, ClientTokens};
use crate::error::{Error, Result};
use crate::group::{Group, Groups};
use crate::growth::Node;
use crate::limits::{CallLayer, Incoming, Limits, Refusals};
use crate::log_store::LogStore;
use crate::metrics::{Metrics, NodeCollector, RequestLayer};
use crate::network::{NetworkFactory, MAX_MESSAGE_BYTES, MAX_REQUEST_BYTES};
use crate::pb::kv_server::KvServer;
use crate::pb::raft_server::RaftServer;
use crate::retention::Retention;
use crate::service::{KvService, RaftService, ReadConsistency, ShardSearch};
use crate::state_machine::StateMachineStore;
use crate::tls::{Tls, TlsFiles};
use crate::{NodeId, Raft};

/// How to run one node.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub node_id: NodeId,
    /// Where to listen; port 0 picks a free port ([`Server::addr`] tells which).
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// The read-write client token ([`crate::access`]): with it or `read_only_token` set,
    /// every client call must carry one of them. Printable ASCII.
    pub token: Option<String>,
    /// The read-only client token: admits get, scan, search and status.
    pub read_only_token: Option<String>,
    /// What Raft RPCs carry without TLS (with TLS, replicas present certificates instead).
    /// Required without TLS once a client token is set: a client token never admits them.
    pub peer_token: Option<String>,
    pub heartbeat_interval_ms: u64,
    /// A follower that hears no leader for a time drawn between these two (once per
    /// process) stands for election ([`ServerConfig::new`] on the choice).
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// A snapshot is built after this many applied entries since the last one.
    pub snapshot_every_entries: u64,
    /// What each group's log keeps behind a snapshot, for followers that lag a little
    /// and members still catching up ([`crate::retention`]).
    pub retention: Retention,
    /// How long a client request may wait for a commit or a read barrier.
    pub request_timeout_ms: u64,
    /// Where to serve metrics over HTTP (`GET /metrics`), if anywhere; port 0 picks a free
    /// port ([`Server::metrics_addr`] tells which).
    pub metrics_listen: Option<SocketAddr>,
    /// TLS for clients and peers ([`crate::tls`]); plaintext if `None`.
    pub tls: Option<TlsFiles>,
    /// Serve plaintext on an address other than loopback. Off: a node without TLS
    /// refuses to listen beyond this machine.
    pub allow_plaintext: bool,
    /// Connections, client calls in flight, and a call's longest time ([`crate::limits`]).
    pub limits: Limits,
    /// The leader embeds the texts written under a model index and the log carries their
    /// vectors, so replicas never run the model for them (docs/replication.md, "Embed
    /// once"). Off: every replica embeds every text it applies.
    pub embed_once: bool,
    /// What reads guarantee: linearizable (the default) or served from this replica's
    /// applied state, perhaps stale (docs/replication.md, "Serializable reads").
    pub read_consistency: ReadConsistency,
    /// The keys the key space is split at, ascending: group 1 serves the keys below the
    /// first, group 2 those from the first to the second, and so on, each a Raft group of
    /// its own on every node (empty: one group serves every key). Every node of a cluster
    /// is started with the same splits, and refuses splits its data was not made with.
    /// A client's request names its group (`shale-group`); clients route by key from the
    /// node's `ShardMap`.
    pub splits: Vec<Vec<u8>>,
}

impl ServerConfig {
    /// Node `node_id` listening on `listen`, its data in `data_dir`, with the default
    /// timings and no token.
    ///
    /// Timings: openraft 0.9 gives an `AppendEntries` one heartbeat interval to complete,
    /// so 100 ms leaves a 1 MiB append room to be written and synced on a busy follower.
    /// A follower refuses votes until `election_timeout_max` after the last heartbeat (its
    /// leader lease), so the first candidate after a leader dies usually loses and the
    /// next one wins: a new leader comes after about `max + (min + max) / 2`. 300 to 400 ms
    /// keeps that under a second (docs/replication.md, "Timings").
    pub fn new(node_id: NodeId, listen: SocketAddr, data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            node_id,
            listen,
            data_dir: data_dir.into(),
            token: None,
            read_only_token: None,
            peer_token: None,
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 300,
            election_timeout_max_ms: 400,
            snapshot_every_entries: 10_000,
            retention: Retention::default(),
            request_timeout_ms: 5_000,
            metrics_listen: None,
            tls: None,
            allow_plaintext: false,
            limits: Limits::default(),
            embed_once: true,
            read_consistency: ReadConsistency::Linearizable,
            splits: Vec::new(),
        }
    }

    /// Every problem with the configuration, at once.
    ///
    /// # Errors
    /// `Config` listing them.
    pub fn validate(&self) -> Result<()> {
        let mut problems = self.credential_problems();
        if self.heartbeat_interval_ms == 0 {
            problems.push("heartbeat_interval_ms must be positive".into());
        }
        if self.election_timeout_min_ms <= self.heartbeat_interval_ms {
            problems.push("election_timeout_min_ms must exceed heartbeat_interval_ms".into());
        }
        if self.election_timeout_max_ms <= self.election_timeout_min_ms {
            problems.push("election_timeout_max_ms must exceed election_timeout_min_ms".into());
        }
        if self.snapshot_every_entries == 0 {
            problems.push("snapshot_every_entries must be positive".into());
        }
        if self.request_timeout_ms == 0 {
            problems.push("request_timeout_ms must be positive".into());
        }
        problems.extend(self.limits.problems(self.request_timeout_ms));
        problems.extend(crate::group::split_problems(&self.splits));
        if self.tls.is_none() && !self.allow_plaintext && !self.listen.ip().is_loopback() {
            problems.push(format!(
                "{} is not a loopback address: give TLS files, or allow plaintext explicitly",
                self.listen
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Config(problems))
        }
    }

    /// What is wrong with the tokens ([`crate::access`]).
    fn credential_problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let tokens = [
            ("token", &self.token),
            ("read_only_token", &self.read_only_token),
            ("peer_token", &self.peer_token),
        ];
        for (name, token) in tokens {
            if let Some(t) = token {
                if t.is_empty() || !t.bytes().all(|b| b.is_ascii_graphic()) {
                    problems.push(format!(
                        "{name} must be non-empty printable ASCII without spaces"
                    ));
                }
            }
        }
        for (i, (a, ta)) in tokens.iter().enumerate() {
            for (b, tb) in tokens.iter().skip(i + 1) {
                if ta.is_some() && ta == tb {
                    problems.push(format!("{a} and {b} must differ"));
                }
            }
        }
        if self.read_only_token.is_some() && self.token.is_none() {
            problems.push(
                "read_only_token needs a read-write token too (without one, every client could write)"
                    .into(),
            );
        }
        let client_token = self.token.is_some() || self.read_only_token.is_some();
        match (&self.tls, &self.peer_token) {
            (Some(_), Some(_)) => problems.push(
                "peer_token is for clusters without TLS: with TLS, replicas present certificates"
                    .into(),
            ),
            (None, None) if client_token => problems.push(
                "without TLS, a client token needs a peer_token for the replicas' Raft RPCs".into(),
            ),
            _ => {}
        }
        problems
    }

    fn raft_config(&self) -> Result<Config> {
        Config {
            cluster_name: "shale".into(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every_entries),
            // The node's retention tasks purge the log (`crate::retention`).
            max_in_snapshot_log_to_keep: u64::MAX,
            ..Default::default()
        }
        .validate()
        .map_err(|e| Error::Config(vec![e.to_string()]))
    }
}

/// The node's log store in `cfg.data_dir`, claimed for this node.
fn open_log(cfg: &ServerConfig) -> Result<LogStore> {
    let log = LogStore::open(&cfg.data_dir.join("raft-log"), Options::default())?;
    log.claim(cfg.node_id)?;
    Ok(log)
}

/// The node `cfg` describes, its groups' Raft configured by `raft_config`, its log store
/// `log`, its peers reached through `network`; its state machines tell `seeded` of the
/// groups their splits seed.
fn node(
    cfg: &ServerConfig,
    raft_config: Arc<Config>,
    log: LogStore,
    network: NetworkFactory,
    seeded: tokio::sync::mpsc::UnboundedSender<crate::state_machine::Seeded>,
) -> Node {
    Node {
        id: cfg.node_id,
        data_dir: cfg.data_dir.clone(),
        raft_config,
        log,
        network,
        seeded,
    }
}

/// The node's listener and its address, and the metrics listener if `cfg` asks for one.
async fn bind(cfg: &ServerConfig) -> Result<(TcpListener, SocketAddr, Option<TcpListener>)> {
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| Error::Transport(format!("bind {}: {e}", cfg.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Transport(format!("local address: {e}")))?;
    let metrics = match cfg.metrics_listen {
        Some(at) => Some(
            TcpListener::bind(at)
                .await
                .map_err(|e| Error::Transport(format!("bind {at} (metrics): {e}")))?,
        ),
        None => None,
    };
    Ok((listener, addr, metrics))
}

/// How the node reaches its peers: with `token` or over `tls`, naming the cluster of
/// `node_log`, sending snapshots at the rate `cfg`'s limits allow.
fn peer_network(
    cfg: &ServerConfig,
    token: Option<Arc<str>>,
    tls: Option<&Tls>,
    node_log: &LogStore,
) -> NetworkFactory {
    NetworkFactory::new(token, tls.map(Tls::peer))
        .with_cluster(node_log.cluster_cell())
        .with_snapshot_rate(cfg.limits.snapshot_send_bytes_per_sec)
}

/// The Raft service for the peers, behind the replicas' credential.
fn raft_service(
    cfg: &ServerConfig,
    groups: Groups,
    peer_token: Option<Arc<str>>,
    tls: bool,
    shards: ShardSearch,
) -> InterceptedService<RaftServer<RaftService>, impl Interceptor + Clone> {
    InterceptedService::new(
        RaftServer::new(RaftService::new(
            groups,
            cfg.node_id,
            cfg.limits.max_snapshot_bytes,
            shards,
        ))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES),
        replica_check(peer_token, tls),
    )
}

/// The key-value service of the node's `groups`.
fn kv(cfg: &ServerConfig, groups: &Groups, peers: NetworkFactory) -> KvService {
    KvService::new(
        groups.clone(),
        cfg.node_id,
        Duration::from_millis(cfg.request_timeout_ms),
        cfg.embed_once,
        peers,
        cfg.read_consistency,
    )
}

/// The key-value service for clients, behind their tokens.
fn kv_service(
    cfg: &ServerConfig,
    kv: KvService,
) -> InterceptedService<KvServer<KvService>, impl Interceptor + Clone> {
    let check = client_check(ClientTokens {
        read_write: cfg.token.as_deref().map(Arc::from),
        read_only: cfg.read_only_token.as_deref().map(Arc::from),
    });
    InterceptedService::new(
        KvServer::new(kv)
            .max_decoding_message_size(MAX_REQUEST_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
        check,
    )
}

/// The gRPC transport: at most `limits.max_streams_per_connection` streams a connection,
/// over TLS when `tls` is given.
fn transport(limits: &Limits, tls: Option<&Tls>) -> Result<tonic::transport::Server> {
    let builder = tonic::transport::Server::builder()
        .max_concurrent_streams(limits.max_streams_per_connection);
    match tls {
        Some(tls) => builder
            .tls_config(tls.server())
            .map_err(|e| Error::Config(vec![format!("TLS: {e}")])),
        None => Ok(builder),
    }
}

/// Serve the metrics on `listener` until `stopped` resolves.
fn serve_metrics(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        if let Err(e) = crate::metrics::serve(listener, metrics, stopped).await {
            tracing::warn!("metrics listener: {e}");
        }
    })
}

/// A running node.
pub struct Server {
    node_id: NodeId,
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    /// Group 1's, which clients reach.
    raft: Raft,
    sm: StateMachineStore,
    log: LogStore,
    /// Every group of the node, group 1 among them.
    groups: Groups,
    metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    serving: Option<JoinHandle<std::result::Result<(), tonic::transport::Error>>>,
    /// The metrics listener and the health task: stopped with the node.
    helpers: Vec<JoinHandle<()>>,
    /// Each group's log retention task and the task that starts a split's children:
    /// aborted with the node.
    keepers: Vec<JoinHandle<()>>,
}

impl Server {
    /// Open the stores in `cfg.data_dir`, start Raft and serve on `cfg.listen`.
    ///
    /// # Errors
    /// `Config`, `Io`, `Engine`, `Transport` (the address cannot be bound), `Raft`.
    pub async fn start(cfg: ServerConfig) -> Result<Server> {
        cfg.validate()?;
        let raft_config = Arc::new(cfg.raft_config()?);
        let node_log = open_log(&cfg)?;
        let (listener, addr, metrics_listener) = bind(&cfg).await?;
        let tls = cfg.tls.as_ref().map(Tls::load).transpose()?;
        let peer_token: Option<Arc<str>> = cfg.peer_token.as_deref().map(Arc::from);
        let network = peer_network(&cfg, peer_token.clone(), tls.as_ref(), &node_log);
        let reachability = network.reachability();
        let refusals = Arc::new(Refusals::default());
        let peers = network.clone();
        let (seeded, seeds) = tokio::sync::mpsc::unbounded_channel();
        let node = node(&cfg, raft_config, node_log, network, seeded);
        let (groups, Group { raft, sm, log, .. }) = node.start_groups(&cfg.splits).await?;
        let metrics = Arc::new(Metrics::new(NodeCollector {
            groups: groups.clone(),
            reachability,
            refusals: Arc::clone(&refusals),
        }));
        let (health, health_svc) = tonic_health::server::health_reporter();
        let (mut helpers, keepers) = node.tend(&groups, health, seeds, cfg.retention);
        let kv = kv(&cfg, &groups, peers);
        let raft_svc = raft_service(
            &cfg,
            groups.clone(),
            peer_token,
            tls.is_some(),
            kv.shard_search(),
        );
        let kv_svc = kv_service(&cfg, kv);
        let (stop, stopped) = watch::channel(false);
        let stopped = move || {
            let mut stopped = stopped.clone();
            async move {
                // Stopped when told to, or when the sender is gone.
                let _ = stopped.wait_for(|&stop| stop).await;
            }
        };
        let mut metrics_addr = None;
        if let Some(listener) = metrics_listener {
            metrics_addr = Some(crate::metrics::local_addr(&listener)?);
            helpers.push(serve_metrics(listener, Arc::clone(&metrics), stopped()));
        }
        let incoming = Incoming::new(listener, &cfg.limits, Arc::clone(&refusals));
        let serving = tokio::spawn(
            transport(&cfg.limits, tls.as_ref())?
                .layer(RequestLayer(Arc::clone(&metrics)))
                .layer(CallLayer::new(&cfg.limits, refusals))
                .add_service(raft_svc)
                .add_service(kv_svc)
                .add_service(health_svc)
                .serve_with_incoming_shutdown(incoming, stopped()),
        );
        Ok(Server {
            node_id: cfg.node_id,
            addr,
            metrics_addr,
            raft,
            sm,
            log,
            groups,
            metrics,
            stop,
            serving: Some(serving),
            helpers,
            keepers,
        })
    }

    /// The address the node listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address metrics are served on, if [`ServerConfig::metrics_listen`] was set.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The node's metrics (what `GET /metrics` answers: [`Metrics::render`]).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The node's Raft, for membership changes and metrics.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Every group the node holds a replica of (tests and tools).
    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// The log store (tests and tools).
    pub fn log_store(&self) -> &LogStore {
        &self.log
    }

    /// The state machine (reads without the linearizability step: tests and tools only).
    pub fn state_machine(&self) -> &StateMachineStore {
        &self.sm
    }

    /// Wait until Raft stops on a fatal error (a storage error, a panic in its core) and
    /// say what it was. A node whose Raft stopped can serve nothing: its process should
    /// end with a failure status, so that a supervisor restarts it. Pending forever while
    /// Raft runs; resolves at once if it stopped already, or if it was shut down.
    pub async fn fatal(&self) -> String {
        let mut metrics = self.raft.metrics();
        loop {
            if let Err(e) = &metrics.borrow_and_update().running_state {
                return e.to_string();
            }
            if metrics.changed().await.is_err() {
                return "Raft stopped".to_string();
            }
        }
    }

    /// Make `members` (this node among them) the voters of a new cluster. Run on one node
    /// of a cluster that was never initialized.
    ///
    /// # Errors
    /// `Raft` if this node was initialized already or the members are wrong.
    pub async fn bootstrap(&self, members: BTreeMap<NodeId, String>) -> Result<()> {
        // The cluster's id, drawn once: a bootstrap retried after a crash keeps the first.
        let cluster = self.log.cluster_id().unwrap_or_else(new_cluster_id);
        self.log.join_cluster(cluster)?;
        let members: BTreeMap<NodeId, BasicNode> = members
            .into_iter()
            .map(|(id, addr)| (id, BasicNode::new(addr)))
            .collect();
        for id in self.groups.ids() {
            let Some(group) = self.groups.get(id) else {
                continue;
            };
            group
                .raft
                .initialize(members.clone())
                .await
                .map_err(|e| Error::Raft(format!("group {id}: {e}")))?;
        }
        Ok(())
    }

    /// True once this node holds a membership (bootstrapped, or joined).
    ///
    /// # Errors
    /// `Raft` if Raft stopped.
    pub async fn is_initialized(&self) -> Result<bool> {
        self.raft
            .is_initialized()
            .await
            .map_err(|e| Error::Raft(e.to_string()))
    }

    /// Stop Raft and the gRPC server and close the stores. Dropping a `Server` without
    /// this stops serving too, less tidily.
    ///
    /// # Errors
    /// `Raft`, `Transport`, `Engine` for whatever failed to stop cleanly.
    pub async fn shutdown(mut self) -> Result<()> {
        self.keepers.iter().for_each(JoinHandle::abort);
        let mut raft = Ok(());
        for id in self.groups.ids() {
            if let Some(group) = self.groups.get(id) {
                let stopped = group.raft.shutdown().await;
                if let (Ok(()), Err(e)) = (&raft, stopped) {
                    raft = Err(Error::Raft(format!("group {id}: {e}")));
                }
            }
        }
        self.stop.send_replace(true);
        if let Some(serving) = self.serving.take() {
            match serving.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(Error::Transport(e.to_string())),
                Err(e) => return Err(Error::Transport(format!("server task: {e}"))),
            }
        }
        for helper in std::mem::take(&mut self.helpers) {
            // The health task ends with Raft, the metrics listener with `stop`.
            let _ = helper.await;
        }
        raft?;
        let log = self.log.close();
        for id in self.groups.ids() {
            if let Some(group) = self.groups.get(id) {
                group.sm.close()?;
            }
        }
        log
    }
}

/// A new cluster's id: 128 bits from the standard library's randomly keyed hasher (keys
/// from the operating system's random source), with the time and the process id mixed in.
pub(crate) fn new_cluster_id() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let half = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u32(std::process::id());
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            h.write_u128(t.as_nanos());
        }
        h.finish()
    };
    (u128::from(half(1)) << 64) | u128::from(half(2))
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
        for helper in self.helpers.drain(..) {
            helper.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(edit: impl FnOnce(&mut ServerConfig)) -> Vec<String> {
        let listen = "127.0.0.1:0".parse().expect("address");
        let mut cfg = ServerConfig::new(1, listen, "/nonexistent");
        edit(&mut cfg);
        match cfg.validate() {
            Ok(()) => Vec::new(),
            Err(Error::Config(p)) => p,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn credentials_are_separate_and_complete() {
        let some = |s: &str| Some(s.to_string());
        assert!(problems(|_| {}).is_empty(), "no tokens: open on loopback");
        assert!(problems(|c| {
            c.token = some("rw");
            c.read_only_token = some("ro");
            c.peer_token = some("peer");
        })
        .is_empty());
        type Edit = fn(&mut ServerConfig);
        let cases: [(&str, Edit); 5] = [
            ("needs a peer_token", |c| c.token = Some("rw".into())),
            ("must differ", |c| {
                c.token = Some("same".into());
                c.peer_token = Some("same".into());
            }),
            ("needs a read-write token", |c| {
                c.read_only_token = Some("ro".into());
                c.peer_token = Some("peer".into());
            }),
            ("printable ASCII", |c| {
                c.token = Some("has space".into());
                c.peer_token = Some("peer".into());
            }),
            ("with TLS, replicas present certificates", |c| {
                c.peer_token = Some("peer".into());
                c.tls = Some(TlsFiles {
                    cert: "c".into(),
                    key: "k".into(),
                    ca: "a".into(),
                });
            }),
        ];
        for (want, edit) in cases {
            let got = problems(edit);
            assert!(got.iter().any(|p| p.contains(want)), "{want}: {got:?}");
        }
    }
}

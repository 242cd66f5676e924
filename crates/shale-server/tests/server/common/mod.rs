//! An in-process cluster for the tests: replicas on 127.0.0.1 with ephemeral ports, each
//! with its own data directory under one temporary directory. Every wait is bounded.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use shale_server::service::ReadConsistency;
use shale_server::tls::TlsFiles;
use shale_server::{GroupId, NodeId, Server, ServerConfig};
use tempfile::TempDir;

/// Timings for tests: short enough that an election takes well under a second.
#[derive(Clone, Debug)]
pub struct Timings {
    /// The read-write client token; the read-only one; the peer token (plaintext only).
    pub token: Option<String>,
    pub read_only_token: Option<String>,
    pub peer_token: Option<String>,
    /// TLS files (`ca.pem`, `node-<id>.pem`, `node-<id>.key`), if the cluster uses TLS.
    pub tls_dir: Option<PathBuf>,
    pub snapshot_every_entries: u64,
    pub log_entries_kept_after_snapshot: u64,
    pub limits: shale_server::limits::Limits,
    /// `ServerConfig::embed_once`.
    pub embed_once: bool,
    /// `ServerConfig::read_consistency`.
    pub read_consistency: ReadConsistency,
    /// `ServerConfig::splits`.
    pub splits: Vec<Vec<u8>>,
}

pub fn timings() -> Timings {
    Timings {
        token: None,
        read_only_token: None,
        peer_token: None,
        tls_dir: None,
        snapshot_every_entries: 10_000,
        log_entries_kept_after_snapshot: 1_000,
        limits: shale_server::limits::Limits::default(),
        embed_once: true,
        read_consistency: ReadConsistency::Linearizable,
        splits: Vec::new(),
    }
}

pub struct Cluster {
    pub dir: TempDir,
    pub timings: Timings,
    pub servers: BTreeMap<NodeId, Server>,
    pub addrs: BTreeMap<NodeId, SocketAddr>,
}

impl Cluster {
    pub fn config(&self, id: NodeId, listen: SocketAddr) -> ServerConfig {
        let mut cfg = ServerConfig::new(id, listen, self.data_dir(id));
        cfg.token = self.timings.token.clone();
        cfg.read_only_token = self.timings.read_only_token.clone();
        cfg.peer_token = self.timings.peer_token.clone();
        cfg.heartbeat_interval_ms = 50;
        cfg.election_timeout_min_ms = 300;
        cfg.election_timeout_max_ms = 600;
        cfg.snapshot_every_entries = self.timings.snapshot_every_entries;
        cfg.retention.after_snapshot_entries = self.timings.log_entries_kept_after_snapshot;
        cfg.request_timeout_ms = 3_000;
        cfg.limits = self.timings.limits;
        cfg.embed_once = self.timings.embed_once;
        cfg.read_consistency = self.timings.read_consistency;
        cfg.splits = self.timings.splits.clone();
        cfg.tls = self.timings.tls_dir.as_ref().map(|dir| TlsFiles {
            cert: dir.join(format!("node-{id}.pem")),
            key: dir.join(format!("node-{id}.key")),
            ca: dir.join("ca.pem"),
        });
        cfg
    }

    /// A plaintext Raft client to node `id`, for RPCs no replica would send.
    pub async fn raft_client(
        &self,
        id: NodeId,
    ) -> shale_server::pb::raft_client::RaftClient<tonic::transport::Channel> {
        let addr = self.addrs.get(&id).expect("a node of the cluster");
        shale_server::pb::raft_client::RaftClient::connect(format!("http://{addr}"))
            .await
            .expect("connect")
    }

    pub fn data_dir(&self, id: NodeId) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    /// `n` replicas, ids 1..=n, bootstrapped by node 1, with a leader elected.
    pub async fn start(n: u64, timings: Timings) -> Cluster {
        let mut cluster = Cluster {
            dir: tempfile::tempdir().expect("tempdir"),
            timings,
            servers: BTreeMap::new(),
            addrs: BTreeMap::new(),
        };
        for id in 1..=n {
            let any_port: SocketAddr = "127.0.0.1:0".parse().expect("address");
            let server = Server::start(cluster.config(id, any_port))
                .await
                .expect("start");
            cluster.addrs.insert(id, server.addr());
            cluster.servers.insert(id, server);
        }
        let members = cluster
            .addrs
            .iter()
            .map(|(id, a)| (*id, a.to_string()))
            .collect();
        cluster
            .server(1)
            .bootstrap(members)
            .await
            .expect("bootstrap");
        cluster.leader(Duration::from_secs(10)).await;
        cluster
    }

    pub fn server(&self, id: NodeId) -> &Server {
        self.servers.get(&id).expect("a running node")
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.addrs.values().map(ToString::to_string).collect()
    }

    /// The leader every running node agrees on, waited for at most `timeout`.
    pub async fn leader(&self, timeout: Duration) -> NodeId {
        let start = Instant::now();
        loop {
            let seen: Vec<Option<NodeId>> = self
                .servers
                .values()
                .map(|s| s.raft().metrics().borrow().current_leader)
                .collect();
            if let Some(Some(first)) = seen.first() {
                if self.servers.contains_key(first) && seen.iter().all(|l| l == &Some(*first)) {
                    return *first;
                }
            }
            assert!(
                start.elapsed() < timeout,
                "no agreed leader within {timeout:?}: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn applied_index(&self, id: NodeId) -> u64 {
        self.server(id)
            .raft()
            .metrics()
            .borrow()
            .last_applied
            .map_or(0, |l| l.index)
    }

    pub async fn wait_applied(&self, id: NodeId, index: u64, timeout: Duration) {
        self.server(id)
            .raft()
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "catch up")
            .await
            .expect("caught up in time");
    }

    /// Wait until every replica has applied the leader's last entry and its vector index
    /// `index` has indexed everything applied.
    pub async fn wait_indexed_everywhere(&self, index: &str) {
        let leader = self.leader(Duration::from_secs(10)).await;
        let applied = self.applied_index(leader);
        for id in self.addrs.keys() {
            self.wait_applied(*id, applied, Duration::from_secs(20))
                .await;
            let replicated = self.server(*id).state_machine().index(index);
            replicated
                .expect("the index")
                .vectors
                .wait_indexed()
                .expect("indexed");
        }
    }

    /// Start node `id` with an empty directory on `listen`, have `leader` add it as a
    /// learner (which returns once it has caught up) and then as a voter, and wait until
    /// it has applied what the leader had applied then. Returns its address.
    pub async fn add_node(&mut self, leader: NodeId, id: NodeId, listen: SocketAddr) -> SocketAddr {
        let addr = self.start_node(id, listen).await;
        let raft = self.server(leader).raft().clone();
        tokio::time::timeout(
            Duration::from_secs(20),
            raft.add_learner(id, openraft::BasicNode::new(addr.to_string()), true),
        )
        .await
        .expect("the learner catches up in time")
        .expect("add learner");
        let voters: std::collections::BTreeSet<NodeId> = self.servers.keys().copied().collect();
        tokio::time::timeout(
            Duration::from_secs(20),
            raft.change_membership(voters, false),
        )
        .await
        .expect("membership changes in time")
        .expect("change membership");
        let applied = self.applied_index(leader);
        self.wait_applied(id, applied, Duration::from_secs(10))
            .await;
        addr
    }

    /// Start node `id` with an empty directory on `listen`, a member of nothing yet;
    /// returns its address.
    pub async fn start_node(&mut self, id: NodeId, listen: SocketAddr) -> SocketAddr {
        let server = Server::start(self.config(id, listen))
            .await
            .expect("start the new node");
        let addr = server.addr();
        self.servers.insert(id, server);
        self.addrs.insert(id, addr);
        addr
    }

    /// Wait (at most 10 s) until node `id` has purged its log past `index`, behind a
    /// snapshot: a replica that starts empty can then only catch up by snapshot.
    pub async fn wait_purged(&self, id: NodeId, index: u64) {
        self.server(id)
            .raft()
            .wait(Some(Duration::from_secs(10)))
            .metrics(
                |m| m.purged.is_some_and(|p| p.index > index),
                "log purged behind a snapshot",
            )
            .await
            .expect("the node purges its log after a snapshot");
    }

    /// Stop a node as a crash would, as far as the others can tell.
    pub async fn stop(&mut self, id: NodeId) {
        let server = self.servers.remove(&id).expect("a running node");
        server.shutdown().await.expect("shutdown");
    }

    /// Start a stopped node again on its address and data.
    pub async fn restart(&mut self, id: NodeId) {
        let addr = *self.addrs.get(&id).expect("a known node");
        let server = Server::start(self.config(id, addr)).await.expect("restart");
        self.servers.insert(id, server);
    }

    pub async fn stop_all(mut self) {
        let ids: Vec<NodeId> = self.servers.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
    }
}

/// The key space split at `h` and `p`: groups 1, 2 and 3.
pub fn split_in_three() -> Timings {
    Timings {
        splits: vec![b"h".to_vec(), b"p".to_vec()],
        ..timings()
    }
}

/// The leader every running node agrees on for each group, waited for at most 10 s.
pub async fn group_leaders(cluster: &Cluster, groups: &[GroupId]) -> Vec<NodeId> {
    let start = Instant::now();
    loop {
        let seen: Vec<BTreeSet<Option<NodeId>>> = groups
            .iter()
            .map(|&g| {
                let leader_seen_by = |s: &Server| {
                    let group = s.groups().get(g).expect("every node holds every group");
                    let leader = group.raft.metrics().borrow().current_leader;
                    leader
                };
                cluster.servers.values().map(leader_seen_by).collect()
            })
            .collect();
        let agreed: Vec<NodeId> = seen
            .iter()
            .filter_map(|s| match s.iter().collect::<Vec<_>>()[..] {
                [Some(l)] if cluster.servers.contains_key(l) => Some(*l),
                _ => None,
            })
            .collect();
        if agreed.len() == groups.len() {
            return agreed;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no agreed leader for every group: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The status the node at `addr` gives `service` in its gRPC health service, if it answers.
pub async fn health(
    addr: SocketAddr,
    service: &str,
) -> Option<tonic_health::pb::health_check_response::ServingStatus> {
    use tonic_health::pb::health_client::HealthClient;
    use tonic_health::pb::HealthCheckRequest;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .ok()?
        .connect()
        .await
        .ok()?;
    let mut client = HealthClient::new(channel);
    let resp = client
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
        .ok()?;
    tonic_health::pb::health_check_response::ServingStatus::try_from(resp.into_inner().status).ok()
}

/// Keys and values.
pub type Pairs = BTreeMap<Vec<u8>, Vec<u8>>;

/// The user pairs group `group` holds on node `id`.
pub fn pairs(cluster: &Cluster, id: NodeId, group: GroupId) -> Pairs {
    let sm = cluster.server(id).groups().get(group).expect("group").sm;
    sm.db()
        .range(Vec::new()..vec![0xff])
        .expect("range")
        .map(|pair| pair.expect("pair"))
        .collect()
}

/// Node `id`'s applied index in group `group`.
pub fn applied(cluster: &Cluster, id: NodeId, group: GroupId) -> u64 {
    let group = cluster.server(id).groups().get(group).expect("group");
    let applied = group.raft.metrics().borrow().last_applied;
    applied.map_or(0, |l| l.index)
}

/// Four writers putting keys under each of `prefixes` in turn (`<prefix>/<writer>/<n>`)
/// until `stop`; the pairs each acknowledged.
pub fn writers(
    client: &std::sync::Arc<shale_client::Client>,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    prefixes: [&'static str; 2],
) -> Vec<tokio::task::JoinHandle<Pairs>> {
    (0..4)
        .map(|w| {
            let (client, stop) = (std::sync::Arc::clone(client), std::sync::Arc::clone(stop));
            tokio::spawn(async move {
                let mut acked = Pairs::new();
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let prefix = prefixes[(n % 2) as usize];
                    let key = format!("{prefix}/{w}/{n:05}").into_bytes();
                    let value = format!("v{n}").into_bytes();
                    if client.put(&key, &value).await.is_ok() {
                        acked.insert(key, value);
                    }
                    n += 1;
                }
                acked
            })
        })
        .collect()
}

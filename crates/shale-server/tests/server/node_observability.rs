//! A node seen from outside its process: its log, its gRPC health service and its metrics.
//!
//! Node 1 of a three-voter cluster starts alone: its log must say once that each peer is
//! not reachable yet, with no warning or error while they are missing (openraft logs each
//! failed RPC; `shale_server::logging` drops those lines), and its client service must be
//! `NOT_SERVING` (no quorum, no leader). Node 2 starts: a leader is elected, the service
//! turns `SERVING`, and `/metrics` shows the cluster as it is.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic_health::pb::health_check_response::ServingStatus;

use crate::common::health;

/// The binary under test.
const SERVER: &str = env!("CARGO_BIN_EXE_shale-server");

fn free_addr() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local address")
}

/// A server process, killed when dropped; its stderr goes to `log`.
struct Node {
    child: Child,
    log: PathBuf,
}

impl Node {
    fn start(dir: &Path, id: u64, addrs: &[SocketAddr; 3], extra: &[String]) -> Node {
        let log = dir.join(format!("node-{id}.log"));
        let file = std::fs::File::create(&log).expect("create the log file");
        let mut cmd = Command::new(SERVER);
        cmd.arg("--id")
            .arg(id.to_string())
            .arg("--listen")
            .arg(addrs[id as usize - 1].to_string())
            .arg("--data-dir")
            .arg(dir.join(format!("data-{id}")))
            .args(extra)
            .env_remove("SHALE_LOG")
            .stdout(Stdio::null())
            .stderr(file);
        for (peer, addr) in (1u64..).zip(addrs) {
            if peer != id {
                cmd.arg("--peer").arg(format!("{peer}={addr}"));
            }
        }
        Node {
            child: cmd.spawn().expect("start shale-server"),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).expect("read the log")
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Poll `f` every 50 ms until it is true or `limit` passes.
async fn eventually(limit: Duration, what: &str, mut f: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !f().await {
        assert!(start.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn get_metrics(addr: SocketAddr) -> String {
    let mut conn = TcpStream::connect(addr).expect("connect to the metrics port");
    conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: shale\r\nConnection: close\r\n\r\n")
        .expect("send the request");
    let mut resp = String::new();
    conn.read_to_string(&mut resp).expect("read the response");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    resp
}

/// The value of the series `name` (with its labels, as written), if present.
fn series(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_health_and_metrics_follow_the_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let addrs = [free_addr(), free_addr(), free_addr()];
    let metrics_addr = free_addr();
    let one = Node::start(
        dir.path(),
        1,
        &addrs,
        &[
            "--bootstrap".into(),
            "--metrics-listen".into(),
            metrics_addr.to_string(),
        ],
    );
    let limit = Duration::from_secs(20);
    eventually(
        limit,
        "node 1 says its peers are not reachable yet",
        async || {
            let log = one.log();
            log.contains("peer 2 not reachable yet") && log.contains("peer 3 not reachable yet")
        },
    )
    .await;
    assert_eq!(health(addrs[0], "").await, Some(ServingStatus::Serving));
    assert_eq!(
        health(addrs[0], shale_server::health::KV_SERVICE).await,
        Some(ServingStatus::NotServing),
        "one voter of three has no leader"
    );
    // Long enough for openraft to retry each peer many times (and log each failure).
    tokio::time::sleep(Duration::from_secs(2)).await;

    let two = Node::start(dir.path(), 2, &addrs, &[]);
    eventually(
        limit,
        "node 1 serves clients once a leader is elected",
        async || {
            health(addrs[0], shale_server::health::KV_SERVICE).await == Some(ServingStatus::Serving)
        },
    )
    .await;
    eventually(limit, "node 1 says peer 2 is reachable", async || {
        one.log().contains("peer 2 reachable")
    })
    .await;

    eventually(
        limit,
        "node 1 applies the new leader's first entry",
        async || {
            series(
                &get_metrics(metrics_addr),
                "shale_raft_applied_index{group=\"1\"}",
            )
            .is_some_and(|i| i >= 1.0)
        },
    )
    .await;
    let metrics = get_metrics(metrics_addr);
    assert!(
        metrics.contains("application/openmetrics-text"),
        "{metrics}"
    );
    assert!(
        series(&metrics, "shale_raft_term{group=\"1\"}").is_some_and(|t| t >= 1.0),
        "{metrics}"
    );
    assert_eq!(
        series(&metrics, "shale_raft_voters{group=\"1\"}"),
        Some(3.0),
        "{metrics}"
    );
    assert_eq!(
        series(&metrics, "shale_peer_reachable{peer=\"2\"}"),
        Some(1.0)
    );
    assert_eq!(
        series(&metrics, "shale_peer_reachable{peer=\"3\"}"),
        Some(0.0)
    );
    assert_eq!(
        series(&metrics, "shale_raft_running{group=\"1\"}"),
        Some(1.0)
    );
    let leader = series(&metrics, "shale_raft_leader{group=\"1\"}").expect("a leader series");
    assert!(leader == 1.0 || leader == 2.0, "{metrics}");
    let checks = "shale_grpc_requests_total{method=\"/grpc.health.v1.Health/Check\",code=\"OK\"}";
    assert!(
        series(&metrics, checks).is_some_and(|n| n >= 2.0),
        "{metrics}"
    );
    if leader == 2.0 {
        let appends =
            "shale_grpc_requests_total{method=\"/shale.v1.Raft/AppendEntries\",code=\"OK\"}";
        assert!(series(&metrics, appends).is_some(), "{metrics}");
    }
    assert!(
        metrics.contains("shale_grpc_request_duration_seconds_bucket{le="),
        "{metrics}"
    );
    assert!(
        series(&metrics, "shale_engine_writes_total{store=\"log\"}").is_some_and(|w| w >= 1.0),
        "the log store's writes: {metrics}"
    );
    assert!(
        metrics.contains("shale_engine_open_tables{store=\"state\"}"),
        "{metrics}"
    );

    drop(two);
    let log = one.log();
    assert!(
        !log.contains('\u{1b}'),
        "a log written to a file has no colour codes:\n{log}"
    );
    for level in [" WARN ", " ERROR "] {
        assert!(
            !log.contains(level),
            "no{level}line while peers start:\n{log}"
        );
    }
    for peer in [2, 3] {
        let said = log
            .matches(&format!("peer {peer} not reachable yet"))
            .count();
        assert_eq!(said, 1, "said once for peer {peer}:\n{log}");
    }
    assert!(log.contains("bootstrapped a new cluster"), "{log}");
    assert!(log.contains(" INFO "), "{log}");
    assert!(
        log.contains("this node is the leader") || log.contains("leader: node 2"),
        "{log}"
    );
}

//! The replicas of `shale-bench cluster`: `shale-server` child processes on 127.0.0.1,
//! started, killed and restarted from the run's one async task, and the client that
//! talks to them. A `Node` owns its process: dropping the handle without `stop_cluster`
//! leaves the process running.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_client::Client;

use super::args::ClusterArgs;

/// One replica: its Raft id, its address and, while it runs, its process.
pub struct Node {
    pub id: u64,
    pub addr: String,
    pub child: Option<Child>,
}

impl Node {
    /// A replica that is not started yet, on a free port of 127.0.0.1.
    pub fn on_free_port(id: u64) -> Result<Node, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        Ok(Node {
            id,
            addr: format!("127.0.0.1:{port}"),
            child: None,
        })
    }
}

/// How a replica starts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The first node of a new cluster (`--bootstrap`).
    Bootstrap,
    /// One of the first three, or one added later (id above 3) that joins group 1 at
    /// once (`--join`).
    Member,
    /// One added later that waits, a member of no group, to be added to one (a shard's
    /// replica moving to it).
    Spare,
}

/// Start the replica `nodes[i]` with every other node as its peer, as `how` says; its
/// output goes to `node-<id>.log` in the run's directory.
pub fn start(args: &ClusterArgs, nodes: &mut [Node], i: usize, how: Start) -> Result<(), String> {
    let peers: Vec<String> = nodes
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, n)| format!("{}={}", n.id, n.addr))
        .collect();
    let Some(node) = nodes.get_mut(i) else {
        return Ok(());
    };
    let mut cmd = Command::new(&args.server_bin);
    cmd.arg("--id")
        .arg(node.id.to_string())
        .arg("--listen")
        .arg(&node.addr)
        .arg("--data-dir")
        .arg(args.dir.join(format!("node-{}", node.id)));
    for p in peers {
        cmd.arg("--peer").arg(p);
    }
    settings(args, node.id, &mut cmd);
    match how {
        Start::Bootstrap => {
            cmd.arg("--bootstrap");
        }
        Start::Member if node.id > 3 => {
            cmd.arg("--join");
        }
        Start::Member | Start::Spare => {}
    }
    std::fs::create_dir_all(&args.dir).map_err(|e| format!("{}: {e}", args.dir.display()))?;
    let log_path = args.dir.join(format!("node-{}.log", node.id));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("{}: {e}", log_path.display()))?;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("{}: {e}", args.server_bin.display()))?;
    node.child = Some(child);
    Ok(())
}

/// The flags every replica gets from the command line: snapshots and their send rate,
/// threads, TLS, embedding, splits.
fn settings(args: &ClusterArgs, id: u64, cmd: &mut Command) {
    cmd.arg("--snapshot-every")
        .arg(args.snapshot_every.to_string());
    for split in &args.splits {
        cmd.arg("--split").arg(split);
    }
    if let Some(mib) = args.snapshot_send_mib_per_sec {
        cmd.arg("--snapshot-send-mib-per-sec").arg(mib.to_string());
    }
    if let Some(n) = args.server_worker_threads {
        cmd.arg("--worker-threads").arg(n.to_string());
    }
    if let Some(dir) = &args.tls_dir {
        cmd.arg("--tls-cert")
            .arg(dir.join(format!("node-{id}.pem")))
            .arg("--tls-key")
            .arg(dir.join(format!("node-{id}.key")))
            .arg("--tls-ca")
            .arg(dir.join("ca.pem"));
    }
    if args.embed_on_every_replica {
        cmd.arg("--embed-on-every-replica");
    }
}

/// Three replicas started, and a client (whose calls wait up to `deadline`) that has seen
/// a write acknowledged.
pub async fn start_cluster(
    args: &ClusterArgs,
    deadline: Duration,
) -> Result<(Vec<Node>, Arc<Client>), String> {
    let mut nodes = (1..=3u64)
        .map(Node::on_free_port)
        .collect::<Result<Vec<_>, _>>()?;
    for i in 0..3 {
        let how = if i == 0 {
            Start::Bootstrap
        } else {
            Start::Member
        };
        start(args, &mut nodes, i, how)?;
    }
    let endpoints: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();
    let mut client = Client::new(endpoints, None)
        .map_err(|e| e.to_string())?
        .with_deadline(deadline);
    if let Some(dir) = &args.tls_dir {
        let ca = dir.join("ca.pem");
        client = client.with_tls(std::fs::read(&ca).map_err(|e| format!("{}: {e}", ca.display()))?);
    }
    let client = Arc::new(client);
    if let Err(e) = client.put(b"warmup", b"1").await {
        stop_cluster(&mut nodes);
        return Err(format!("no leader: {e}"));
    }
    Ok((nodes, client))
}

/// Kill every replica that runs and wait for it to exit.
pub fn stop_cluster(nodes: &mut [Node]) {
    for n in nodes {
        if let Some(mut child) = n.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The position in `nodes` of the leader some node names, asking until one does (up to
/// 10 s): a replica that has just restarted may not know the leader yet.
pub async fn wait_for_leader(client: &Client, nodes: &[Node]) -> Option<usize> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for n in nodes {
            if let Ok(s) = client.status_of(&n.addr).await {
                if let Some(i) = s
                    .leader_id
                    .and_then(|l| nodes.iter().position(|n| n.id == l))
                {
                    return Some(i);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

//! The three `shale-server` processes of a run: how each is started (its flags, its
//! namespace with `--netns`), killed and signalled. No server outlives the [`Cluster`].

use std::fs::File;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::args::Args;
use crate::netns::ns_name;

/// One server: its id, its address, and its process while it runs.
pub(crate) struct Node {
    pub(crate) id: u64,
    pub(crate) addr: String,
    pub(crate) child: Option<Child>,
}

/// The run's servers, started with the run's flags.
pub(crate) struct Cluster {
    pub(crate) args: Args,
    pub(crate) nodes: Vec<Node>,
}

impl Cluster {
    /// Every node's address, for a client of the whole cluster.
    pub(crate) fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.addr.clone()).collect()
    }

    /// The Raft groups of the run: one per range of its splits.
    pub(crate) fn groups(&self) -> std::ops::RangeInclusive<u64> {
        1..=self.args.splits.len() as u64 + 1
    }

    fn peers_of(&self, id: u64) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.id != id)
            .map(|n| format!("{}={}", n.id, n.addr))
            .collect()
    }

    pub(crate) fn start(&mut self, index: usize, bootstrap: bool) -> std::io::Result<()> {
        let peers = self
            .nodes
            .get(index)
            .map(|n| self.peers_of(n.id))
            .unwrap_or_default();
        let Some(node) = self.nodes.get_mut(index) else {
            return Ok(());
        };
        let data = self.args.dir.join(format!("node-{}", node.id));
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.args.dir.join(format!("node-{}.log", node.id)))?;
        // `ip netns exec` execs the server in place: the child is the server itself.
        let mut cmd = if self.args.netns {
            let mut c = Command::new("ip");
            c.arg("netns")
                .arg("exec")
                .arg(ns_name(node.id))
                .arg(&self.args.server_bin);
            c
        } else {
            Command::new(&self.args.server_bin)
        };
        cmd.arg("--id")
            .arg(node.id.to_string())
            .arg("--listen")
            .arg(&node.addr)
            .arg("--data-dir")
            .arg(&data)
            // Snapshots often and a short log behind them, kept for a lagging member only
            // while it is within 10 entries: a node that was down or paused for a fault
            // round is caught up by a snapshot, which the run counts; one that lagged a
            // little, by the log the leader kept for it.
            .arg("--snapshot-every")
            .arg("100")
            .arg("--keep-log-entries")
            .arg("10")
            .arg("--keep-log-for-lagging-entries")
            .arg("10")
            .arg("--allow-plaintext");
        for split in &self.args.splits {
            cmd.arg("--split").arg(split);
        }
        cmd.args(&self.args.server_args);
        for p in peers {
            cmd.arg("--peer").arg(p);
        }
        if bootstrap {
            cmd.arg("--bootstrap");
        }
        node.child = Some(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()?,
        );
        Ok(())
    }

    pub(crate) fn kill(&mut self, index: usize) {
        if let Some(child) = self.nodes.get_mut(index).and_then(|n| n.child.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(n) = self.nodes.get_mut(index) {
            n.child = None;
        }
    }

    pub(crate) fn signal(&self, index: usize, sig: &str) {
        if let Some(child) = self.nodes.get(index).and_then(|n| n.child.as_ref()) {
            let _ = Command::new("kill")
                .arg(sig)
                .arg(child.id().to_string())
                .status();
        }
    }
}

/// No server outlives the run, whichever way it ends.
impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Start the three nodes, on free ports of this host or, with `--netns`, each in its
/// namespace.
pub(crate) fn start_cluster(args: &Args) -> Result<Cluster, String> {
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let addr = if args.netns {
            format!("10.77.0.{}:7000", 10 + id)
        } else {
            format!(
                "127.0.0.1:{}",
                free_port().map_err(|e| format!("free port: {e}"))?
            )
        };
        nodes.push(Node {
            id,
            addr,
            child: None,
        });
    }
    let mut cluster = Cluster {
        args: args.clone(),
        nodes,
    };
    // Node 1 bootstraps and stands for election at once, so it starts once the others
    // listen: with slow elections (the third control) a failed first one comes too late.
    for i in [1, 2, 0] {
        if i == 0 {
            (cluster.nodes[1..].iter()).try_for_each(|n| wait_listening(&n.addr))?;
        }
        cluster
            .start(i, i == 0)
            .map_err(|e| format!("start node {}: {e}", i + 1))?;
    }
    Ok(cluster)
}

/// Wait until `addr` accepts a TCP connection, for at most 10 s.
fn wait_listening(addr: &str) -> Result<(), String> {
    let target: std::net::SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let (start, limit) = (Instant::now(), Duration::from_secs(10));
    while std::net::TcpStream::connect_timeout(&target, Duration::from_millis(200)).is_err() {
        if start.elapsed() > limit {
            return Err(format!("{addr} did not listen within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

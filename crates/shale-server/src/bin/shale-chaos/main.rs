//! `shale-chaos`: three `shale-server` processes on 127.0.0.1, clients doing get, put,
//! delete, compare-and-set, batches and scans on a few keys (`workload.rs`) while the
//! leader is killed and restarted, a replica is removed from the cluster and added back,
//! nodes are paused and resumed and the whole cluster is killed and restarted; every call is
//! recorded with its start and end time, one JSON object a line, for the porcupine checker
//! in `chaos/` (run by `scripts/chaos.sh`).
//!
//! Reads go to a node picked at random (a follower redirects them), so servers started
//! with `--server-arg=--read-consistency=serializable`, which answer reads from their own
//! state without the read index, produce stale reads the checker must catch.
//!
//! After each fault heals, every node must name one leader, in one term, within
//! [`LEADER_BOUND`]: a cluster that never elects again fails the run (servers given
//! election timeouts longer than the bound must fail it; `scripts/chaos.sh` checks).
//!
//! After the run, once the three replicas report the same applied index, they are stopped
//! and each one's state machine is opened from its directory and hashed: the hashes and
//! applied indexes must agree.
//!
//! With `--netns` (root, ip(8); `netns.rs`) each server runs in a network namespace of its
//! own, joined to the others by a veth pair and a bridge (10.77.0.0/24) that the run
//! creates and removes, and the faults add partitions: a node's link is cut for 2 s, isolating it
//! (the leader half the time) from the other two and from the clients, or one direction
//! of it is (what the node sends, or what it receives).
//!
//! The servers snapshot every 100 entries and keep 10 behind, so a node that was down,
//! paused, cut off or removed is caught up by a snapshot; a run in which no replica
//! installed one fails, and so does a run in which no replica was removed and added back.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use shale_client::pb::MembershipResponse;
use shale_client::Client;
use shale_rng::XorShift64Star as Rng;

mod netns;
mod workload;
use netns::{host_link, ip, netns_down, netns_up, node_link, ns_name, one_way};
use workload::{client_loop, History};

#[derive(Parser, Debug, Clone)]
#[command(
    name = "shale-chaos",
    about = "Record a history of a Shale cluster under faults"
)]
struct Args {
    /// The shale-server binary to run.
    #[arg(long)]
    server_bin: PathBuf,
    /// Working directory: the nodes' data and logs (created; must be empty or absent).
    #[arg(long)]
    dir: PathBuf,
    /// Where to write the history (JSON lines).
    #[arg(long)]
    history: PathBuf,
    /// How long the clients run.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    #[arg(long, default_value_t = 8)]
    clients: u32,
    /// Keys k0, k1, ...: in pairs, each pair the keys of one batch or scan.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10))]
    keys: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Run each server in a network namespace of its own and add partitions to the faults
    /// (needs root and ip(8)).
    #[arg(long)]
    netns: bool,
    /// One more flag for every server, after the run's own (`--server-arg=--flag=value`);
    /// repeat for each. The negative controls of `scripts/chaos.sh` choose their wrong
    /// settings so.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    server_args: Vec<String>,
}

struct Node {
    id: u64,
    addr: String,
    child: Option<Child>,
}

struct Cluster {
    args: Args,
    nodes: Vec<Node>,
}

impl Cluster {
    fn peers_of(&self, id: u64) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.id != id)
            .map(|n| format!("{}={}", n.id, n.addr))
            .collect()
    }

    fn start(&mut self, index: usize, bootstrap: bool) -> std::io::Result<()> {
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
            // Snapshots often and a short log behind them: a node that was down or
            // paused for a fault round is caught up by a snapshot, which the run counts.
            .arg("--snapshot-every")
            .arg("100")
            .arg("--keep-log-entries")
            .arg("10")
            .arg("--allow-plaintext")
            .args(&self.args.server_args);
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

    fn kill(&mut self, index: usize) {
        if let Some(child) = self.nodes.get_mut(index).and_then(|n| n.child.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(n) = self.nodes.get_mut(index) {
            n.child = None;
        }
    }

    fn signal(&self, index: usize, sig: &str) {
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

/// How long after a fault heals the nodes may take to agree on a leader. An election takes
/// about 0.75 s with the default timings (docs/replication.md, "Timings"); a restarted
/// node also opens its stores first, and a whole-cluster restart opens all three at once.
const LEADER_BOUND: Duration = Duration::from_secs(10);

/// Wait until every running node names the same leader, one of them, in the same term;
/// how long that took.
async fn await_leader(cluster: &Cluster, bound: Duration) -> Result<Duration, String> {
    let probe = Client::new(cluster.nodes.iter().map(|n| n.addr.clone()).collect(), None)
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < bound {
        seen.clear();
        for node in cluster.nodes.iter().filter(|n| n.child.is_some()) {
            let s =
                tokio::time::timeout(Duration::from_millis(300), probe.status_of(&node.addr)).await;
            seen.push(match s {
                Ok(Ok(s)) => s.leader_id.map(|l| (l, s.term)),
                _ => None,
            });
        }
        let first = seen.first().copied().flatten();
        // The leader must be one of the nodes asked (a follower still names a killed one
        // until its election timeout), so it names itself.
        let running = |l: u64| cluster.nodes.iter().any(|n| n.id == l && n.child.is_some());
        if first.is_some_and(|(l, _)| running(l)) && seen.iter().all(|s| *s == first) {
            return Ok(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!(
        "no leader within {bound:?}: (leader, term) by running node {seen:?}"
    ))
}

async fn leader_index(cluster: &Cluster) -> Option<usize> {
    let probe = Client::new(cluster.nodes.iter().map(|n| n.addr.clone()).collect(), None).ok()?;
    for node in &cluster.nodes {
        if node.child.is_none() {
            continue;
        }
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(300), probe.status_of(&node.addr)).await
        {
            if let Some(leader) = s.leader_id {
                return cluster.nodes.iter().position(|n| n.id == leader);
            }
        }
    }
    None
}

/// The faults, taken in this order, round after round. A replica removed and re-added
/// comes second so that every run of more than a few seconds has one.
#[derive(Clone, Copy, Debug)]
enum Fault {
    KillLeader,
    Membership,
    Pause,
    Isolate,
    OneWay,
    RestartAll,
}

const FAULTS: [Fault; 6] = [
    Fault::KillLeader,
    Fault::Membership,
    Fault::Pause,
    Fault::Isolate,
    Fault::OneWay,
    Fault::RestartAll,
];

/// What the faults showed: how long each round's election took, and how many times a
/// replica was removed from the cluster and added back.
struct Rounds {
    elections: Vec<Duration>,
    membership_changes: u32,
}

/// Faults, in turn, until `end`: kill the leader and restart it; remove a replica from
/// the cluster and add it back; pause a node and resume it; with `--netns`, cut a node's
/// link, or one direction of it; kill the whole cluster and restart it. After each heals,
/// a leader within [`LEADER_BOUND`].
async fn faults(cluster: &mut Cluster, end: Instant, seed: u64) -> Result<Rounds, String> {
    let mut rng = Rng::new(seed | 1);
    let mut round = 0u32;
    let mut rounds = Rounds {
        elections: Vec::new(),
        membership_changes: 0,
    };
    let kinds: Vec<Fault> = FAULTS
        .into_iter()
        .filter(|f| cluster.args.netns || !matches!(f, Fault::Isolate | Fault::OneWay))
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    while Instant::now() + Duration::from_secs(4) < end {
        round += 1;
        let fault = kinds[(round as usize - 1) % kinds.len()];
        match fault {
            Fault::KillLeader => rounds
                .elections
                .push(kill_leader(cluster, round, &mut rng).await?),
            Fault::Membership => {
                remove_replica(cluster, round, &mut rng).await?;
                rounds.membership_changes += 1;
            }
            Fault::Pause => pause(cluster, round, &mut rng).await,
            Fault::Isolate => isolate(cluster, round, &mut rng).await?,
            Fault::OneWay => cut_one_way(cluster, round, &mut rng).await?,
            Fault::RestartAll => restart_all(cluster, round).await?,
        }
        let took = await_leader(cluster, LEADER_BOUND)
            .await
            .map_err(|e| format!("round {round}, after the faults healed: {e}"))?;
        eprintln!("shale-chaos: round {round}: one leader after {took:.1?}");
        rounds.elections.push(took);
        tokio::time::sleep(Duration::from_millis(1500).saturating_sub(took)).await;
    }
    Ok(rounds)
}

/// The node a fault hits: the leader half the time, another node otherwise.
async fn target(cluster: &Cluster, rng: &mut Rng) -> usize {
    match leader_index(cluster).await {
        Some(i) if rng.below(2) == 0 => i,
        _ => rng.below(3) as usize,
    }
}

fn restart_failed(e: std::io::Error) -> String {
    format!("restart: {e}")
}

/// Kill the leader, wait for the other two to elect one, and restart it; how long the
/// election took.
async fn kill_leader(cluster: &mut Cluster, round: u32, rng: &mut Rng) -> Result<Duration, String> {
    let i = match leader_index(cluster).await {
        Some(i) => i,
        None => rng.below(3) as usize,
    };
    eprintln!(
        "shale-chaos: round {round}: SIGKILL node {} and restart",
        i + 1
    );
    cluster.kill(i);
    // The two left must elect one of themselves (two voters can split their votes;
    // openraft 0.9 draws its election timeout once per process).
    let took = await_leader(cluster, LEADER_BOUND)
        .await
        .map_err(|e| format!("round {round}, with node {} down: {e}", i + 1))?;
    eprintln!("shale-chaos: round {round}: the other two elected a leader after {took:.1?}");
    tokio::time::sleep(Duration::from_millis(1000).saturating_sub(took)).await;
    cluster.start(i, false).map_err(restart_failed)?;
    Ok(took)
}

/// Remove a replica from the cluster and add it back.
async fn remove_replica(cluster: &Cluster, round: u32, rng: &mut Rng) -> Result<(), String> {
    let i = target(cluster, rng).await;
    let (id, addr) = cluster
        .nodes
        .get(i)
        .map(|n| (n.id, n.addr.clone()))
        .ok_or("no such node")?;
    let role = if leader_index(cluster).await == Some(i) {
        "the leader"
    } else {
        "a follower"
    };
    eprintln!("shale-chaos: round {round}: remove node {id} ({role}) from the cluster");
    remove_and_readd(cluster, id, &addr)
        .await
        .map_err(|e| format!("round {round}, node {id}: {e}"))?;
    eprintln!("shale-chaos: round {round}: node {id} is a voter again");
    Ok(())
}

/// Stop a node's process for 1.5 s and resume it.
async fn pause(cluster: &Cluster, round: u32, rng: &mut Rng) {
    let i = target(cluster, rng).await;
    eprintln!(
        "shale-chaos: round {round}: SIGSTOP node {} for 1.5 s",
        i + 1
    );
    cluster.signal(i, "-STOP");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.signal(i, "-CONT");
}

/// Take a node's link down for 2 s.
async fn isolate(cluster: &Cluster, round: u32, rng: &mut Rng) -> Result<(), String> {
    let i = target(cluster, rng).await;
    let id = cluster.nodes.get(i).map_or(1, |n| n.id);
    eprintln!("shale-chaos: round {round}: isolate node {id} for 2 s");
    let link = host_link(id);
    ip(&["link", "set", &link, "down"])?;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    ip(&["link", "set", &link, "up"])
}

/// Drop one direction of a node's link for 2 s: what it sends (its end of the veth pair)
/// or what it receives (the bridge's end).
async fn cut_one_way(cluster: &Cluster, round: u32, rng: &mut Rng) -> Result<(), String> {
    let i = target(cluster, rng).await;
    let id = cluster.nodes.get(i).map_or(1, |n| n.id);
    let (ns, dev, what) = if rng.below(2) == 0 {
        (Some(ns_name(id)), node_link(id), "sends")
    } else {
        (None, host_link(id), "receives")
    };
    eprintln!("shale-chaos: round {round}: drop what node {id} {what} for 2 s");
    one_way(ns.as_deref(), &dev, true)?;
    tokio::time::sleep(Duration::from_millis(2000)).await;
    one_way(ns.as_deref(), &dev, false)
}

/// Kill every node and restart them all.
async fn restart_all(cluster: &mut Cluster, round: u32) -> Result<(), String> {
    eprintln!("shale-chaos: round {round}: SIGKILL every node and restart");
    for i in 0..cluster.nodes.len() {
        cluster.kill(i);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..cluster.nodes.len() {
        cluster.start(i, false).map_err(restart_failed)?;
    }
    Ok(())
}

/// How long one membership change may take, retries included: each waits for a leader,
/// and adding the learner back waits until it has caught up (by a snapshot, usually).
const MEMBERSHIP_BOUND: Duration = Duration::from_secs(20);

/// One step of taking a replica out of the cluster and back in.
#[derive(Clone, Copy, Debug)]
enum Step {
    Remove,
    AddLearner,
    AddVoter,
}

/// Remove voter `id` (it keeps running, and the clients keep sending it requests), let
/// the other two take writes without it for 1.5 s, then add it back: first as a learner,
/// which catches up, then as a voter. Each step is retried until the membership it
/// returns shows it done; all three are idempotent (removing a removed voter, or adding
/// a learner or voter that already is one, changes nothing).
async fn remove_and_readd(cluster: &Cluster, id: u64, addr: &str) -> Result<(), String> {
    let admin = Client::new(cluster.nodes.iter().map(|n| n.addr.clone()).collect(), None)
        .map_err(|e| e.to_string())?
        .with_deadline(Duration::from_secs(5));
    let start = Instant::now();
    for step in [Step::Remove, Step::AddLearner, Step::AddVoter] {
        loop {
            let result = match step {
                Step::Remove => admin.remove_voters(&[id]).await,
                Step::AddLearner => admin.add_learner(id, addr).await,
                Step::AddVoter => admin.add_voters(&[id]).await,
            };
            let done = |m: &MembershipResponse| match step {
                Step::Remove => !m.voters.contains(&id) && !m.learners.contains(&id),
                Step::AddLearner => m.learners.contains(&id),
                Step::AddVoter => m.voters.contains(&id) && m.voters.len() == 3,
            };
            match result {
                Ok(m) if done(&m) => {
                    eprintln!(
                        "shale-chaos: {step:?} {id}: done, membership at index {}",
                        m.index
                    );
                    break;
                }
                Ok(m) => eprintln!("shale-chaos: {step:?} {id}: membership now {m:?}; again"),
                Err(e) => eprintln!("shale-chaos: {step:?} {id}: {e}; again"),
            }
            if start.elapsed() > MEMBERSHIP_BOUND {
                return Err(format!("{step:?}: not done within {MEMBERSHIP_BOUND:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if matches!(step, Step::Remove) {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
    }
    Ok(())
}

/// Wait until every replica reports the same applied index twice in a row.
async fn settle(cluster: &Cluster) -> Result<u64, String> {
    let probe = Client::new(cluster.nodes.iter().map(|n| n.addr.clone()).collect(), None)
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut previous = None;
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(30) {
        seen.clear();
        for node in &cluster.nodes {
            let s =
                tokio::time::timeout(Duration::from_millis(500), probe.status_of(&node.addr)).await;
            seen.push(match s {
                Ok(Ok(s)) => Some(s.applied_index),
                _ => None,
            });
        }
        let first = seen.first().copied().flatten();
        if first.is_some() && seen.iter().all(|s| *s == first) {
            if previous == first {
                return first.ok_or_else(|| "no applied index".to_string());
            }
            previous = first;
        } else {
            previous = None;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(format!(
        "the replicas did not settle on one applied index: {seen:?}"
    ))
}

/// Open each stopped replica's state machine and hash its user keys and values.
fn compare_replicas(cluster: &Cluster, applied: u64) -> Result<(), String> {
    let mut digests = Vec::new();
    let mut snapshot_installs = 0;
    for node in &cluster.nodes {
        let dir = cluster
            .args
            .dir
            .join(format!("node-{}", node.id))
            .join("state");
        let sm =
            shale_server::state_machine::StateMachineStore::open(&dir, shale::Options::default())
                .map_err(|e| format!("node {}: {e}", node.id))?;
        let db = sm.db();
        let mut crc = 0u32;
        let mut pairs = 0u64;
        let reserved = vec![shale_server::format::RESERVED_PREFIX];
        for pair in db.range(..reserved).map_err(|e| e.to_string())? {
            let (k, v) = pair.map_err(|e| e.to_string())?;
            let mut framed = Vec::with_capacity(k.len() + v.len() + 20);
            shale::inspect::codec::put_length_prefixed(&mut framed, &k);
            shale::inspect::codec::put_length_prefixed(&mut framed, &v);
            crc = shale::inspect::codec::crc32c_extend(crc, &framed);
            pairs += 1;
        }
        let index = sm.applied().0.map_or(0, |l| l.index);
        drop(db);
        sm.close().map_err(|e| e.to_string())?;
        // Each snapshot install makes a new state machine generation.
        let installs = std::fs::read_to_string(dir.join("SM_CURRENT"))
            .ok()
            .and_then(|g| g.trim().parse::<u64>().ok())
            .unwrap_or(0);
        eprintln!(
            "shale-chaos: node {}: applied index {index}, {pairs} pairs, crc32c {crc:08x}, \
             {installs} snapshot installs",
            node.id
        );
        digests.push((index, pairs, crc));
        snapshot_installs += installs;
    }
    if snapshot_installs == 0 {
        return Err("no replica installed a snapshot: the run never tested a catch-up".into());
    }
    let first = digests.first().copied();
    if digests.iter().any(|d| Some(*d) != first) || first.map(|d| d.0) != Some(applied) {
        return Err(format!(
            "the replicas differ at applied index {applied}: {digests:?} (index, pairs, crc32c)"
        ));
    }
    Ok(())
}

/// The run: start the cluster, run the clients while the faults hit it, then stop it and
/// check that the replicas agree.
async fn run(args: Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.dir).map_err(|e| format!("{}: {e}", args.dir.display()))?;
    if args.netns {
        netns_up()?;
    }
    let mut cluster = start_cluster(&args)?;
    let endpoints: Vec<String> = cluster.nodes.iter().map(|n| n.addr.clone()).collect();
    let history_file =
        File::create(&args.history).map_err(|e| format!("{}: {e}", args.history.display()))?;
    let history = Arc::new(History::new(history_file));
    // The cluster elects a leader before the clock starts.
    let warmup = Client::new(endpoints.clone(), None)
        .map_err(|e| e.to_string())?
        .with_deadline(Duration::from_secs(20));
    warmup
        .put(b"warmup", b"1")
        .await
        .map_err(|e| format!("no leader: {e}"))?;

    let end = Instant::now() + Duration::from_secs(args.seconds);
    let mut tasks = Vec::new();
    for id in 0..args.clients {
        tasks.push(tokio::spawn(client_loop(
            id,
            args.seed,
            args.keys,
            endpoints.clone(),
            Arc::clone(&history),
            end,
        )));
    }
    let rounds = faults(&mut cluster, end, args.seed).await;
    for t in tasks {
        let _ = t.await;
    }
    let rounds = rounds?;
    if rounds.membership_changes == 0 {
        return Err("no replica was removed and added back: the run was too short".into());
    }
    let applied = stop_cluster(&mut cluster).await?;
    compare_replicas(&cluster, applied)?;
    history.flush().map_err(|e| format!("history: {e}"))?;
    report(rounds, &args.history);
    Ok(())
}

/// Start the three nodes, on free ports of this host or, with `--netns`, each in its
/// namespace.
fn start_cluster(args: &Args) -> Result<Cluster, String> {
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

/// Resume every node, wait until the replicas settle on one applied index, and stop them;
/// that index.
async fn stop_cluster(cluster: &mut Cluster) -> Result<u64, String> {
    for i in 0..cluster.nodes.len() {
        cluster.signal(i, "-CONT");
    }
    let settled = settle(cluster).await;
    for i in 0..cluster.nodes.len() {
        cluster.signal(i, "-TERM");
    }
    for node in &mut cluster.nodes {
        if let Some(mut child) = node.child.take() {
            let _ = child.wait();
        }
    }
    settled
}

/// The run's summary: the fault rounds, their elections, the membership changes.
fn report(rounds: Rounds, history: &Path) {
    let Rounds {
        mut elections,
        membership_changes,
    } = rounds;
    elections.sort();
    let median = elections
        .get(elections.len() / 2)
        .copied()
        .unwrap_or_default();
    let max = elections.last().copied().unwrap_or_default();
    eprintln!(
        "shale-chaos: {} fault rounds, one leader after each within {max:.1?} (median {median:.1?}), \
         {membership_changes} replicas removed and added back, history in {}",
        elections.len(),
        history.display()
    );
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

fn main() -> ExitCode {
    let args = Args::parse();
    if !Path::new(&args.server_bin).exists() {
        eprintln!(
            "shale-chaos: no server binary at {}",
            args.server_bin.display()
        );
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shale-chaos: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let netns = args.netns;
    let result = runtime.block_on(run(args));
    if netns {
        netns_down();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale-chaos: {e}");
            ExitCode::FAILURE
        }
    }
}

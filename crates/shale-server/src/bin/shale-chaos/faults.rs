//! The faults a run inflicts, one per round in a fixed order, and what they showed: each
//! round's election and the replicas removed and added back.

use std::time::{Duration, Instant};

use shale_rng::XorShift64Star as Rng;

use crate::cluster::Cluster;
use crate::leader::{await_leader, leader_index, LEADER_BOUND};
use crate::membership::remove_and_readd;
use crate::netns::{host_link, ip, node_link, ns_name, one_way};

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
pub(crate) struct Rounds {
    pub(crate) elections: Vec<Duration>,
    pub(crate) membership_changes: u32,
}

/// Faults, in turn, until `end`: kill the leader and restart it; remove a replica from
/// the cluster and add it back; pause a node and resume it; with `--netns`, cut a node's
/// link, or one direction of it; kill the whole cluster and restart it. After each heals,
/// a leader within [`LEADER_BOUND`].
pub(crate) async fn faults(
    cluster: &mut Cluster,
    end: Instant,
    seed: u64,
) -> Result<Rounds, String> {
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

//! What the running nodes say of their leader: the wait, after a fault heals, until they
//! all name one, and which node leads now.

use std::time::{Duration, Instant};

use shale_client::Client;

use crate::cluster::Cluster;

/// How long after a fault heals the nodes may take to agree on a leader. An election takes
/// about 0.75 s with the default timings (docs/replication.md, "Timings"); a restarted
/// node also opens its stores first, and a whole-cluster restart opens all three at once.
pub(crate) const LEADER_BOUND: Duration = Duration::from_secs(10);

/// Wait until every running node names the same leader, one of them, in the same term;
/// how long that took.
pub(crate) async fn await_leader(cluster: &Cluster, bound: Duration) -> Result<Duration, String> {
    let probe = Client::new(cluster.endpoints(), None).map_err(|e| e.to_string())?;
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

pub(crate) async fn leader_index(cluster: &Cluster) -> Option<usize> {
    let probe = Client::new(cluster.endpoints(), None).ok()?;
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

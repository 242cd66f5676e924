//! The cluster's recovery figures for `shale-bench cluster`: the time from a leader's
//! SIGKILL to the next acknowledged write, and the time a new, empty replica takes to
//! catch up by snapshot. Each kills or starts replicas, from the run's one async task.

use std::time::{Duration, Instant};

use shale_client::Client;

use super::args::ClusterArgs;
use super::measure::percentile;
use super::replica::{start, wait_for_leader, Node, Start};

/// How long after a kill a write may take to be acknowledged before the kill counts as
/// one with no write.
const REELECTION_LIMIT: Duration = Duration::from_secs(30);

/// Re-election: SIGKILL the leader, time until a write is acknowledged; the table's row.
/// Every kill counts: a write that fails (ambiguous, as one sent to the dying leader is) is
/// sent again until one is acknowledged, and a kill with no write acknowledged within
/// `REELECTION_LIMIT`, or with no leader to kill, is reported beside the median.
pub async fn reelection(
    args: &ClusterArgs,
    nodes: &mut [Node],
    client: &Client,
) -> Result<String, String> {
    let mut times_ms = Vec::new();
    let (mut no_leader, mut no_write) = (0u32, 0u32);
    for k in 0..args.kills {
        let Some(i) = wait_for_leader(client, nodes).await else {
            no_leader += 1;
            continue;
        };
        if let Some(child) = nodes.get_mut(i).and_then(|n| n.child.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
        match next_acknowledged_write(client, &format!("after-kill-{k}")).await {
            Some(ms) => times_ms.push(ms),
            None => no_write += 1,
        }
        start(args, nodes, i, Start::Member)?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    times_ms.sort_unstable();
    Ok(format!(
        "| leader SIGKILL to the next acknowledged write ({} kills; {no_leader} found no leader, {no_write} no write in {} s) | median {} ms | max {} ms | |",
        times_ms.len(),
        REELECTION_LIMIT.as_secs(),
        percentile(&times_ms, 0.5),
        times_ms.last().copied().unwrap_or(0)
    ))
}

/// Milliseconds until a put of `key` is acknowledged, sending it again after each failure;
/// `None` if none is within `REELECTION_LIMIT`.
async fn next_acknowledged_write(client: &Client, key: &str) -> Option<u64> {
    let t = Instant::now();
    loop {
        if client.put(key.as_bytes(), b"1").await.is_ok() {
            return Some(u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX));
        }
        if t.elapsed() >= REELECTION_LIMIT {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A fourth replica joins (`--join`: a learner, then a voter) with an empty directory:
/// the time until it has applied what the leader had applied when it started, and the
/// size of the leader's snapshot it was sent.
pub async fn catch_up(
    args: &ClusterArgs,
    nodes: &mut Vec<Node>,
    client: &Client,
) -> Result<String, String> {
    let (leader, target) = leader_applied(nodes, client).await?;
    let snap = args
        .dir
        .join(format!("node-{leader}"))
        .join("state/snapshots/current.snap");
    let bytes = std::fs::metadata(&snap).map(|m| m.len()).unwrap_or(0);
    nodes.push(Node::on_free_port(4)?);
    let new = nodes.len() - 1;
    let t = Instant::now();
    start(args, nodes, new, Start::Member)?;
    let addr = nodes.get(new).map(|n| n.addr.clone()).unwrap_or_default();
    loop {
        if let Ok(s) = client.status_of(&addr).await {
            if s.applied_index >= target {
                break;
            }
        }
        if t.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "the new replica did not reach index {target} in 120 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    let mb = bytes as f64 / 1e6;
    Ok(format!(
        "| a new replica caught up by snapshot ({mb:.1} MB, index {target}) | {:.1} MB/s | {:.0} ms in all | |",
        mb / secs,
        secs * 1000.0
    ))
}

/// The leader's id, as the first node that answers names it, and the log index the leader
/// has applied.
async fn leader_applied(nodes: &[Node], client: &Client) -> Result<(u64, u64), String> {
    let mut leader = None;
    for n in nodes {
        if let Ok(s) = client.status_of(&n.addr).await {
            leader = s.leader_id;
            break;
        }
    }
    let leader = leader.ok_or("no leader before the catch-up")?;
    let leader_addr = nodes
        .iter()
        .find(|n| n.id == leader)
        .map(|n| n.addr.clone())
        .ok_or("the leader is not a known node")?;
    let target = client
        .status_of(&leader_addr)
        .await
        .map_err(|e| e.to_string())?
        .applied_index;
    Ok((leader, target))
}

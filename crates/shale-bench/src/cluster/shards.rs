//! The shards figure of `shale-bench cluster --shards 1,2,4`: for each number of shards, a
//! fresh three-replica cluster whose key space is split into that many ranges (each a Raft
//! group on every node), and 64 clients each writing synced puts to keys of its own for
//! the run's seconds. Client `c`'s keys start `s<c>` (two digits), so the splits at
//! `s16`, `s32` and `s48` give each of four shards 16 clients.
//!
//! Each figure is taken twice: with the leaders where the groups elected them (the node
//! that bootstrapped the cluster, as a rule), and with group `g`'s leadership handed to
//! node `(g - 1) % 3 + 1`, as a placement loop would spread it. Each row names where the
//! leaders were.

use std::sync::Arc;
use std::time::Duration;

use super::args::ClusterArgs;
use super::measure::{drive, row};
use super::replica::{start_cluster, stop_cluster, Node};
use shale_client::Client;

/// Clients writing at once in the figure.
const CLIENTS: usize = 64;

/// The keys a key space of client-numbered keys is split at to make `shards` ranges of
/// about as many clients each.
fn splits(shards: u32) -> Vec<String> {
    let per = CLIENTS / shards as usize;
    (1..shards as usize)
        .map(|i| format!("s{:02}", i * per))
        .collect()
}

/// A row for each number of shards `args.shards` names.
pub async fn rows(args: &ClusterArgs) -> Result<Vec<String>, String> {
    let mut out = vec![
        "| measurement | rate | p50 µs | p99 µs |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    for &shards in &args.shards {
        let mut run = args.clone();
        run.dir = args.dir.join(format!("shards-{shards}"));
        run.splits = splits(shards);
        let (mut nodes, client) = start_cluster(&run, Duration::from_secs(20)).await?;
        // A write to each shard first: every group has elected and the client has its map.
        for first in (0..CLIENTS).step_by(CLIENTS / shards as usize) {
            if let Err(e) = client
                .put(format!("s{first:02}-warmup").as_bytes(), b"1")
                .await
            {
                stop_cluster(&mut nodes);
                return Err(format!("{shards} shard(s): a first write: {e}"));
            }
        }
        out.push(measure(&client, &nodes, shards, args.seconds).await);
        if shards > 1 {
            if let Err(e) = spread_leaders(&client, shards).await {
                stop_cluster(&mut nodes);
                return Err(e);
            }
            out.push(measure(&client, &nodes, shards, args.seconds).await);
        }
        stop_cluster(&mut nodes);
    }
    Ok(out)
}

/// The row of 64 clients' synced puts for `seconds` over `shards` shards.
async fn measure(client: &Arc<Client>, nodes: &[Node], shards: u32, seconds: u64) -> String {
    let leaders = leaders(client, nodes, shards).await;
    let c = Arc::clone(client);
    let v = vec![b'v'; 100];
    let (rate, lat) = drive(CLIENTS, seconds, move |id, n| {
        let c = Arc::clone(&c);
        let v = v.clone();
        async move { c.put(format!("s{id:02}-{n}").as_bytes(), &v).await.is_ok() }
    })
    .await;
    let what = format!(
        "replicated puts, {CLIENTS} clients, {shards} shard(s), leaders on nodes {leaders}"
    );
    row(&what, rate, "writes/s", &lat)
}

/// Hand group `g`'s leadership to node `(g - 1) % 3 + 1`.
async fn spread_leaders(client: &Client, shards: u32) -> Result<(), String> {
    for group in 1..=u64::from(shards) {
        let to = (group - 1) % 3 + 1;
        client
            .transfer_leader_in(group, to)
            .await
            .map_err(|e| format!("group {group}'s leadership to node {to}: {e}"))?;
    }
    Ok(())
}

/// The node each group's leader is on, as the first node that names one says (`?` for
/// none named), comma-separated by group.
async fn leaders(client: &Client, nodes: &[Node], shards: u32) -> String {
    let mut named = Vec::new();
    for group in 1..=u64::from(shards) {
        let mut leader = None;
        for n in nodes {
            if let Ok(s) = client.status_in(&n.addr, group).await {
                leader = leader.or(s.leader_id);
            }
        }
        named.push(leader.map_or("?".to_string(), |l| l.to_string()));
    }
    named.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_give_each_shard_as_many_clients() {
        assert!(splits(1).is_empty());
        assert_eq!(splits(2), ["s32"]);
        assert_eq!(splits(4), ["s16", "s32", "s48"]);
    }
}

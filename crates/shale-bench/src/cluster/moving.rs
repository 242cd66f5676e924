//! The move figure of `shale-bench cluster --move-mib N`: a three-replica cluster whose
//! key space is split at `m`, group 2 (the keys from `m` on) loaded with N MiB of
//! incompressible values; then 16 clients' synced puts to group 2 for the run's seconds,
//! 30 at least (the steady state), and the same puts while group 2's replica on a follower
//! moves to a fourth node started with the same splits (learner caught up by snapshot,
//! then one joint membership change). Rows: the load's rate, the steady puts, the puts
//! during the move, and the move's time.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_client::Client;
use shale_rng::SplitMix64;

use super::args::ClusterArgs;
use super::measure::{drive, drive_until, row};
use super::replica::{start, start_cluster, stop_cluster, Node, Start};

/// Clients writing at once while the figure is taken.
pub(super) const CLIENTS: usize = 16;
/// The load's values: 48 of 16 KiB per batch, within a command's 1 MiB.
const VALUE_BYTES: usize = 16 << 10;
const PER_BATCH: usize = 48;
/// Batches of the load in flight at once.
const LOADERS: usize = 8;
/// The least time the steady state is measured for.
const STEADY_SECONDS: u64 = 30;

/// The figure's rows.
pub async fn rows(args: &ClusterArgs) -> Result<Vec<String>, String> {
    let mut run = args.clone();
    run.dir = args.dir.join("move");
    run.splits = vec!["m".to_string()];
    let (mut nodes, client) = start_cluster(&run, Duration::from_secs(120)).await?;
    let rows = figure(&run, &mut nodes, &client).await;
    stop_cluster(&mut nodes);
    rows
}

async fn figure(
    args: &ClusterArgs,
    nodes: &mut Vec<Node>,
    client: &Arc<Client>,
) -> Result<Vec<String>, String> {
    let mut out = vec![
        "| measurement | rate | p50 µs | p99 µs |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let started = Instant::now();
    load(client, args.move_mib).await?;
    let secs = started.elapsed().as_secs_f64();
    out.push(format!(
        "| load group 2 with {} MiB (batches of {PER_BATCH} × 16 KiB, {LOADERS} at once) | \
         {:.1} MiB/s | | |",
        args.move_mib,
        args.move_mib as f64 / secs
    ));
    // The steady state spans several snapshot builds (each writes the shard's whole
    // state), as the move does: a shorter window's p99 depends on whether one fell in it.
    let steady = args.seconds.max(STEADY_SECONDS);
    let (rate, lat) = drive(CLIENTS, steady, puts(client, "steady")).await;
    out.push(row(
        &format!("synced puts to group 2, {CLIENTS} clients, steady ({steady} s)"),
        rate,
        "writes/s",
        &lat,
    ));

    nodes.push(Node::on_free_port(4)?);
    start(args, nodes, 3, Start::Spare)?;
    let addr = nodes[3].addr.clone();
    let leader = client
        .status_in(&nodes[0].addr, 2)
        .await
        .map_err(|e| format!("group 2's status: {e}"))?
        .leader_id;
    let from = (1..=3).find(|&n| Some(n) != leader).unwrap_or(3);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = tokio::spawn(drive_until(
        CLIENTS,
        Arc::clone(&stop),
        puts(client, "moving"),
    ));
    let started = Instant::now();
    let moved = client.move_replica(2, from, 4, &addr).await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (rate, lat) = writers.await.map_err(|e| e.to_string())?;
    let moved = moved.map_err(|e| format!("the move: {e}"))?;
    out.push(row(
        &format!(
            "synced puts to group 2, {CLIENTS} clients, during the move ({:.1} s)",
            took.as_secs_f64()
        ),
        rate,
        "writes/s",
        &lat,
    ));
    out.push(format!(
        "| move group 2's replica ({} MiB) from node {from} to node 4; voters now {:?} | \
         {:.1} s | | |",
        args.move_mib,
        moved.voters,
        took.as_secs_f64()
    ));
    Ok(out)
}

/// One put in flight: whether it was acknowledged.
pub(super) type Put = Pin<Box<dyn Future<Output = bool> + Send>>;

/// The synced put of 100 bytes that client `id` makes `n`-th, to a key of group 2.
pub(super) fn puts(
    client: &Arc<Client>,
    phase: &'static str,
) -> impl Fn(usize, u64) -> Put + Send + Sync {
    let client = Arc::clone(client);
    move |id, n| {
        let client = Arc::clone(&client);
        Box::pin(async move {
            let key = format!("m/{phase}/{id:02}/{n:08}");
            client.put(key.as_bytes(), &[b'v'; 100]).await.is_ok()
        })
    }
}

/// Write `mib` MiB of random values to group 2 (keys `m/load/<batch:07>/<i:02>`),
/// [`LOADERS`] batches at a time; the batches written.
pub(super) async fn load(client: &Arc<Client>, mib: u64) -> Result<u64, String> {
    let batches = (mib << 20).div_ceil((VALUE_BYTES * PER_BATCH) as u64);
    let mut tasks = Vec::new();
    for loader in 0..LOADERS as u64 {
        let client = Arc::clone(client);
        tasks.push(tokio::spawn(async move {
            let mut rng = SplitMix64::new(loader + 1);
            for b in (loader..batches).step_by(LOADERS) {
                let pairs: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..PER_BATCH)
                    .map(|i| {
                        let key = format!("m/load/{b:07}/{i:02}").into_bytes();
                        let value: Vec<u8> = (0..VALUE_BYTES / 8)
                            .flat_map(|_| rng.next_u64().to_le_bytes())
                            .collect();
                        (key, Some(value))
                    })
                    .collect();
                client
                    .batch(&pairs)
                    .await
                    .map_err(|e| format!("load batch {b}: {e}"))?;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(batches)
}

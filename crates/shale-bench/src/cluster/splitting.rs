//! The split figure of `shale-bench cluster --split-mib N`: a three-replica cluster whose
//! key space is split at `m`, group 2 (the keys from `m` on) loaded with N MiB of
//! incompressible values as the move figure loads it; then 16 clients' synced puts to
//! group 2 for the run's seconds (the steady state), and the same puts while group 2
//! splits at the middle of the loaded keys into a new group 3, which takes the keys the
//! clients write. Rows: the load's rate, the steady puts, the puts from the split's start
//! until the child took its first write, the split's call, and the time until then.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_client::Client;

use super::args::ClusterArgs;
use super::measure::{drive, drive_until, row};
use super::moving::{load, puts, CLIENTS};
use super::replica::{start_cluster, stop_cluster};

/// The longest the child may take to take a write.
const CHILD_SERVES: Duration = Duration::from_secs(600);

/// The figure's rows.
pub async fn rows(args: &ClusterArgs) -> Result<Vec<String>, String> {
    let mut run = args.clone();
    run.dir = args.dir.join("split");
    run.splits = vec!["m".to_string()];
    let (mut nodes, client) = start_cluster(&run, Duration::from_secs(120)).await?;
    let rows = figure(&run, &client).await;
    stop_cluster(&mut nodes);
    rows
}

async fn figure(args: &ClusterArgs, client: &Arc<Client>) -> Result<Vec<String>, String> {
    let mut out = vec![
        "| measurement | rate | p50 µs | p99 µs |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let started = Instant::now();
    let batches = load(client, args.split_mib).await?;
    let secs = started.elapsed().as_secs_f64();
    out.push(format!(
        "| load group 2 with {} MiB | {:.1} MiB/s | | |",
        args.split_mib,
        args.split_mib as f64 / secs
    ));
    let (rate, lat) = drive(CLIENTS, args.seconds, puts(client, "steady")).await;
    out.push(row(
        &format!("synced puts to group 2, {CLIENTS} clients, steady"),
        rate,
        "writes/s",
        &lat,
    ));

    // The clients' keys (`m/splitting/...`) sort after every loaded key: the child's.
    let at = format!("m/load/{:07}", batches / 2);
    let stop = Arc::new(AtomicBool::new(false));
    let writers = tokio::spawn(drive_until(
        CLIENTS,
        Arc::clone(&stop),
        puts(client, "splitting"),
    ));
    let started = Instant::now();
    let split = client.split(2, at.as_bytes(), 3).await;
    let called = started.elapsed();
    let served = match &split {
        Ok(_) => first_child_write(client).await.map(|()| started.elapsed()),
        Err(e) => Err(format!("the split: {e}")),
    };
    stop.store(true, Ordering::Relaxed);
    let (rate, lat) = writers.await.map_err(|e| e.to_string())?;
    let served = served?;
    out.push(row(
        &format!(
            "synced puts, {CLIENTS} clients, from the split's start until the child took a \
             write ({:.1} s)",
            served.as_secs_f64()
        ),
        rate,
        "writes/s",
        &lat,
    ));
    out.push(format!(
        "| split group 2 ({} MiB) at {at}: the call returned | {:.2} s | | |",
        args.split_mib,
        called.as_secs_f64()
    ));
    out.push(format!(
        "| ... until group 3 took its first write | {:.2} s | | |",
        served.as_secs_f64()
    ));
    Ok(out)
}

/// Put a key of the child's until one is acknowledged.
async fn first_child_write(client: &Client) -> Result<(), String> {
    let started = Instant::now();
    loop {
        match client.put(b"m/splitting/probe", b"p").await {
            Ok(_) => return Ok(()),
            Err(e) if started.elapsed() > CHILD_SERVES => {
                return Err(format!("group 3 took no write in {CHILD_SERVES:?}: {e}"))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

//! Timing for `shale-bench cluster`: clients that repeat an operation for a fixed time,
//! and the Markdown row of their rate and latency percentiles. Used from the async
//! runtime's tasks; holds no state between measurements.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The value at percentile `p` (0 to 1) of `sorted_us`; 0 if it is empty.
pub fn percentile(sorted_us: &[u64], p: f64) -> u64 {
    if sorted_us.is_empty() {
        return 0;
    }
    let rank = ((sorted_us.len() - 1) as f64 * p).round() as usize;
    sorted_us.get(rank).copied().unwrap_or(0)
}

/// `clients` tasks each running `op(client, n)` until `seconds` pass: the rate of the
/// operations that succeeded (per second) and their latencies (µs), sorted.
pub async fn drive<F, Fut>(clients: usize, seconds: u64, op: F) -> (f64, Vec<u64>)
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let stop = Arc::new(AtomicBool::new(false));
    let timer = {
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
            stop.store(true, Ordering::Relaxed);
        })
    };
    let driven = drive_until(clients, stop, op).await;
    let _ = timer.await;
    driven
}

/// `clients` tasks each running `op(client, n)` until `stop` is set: the rate of the
/// operations that succeeded (per second) and their latencies (µs), sorted.
pub async fn drive_until<F, Fut>(clients: usize, stop: Arc<AtomicBool>, op: F) -> (f64, Vec<u64>)
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (op, stop) = (Arc::clone(&op), Arc::clone(&stop));
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                if op(c, n).await {
                    lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                }
                n += 1;
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        if let Ok(lat) = t.await {
            all.extend(lat);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    (all.len() as f64 / secs, all)
}

/// A row of the table: what was measured, its rate, p50 and p99 of `lat` (µs).
pub fn row(what: &str, rate: f64, unit: &str, lat: &[u64]) -> String {
    format!(
        "| {what} | {rate:.0} {unit} | {} | {} |",
        percentile(lat, 0.5),
        percentile(lat, 0.99)
    )
}

//! Measures the raw throughput of all-MiniLM-L6-v2: sentences per second for each batch size
//! and thread count, one forward pass per batch (`MiniLm::embed_batch`), plus the cost of
//! loading the model and of the sha256 check inside it; then the bulk path, `Embedder::embed`
//! over 256 texts.
//!
//! ```sh
//! scripts/fetch-model.sh
//! cargo run --release -p shale-embed --example embed_probe [-- --seconds 3 --batches 1,8,32 --threads 1,2]
//! CANDLE_NUM_THREADS=1 cargo run --release -p shale-embed --example embed_probe
//! ```
//!
//! The sentences are short English sentences of 8 to 20 words (10 to 25 tokens), the kind of
//! text a semantic index usually stores; longer texts cost more per sentence.

use std::time::{Duration, Instant};

use shale_embed::MiniLm;

const SENTENCES: &[&str] = &[
    "A man is eating food.",
    "A man is eating a piece of bread while sitting on a park bench.",
    "The girl is carrying a baby through the crowded market.",
    "A log-structured merge tree turns random writes into sequential ones.",
    "Compaction merges sorted runs so that reads touch fewer files.",
    "The cat sleeps on the warm windowsill all afternoon.",
    "Bloom filters let a lookup skip files that cannot hold the key.",
    "Two men are pushing a cart full of fresh vegetables down the street.",
    "The stock market fell sharply on Tuesday after the announcement.",
    "A woman is playing the violin in front of the old cathedral.",
    "Write-ahead logs make acknowledged writes survive a crash.",
    "Children are building a sandcastle near the edge of the sea.",
    "The recipe needs two eggs, a cup of flour and a pinch of salt.",
    "A monkey is playing drums on a stage under bright lights.",
    "Snapshots give a consistent view of the database at one point in time.",
    "The train to the airport leaves every twenty minutes from platform four.",
];

struct Args {
    seconds: f64,
    batches: Vec<usize>,
    threads: Vec<usize>,
}

fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    s.split(',')
        .map(|x| x.trim().parse().map_err(|e| format!("{x:?}: {e}")))
        .collect()
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        seconds: 3.0,
        batches: vec![1, 8, 32],
        threads: vec![1, 2],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seconds" => args.seconds = value.parse().map_err(|e| format!("{value}: {e}"))?,
            "--batches" => args.batches = parse_list(&value)?,
            "--threads" => args.threads = parse_list(&value)?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

/// Set in the child processes, one per thread count.
const CHILD_ENV: &str = "SHALE_EMBED_PROBE_CHILD";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let dir = shale_embed::model_dir_from_env()?;
    if std::env::var_os(CHILD_ENV).is_none() {
        println!("model: {}", dir.display());
        sha256_cost(&dir.join("model.safetensors"))?;
        return run_children(&args);
    }
    for &threads in &args.threads {
        let start = Instant::now();
        let model = MiniLm::load_with_threads(&dir, threads)?;
        let load = start.elapsed();
        println!(
            "threads {threads}: load {:.0} ms (read + sha256 + build)",
            ms(load)
        );
        for &batch_size in &args.batches {
            one_batch_size(&model, batch_size, args.seconds)?;
        }
        bulk(&model, args.seconds)?;
    }
    Ok(())
}

/// candle sizes two things once per process, from the environment: the thread count its
/// matrix multiplications split into (RAYON_NUM_THREADS) and a global pool for large
/// elementwise operations (CANDLE_NUM_THREADS). So each thread count runs in a process of
/// its own with RAYON_NUM_THREADS set to it, and CANDLE_NUM_THREADS too unless the caller
/// set it (CANDLE_NUM_THREADS=1 keeps that pool from spinning).
fn run_children(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let candle_threads = std::env::var("CANDLE_NUM_THREADS").ok();
    for &threads in &args.threads {
        let candle = candle_threads.clone().unwrap_or(threads.to_string());
        println!("-- RAYON_NUM_THREADS={threads} CANDLE_NUM_THREADS={candle}");
        let status = std::process::Command::new(std::env::current_exe()?)
            .args(std::env::args().skip(1))
            .args(["--threads", &threads.to_string()])
            .env(CHILD_ENV, "1")
            .env("RAYON_NUM_THREADS", threads.to_string())
            .env("CANDLE_NUM_THREADS", candle)
            .status()?;
        if !status.success() {
            return Err(format!("the run with {threads} threads failed: {status}").into());
        }
    }
    Ok(())
}

/// One forward pass per batch of `batch_size` sentences for `seconds` (at least three):
/// prints sentences/s, the median pass and how busy the cores were.
fn one_batch_size(
    model: &MiniLm,
    batch_size: usize,
    seconds: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let batch: Vec<&str> = SENTENCES.iter().cycle().take(batch_size).copied().collect();
    // Warm up: first passes allocate and fault in the weights.
    for _ in 0..2 {
        model.embed_batch(&batch)?;
    }
    let mut passes = 0u32;
    let mut latencies = Vec::new();
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds || passes < 3 {
        let t = Instant::now();
        model.embed_batch(&batch)?;
        latencies.push(t.elapsed());
        passes += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = process_cpu_seconds()
        .zip(cpu_start)
        .map(|(end, start)| end - start);
    latencies.sort();
    let p50 = latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or_default();
    let sentences = f64::from(passes) * batch_size as f64;
    // CPU seconds used per wall second: below `threads` when the pool idles or the
    // machine is busy with other work.
    let busy = cpu.map_or(String::new(), |c| {
        format!(", {:.2} cores busy", c / elapsed)
    });
    println!(
        "  batch {batch_size:>3}: {:>7.1} sentences/s  (p50 {:.1} ms per batch, {passes} batches{busy})",
        sentences / elapsed,
        ms(p50),
    );
    Ok(())
}

/// `Embedder::embed` over 256 texts: batches of `batch_size` run side by side on the pool.
fn bulk(model: &MiniLm, seconds: f64) -> Result<(), Box<dyn std::error::Error>> {
    use shale_search::semantic::Embedder;
    let texts: Vec<&str> = SENTENCES.iter().cycle().take(256).copied().collect();
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let mut calls = 0u32;
    while start.elapsed().as_secs_f64() < seconds || calls < 1 {
        model.embed(&texts)?;
        calls += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let busy = process_cpu_seconds()
        .zip(cpu_start)
        .map_or(String::new(), |(end, start)| {
            format!(", {:.2} cores busy", (end - start) / elapsed)
        });
    println!(
        "  embed(256 texts, batches of {}): {:>7.1} sentences/s  ({calls} calls{busy})",
        model.batch_size(),
        f64::from(calls) * texts.len() as f64 / elapsed,
    );
    Ok(())
}

/// User + system CPU time of this process (all threads), from /proc; `None` elsewhere.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    let rest = stat.rsplit_once(')')?.1;
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    // Linux reports these in clock ticks of USER_HZ, which is 100 on every Linux ABI.
    Some((utime + stime) / 100.0)
}

/// What the sha256 check inside `MiniLm::load` costs, apart from reading the file.
fn sha256_cost(weights: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    use sha2::{Digest, Sha256};
    let start = Instant::now();
    let bytes = std::fs::read(weights)?;
    let read = start.elapsed();
    // The fastest of three, to keep other work on the machine out of the figure.
    let mut hash = Duration::MAX;
    let mut digest = Sha256::digest(b"");
    let cpu_start = process_cpu_seconds();
    for _ in 0..3 {
        let start = Instant::now();
        digest = Sha256::digest(&bytes);
        hash = hash.min(start.elapsed());
    }
    let cpu_ms = process_cpu_seconds()
        .zip(cpu_start)
        .map_or(String::new(), |(end, start)| {
            format!(", {:.0} ms of CPU each", (end - start) / 3.0 * 1e3)
        });
    println!(
        "model.safetensors: read {:.0} ms, sha256 {:.0} ms (best of 3{cpu_ms}; {:.0} MB/s, {:02x}{:02x}..)",
        ms(read),
        ms(hash),
        bytes.len() as f64 / hash.as_secs_f64() / 1e6,
        digest[0],
        digest[1],
    );
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

//! A quick single-thread random-get probe (the full suite is `shale-bench`):
//! `cargo run --release -p shale --example readrandom -- DIR [N] [load]`.
//! With `load`, writes N random keys (16 B, 100 B values, as db_bench) into DIR, compacts,
//! and exits; without, opens DIR and times N random gets of existing keys, printing the
//! per-stage timings of the perf context. Environment: `COMPRESSION=none` (when loading),
//! `MMAP=0` (read with pread), `CACHE_MIB=N` (block cache size), `PERF=0` (no stage
//! timers), `MISSING=1` (keys never written), `THREADS=N` (readers, N gets in all).

use std::time::Instant;

use shale::{Db, Options, WriteOptions};

fn key(i: u64) -> String {
    format!(
        "{:016}",
        i.wrapping_mul(0x9e37_79b9_7f4a_7c15) % 10_000_000_000
    )
}

fn main() -> shale::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .cloned()
        .unwrap_or_else(|| "readrandom-db".into());
    let n: u64 = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3_000_000);
    let mut opts = Options::default();
    if std::env::var("COMPRESSION").is_ok_and(|c| c == "none") {
        opts.compression = shale::Compression::None;
    }
    if std::env::var("MMAP").is_ok_and(|c| c == "0") {
        opts.mmap_reads = false;
    }
    if let Some(mib) = std::env::var("CACHE_MIB")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
    {
        opts.cache_size = mib << 20;
    }
    let db = Db::open(&dir, opts)?;
    if args.get(3).is_some_and(|a| a == "load") {
        return load(&db, n);
    }
    read(&db, n)
}

/// Write `n` random keys (16 B, 100 B values, as db_bench), compact, wait until idle.
fn load(db: &Db, n: u64) -> shale::Result<()> {
    // Values as db_bench makes them: half random bytes, half a repeat (about 50%
    // compressible), different for every key.
    let mut value = [0u8; 100];
    // A random order of 0..n: a full-period LCG modulo the next power of two.
    let m = n.next_power_of_two();
    let mut x = 0u64;
    for _ in 0..m {
        x = (x.wrapping_mul(5).wrapping_add(1)) & (m - 1);
        if x < n {
            let mut h = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
            for b in value.iter_mut().take(50) {
                h ^= h >> 29;
                h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
                *b = b'a' + (h >> 59) as u8;
            }
            db.put(key(x), value)?;
        }
    }
    db.write(shale::WriteBatch::new(), WriteOptions::default())?;
    db.compact_range(None, None)?;
    db.wait_idle()?;
    println!(
        "loaded {n} keys; files per level {:?}",
        db.level_file_counts()
    );
    Ok(())
}

/// Time `n` random gets of existing (or, `MISSING=1`, never written) keys.
fn read(db: &Db, n: u64) -> shale::Result<()> {
    // PERF=0: no stage timers. MISSING=1: keys that were never written. THREADS=N readers.
    let perf = !std::env::var("PERF").is_ok_and(|c| c == "0");
    let missing = std::env::var("MISSING").is_ok_and(|c| c == "1");
    let threads: u64 = std::env::var("THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    let start = Instant::now();
    let found = std::thread::scope(|s| {
        let readers: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> shale::Result<u64> {
                    shale::perf::enable(perf);
                    let mut x = 0x2545_f491_4f6c_dd1d_u64 ^ t.wrapping_mul(0x9e37_79b9);
                    let mut found = 0u64;
                    for _ in 0..n / threads {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let i = x % n + if missing { n } else { 0 };
                        if db.get(key(i))?.is_some() {
                            found += 1;
                        }
                    }
                    if perf && t == 0 {
                        println!("{:?}", shale::perf::take());
                    }
                    Ok(found)
                })
            })
            .collect();
        readers
            .into_iter()
            .map(|r| r.join().unwrap_or(Ok(0)))
            .sum::<shale::Result<u64>>()
    })?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} random gets ({found} found) on {threads} threads in {secs:.2} s: {:.0} ops/s",
        n as f64 / secs
    );
    println!("files per level {:?}", db.level_file_counts());
    let stats = db.stats();
    println!(
        "block cache: {} hits, {} misses ({} turned away), {} of {} bytes used",
        stats.block_cache_hits,
        stats.block_cache_misses,
        stats.block_cache_rejections,
        stats.block_cache_usage_bytes,
        stats.block_cache_capacity_bytes
    );
    Ok(())
}

//! The workloads (db_bench and YCSB names) and the loop that measures them.
//!
//! A *group* of workloads runs in one process on one database: a workload that needs a
//! fresh database (the fills, `ycsb-load`, `lab`) opens a new one; the others run on what
//! the group holds, loading it first (unmeasured) if it does not hold what they need.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::{self, BenchResult, Durability, Engine, Parity};
use crate::gen::{fnv64, shuffled, KeyGen, Rng, ValueGen};
use crate::metrics::{self, Latencies};
use crate::record::Record;
use crate::ycsb::{ScrambledZipfian, SkewedLatest};

/// Every workload, in the default order.
pub const ALL: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readmissing",
    "multiget",
    "seekrandom",
    "readseq",
    "checkpoint",
    "readwhilewriting",
    "snapshotwhilewriting",
    "snapshotcreatewhilewriting",
    "deleterandom",
    "deleterange",
    "fillrandom-nowal",
    "fillbatch",
    "fillkeyspaces",
    "fillsync",
    "fillsync-threads-1",
    "fillsync-threads-2",
    "fillsync-threads-8",
    "fillsync-threads-32",
    "ycsb-load",
    "ycsb-a",
    "ycsb-b",
    "ycsb-c",
    "ycsb-f",
    "ycsb-d",
    "ycsb-e",
    "lab",
];

mod dbbench;
mod lab;
mod measure;
mod stages;
mod ycsb_runs;

/// Whether `name` starts from an empty database (and so starts a new group).
pub fn is_fresh(name: &str) -> bool {
    matches!(
        name,
        "fillseq"
            | "fillrandom"
            | "fillrandom-nowal"
            | "fillbatch"
            | "fillkeyspaces"
            | "fillsync"
            | "ycsb-load"
            | "lab"
    ) || name.starts_with("fillsync-threads-")
}

/// Whether `name` is a workload this binary knows.
pub fn is_known(name: &str) -> bool {
    ALL.contains(&name) || sync_threads(name).is_some()
}

fn sync_threads(name: &str) -> Option<usize> {
    name.strip_prefix("fillsync-threads-")?
        .parse()
        .ok()
        .filter(|&n| n > 0)
}

/// Sizes and counts of one run, resolved from the command line.
#[derive(Debug, Clone)]
pub struct Config {
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub threads: usize,
    /// Puts per second of readwhilewriting's writer; 0 for no limit.
    pub writer_rate: u64,
    pub sync_num: u64,
    pub ycsb_records: u64,
    pub ycsb_ops: u64,
    pub lab_sizes: Vec<u64>,
    pub seed: u64,
    pub parity: Parity,
    pub db_dir: PathBuf,
    pub run: u32,
    pub command: String,
    /// Gets of readrandom and readmissing, when not `num`.
    pub read_ops: Option<u64>,
    /// Time the stages of each get of readrandom and readmissing (Shale's perf context)
    /// and add them to the record's note.
    pub get_breakdown: bool,
    /// The memory cgroup limit the process runs under, if any (`cgroup.rs`).
    pub memory_limit_bytes: Option<u64>,
    /// The cgroup to join before the first workload that does not start a fresh database.
    pub cgroup: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loaded {
    Nothing,
    /// Keys `0..n`, each once, `value_size` values.
    Keys(u64),
    /// YCSB records `0..n`.
    Ycsb(u64),
}

/// What one measured workload did.
struct Outcome {
    ops: u64,
    seconds: f64,
    lat: Latencies,
    /// Key + value bytes moved (written or read), for MB/s.
    bytes: u64,
    /// Key + value bytes the user wrote (0 for read-only workloads).
    user_bytes_written: u64,
    /// Live user bytes afterwards, when known.
    live_bytes: Option<u64>,
    note: Option<String>,
}

impl Outcome {
    /// A load: `ops` entries of `bytes` in all, written and then live.
    fn load(ops: u64, seconds: f64, lat: Latencies, bytes: u64) -> Outcome {
        Outcome {
            ops,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: None,
        }
    }
}

/// Runs workloads for one engine; owns its database directory.
pub struct Runner {
    cfg: Config,
    engine_name: String,
    dir: PathBuf,
    engine: Option<Box<dyn Engine>>,
    loaded: Loaded,
    keys: KeyGen,
    machine: String,
    git_commit: String,
    date: String,
    /// Whether this process has joined `cfg.cgroup`.
    limited: bool,
}

impl Runner {
    pub fn new(cfg: Config, engine_name: &str) -> Runner {
        let dir = cfg
            .db_dir
            .join(format!("{engine_name}-{}", std::process::id()));
        let keys = KeyGen {
            key_size: cfg.key_size,
        };
        Runner {
            cfg,
            engine_name: engine_name.to_string(),
            dir,
            engine: None,
            loaded: Loaded::Nothing,
            keys,
            machine: crate::machine::describe(),
            git_commit: crate::machine::git_commit(),
            date: crate::machine::date(),
            limited: false,
        }
    }

    /// Before the first workload on a loaded database: let background work finish, write
    /// every dirty page back and drop the page cache (the load's pages must not serve the
    /// reads), then join the memory cgroup. The load itself runs unlimited: under a memory
    /// cgroup the dirty pages of a fast load outrun write-back and the kernel kills the
    /// engine (cgroup v1 throttles no writer).
    fn enter_memory_limit(&mut self) -> BenchResult<()> {
        let Some(path) = self.cfg.cgroup.clone() else {
            return Ok(());
        };
        if self.limited {
            return Ok(());
        }
        self.engine()?.wait_background()?;
        std::process::Command::new("sync").status()?;
        std::fs::write("/proc/sys/vm/drop_caches", "1")
            .map_err(|e| format!("cannot drop the page cache (needs root): {e}"))?;
        crate::cgroup::join(&path)?;
        self.limited = true;
        Ok(())
    }

    /// Run `workloads` in order; one record per measured workload (`lab` gives several).
    pub fn run_group(
        &mut self,
        workloads: &[String],
        emit: &mut dyn FnMut(&Record),
    ) -> BenchResult<()> {
        for w in workloads {
            self.run_one(w, emit)?;
        }
        self.close()?;
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }

    fn close(&mut self) -> BenchResult<()> {
        if let Some(e) = self.engine.take() {
            e.close()?;
        }
        Ok(())
    }

    fn fresh(&mut self) -> BenchResult<()> {
        self.close()?;
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir)?;
        self.engine = Some(engine::open(
            &self.engine_name,
            &self.dir,
            &self.cfg.parity,
        )?);
        self.loaded = Loaded::Nothing;
        Ok(())
    }

    fn engine(&self) -> BenchResult<&dyn Engine> {
        self.engine
            .as_deref()
            .ok_or_else(|| "no engine open".into())
    }

    fn entry_bytes(&self) -> u64 {
        (self.cfg.key_size + self.cfg.value_size) as u64
    }

    fn ensure_keys(&mut self) -> BenchResult<()> {
        if self.loaded != Loaded::Keys(self.cfg.num) {
            eprintln!(
                "[{}] loading {} keys (not measured)",
                self.engine_name, self.cfg.num
            );
            self.fresh()?;
            self.fill(true, Durability::Buffered, &ProgressBar::hidden())?;
            self.engine()?.wait_background()?;
        }
        Ok(())
    }

    fn ensure_ycsb(&mut self) -> BenchResult<u64> {
        if let Loaded::Ycsb(n) = self.loaded {
            return Ok(n);
        }
        eprintln!(
            "[{}] loading {} YCSB records (not measured)",
            self.engine_name, self.cfg.ycsb_records
        );
        self.fresh()?;
        self.ycsb_load(&ProgressBar::hidden())?;
        self.engine()?.wait_background()?;
        Ok(self.cfg.ycsb_records)
    }

    fn progress(&self, name: &str, len: u64) -> ProgressBar {
        let pb = ProgressBar::new(len);
        pb.set_style(
            ProgressStyle::with_template("{prefix:>22} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        pb.set_prefix(format!("{}/{name}", self.engine_name));
        pb
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call site that assembles a record"
    )]
    fn record(
        &self,
        name: &str,
        durability: Durability,
        threads: usize,
        out: &Outcome,
        wrote: bool,
        io_bytes: u64,
        disk: u64,
        cpu: f64,
    ) -> Record {
        let secs = out.seconds.max(1e-9);
        Record {
            engine: self.engine_name.clone(),
            workload: name.to_string(),
            run: self.cfg.run,
            ops: out.ops,
            seconds: out.seconds,
            ops_per_sec: out.ops as f64 / secs,
            mb_per_sec: out.bytes as f64 / secs / 1e6,
            mean_us: out.lat.mean_us(),
            p50_us: out.lat.quantile_us(0.5),
            p99_us: out.lat.quantile_us(0.99),
            p999_us: out.lat.quantile_us(0.999),
            max_us: out.lat.max_us(),
            write_amp: wrote.then(|| io_bytes as f64 / out.user_bytes_written.max(1) as f64),
            space_amp: out
                .live_bytes
                .filter(|&b| b > 0)
                .map(|b| disk as f64 / b as f64),
            settle_seconds: None,
            disk_read_bytes: None,
            memory_limit_bytes: None,
            disk_bytes: disk,
            user_bytes_written: out.user_bytes_written,
            peak_rss_bytes: metrics::peak_rss_bytes(),
            index_bytes: None,
            cpu_seconds: cpu,
            threads,
            key_size: self.cfg.key_size,
            value_size: self.cfg.value_size,
            durability: format!("{durability:?}"),
            parity: self.cfg.parity.clone(),
            caveats: self
                .engine
                .as_ref()
                .map(|e| e.caveats())
                .unwrap_or_default(),
            recall: None,
            note: out.note.clone(),
            git_commit: self.git_commit.clone(),
            date: self.date.clone(),
            machine: self.machine.clone(),
            command: self.cfg.command.clone(),
        }
    }
}

/// YCSB record `record`'s key: hashed, as YCSB's `insertorder=hashed`.
fn ycsb_key(keys: KeyGen, record: u64, out: &mut Vec<u8>) {
    keys.key(fnv64(record) % 10_000_000_000_000_000, out);
}

fn tick(pb: &ProgressBar, i: usize) {
    if i % 4096 == 4095 {
        pb.inc(4096);
    }
}

/// Run `f(engine, thread_index, latencies)` on `threads` threads (the calling thread if
/// one) and merge their latencies. Engines that cannot be shared only run with one.
fn parallel(
    engine: &dyn Engine,
    threads: usize,
    f: impl Fn(&dyn Engine, usize, &mut Latencies) -> BenchResult<()> + Sync,
) -> BenchResult<Latencies> {
    let mut all = Latencies::new();
    if threads <= 1 {
        f(engine, 0, &mut all)?;
        return Ok(all);
    }
    let shared = engine
        .shared()
        .ok_or("engine is not shareable between threads")?;
    let f = &f;
    let results: Vec<BenchResult<Latencies>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut lat = Latencies::new();
                    f(shared, t, &mut lat).map(|()| lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("benchmark thread panicked".into()))
            })
            .collect()
    });
    for r in results {
        all.merge(&r?);
    }
    Ok(all)
}

//! `shale-bench`: db_bench and YCSB style workloads against Shale and, behind cargo
//! features, RocksDB, fjall, LevelDB (rusty-leveldb) and redb.
//!
//! The parent process splits the workloads into groups (a group starts at each workload
//! that needs a fresh database) and runs every (engine, group) in a child process of this
//! same binary (`--internal-run`), so peak RSS, CPU time and /proc/self/io belong to one
//! engine. Children print one JSON line per result on stdout; the parent appends them to
//! the JSON-lines file and writes the markdown report and the chart.

mod blockfloor;
mod cgroup;
mod chart;
mod cluster;
mod engine;
mod gen;
mod machine;
mod metrics;
mod record;
mod report;
mod results;
mod summary;
mod text;
mod vector;
mod workload;
mod ycsb;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use clap::{Args, Parser, Subcommand};

use engine::{BenchResult, CompressionChoice, FileReads, Parity};
use record::Record;

#[derive(Parser, Debug)]
#[command(
    name = "shale-bench",
    version,
    about = "LSM key-value store benchmarks (db_bench / YCSB)"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Write the markdown report for a JSON-lines file to stdout (and a chart beside it).
    Report {
        /// JSON-lines file written by a run.
        #[arg(long)]
        input: PathBuf,
        /// Also draw the ops/s chart to this PNG and link it from the report.
        #[arg(long)]
        chart: Option<PathBuf>,
    },
    /// Vector search: HNSW against hnswlib and exact search, embedding throughput and
    /// semantic query latency (see crates/shale-bench/README.md).
    Vector(Box<vector::VectorArgs>),
    /// Keyword search: Shale's text index against tantivy over WordNet's glosses (see
    /// crates/shale-bench/README.md).
    Text(Box<text::TextArgs>),
    /// Rough figures of a 3-replica `shale-server` cluster: replicated write rates and
    /// latencies, re-election after a leader's SIGKILL, catch-up by snapshot (see
    /// crates/shale-bench/README.md).
    Cluster(Box<cluster::ClusterArgs>),
    /// The floor under a get: random data blocks of a database's tables checked and
    /// decompressed straight from the mapping, nothing else (see crates/shale-bench/README.md).
    Blockfloor(blockfloor::BlockFloorArgs),
    /// Internal: the process `shale-bench vector` kills to time an index's restart.
    #[command(hide = true)]
    IndexCrashChild(vector::restart::ChildArgs),
}

#[derive(Args, Debug, Clone)]
struct RunArgs {
    /// Engines, comma-separated: shale, rocksdb, fjall, leveldb, redb (peers need their feature).
    #[arg(long, default_value = "shale", value_delimiter = ',')]
    engines: Vec<String>,
    /// Workloads, comma-separated, in order (default: all). See `workload::ALL`.
    #[arg(long, value_delimiter = ',')]
    workloads: Vec<String>,
    /// Keys written by the fills; operations of the read workloads.
    #[arg(long)]
    num: Option<u64>,
    /// Gets of readrandom and readmissing (default: --num), for a large load read in part.
    #[arg(long)]
    read_ops: Option<u64>,
    /// Shale only: time the stages of every get of readrandom and readmissing (memtable,
    /// bloom filter, block read, decompression; the engine's perf context) and put the
    /// means per get in the record's note. The timers slow the gets down.
    #[arg(long)]
    get_breakdown: bool,
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Client threads of the read and YCSB workloads (readwhilewriting: readers).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Puts per second of the writer of readwhilewriting and its variants (like db_bench's
    /// --benchmark_write_rate_limit): every engine's reader then competes with the same
    /// background work. Default: 0, as fast as the engine takes them.
    #[arg(long, default_value_t = 0)]
    writer_rate: u64,
    /// Writes of fillsync and each fillsync-threads-N.
    #[arg(long)]
    sync_num: Option<u64>,
    #[arg(long)]
    ycsb_records: Option<u64>,
    /// Operations of each YCSB workload A..F.
    #[arg(long)]
    ycsb_ops: Option<u64>,
    /// Small counts: every workload for shale alone in well under two minutes.
    #[arg(long)]
    quick: bool,
    /// Repeat the whole run this many times (the report takes medians).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Run each engine's process in a memory cgroup of this many MiB that the benchmark
    /// creates and removes (its heap, mappings and page cache all count; needs root):
    /// with data larger than that, reads go to the disk. 0: no limit.
    #[arg(long, default_value_t = 0)]
    memory_limit_mib: u64,
    /// Internal: the cgroup the child process moves itself into.
    #[arg(long, hide = true)]
    cgroup: Option<PathBuf>,
    #[arg(long, value_enum, default_value_t = CompressionChoice::Lz4)]
    compression: CompressionChoice,
    /// Block cache budget for every engine, MiB.
    #[arg(long, default_value_t = 64)]
    cache_mib: usize,
    /// Write buffer (memtable) size for every engine, MiB.
    #[arg(long, default_value_t = 64)]
    write_buffer_mib: usize,
    /// Memtables every engine that has the setting may hold at once (Shale, RocksDB):
    /// 2 to 64, the range both take as given (RocksDB would raise a 1 to 2 silently).
    #[arg(long, default_value_t = 4, value_parser = write_buffers_in_range)]
    write_buffers: usize,
    /// Target SSTable size for every engine, KiB (small values make trees of many files).
    #[arg(long, default_value_t = 64 * 1024)]
    target_file_kib: u64,
    /// Data block size for every engine, bytes.
    #[arg(long, default_value_t = 4096)]
    block_bytes: usize,
    /// Bloom filter bits per key for every engine (0: no filter, Shale only).
    #[arg(long, default_value_t = 10)]
    filter_bits: u32,
    /// Keys between restart points in a data block (Shale only).
    #[arg(long, default_value_t = 16)]
    restart_interval: usize,
    /// How Shale and RocksDB read table files: each its own default (Shale maps them,
    /// RocksDB uses pread), or both the same way.
    #[arg(long, value_enum, default_value_t = FileReads::EngineDefault)]
    file_reads: FileReads,
    /// Open RocksDB with the settings its tuning guide gives for point lookups
    /// (HyperClockCache, a hash index in each data block) instead of its defaults.
    #[arg(long)]
    rocksdb_point_lookup: bool,
    /// Shale only: compress the tables compacted into the last level with this codec
    /// (`Options::bottommost_compression`), and with `--compression` above it.
    #[arg(long, value_enum)]
    bottommost_compression: Option<CompressionChoice>,
    /// Name the results by this label instead of the engine (one engine only): for
    /// sweeps of one engine's settings, reported side by side like engines.
    #[arg(long)]
    label: Option<String>,
    /// SSTables each engine keeps open at most (max_open_files; fjall: max_cached_files).
    #[arg(long, default_value_t = 1000)]
    max_open_files: usize,
    /// Smallest level target (RocksDB's max_bytes_for_level_base), MiB.
    #[arg(long, default_value_t = 256)]
    level_base_mib: u64,
    /// Where databases are created (fresh subdirectory per group); use a real disk.
    #[arg(long, default_value = "target/bench-db")]
    db_dir: PathBuf,
    /// Directory for results, report and chart.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// JSON-lines file to append results to (default: OUT/results.jsonl).
    #[arg(long)]
    json_lines: Option<PathBuf>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Internal: run one group of workloads for one engine in this process.
    #[arg(long, hide = true)]
    internal_run: bool,
    #[arg(long, hide = true, default_value_t = 0)]
    run_index: u32,
    #[arg(long, hide = true)]
    command_line: Option<String>,
}

fn write_buffers_in_range(arg: &str) -> Result<usize, String> {
    match arg.parse::<usize>() {
        Ok(n) if (2..=64).contains(&n) => Ok(n),
        _ => Err(format!("{arg} is not a count from 2 to 64")),
    }
}

impl RunArgs {
    fn config(&self, command: String) -> workload::Config {
        let q = self.quick;
        let num = self.num.unwrap_or(if q { 50_000 } else { 1_000_000 });
        workload::Config {
            num,
            key_size: self.key_size,
            value_size: self.value_size,
            threads: self.threads.max(1),
            writer_rate: self.writer_rate,
            sync_num: self.sync_num.unwrap_or(if q { 1_000 } else { 10_000 }),
            ycsb_records: self
                .ycsb_records
                .unwrap_or(if q { 50_000 } else { 1_000_000 }),
            ycsb_ops: self.ycsb_ops.unwrap_or(if q { 50_000 } else { 1_000_000 }),
            lab_sizes: if q {
                vec![2_000, 10_000, 20_000]
            } else {
                vec![20_000, 100_000, 200_000]
            },
            seed: self.seed,
            parity: Parity {
                block_cache_bytes: self.cache_mib << 20,
                write_buffer_bytes: self.write_buffer_mib << 20,
                write_buffers: self.write_buffers,
                target_file_bytes: self.target_file_kib << 10,
                level_base_bytes: self.level_base_mib << 20,
                max_open_files: self.max_open_files,
                compression: self.compression,
                block_bytes: self.block_bytes,
                filter_bits_per_key: self.filter_bits,
                restart_interval: self.restart_interval,
                file_reads: self.file_reads,
                rocksdb_point_lookup: self.rocksdb_point_lookup,
                bottommost_compression: self.bottommost_compression,
                ..Parity::default()
            },
            db_dir: self.db_dir.clone(),
            run: self.run_index,
            command,
            memory_limit_bytes: (self.memory_limit_mib > 0).then_some(self.memory_limit_mib << 20),
            read_ops: self.read_ops,
            get_breakdown: self.get_breakdown,
            cgroup: self.cgroup.clone(),
        }
    }
}

fn main() {
    #[cfg(feature = "semantic")]
    shale_embed::quiet_candle_threads();
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Sub::Report { input, chart }) => report_cmd(input, chart.as_deref()),
        Some(Sub::Vector(args)) => vector::run(args),
        Some(Sub::Text(args)) => text::run(args).map_err(Into::into),
        Some(Sub::Cluster(args)) => cluster::run(args),
        Some(Sub::Blockfloor(args)) => blockfloor::run(args),
        Some(Sub::IndexCrashChild(args)) => vector::restart::child(args),
        None if cli.run.internal_run => internal_run(&cli.run),
        None => run(&cli.run),
    };
    if let Err(e) = result {
        eprintln!("shale-bench: error: {e}");
        std::process::exit(1);
    }
}

fn report_cmd(input: &Path, chart_path: Option<&Path>) -> BenchResult<()> {
    let records = results::read_records(input)?;
    let mut link = None;
    let mut recall_link = None;
    if let Some(p) = chart_path {
        if chart::ops_chart(&summary::summarize(&records), p)? {
            link = Some(p.display().to_string());
        } else {
            eprintln!("no DejaVu Sans font found: chart not drawn");
        }
        let recall_path = p.with_file_name(chart::RECALL_CHART);
        if chart::recall_chart(&records, &recall_path)? {
            recall_link = Some(recall_path.display().to_string());
        }
    }
    print!(
        "{}",
        report::markdown_with(&records, link.as_deref(), recall_link.as_deref())
    );
    Ok(())
}

/// Child: one engine, one group of workloads; results as JSON lines on stdout.
fn internal_run(args: &RunArgs) -> BenchResult<()> {
    let engine = args
        .engines
        .first()
        .ok_or("--internal-run needs one engine")?;
    let command = args.command_line.clone().unwrap_or_default();
    let mut runner = workload::Runner::new(args.config(command), engine);
    let stdout = std::io::stdout();
    let mut failed = None;
    runner.run_group(&args.workloads, &mut |r| {
        let mut lock = stdout.lock();
        match serde_json::to_string(r) {
            Ok(line) => {
                let _ = writeln!(lock, "{line}");
                let _ = lock.flush();
            }
            Err(e) => failed = Some(e.to_string()),
        }
    })?;
    failed.map_or(Ok(()), |e| Err(e.into()))
}

/// Split `workloads` into groups that each start from a fresh database.
fn groups(workloads: &[String]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for w in workloads {
        match out.last_mut() {
            Some(g) if !workload::is_fresh(w) => g.push(w.clone()),
            _ => out.push(vec![w.clone()]),
        }
    }
    out
}

fn run(args: &RunArgs) -> BenchResult<()> {
    let workloads = checked_workloads(args)?;
    std::fs::create_dir_all(&args.out)?;
    std::fs::create_dir_all(&args.db_dir)?;
    let jsonl = args
        .json_lines
        .clone()
        .unwrap_or_else(|| args.out.join("results.jsonl"));
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let cfg = args.config(command.clone());
    let exe = std::env::current_exe()?;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&jsonl)?;
    let mut produced = 0usize;
    for run_index in 0..args.repeat {
        // Each round starts with the next engine: the one that runs first meets a machine
        // that has just been idle, and the others the write-back of the one before.
        let mut engines = args.engines.clone();
        if !engines.is_empty() {
            let shift = run_index as usize % engines.len();
            engines.rotate_left(shift);
        }
        for g in groups(&workloads) {
            for e in &engines {
                let child = ChildRun {
                    exe: &exe,
                    engine: e,
                    workloads: &g,
                    run_index,
                    command: &command,
                };
                produced += child.run(args, &cfg, &mut file)?;
            }
        }
    }
    file.flush()?;
    results::write_report(&args.out, &jsonl)?;
    eprintln!(
        "{produced} results appended to {}; report in {}",
        jsonl.display(),
        args.out.join("report.md").display()
    );
    Ok(())
}

/// The workloads to run (default: all), once they, the engines and `--label` are checked.
fn checked_workloads(args: &RunArgs) -> BenchResult<Vec<String>> {
    let workloads: Vec<String> = if args.workloads.is_empty() {
        workload::ALL.iter().map(|s| s.to_string()).collect()
    } else {
        args.workloads.clone()
    };
    if let Some(bad) = workloads.iter().find(|w| !workload::is_known(w)) {
        return Err(format!(
            "unknown workload {bad:?}; known: {}",
            workload::ALL.join(",")
        )
        .into());
    }
    let available = engine::available();
    if let Some(bad) = args
        .engines
        .iter()
        .find(|e| !available.contains(&e.as_str()))
    {
        return Err(format!(
            "engine {bad:?} is not compiled in (available: {}); rebuild with --features {bad}",
            available.join(",")
        )
        .into());
    }
    if args.label.is_some() && args.engines.len() != 1 {
        return Err("--label names the results of one engine; pass exactly one".into());
    }
    Ok(workloads)
}

/// One child process: one engine, one group of workloads, in one round.
struct ChildRun<'a> {
    exe: &'a Path,
    engine: &'a str,
    workloads: &'a [String],
    run_index: u32,
    command: &'a str,
}

impl ChildRun<'_> {
    /// Run the child (in a memory cgroup of its own if the run has a limit), append its
    /// records to `file` and echo them; how many.
    fn run(
        &self,
        args: &RunArgs,
        cfg: &workload::Config,
        file: &mut std::fs::File,
    ) -> BenchResult<usize> {
        let (e, g, run_index) = (self.engine, self.workloads, self.run_index);
        eprintln!("== run {run_index} engine {e}: {}", g.join(","));
        let limit = match args.memory_limit_mib {
            0 => None,
            mib => Some(cgroup::MemoryCgroup::create(
                &format!("shale-bench-{}-{run_index}-{e}", std::process::id()),
                mib << 20,
            )?),
        };
        let mut child = self
            .command(args, cfg, limit.as_ref())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("child has no stdout")?;
        let mut produced = 0;
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            let mut r: Record = serde_json::from_str(&line)
                .map_err(|e| format!("bad child output {line:?}: {e}"))?;
            let line = match &args.label {
                Some(label) => {
                    r.engine = label.clone();
                    serde_json::to_string(&r)?
                }
                None => line,
            };
            eprintln!(
                "   {:<8} {:<20} {:>12.0} ops/s  p99 {:>9.1} µs  wamp {}",
                r.engine,
                r.workload,
                r.ops_per_sec,
                r.p99_us,
                r.write_amp.map_or("-".into(), |w| format!("{w:.2}"))
            );
            writeln!(file, "{line}")?;
            produced += 1;
        }
        let status = child.wait()?;
        if let Some(peak) = limit.as_ref().and_then(cgroup::MemoryCgroup::peak_bytes) {
            eprintln!("   cgroup peak memory {} MiB", peak >> 20);
        }
        drop(limit);
        if !status.success() {
            return Err(format!(
                "engine {e}, workloads {}: child failed ({status})",
                g.join(",")
            )
            .into());
        }
        Ok(produced)
    }

    /// The child's command line: the parent's settings, resolved, for this engine and group.
    fn command(
        &self,
        args: &RunArgs,
        cfg: &workload::Config,
        limit: Option<&cgroup::MemoryCgroup>,
    ) -> Command {
        let mut child = Command::new(self.exe);
        child
            .arg("--internal-run")
            .args(["--engines", self.engine])
            .args(["--workloads", &self.workloads.join(",")])
            .args(size_args(cfg))
            .args(parity_args(args))
            .arg("--db-dir")
            .arg(&cfg.db_dir)
            .args(["--seed", &cfg.seed.to_string()])
            .args(["--memory-limit-mib", &args.memory_limit_mib.to_string()])
            .args(
                limit
                    .map(|g| ["--cgroup".into(), g.path().as_os_str().to_owned()])
                    .as_ref()
                    .map_or(&[][..], |a| &a[..]),
            )
            .args(["--run-index", &self.run_index.to_string()])
            .args(["--command-line", self.command])
            .args(if args.quick {
                &["--quick"][..]
            } else {
                &[][..]
            });
        child
    }
}

/// The child's sizes and counts, as `cfg` resolved them.
fn size_args(cfg: &workload::Config) -> Vec<String> {
    let mut out = vec!["--num".to_string(), cfg.num.to_string()];
    if let Some(n) = cfg.read_ops {
        out.extend(["--read-ops".to_string(), n.to_string()]);
    }
    if cfg.get_breakdown {
        out.push("--get-breakdown".to_string());
    }
    for (flag, value) in [
        ("--value-size", cfg.value_size.to_string()),
        ("--key-size", cfg.key_size.to_string()),
        ("--threads", cfg.threads.to_string()),
        ("--writer-rate", cfg.writer_rate.to_string()),
        ("--sync-num", cfg.sync_num.to_string()),
        ("--ycsb-records", cfg.ycsb_records.to_string()),
        ("--ycsb-ops", cfg.ycsb_ops.to_string()),
    ] {
        out.extend([flag.to_string(), value]);
    }
    out
}

/// The child's engine settings, as the command line gave them.
fn parity_args(args: &RunArgs) -> Vec<String> {
    let mut out = Vec::new();
    for (flag, value) in [
        ("--cache-mib", args.cache_mib.to_string()),
        ("--write-buffer-mib", args.write_buffer_mib.to_string()),
        ("--write-buffers", args.write_buffers.to_string()),
        ("--target-file-kib", args.target_file_kib.to_string()),
        ("--level-base-mib", args.level_base_mib.to_string()),
        ("--max-open-files", args.max_open_files.to_string()),
        ("--compression", args.compression.name().to_string()),
        ("--block-bytes", args.block_bytes.to_string()),
        ("--filter-bits", args.filter_bits.to_string()),
        ("--restart-interval", args.restart_interval.to_string()),
        ("--file-reads", args.file_reads.name().to_string()),
    ] {
        out.extend([flag.to_string(), value]);
    }
    if let Some(c) = args.bottommost_compression {
        out.extend(["--bottommost-compression".to_string(), c.name().to_string()]);
    }
    if args.rocksdb_point_lookup {
        out.push("--rocksdb-point-lookup".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_start_at_fresh_workloads() {
        let w: Vec<String> = [
            "fillrandom",
            "readrandom",
            "readseq",
            "fillsync",
            "ycsb-load",
            "ycsb-a",
            "lab",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let g = groups(&w);
        assert_eq!(g.len(), 4);
        assert_eq!(g[0], ["fillrandom", "readrandom", "readseq"]);
        assert_eq!(g[2], ["ycsb-load", "ycsb-a"]);
    }

    #[test]
    fn cli_parses() {
        Cli::try_parse_from([
            "shale-bench",
            "--engines",
            "shale,rocksdb",
            "--workloads",
            "fillrandom",
            "--quick",
        ])
        .unwrap();
    }

    #[test]
    fn write_buffers_outside_what_both_engines_take_are_refused() {
        let parse = |n: &str| Cli::try_parse_from(["shale-bench", "--write-buffers", n]);
        for ok in ["2", "4", "64"] {
            assert_eq!(parse(ok).unwrap().run.write_buffers.to_string(), ok);
        }
        for bad in ["0", "1", "65", "four"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}

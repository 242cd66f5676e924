//! The peer engines of the HNSW workloads, each run by `peer_driver.py` in a python child of
//! its own (so its peak RSS is its own) over the vectors Shale indexes:
//!
//! - `hnswlib`: Debian's python3-hnswlib, on `--python` (`/usr/bin/python3`);
//! - `faiss-flat`, `faiss-sq8`, `usearch-f32`, `usearch-i8`, `rabitq-hnsw`, `rabitq-qg`:
//!   pinned PyPI wheels in the venv `scripts/fetch-bench-data.sh --peers` makes, on
//!   `--peer-python`.
//!
//! The driver writes each query run's labels to an `.npy`; recall is scored here, against
//! the same exact ground truths as Shale's. A peer that cannot run (not installed, crashed)
//! fails alone: its error comes back to [`super::hnsw::run`], which runs the others.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use shale_search::vector::Neighbor;

use super::dataset::Dataset;
use super::filter::FilterCase;
use super::record::{short, Emit, VectorRecord};
use super::settings::{FilterSettings, HnswSettings};
use super::truth::recall;
use crate::engine::BenchResult;

/// Every peer engine, in the order they run.
pub const PEERS: [&str; 7] = [
    "hnswlib",
    "faiss-flat",
    "faiss-sq8",
    "usearch-f32",
    "usearch-i8",
    "rabitq-hnsw",
    "rabitq-qg",
];

/// What every peer of one data set shares.
pub struct PeerInputs<'a> {
    /// Holds the vectors' `.npy` files and the labels the drivers write.
    pub dir: PathBuf,
    pub truth: &'a [Vec<Neighbor>],
    pub filters: &'a [FilterCase],
    /// The timed insert window of the 1-thread build: (at, lo, hi).
    pub window: (usize, usize, usize),
    pub note_params: &'a str,
}

impl PeerInputs<'_> {
    fn base(&self) -> PathBuf {
        self.dir.join("base.npy")
    }

    fn queries(&self) -> PathBuf {
        self.dir.join("queries.npy")
    }

    /// Write the vectors of `ds` for the drivers.
    pub fn write(&self, ds: &Dataset) -> BenchResult<()> {
        std::fs::create_dir_all(&self.dir)?;
        for (path, rows, data) in [
            (self.base(), ds.len(), &ds.base),
            (self.queries(), ds.query_count(), &ds.queries),
        ] {
            shale_npy::write_f32_file(&path, rows, ds.dim, data)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// The interpreter that runs `engine`, and how to get one that has its library.
fn interpreter<'a>(engine: &str, s: &'a HnswSettings) -> (&'a Path, &'static str) {
    if engine == "hnswlib" {
        (
            &s.python,
            "is python3-hnswlib installed? (scripts/fetch-bench-data.sh)",
        )
    } else {
        (
            &s.peer_python,
            "is the peers venv installed? (scripts/fetch-bench-data.sh --peers)",
        )
    }
}

/// Run `engine`'s builds, queries and filtered queries on `ds`.
pub fn run(
    engine: &str,
    ds: &Dataset,
    s: &HnswSettings,
    f: &FilterSettings,
    inp: &PeerInputs<'_>,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let (python, hint) = interpreter(engine, s);
    if !python.exists() {
        return Err(format!("{} does not exist; {hint}", python.display()).into());
    }
    let args = driver_args(engine, s, f, inp);
    eprintln!(
        "== {}: {engine} ({}), builds on {:?} thread(s) and queries",
        ds.name,
        python.display(),
        s.threads
    );
    let mut child = Command::new(python)
        .arg("-")
        .arg(args.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    child
        .stdin
        .take()
        .ok_or("python has no stdin")?
        .write_all(include_str!("peer_driver.py").as_bytes())?;
    let stderr = child.stderr.take().ok_or("python has no stderr")?;
    let last_err = relay(stderr, engine.to_string());
    let stdout = child.stdout.take().ok_or("python has no stdout")?;
    let mut lines = Lines {
        engine,
        ds,
        k: s.k,
        inp,
        about: String::new(),
        at: inp.window.0,
    };
    let mut parsed = Ok(());
    for line in BufReader::new(stdout).lines() {
        parsed = line
            .map_err(Into::into)
            .and_then(|line| lines.handle(&line, emit));
        if parsed.is_err() {
            let _ = child.kill();
            break;
        }
    }
    let status = child.wait()?;
    let last = last_err.join().unwrap_or_default();
    parsed?;
    if !status.success() {
        let hint = if last.contains("ImportError") || last.contains("ModuleNotFoundError") {
            format!("; {hint}")
        } else {
            String::new()
        };
        return Err(format!("the {engine} driver failed ({status}): {last}{hint}").into());
    }
    Ok(())
}

/// What the driver is told: the engine, the files, the parameters and the filters.
fn driver_args(
    engine: &str,
    s: &HnswSettings,
    f: &FilterSettings,
    inp: &PeerInputs<'_>,
) -> serde_json::Value {
    let (_, lo, hi) = inp.window;
    let ranges: Vec<serde_json::Value> = inp
        .filters
        .iter()
        .map(|c| serde_json::json!([c.label, c.ids.start, c.ids.end]))
        .collect();
    serde_json::json!({
        "engine": engine, "base": inp.base(), "queries": inp.queries(), "out": inp.dir,
        "m": s.m, "ef_construction": s.ef_construction, "k": s.k, "seed": s.seed % 1_000_000,
        "threads": s.threads, "efs": s.efs, "window": [lo, hi],
        "filter": {"efs": f.efs, "queries": f.queries, "ranges": ranges},
    })
}

/// Pass the driver's stderr on as it comes, each line tagged; the thread returns the last
/// line that is not blank (it names a crash).
fn relay(stderr: std::process::ChildStderr, tag: String) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut last = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("   [{tag}] {line}");
            if !line.trim().is_empty() {
                last = line;
            }
        }
        last
    })
}

/// Turns the driver's lines into records.
struct Lines<'a> {
    engine: &'a str,
    ds: &'a Dataset,
    k: usize,
    inp: &'a PeerInputs<'a>,
    /// The driver's description of the engine and its parameters.
    about: String,
    at: usize,
}

impl Lines<'_> {
    fn handle(&mut self, line: &str, emit: &mut Emit<'_>) -> BenchResult<()> {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("{} driver said {line:?}: {e}", self.engine))?;
        let said = Said(&v);
        let (f, u, text) = (|k| said.f(k), |k| said.u(k), |k| said.text(k));
        let (engine, ds, at) = (self.engine, self.ds, self.at);
        let (_, lo, hi) = self.inp.window;
        let head = self.head();
        match text("what") {
            "engine" => {
                self.about = text("about").to_string();
                if engine == "hnswlib" {
                    if let Some(v) = debian_version("python3-hnswlib") {
                        self.about
                            .push_str(&format!(" (Debian python3-hnswlib {v})"));
                    }
                }
            }
            "build" => {
                let threads = u("threads") as usize;
                emit(
                    self.record(&said, format!("hnsw-build-{}-t{threads}", ds.name))
                        .threads(threads)
                        .index_bytes(u("index_bytes"))
                        .note(format!(
                            "{head}; built on {threads} thread(s); index {} bytes ({}); RSS grew {} bytes during this build; peak RSS is the python process's",
                            u("index_bytes"),
                            text("index_bytes_how"),
                            v.get("rss_delta_bytes").and_then(serde_json::Value::as_i64).unwrap_or(0)
                        )),
                );
            }
            "insert_window" => {
                let mean = f("seconds") * 1e6 / u("ops").max(1) as f64;
                emit(
                    self.record(&said, format!("hnsw-insert-{}-at{}", ds.name, short(at)))
                        .mean_only(mean)
                        .note(format!(
                            "{head}; inserts {lo}..{hi} as one add call of the 1-thread build: mean only, p50/p99 show the mean"
                        )),
                );
            }
            "query" => emit(self.query(&said)?),
            "filter" => emit(self.filter(&said)?),
            "filter_unsupported" => {
                eprintln!(
                    "   {engine}: no filtered search ({}): hnsw-filter-{}-* skipped",
                    text("why"),
                    ds.name
                );
            }
            _ => return Err(format!("{engine} driver said {line:?}").into()),
        }
        Ok(())
    }

    /// The start of every note: the data set's parameters and the driver's description.
    fn head(&self) -> String {
        format!("{}; {}", self.inp.note_params, self.about)
    }

    /// A record of `workload` with the counts, times and peak RSS the driver `said`.
    fn record(&self, said: &Said<'_>, workload: String) -> VectorRecord {
        VectorRecord::new(self.engine, &workload, said.u("ops"), said.f("seconds"))
            .cpu(said.f("cpu_seconds"))
            .rss(said.u("peak_rss_bytes"))
    }

    /// The record of one unfiltered query run, its recall scored here.
    fn query(&self, said: &Said<'_>) -> BenchResult<VectorRecord> {
        let (ops, seconds) = (said.u("ops"), said.f("seconds"));
        let ef = said.u("ef");
        let r = self.recall(said.text("labels"), self.inp.truth)?;
        self.print(&format!("ef {ef:>4}"), ops, seconds, r);
        Ok(self
            .record(said, format!("hnsw-query-{}-ef{ef}", self.ds.name))
            .mean_only(seconds * 1e6 / ops.max(1) as f64)
            .recall(r)
            .note(format!(
                "{}; ef {ef}; all queries in one call on one thread (mean only), index of the 1-thread build; recall scored by shale-bench against the same exact ground truth",
                self.head()
            )))
    }

    /// The record of one filtered query run, its recall scored here against its case.
    fn filter(&self, said: &Said<'_>) -> BenchResult<VectorRecord> {
        let (ops, seconds) = (said.u("ops"), said.f("seconds"));
        let label = said.text("sel");
        let case = self
            .inp
            .filters
            .iter()
            .find(|c| c.label == label)
            .ok_or_else(|| format!("{} driver: no selectivity {label:?}", self.engine))?;
        let ef = said.u("ef") as usize;
        let r = self.recall(said.text("labels"), &case.truth)?;
        self.print(&format!("sel {label:>5}% ef {ef:>4}"), ops, seconds, r);
        Ok(self
            .record(said, case.workload(&self.ds.name, ef))
            .mean_only(seconds * 1e6 / ops.max(1) as f64)
            .recall(r)
            .note(format!(
                "{}; {}; all queries in one call on one thread (mean only), index of the 1-thread build",
                self.head(),
                case.describe(self.ds.len(), ef)
            )))
    }

    /// Recall of the labels the driver saved at `path`.
    fn recall(&self, path: &str, truth: &[Vec<Neighbor>]) -> BenchResult<f64> {
        let labels = shale_npy::read::<u32>(Path::new(path)).map_err(|e| format!("{path}: {e}"))?;
        let got: Vec<Vec<u32>> = (0..labels.rows).map(|i| labels.row(i).to_vec()).collect();
        if got.len() != truth.len() {
            return Err(format!(
                "{}: {} rows of labels for {} queries",
                path,
                got.len(),
                truth.len()
            )
            .into());
        }
        Ok(recall(&got, truth))
    }

    fn print(&self, what: &str, ops: u64, secs: f64, recall: f64) {
        eprintln!(
            "   {:<11} {what}: {:>8.0} QPS  recall@{} {recall:.4}",
            self.engine,
            ops as f64 / secs.max(1e-9),
            self.k
        );
    }
}

/// One line of the driver's: its fields, absent ones read as zero or empty.
struct Said<'a>(&'a serde_json::Value);

impl Said<'_> {
    fn f(&self, k: &str) -> f64 {
        self.0
            .get(k)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0)
    }

    fn u(&self, k: &str) -> u64 {
        self.0
            .get(k)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    }

    fn text(&self, k: &str) -> &str {
        self.0
            .get(k)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    }
}

/// The version of Debian package `package`, if installed.
fn debian_version(package: &str) -> Option<String> {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", package])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

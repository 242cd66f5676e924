//! The workloads that run the MiniLM model (feature `semantic`): embedding throughput of the
//! engine's bulk path against the bare model, semantic query latency end to end, and the
//! MiniLM vectors of WordNet glosses for the HNSW suite. Each runs with the runtime asked
//! for: ONNX Runtime (the default embedder) or candle (the reference).
//!
//! Needs the model (scripts/fetch-model.sh) and WordNet (scripts/fetch-wordnet.sh) in the
//! cache directory.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use shale::{Db, Options};
use shale_embed::Runtime;
use shale_search::semantic::{Embedder, SearchOptions, VectorIndex, VectorIndexOptions};
use shale_testkit::wordnet::{self, Gloss};

use super::dataset::Dataset;
use super::record::{short, Emit, VectorRecord};
use crate::engine::BenchResult;
use crate::metrics::{self, Latencies};

fn glosses(cache: &Path) -> BenchResult<Vec<Gloss>> {
    let dir = cache.join("wordnet");
    wordnet::load(&dir).map_err(|e| {
        format!(
            "{e}: run scripts/fetch-wordnet.sh (WordNet into {})",
            dir.display()
        )
        .into()
    })
}

/// `count` glosses chosen by `seed` (a partial Fisher-Yates shuffle), in the chosen order.
fn sample(mut all: Vec<Gloss>, count: usize, seed: u64) -> BenchResult<Vec<Gloss>> {
    if all.len() < count {
        return Err(format!("WordNet has {} glosses, {count} wanted", all.len()).into());
    }
    let mut rng = crate::gen::Rng::new(seed);
    for i in 0..count {
        let j = i + rng.below((all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    Ok(all)
}

/// `onnx` or `candle`.
pub fn runtime(name: &str) -> BenchResult<Runtime> {
    name.parse().map_err(|e| format!("--embedder: {e}").into())
}

fn model(runtime: Runtime) -> BenchResult<Arc<dyn Embedder>> {
    shale_embed::load(runtime).map_err(|e| format!("{e}").into())
}

/// The engine names of one runtime's records: (model alone, through the engine, exact
/// search). candle's are the names every result had before ONNX Runtime came.
fn engine_names(runtime: Runtime) -> (&'static str, &'static str, &'static str) {
    match runtime {
        Runtime::Onnx => ("onnx-raw", "shale-onnx", "exact-onnx"),
        Runtime::Candle => ("minilm-raw", "shale", "exact"),
    }
}

/// Texts per forward pass of `Embedder::embed`.
fn model_batch(runtime: Runtime) -> usize {
    match runtime {
        Runtime::Onnx => shale_embed::ONNX_BATCH_SIZE,
        Runtime::Candle => shale_embed::DEFAULT_BATCH_SIZE,
    }
}

/// MiniLM vectors of `n + nq` sampled glosses, embedded once and cached as an `.npy`.
pub fn minilm_dataset(
    n: usize,
    nq: usize,
    seed: u64,
    runtime: Runtime,
    cache: &Path,
) -> BenchResult<Dataset> {
    let total = n + nq;
    let dir = cache.join("bench");
    let path = dir.join(format!("minilm-wordnet-{total}-seed{seed}.npy"));
    if !path.exists() {
        let chosen = sample(glosses(cache)?, total, seed)?;
        // Either runtime: their vectors agree to 3e-7 a component.
        let model = model(runtime)?;
        eprintln!(
            "== embedding {total} WordNet glosses with MiniLM ({runtime}), cached in {}",
            path.display()
        );
        let started = Instant::now();
        let mut data = Vec::with_capacity(total * shale_embed::DIM);
        for chunk in chosen.chunks(1024) {
            let texts: Vec<&str> = chunk.iter().map(|g| g.text.as_str()).collect();
            for v in model.embed(&texts)? {
                data.extend_from_slice(&v);
            }
            eprintln!(
                "   {} / {total} embedded, {:.0} s",
                data.len() / shale_embed::DIM,
                started.elapsed().as_secs_f64()
            );
        }
        std::fs::create_dir_all(&dir)?;
        let tmp = dir.join(format!(".{total}-{seed}.tmp"));
        shale_npy::write_f32_file(&tmp, total, shale_embed::DIM, &data)
            .map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
    }
    let rows = shale_npy::read::<f32>(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Dataset::split(
        format!("minilm{}", short(n)),
        format!("MiniLM (all-MiniLM-L6-v2) vectors of {total} WordNet 3.0 glosses (seed {seed})"),
        &rows,
        n,
        nq,
        seed,
    )
}

/// The workloads of one `run`.
pub struct EmbedRun {
    /// Glosses embedded and searched.
    pub n: usize,
    /// Queries per search method.
    pub nq: usize,
    pub runtime: Runtime,
    /// The index's batch size (`None`: the engine's default).
    pub batch_size: Option<usize>,
    pub seed: u64,
}

/// `embed-bulk` and `semantic-query` on `n` glosses, `nq` queries per search method.
pub fn run(
    workload: EmbedRun,
    engines: &[String],
    work_dir: &Path,
    cache: &Path,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let EmbedRun {
        n,
        nq,
        runtime,
        batch_size,
        seed,
    } = workload;
    let chosen = sample(glosses(cache)?, n + nq, seed ^ 0xe3b)?;
    let (docs, held_out) = chosen.split_at(n);
    let model = model(runtime)?;
    let threads = shale_embed::default_threads();
    let texts: Vec<&str> = docs.iter().map(|g| g.text.as_str()).collect();
    let words: usize = texts.iter().map(|t| t.split_whitespace().count()).sum();
    let suite = Suite {
        runtime,
        names: engine_names(runtime),
        threads,
        n,
        about: format!(
            "{n} WordNet glosses (mean {:.1} words), all-MiniLM-L6-v2 on {runtime}, {threads} thread(s)",
            words as f64 / n.max(1) as f64
        ),
    };

    // Warm the model (page in the weights, size the buffers) outside the timings.
    model.embed(&texts[..texts.len().min(64)])?;
    let raw_secs = suite.embed_alone(&*model, &texts, emit)?;
    let dir = work_dir.join(format!("semantic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (db, index) = suite.embed_into_db(model, batch_size, docs, &dir, raw_secs, emit)?;
    suite.queries(&index, held_out, engines, nq, emit)?;
    db.close()?;
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// What the workloads of one runtime share.
struct Suite {
    runtime: Runtime,
    /// (model alone, through the engine, exact search): see [`engine_names`].
    names: (&'static str, &'static str, &'static str),
    threads: usize,
    /// Glosses embedded.
    n: usize,
    /// The notes' description of the texts and the model.
    about: String,
}

impl Suite {
    /// `embed-bulk` of the model alone: every text in one call. Its seconds.
    fn embed_alone(
        &self,
        model: &dyn Embedder,
        texts: &[&str],
        emit: &mut Emit<'_>,
    ) -> BenchResult<f64> {
        let (n, runtime, about) = (self.n, self.runtime, &self.about);
        eprintln!("== embed-bulk ({runtime}): the model alone, {n} texts in one call");
        let cpu0 = metrics::cpu_seconds();
        let started = Instant::now();
        let vectors = model.embed(texts)?;
        let raw_secs = started.elapsed().as_secs_f64();
        if vectors.len() != n {
            return Err(
                format!("the model returned {} vectors for {n} texts", vectors.len()).into(),
            );
        }
        drop(vectors);
        emit(
            VectorRecord::new(self.names.0, "embed-bulk", n as u64, raw_secs)
                .threads(self.threads)
                .cpu(metrics::cpu_seconds() - cpu0)
                .note(format!(
                    "{about}; Embedder::embed over all texts in one call (sorted by length, batches of {})",
                    model_batch(runtime)
                )),
        );
        Ok(raw_secs)
    }

    /// `embed-bulk` through the engine: `docs` put into a database at `dir` with a semantic
    /// index, timed until indexed. The database and its index, left open.
    fn embed_into_db(
        &self,
        model: Arc<dyn Embedder>,
        batch_size: Option<usize>,
        docs: &[Gloss],
        dir: &Path,
        raw_secs: f64,
        emit: &mut Emit<'_>,
    ) -> BenchResult<(Arc<Db>, VectorIndex)> {
        let (n, runtime, about, raw_name) = (self.n, self.runtime, &self.about, self.names.0);
        eprintln!("== embed-bulk ({runtime}): puts into a Db with a semantic index until indexed");
        let mut sem = VectorIndexOptions::text(model);
        if let Some(b) = batch_size {
            sem.batch_size = b;
        }
        let sem_about = format!(
            "{} embed thread(s), batches of up to {}",
            sem.embed_threads, sem.batch_size
        );
        let db = Arc::new(Db::open(dir, Options::default())?);
        let index = VectorIndex::open(&db, "glosses", sem)?;
        metrics::reset_peak_rss();
        let cpu0 = metrics::cpu_seconds();
        let started = Instant::now();
        for g in docs {
            db.put(&g.key, &g.text)?;
        }
        let put_secs = started.elapsed().as_secs_f64();
        index.wait_indexed()?;
        let secs = started.elapsed().as_secs_f64();
        let (applied, queued) = index.progress();
        if applied < queued {
            return Err(format!("wait_indexed returned with {applied} of {queued} applied").into());
        }
        emit(
            VectorRecord::new(self.names.1, "embed-bulk", n as u64, secs)
                .threads(self.threads)
                .cpu(metrics::cpu_seconds() - cpu0)
                .rss(metrics::peak_rss_bytes())
                .note(format!(
                    "{about}; one Db::put per gloss ({put_secs:.2} s for the puts), timed until wait_indexed returned ({applied}/{queued} applied); {sem_about}; ratio to {raw_name} = {:.3}",
                    raw_secs / secs
                )),
        );
        Ok((db, index))
    }

    /// `semantic-query`: the held-out glosses' definitions searched through the graph, and
    /// by exact search first when engine `exact` is asked for (the graph's recall is then
    /// scored against it).
    fn queries(
        &self,
        index: &VectorIndex,
        held_out: &[Gloss],
        engines: &[String],
        nq: usize,
        emit: &mut Emit<'_>,
    ) -> BenchResult<()> {
        let (_, engine_name, exact_name) = self.names;
        // Short queries: the definition of a held-out gloss up to its first ';'.
        let queries: Vec<String> = held_out
            .iter()
            .map(|g| {
                let def = g.text.split_once(": ").map_or(g.text.as_str(), |(_, d)| d);
                def.split(';').next().unwrap_or(def).trim().to_string()
            })
            .collect();
        for q in queries.iter().take(5) {
            index.search(q, &SearchOptions::k(QUERY_K))?;
        }
        let mut exact_keys: Vec<Vec<Vec<u8>>> = Vec::new();
        let methods: &[(&str, bool)] = if engines.iter().any(|e| e == "exact") {
            &[(exact_name, true), (engine_name, false)]
        } else {
            &[(engine_name, false)]
        };
        for &(engine, exact) in methods {
            eprintln!("== semantic-query ({engine}): {nq} queries, k {QUERY_K}");
            let (keys, r) = self.query_pass(index, &queries, engine, exact)?;
            let how = if exact {
                "VectorIndex::search, exact"
            } else {
                "VectorIndex::search through the graph (ef_search 64, best 2k re-scored)"
            };
            let r = if exact {
                exact_keys = keys;
                r.recall(1.0)
            } else if !exact_keys.is_empty() {
                r.recall(recall_of_keys(&keys, &exact_keys))
            } else {
                r
            };
            emit(r.note(format!(
                "{how}, k {QUERY_K}, on a Db of {} glosses: embed the query + search + fetch and verify each hit; queries are held-out gloss definitions (first clause), one at a time",
                self.n
            )));
        }
        Ok(())
    }

    /// Every query once, one at a time: the keys each found, and the record (no note yet).
    fn query_pass(
        &self,
        index: &VectorIndex,
        queries: &[String],
        engine: &str,
        exact: bool,
    ) -> BenchResult<(Vec<Vec<Vec<u8>>>, VectorRecord)> {
        let mut lat = Latencies::new();
        let mut keys = Vec::with_capacity(queries.len());
        let cpu0 = metrics::cpu_seconds();
        let started = Instant::now();
        for q in queries {
            let t = Instant::now();
            let opts = SearchOptions {
                exact,
                ..SearchOptions::k(QUERY_K)
            };
            let hits = index.search(q, &opts)?;
            lat.record_since(t);
            keys.push(hits.into_iter().map(|h| h.key).collect::<Vec<_>>());
        }
        let secs = started.elapsed().as_secs_f64();
        let r = VectorRecord::new(engine, "semantic-query", queries.len() as u64, secs)
            .threads(1)
            .cpu(metrics::cpu_seconds() - cpu0)
            .latencies(&lat);
        Ok((keys, r))
    }
}

/// Hits per semantic query.
const QUERY_K: usize = 10;

/// The share of the `exact` keys of each query that `got` found.
fn recall_of_keys(got: &[Vec<Vec<u8>>], exact: &[Vec<Vec<u8>>]) -> f64 {
    let hits: usize = got
        .iter()
        .zip(exact)
        .map(|(got, want)| want.iter().filter(|w| got.contains(w)).count())
        .sum();
    let total: usize = exact.iter().map(Vec::len).sum();
    hits as f64 / total.max(1) as f64
}

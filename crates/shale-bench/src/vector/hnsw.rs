//! HNSW on real vectors: build time (1 and 2 threads), per-insert time around a graph size,
//! queries per second against recall@k, and filtered search ([`super::filter`]) for Shale's
//! `Hnsw` and its peers ([`super::peers`]: hnswlib, faiss-cpu, usearch, rabitqlib), all scored
//! against exact ground truths computed once with Shale's exact search.
//!
//! Every engine indexes the same unit vectors: Shale's in memory, the peers' from C-order
//! `.npy` files written once per data set into the work directory.

use std::time::Instant;

use shale_search::vector::{Hnsw, Neighbor, NodeId, VectorFile};

use super::dataset::Dataset;
use super::filter::{self, FilterCase};
use super::peers::{self, PeerInputs};
use super::record::{short, Emit, VectorRecord};
use super::restart;
use super::settings::HnswSettings;
use super::truth::{ground_truth, recall};
use crate::engine::BenchResult;
use crate::metrics::{self, Latencies};

/// The window of inserts timed "at" a graph size: 1,000 inserts centred on `at` nodes.
fn insert_window(n: usize) -> (usize, usize, usize) {
    let at = 50_000.min(n / 2);
    let half = 500.min(at / 2);
    (at, at - half, at + half)
}

/// Run every HNSW workload on `ds`. Returns the peers that failed, each with its error
/// (the other engines' results are emitted all the same).
pub fn run(ds: &Dataset, s: &HnswSettings, emit: &mut Emit<'_>) -> BenchResult<Vec<String>> {
    let (n, nq) = (ds.len(), ds.query_count());
    let params = s.params();
    let note_params = format!(
        "{}: {n} vectors x {}, {nq} queries; M {} (m_max0 {}), ef_construction {}, k {}",
        ds.source, ds.dim, params.m, params.m_max0, params.ef_construction, s.k
    );
    let truth = exact_truth(ds, s, &note_params, emit);
    let cases = if s.engines.iter().any(|e| e != "exact") {
        eprintln!(
            "== {}: filtered ground truths ({} queries, {:?}% of the ids)",
            ds.name, s.filter.queries, s.filter.selectivity_pct
        );
        filter::cases(ds, &s.filter, s.k)
    } else {
        Vec::new()
    };
    if s.wants("shale") {
        shale(ds, s, &truth, &cases, &note_params, emit)?;
    }
    let wanted: Vec<&str> = peers::PEERS.into_iter().filter(|e| s.wants(e)).collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let inp = PeerInputs {
        dir: s.work_dir.join(format!("peers-{}", ds.name)),
        truth: &truth,
        filters: &cases,
        window: insert_window(n),
        note_params: &note_params,
    };
    inp.write(ds)?;
    let mut failed = Vec::new();
    for engine in wanted {
        if let Err(e) = peers::run(engine, ds, s, &s.filter, &inp, emit) {
            eprintln!("!! {}: {engine} failed: {e}", ds.name);
            failed.push(format!("{engine} on {}: {e}", ds.name));
        }
    }
    let _ = std::fs::remove_dir_all(&inp.dir);
    Ok(failed)
}

/// The exact nearest neighbours of every query, by exact search on two threads: the ground
/// truth of every engine's recall, and `knn-exact-*` if engine `exact` is asked for.
fn exact_truth(
    ds: &Dataset,
    s: &HnswSettings,
    note_params: &str,
    emit: &mut Emit<'_>,
) -> Vec<Vec<Neighbor>> {
    let nq = ds.query_count();
    eprintln!(
        "== {}: ground truth by exact search ({nq} queries)",
        ds.name
    );
    let started = Instant::now();
    let cpu0 = metrics::cpu_seconds();
    let truth = ground_truth(&ds.base, &ds.queries, ds.dim, s.k, 2, 0..ds.len());
    let secs = started.elapsed().as_secs_f64();
    if s.wants("exact") {
        emit(
            VectorRecord::new("exact", &format!("knn-exact-{}", ds.name), nq as u64, secs)
                .threads(2)
                .cpu(metrics::cpu_seconds() - cpu0)
                .recall(1.0)
                .note(format!(
                    "{note_params}; Shale's exact search (every vector scored), queries split over 2 threads"
                )),
        );
    }
    truth
}

/// Shale's workloads on `ds`: the builds, the queries, the filtered queries and the
/// reopening of the filtered workloads' index.
fn shale(
    ds: &Dataset,
    s: &HnswSettings,
    truth: &[Vec<Neighbor>],
    cases: &[FilterCase],
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let built = shale_builds(ds, s, note_params, emit)?;
    shale_queries(&built, ds, s, truth, note_params, emit)?;
    let filtered = filter::run_shale(
        ds,
        s.params(),
        cases,
        &s.filter,
        s.k,
        &s.work_dir,
        note_params,
        emit,
    )?;
    if let Some(index) = filtered {
        let dir = index.dir.clone();
        restart::run(ds, index, note_params, emit)?;
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// The full vectors of a build: a [`VectorFile`] in the work directory, as the semantic
/// index keeps them, written as each node is inserted.
fn vector_file(s: &HnswSettings, ds: &Dataset, threads: usize) -> BenchResult<VectorFile> {
    let path = s
        .work_dir
        .join(format!("shale-{}-t{threads}.vectors", ds.name));
    let _ = std::fs::remove_file(&path);
    Ok(VectorFile::open(
        std::sync::Arc::new(shale::fs::PosixFs),
        &path,
        ds.dim,
    ))
}

/// A graph Shale built and the full vectors of its nodes.
pub struct Built {
    pub graph: Hnsw,
    pub full: VectorFile,
}

/// Insert node `id`: its full vector into `full`, then its code into the graph (the order
/// the semantic index keeps, so that a search finds the vector of every node it returns).
fn shale_insert(g: &Hnsw, full: &VectorFile, id: NodeId, v: &[f32]) -> shale::Result<()> {
    full.write(id, &g.metric().prepare(v, g.dim(), "vector")?)?;
    g.insert(id, v)
}

/// The vector of node `id` of `ds`.
fn vector_of(ds: &Dataset, id: NodeId) -> Option<&[f32]> {
    let i = id.0 as usize;
    ds.base.get(i * ds.dim..(i + 1) * ds.dim)
}

/// Shale's builds, one per thread count; returns the graph of the 1-thread build (else the
/// first), or a new 1-thread build when no thread count is 1, with its full vectors.
fn shale_builds(
    ds: &Dataset,
    s: &HnswSettings,
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<Built> {
    let n = ds.len();
    let (_, lo, hi) = insert_window(n);
    let ids: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
    let mut graph = None;
    for &threads in &s.threads {
        eprintln!("== {}: shale build, {threads} thread(s)", ds.name);
        metrics::reset_peak_rss();
        let g = Hnsw::new(ds.dim, s.params())?;
        let full = vector_file(s, ds, threads)?;
        let cpu0 = metrics::cpu_seconds();
        let started = Instant::now();
        let (lat, window) = if threads == 1 {
            insert_timed(ds, &g, &full, &ids, lo..hi)?
        } else {
            insert_parallel(ds, &g, &full, &ids, threads)?;
            (Latencies::new(), Latencies::new())
        };
        let secs = started.elapsed().as_secs_f64();
        let r = VectorRecord::new(
            "shale",
            &format!("hnsw-build-{}-t{threads}", ds.name),
            n as u64,
            secs,
        )
        .threads(threads)
        .cpu(metrics::cpu_seconds() - cpu0)
        .rss(metrics::peak_rss_bytes())
        .index_bytes(g.memory_bytes() as u64)
        .note(build_note(note_params, threads, &g, ds));
        if threads == 1 {
            emit(r.latencies(&lat));
            emit(window_record(ds, &window, note_params));
            graph = Some(Built { graph: g, full });
        } else {
            emit(r);
            graph.get_or_insert(Built { graph: g, full });
        }
    }
    match graph {
        Some(built) => Ok(built),
        None => {
            let g = Hnsw::new(ds.dim, s.params())?;
            let full = vector_file(s, ds, 1)?;
            for &id in &ids {
                shale_insert(
                    &g,
                    &full,
                    id,
                    vector_of(ds, id).ok_or("vector out of range")?,
                )?;
            }
            Ok(Built { graph: g, full })
        }
    }
}

/// `hnsw-insert-*`: the inserts of the 1-thread build in its timed window.
fn window_record(ds: &Dataset, window: &Latencies, note_params: &str) -> VectorRecord {
    let (at, lo, hi) = insert_window(ds.len());
    VectorRecord::new(
        "shale",
        &format!("hnsw-insert-{}-at{}", ds.name, short(at)),
        (hi - lo) as u64,
        window.mean_us() * (hi - lo) as f64 / 1e6,
    )
    .latencies(window)
    .note(format!(
        "{note_params}; inserts {lo}..{hi} of the 1-thread build, each timed"
    ))
}

/// Insert `ids` one at a time, each timed: the latencies of all, and of those in `window`.
fn insert_timed(
    ds: &Dataset,
    g: &Hnsw,
    full: &VectorFile,
    ids: &[NodeId],
    window: std::ops::Range<usize>,
) -> BenchResult<(Latencies, Latencies)> {
    let mut lat = Latencies::new();
    let mut in_window = Latencies::new();
    for &id in ids {
        let v = vector_of(ds, id).ok_or("vector out of range")?;
        let t = Instant::now();
        shale_insert(g, full, id, v)?;
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        lat.record_ns(ns);
        if window.contains(&(id.0 as usize)) {
            in_window.record_ns(ns);
        }
    }
    Ok((lat, in_window))
}

/// Insert `ids` from `threads` threads, each taking the next id.
fn insert_parallel(
    ds: &Dataset,
    g: &Hnsw,
    full: &VectorFile,
    ids: &[NodeId],
    threads: usize,
) -> shale::Result<()> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = || -> shale::Result<()> {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&id) = ids.get(i) else {
                return Ok(());
            };
            let v = vector_of(ds, id)
                .ok_or_else(|| shale::Error::InvalidArgument("vector out of range".into()))?;
            shale_insert(g, full, id, v)?;
        }
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

/// The note of a build of `g` on `threads` threads.
fn build_note(note_params: &str, threads: usize, g: &Hnsw, ds: &Dataset) -> String {
    let (n, dim) = (ds.len(), ds.dim);
    format!(
        "{note_params}; {threads} thread(s) inserting into Hnsw (int8 codes, kernel {}) and \
         the full vectors into a VectorFile; index bytes = Hnsw::memory_bytes (codes and \
         links in memory, {:.0} B per vector); the full vectors are the {:.0} MB file, \
         read through the page cache",
        shale_search::vector::quant::Kernel::get().name(),
        g.memory_bytes() as f64 / n.max(1) as f64,
        (4 * dim * n) as f64 / 1e6
    )
}

/// How many of a search's best candidates by code are scored again with their full
/// vectors: what the semantic index does (`SearchOptions::rerank`'s default).
pub fn rerank(k: usize) -> usize {
    2 * k
}

/// Shale's queries at every ef, one at a time on one thread.
fn shale_queries(
    built: &Built,
    ds: &Dataset,
    s: &HnswSettings,
    truth: &[Vec<Neighbor>],
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let nq = ds.query_count();
    for &ef in &s.efs {
        let mut lat = Latencies::new();
        let mut got = Vec::with_capacity(nq);
        let cpu0 = metrics::cpu_seconds();
        let started = Instant::now();
        for q in ds.queries.chunks_exact(ds.dim) {
            let t = Instant::now();
            let hits =
                built
                    .graph
                    .search_rescored(q, s.k, Some(ef), None, &built.full, rerank(s.k))?;
            lat.record_since(t);
            got.push(hits.iter().map(|n| n.id.0).collect::<Vec<u32>>());
        }
        let secs = started.elapsed().as_secs_f64();
        let recall = recall(&got, truth);
        eprintln!(
            "   {:<11} ef {ef:>4}: {:>8.0} QPS  recall@{} {recall:.4}",
            "shale",
            nq as f64 / secs,
            s.k
        );
        emit(
            VectorRecord::new(
                "shale",
                &format!("hnsw-query-{}-ef{ef}", ds.name),
                nq as u64,
                secs,
            )
            .cpu(metrics::cpu_seconds() - cpu0)
            .latencies(&lat)
            .recall(recall)
            .note(format!(
                "{note_params}; ef {ef}; Hnsw::search_rescored (the best {} by code scored with the full vectors from the VectorFile), one query at a time on one thread, graph of the 1-thread build",
                rerank(s.k)
            )),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shale_search::vector::HnswParams;
    /// The semantic-search issue's recall requirement, on real vectors in every test run:
    /// HNSW recall@10 >= 0.95 against exact search over 20,000 GloVe vectors (500 held-out
    /// GloVe words as queries), with the engine's default parameters (m 16,
    /// ef_construction 200, ef_search 64) and two threads building the graph concurrently.
    /// The vectors come from `scripts/fetch-bench-data.sh` (which `scripts/test.sh` runs).
    #[test]
    fn recall_at_10_on_20k_glove_vectors() {
        let path = super::super::glove_path(None);
        let rows = shale_npy::read::<f32>(&path).unwrap_or_else(|e| {
            panic!("{e}\n(this test needs the GloVe vectors: run scripts/fetch-bench-data.sh)")
        });
        let seed = 0x5eed_0001;
        println!("GloVe {}, shuffle seed {seed:#x}", path.display());
        let ds =
            Dataset::split("glove20k".into(), String::new(), &rows, 20_000, 500, seed).unwrap();
        let k = 10;
        let truth = ground_truth(&ds.base, &ds.queries, ds.dim, k, 2, 0..ds.len());
        let params = HnswParams::default();
        let g = Hnsw::new(ds.dim, params).unwrap();
        let ids: Vec<NodeId> = (0..ds.len() as u32).map(NodeId).collect();
        g.insert_all(
            &ids,
            |id| ds.base.chunks_exact(ds.dim).nth(id.0 as usize),
            2,
        )
        .unwrap();
        let got: Vec<Vec<u32>> = ds
            .queries
            .chunks_exact(ds.dim)
            .map(|q| {
                let hits = g.search(q, k, None, None).unwrap();
                hits.iter().map(|n| n.id.0).collect()
            })
            .collect();
        let r = recall(&got, &truth);
        println!("recall@{k} {r:.4} (ef_search {})", params.ef_search);
        assert!(r >= 0.95, "recall@{k} {r:.4} < 0.95");
    }

    #[test]
    fn insert_window_is_centred_and_bounded() {
        assert_eq!(insert_window(100_000), (50_000, 49_500, 50_500));
        assert_eq!(insert_window(2_000), (1_000, 500, 1_500));
    }
}

//! Filtered search: `hnsw-filter-{ds}-sel{P}-ef{E}`, the k nearest among the ids of one key
//! range that holds P% of the vectors, at each ef of `--filter-ef` (so that engines are
//! compared at equal recall, as the unfiltered rows are).
//!
//! The harness gives vectors ids in key order, so a key range is a contiguous id range
//! `[lo, lo + P% of n)`; it is centred in the id space, so that it holds neither only the
//! first nodes inserted (the graph's oldest, best-linked ones) nor only the last. Recall@k is
//! scored against the exact top-k among the admitted ids ([`shale_search::vector::exact`] over the
//! range), for every engine alike. The peers' side is `peer_driver.py` (faiss-cpu:
//! `SearchParametersHNSW(sel=IDSelectorRange(lo, hi))`).

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use shale::{Db, WriteBatch, WriteOptions};
use shale_search::semantic::{vector_value, SearchOptions, VectorIndex, VectorIndexOptions};
use shale_search::vector::Neighbor;

use super::dataset::Dataset;
use super::record::{Emit, VectorRecord};
use super::settings::FilterSettings;
use super::truth::{ground_truth, recall};
use crate::engine::BenchResult;
use crate::metrics::{self, Latencies};

/// One selectivity: the admitted ids and the exact answer among them.
pub struct FilterCase {
    /// The selectivity as written in the workload name (`0.1`, `50`).
    pub label: String,
    pub ids: Range<u32>,
    /// Per query, the exact top-k among `ids`.
    pub truth: Vec<Vec<Neighbor>>,
}

impl FilterCase {
    pub fn workload(&self, ds: &str, ef: usize) -> String {
        format!("hnsw-filter-{ds}-sel{}-ef{ef}", self.label)
    }

    /// The note's description of the filter.
    pub fn describe(&self, n: usize, ef: usize) -> String {
        format!(
            "admits ids [{}, {}) ({}% of {n}), ef {ef}, {} queries; recall against the exact top-k among admitted ids",
            self.ids.start,
            self.ids.end,
            self.label,
            self.truth.len()
        )
    }
}

/// The id range admitting `pct`% of `n` ids (at least one), centred.
fn admitted(n: usize, pct: f64) -> Range<u32> {
    let want = (n as f64 * pct / 100.0).round();
    let width = if want >= 1.0 {
        (want as usize).min(n)
    } else {
        1
    };
    let lo = (n - width) / 2;
    let bound = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    bound(lo)..bound(lo + width)
}

/// Every case of `f` on `ds`, with its ground truth (none when `f.queries` is 0).
pub fn cases(ds: &Dataset, f: &FilterSettings, k: usize) -> Vec<FilterCase> {
    if f.queries == 0 {
        return Vec::new();
    }
    let nq = f.queries.min(ds.query_count());
    let queries = ds.queries.get(..nq * ds.dim).unwrap_or(&ds.queries);
    f.selectivity_pct
        .iter()
        .map(|&pct| {
            let ids = admitted(ds.len(), pct);
            let rows = ids.start as usize..ids.end as usize;
            FilterCase {
                label: pct.to_string(),
                truth: ground_truth(&ds.base, queries, ds.dim, k, 2, rows),
                ids,
            }
        })
        .collect()
}

/// The name of the index the filtered workloads build.
pub const INDEX: &str = "bench";

/// The key of vector `id` in the filtered workloads' index: its id, zero-padded, so that
/// key order is id order and an id range is a key range.
pub(super) fn key(id: u32) -> String {
    format!("{id:08}")
}

/// The database the filtered workloads leave, with its index over every vector of the
/// data set (what [`super::restart`] opens again).
pub struct FilterIndex {
    pub db: Arc<Db>,
    pub index: VectorIndex,
    pub dir: PathBuf,
    pub opts: VectorIndexOptions,
}

/// The filtered workloads on Shale: a semantic index (vectors only, the options the graph
/// workloads use) over `ds`' vectors in a database in the work directory, searched with a
/// key range, as a user would (`VectorIndex::search_vector` with `SearchOptions::range`: the
/// engine chooses an exact scan or a filtered graph walk, re-scores, and checks every hit
/// against the data). Returns the database and its index, left open (`None` when there
/// are no cases, and so no index).
#[allow(
    clippy::too_many_arguments,
    reason = "the settings of one workload group"
)]
pub fn run_shale(
    ds: &Dataset,
    params: shale_search::vector::HnswParams,
    cases: &[FilterCase],
    f: &FilterSettings,
    k: usize,
    work_dir: &std::path::Path,
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<Option<FilterIndex>> {
    if cases.is_empty() {
        return Ok(None);
    }
    let dir = work_dir.join(format!("shale-filter-{}", ds.name));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Arc::new(Db::open(&dir, shale::Options::default())?);
    let mut opts = VectorIndexOptions::vectors(ds.dim);
    opts.hnsw = params;
    let index = VectorIndex::open(&db, INDEX, opts.clone())?;
    eprintln!(
        "== {}: shale filtered: indexing {} vectors",
        ds.name,
        ds.len()
    );
    let started = Instant::now();
    for (c, chunk) in ds.base.chunks(1024 * ds.dim).enumerate() {
        let mut batch = WriteBatch::new();
        for (i, v) in chunk.chunks_exact(ds.dim).enumerate() {
            let id = u32::try_from(c * 1024 + i).unwrap_or(u32::MAX);
            batch.put(key(id), vector_value(v, b""));
        }
        db.write(batch, WriteOptions::default())?;
    }
    index.wait_indexed()?;
    eprintln!("   indexed in {:.1} s", started.elapsed().as_secs_f64());
    // The peers have no background work: measure after the loads' flushes and compactions.
    db.wait_idle()?;
    for case in cases {
        for &ef in &f.efs {
            filtered_queries(ds, &index, case, ef, k, note_params, emit)?;
        }
    }
    Ok(Some(FilterIndex {
        db,
        index,
        dir,
        opts,
    }))
}

/// One case at one ef on Shale's index: every query, one at a time.
fn filtered_queries(
    ds: &Dataset,
    index: &VectorIndex,
    case: &FilterCase,
    ef: usize,
    k: usize,
    note_params: &str,
    emit: &mut Emit<'_>,
) -> BenchResult<()> {
    let mut lat = Latencies::new();
    let mut got = Vec::with_capacity(case.truth.len());
    let opts = SearchOptions::k(k)
        .ef(ef)
        .range(key(case.ids.start), key(case.ids.end));
    let cpu0 = metrics::cpu_seconds();
    let started = Instant::now();
    for q in ds.queries.chunks_exact(ds.dim).take(case.truth.len()) {
        let t = Instant::now();
        let hits = index.search_vector(q, &opts)?;
        lat.record_since(t);
        got.push(
            hits.iter()
                .filter_map(|h| std::str::from_utf8(&h.key).ok()?.parse().ok())
                .collect::<Vec<u32>>(),
        );
    }
    let secs = started.elapsed().as_secs_f64();
    let r = recall(&got, &case.truth);
    eprintln!(
        "   {:<11} sel {:>5}% ef {ef:>4}: {:>8.0} QPS  recall@{k} {r:.4}",
        "shale",
        case.label,
        got.len() as f64 / secs
    );
    emit(
        VectorRecord::new("shale", &case.workload(&ds.name, ef), got.len() as u64, secs)
            .cpu(metrics::cpu_seconds() - cpu0)
            .latencies(&lat)
            .recall(r)
            .note(format!(
                "{note_params}; {}; a semantic index over the vectors, keys = ids zero-padded, VectorIndex::search_vector with SearchOptions::range (the engine's own choice of scan or filtered graph walk, hits checked against the data), one query at a time on one thread",
                case.describe(ds.len(), ef)
            )),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admitted_ranges_are_centred_and_sized() {
        assert_eq!(admitted(100_000, 0.1), 49_950..50_050);
        assert_eq!(admitted(100_000, 100.0), 0..100_000);
        assert_eq!(admitted(10_000, 50.0), 2_500..7_500);
        assert_eq!(admitted(10, 0.1), 4..5, "never empty");
    }
}

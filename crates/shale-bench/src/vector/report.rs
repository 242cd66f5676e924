//! The "Vector search" section of the report: QPS against recall@10 per data set, the best
//! QPS at recall >= 0.95, build and insert times, index memory, filtered search per
//! selectivity, embedding throughput and semantic query latency, with Shale's ratio to
//! hnswlib and the project's targets.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::record::Record;
use crate::summary::Summary;

/// The recall a configuration must reach to count in "QPS at recall >= 0.95".
pub const RECALL_TARGET: f64 = 0.95;

/// Whether `workload` is one of `shale-bench vector`'s.
pub fn is_vector(workload: &str) -> bool {
    ["hnsw-", "knn-exact-", "embed-", "semantic-", "index-"]
        .iter()
        .any(|p| workload.starts_with(p))
}

/// `hnsw-query-glove100k-ef40` -> (`glove100k`, 40).
pub fn query_point(workload: &str) -> Option<(&str, usize)> {
    let rest = workload.strip_prefix("hnsw-query-")?;
    let (ds, ef) = rest.rsplit_once("-ef")?;
    Some((ds, ef.parse().ok()?))
}

/// `hnsw-filter-glove100k-sel0.1-ef80` -> (`glove100k`, `0.1`, 80).
pub fn filter_point(workload: &str) -> Option<(&str, &str, usize)> {
    let (ds, rest) = workload.strip_prefix("hnsw-filter-")?.rsplit_once("-sel")?;
    let (sel, ef) = rest.rsplit_once("-ef")?;
    Some((ds, sel, ef.parse().ok()?))
}

/// The best QPS among `points` (ef, QPS, recall) that reach [`RECALL_TARGET`], or, if none
/// does, the point of highest recall; `true` if it reached the target.
fn best_point(points: &[Point]) -> Option<(Point, bool)> {
    let reached = points
        .iter()
        .filter(|p| p.2 >= RECALL_TARGET)
        .max_by(|a, b| a.1.total_cmp(&b.1));
    match reached {
        Some(p) => Some((*p, true)),
        None => points
            .iter()
            .max_by(|a, b| a.2.total_cmp(&b.2))
            .map(|p| (*p, false)),
    }
}

/// One configuration's (ef, QPS, recall).
pub type Point = (usize, f64, f64);

/// Per (data set, engine): its points sorted by ef.
pub type Curves = BTreeMap<(String, String), Vec<Point>>;

/// The [`Curves`] of the median cells of `s`.
pub fn curves(s: &Summary) -> Curves {
    let mut out = Curves::new();
    for ((w, e), (r, _)) in &s.cells {
        if let (Some((ds, ef)), Some(recall)) = (query_point(w), r.recall) {
            out.entry((ds.to_string(), e.clone()))
                .or_default()
                .push((ef, r.ops_per_sec, recall));
        }
    }
    for v in out.values_mut() {
        v.sort_by_key(|p| p.0);
    }
    out
}

fn cell<'a>(s: &'a Summary, w: &str, e: &str) -> Option<&'a Record> {
    s.cells.get(&(w.to_string(), e.to_string())).map(|(r, _)| r)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// The rows of a table: (label, workload) for each workload `label` names, and the engines
/// with a result in any of them (in the report's order); `None` when there are no rows.
type Rows<'a> = (Vec<(&'a str, &'a String)>, Vec<&'a String>);

fn table_rows<'a>(s: &'a Summary, label: impl Fn(&'a str) -> Option<&'a str>) -> Option<Rows<'a>> {
    let rows: Vec<(&str, &String)> = s
        .workloads
        .iter()
        .filter_map(|w| Some((label(w)?, w)))
        .collect();
    let engines = s
        .engines
        .iter()
        .filter(|e| rows.iter().any(|(_, w)| cell(s, w, e).is_some()))
        .collect();
    (!rows.is_empty()).then_some((rows, engines))
}

/// A table's header and rule: `first`, then a column per engine and name in `columns`, then
/// the `trailing` columns.
fn table_head(first: &str, engines: &[&String], columns: &[&str], trailing: &[&str]) -> String {
    let mut header = format!("| {first} |");
    let mut rule = String::from("|---|");
    let names = engines
        .iter()
        .flat_map(|e| columns.iter().map(move |c| format!("{e} {c}")))
        .chain(trailing.iter().map(|c| c.to_string()));
    for name in names {
        let _ = write!(header, " {name} |");
        rule.push_str("---:|");
    }
    format!("{header}\n{rule}")
}

/// Build time per thread count, every engine, and Shale's ratio to hnswlib.
fn builds(out: &mut String, s: &Summary, ds: &str) {
    let prefix = format!("hnsw-build-{ds}-t");
    let Some((builds, engines)) = table_rows(s, |w| w.strip_prefix(&prefix)) else {
        return;
    };
    let _ = writeln!(
        out,
        "{}",
        table_head(
            &format!("{ds} build"),
            &engines,
            &["s"],
            &["shale/hnswlib time (target <= 0.6)"]
        )
    );
    for (t, w) in builds {
        let mut line = format!("| {t} thread(s) |");
        for e in &engines {
            let _ = write!(line, " {} |", num(cell(s, w, e).map(|r| r.seconds), 2));
        }
        let a = cell(s, w, "shale").map(|r| r.seconds);
        let b = cell(s, w, "hnswlib").map(|r| r.seconds);
        let _ = writeln!(out, "{line} {} |", ratio(a, b));
    }
    let _ = writeln!(out);
}

/// The index's bytes as its library counts them, from the 1-thread build (the queried one).
fn memory(out: &mut String, s: &Summary, ds: &str) {
    let w = format!("hnsw-build-{ds}-t1");
    let rows: Vec<(&String, &Record)> = s
        .engines
        .iter()
        .filter_map(|e| Some((e, cell(s, &w, e)?)))
        .collect();
    if rows.is_empty() {
        return;
    }
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    let _ = writeln!(
        out,
        "| {ds} index memory (1-thread build) | index MiB | bytes per vector | peak RSS MiB |\n|---|---:|---:|---:|"
    );
    for (e, r) in rows {
        let (index, per) = match r.index_bytes {
            Some(b) => (
                format!("{:.1}", mib(b)),
                format!("{:.0}", b as f64 / r.ops.max(1) as f64),
            ),
            None => ("not measured".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "| {e} | {index} | {per} | {:.0} |",
            mib(r.peak_rss_bytes)
        );
    }
    let _ = writeln!(
        out,
        "\nIndex bytes are each library's own count (the build's note says which: usearch's \
         `memory_usage`, faiss's serialized size, the size of the file hnswlib or rabitqlib \
         saves); peak RSS is the whole process's (a peer's python child holds its two builds \
         and the vectors).\n"
    );
}

/// The (ef, QPS, recall) points of every (selectivity, engine) of the filtered workloads
/// on `ds`, and the selectivities, smallest first.
type FilterPoints<'a> = (BTreeMap<(&'a str, &'a String), Vec<Point>>, Vec<&'a str>);

fn filter_points<'a>(s: &'a Summary, ds: &str) -> FilterPoints<'a> {
    let mut points: BTreeMap<(&str, &String), Vec<Point>> = BTreeMap::new();
    let mut sels: Vec<&str> = Vec::new();
    for ((w, e), (r, _)) in &s.cells {
        let Some((d, sel, ef)) = filter_point(w) else {
            continue;
        };
        if d != ds {
            continue;
        }
        if !sels.contains(&sel) {
            sels.push(sel);
        }
        points
            .entry((sel, e))
            .or_default()
            .push((ef, r.ops_per_sec, r.recall.unwrap_or(0.0)));
    }
    sels.sort_by(|a, b| {
        let (a, b) = (a.parse::<f64>(), b.parse::<f64>());
        a.unwrap_or(f64::MAX).total_cmp(&b.unwrap_or(f64::MAX))
    });
    (points, sels)
}

/// Filtered search per selectivity: each engine's best QPS at recall >= 0.95 over the efs
/// it ran (or, where no ef reached it, its best recall), and Shale's ratio to faiss-flat's.
fn filtered(out: &mut String, s: &Summary, ds: &str) {
    let (points, sels) = filter_points(s, ds);
    if sels.is_empty() {
        return;
    }
    let engines: Vec<&String> = s
        .engines
        .iter()
        .filter(|e| sels.iter().any(|sel| points.contains_key(&(*sel, *e))))
        .collect();
    let _ = writeln!(
        out,
        "### {ds}: filtered search (an id range standing for a key range)\n\n{}",
        table_head(
            "admitted",
            &engines,
            &["QPS", "recall", "ef"],
            &["shale/faiss-flat QPS"]
        )
    );
    for sel in &sels {
        let mut line = format!("| {sel}% |");
        let mut best_of = BTreeMap::new();
        for e in &engines {
            let best = points.get(&(*sel, *e)).and_then(|p| best_point(p));
            best_of.insert(e.as_str(), best);
            let cells = match best {
                Some(((ef, qps, r), true)) => (format!("{qps:.0}"), format!("{r:.4}"), ef),
                Some(((ef, qps, r), false)) => (format!("({qps:.0})"), format!("{r:.4} <"), ef),
                None => {
                    line.push_str(" - | - | - |");
                    continue;
                }
            };
            let _ = write!(line, " {} | {} | {} |", cells.0, cells.1, cells.2);
        }
        let reached = |e: &str| match best_of.get(e) {
            Some(Some((p, true))) => Some(p.1),
            _ => None,
        };
        let _ = writeln!(
            out,
            "{line} {} |",
            ratio(reached("shale"), reached("faiss-flat"))
        );
    }
    let _ = writeln!(
        out,
        "\nEach cell is the engine's best QPS over the efs it ran that reached recall@10 >= \
         {RECALL_TARGET} against the exact top-10 among the admitted ids, with that recall and ef; \
         where no ef reached it, the QPS (in parentheses) and recall (marked <) of its best \
         recall. The query count is in each note.\n"
    );
}

/// Opening the filtered workloads' index again, after a clean close and after SIGKILL.
fn restarts(out: &mut String, s: &Summary, ds: &str) {
    let mut any = false;
    for (w, what) in [
        ("index-reopen", "after a clean close"),
        (
            "index-restart",
            "after SIGKILL, with 1,000 vectors past the last checkpoint",
        ),
    ] {
        if let Some(r) = cell(s, &format!("{w}-{ds}"), "shale") {
            let _ = writeln!(
                out,
                "- `{w}-{ds}`: Db::open + VectorIndex::open of {} vectors {what}: {:.2} s (target \
                 after SIGKILL: under 2 s of index work, in the note)",
                r.ops, r.seconds
            );
            any = true;
        }
    }
    if any {
        let _ = writeln!(out);
    }
}

/// Append the section to `out` (nothing when there are no vector records).
pub fn section(out: &mut String, s: &Summary, recall_chart: Option<&str>) {
    if !s.workloads.iter().any(|w| is_vector(w)) {
        return;
    }
    let _ = writeln!(out, "\n## Vector search\n");
    let _ = writeln!(
        out,
        "From `shale-bench vector`. Targets: QPS at recall@10 >= {RECALL_TARGET} at least \
         2.0x hnswlib's with the same M and ef_construction, and above every faiss and usearch \
         index; build time <= 0.6x hnswlib's on 1 and 2 threads; at most 0.6 KB of graph and \
         codes per 384-d vector; filtered search at recall >= {RECALL_TARGET} and at least \
         faiss-flat's QPS at every selectivity. Each workload's note (Details) says how it was measured.\n"
    );
    let curves = curves(s);
    let mut datasets: Vec<&String> = curves.keys().map(|(ds, _)| ds).collect();
    datasets.dedup();
    for ds in datasets {
        dataset(out, s, &curves, ds);
    }
    if let Some(c) = recall_chart {
        let _ = writeln!(out, "![QPS against recall@10]({c})\n");
    }
    embedding(out, s);
    semantic_queries(out, s);
}

/// Everything measured on data set `ds`.
fn dataset(out: &mut String, s: &Summary, curves: &Curves, ds: &str) {
    let engines = recall_table(out, s, curves, ds);
    best_at_target(out, s, curves, ds, &engines);
    builds(out, s, ds);
    memory(out, s, ds);
    inserts(out, s, ds);
    filtered(out, s, ds);
    restarts(out, s, ds);
}

/// QPS and recall of every engine at every ef it ran on `ds`; returns those engines.
fn recall_table<'a>(
    out: &mut String,
    s: &'a Summary,
    curves: &Curves,
    ds: &str,
) -> Vec<&'a String> {
    let engines: Vec<&String> = s
        .engines
        .iter()
        .filter(|e| curves.contains_key(&(ds.to_string(), (*e).clone())))
        .collect();
    let _ = writeln!(
        out,
        "### {ds}: queries per second against recall@10\n\n{}",
        table_head("ef", &engines, &["QPS", "recall"], &[])
    );
    let mut efs: Vec<usize> = engines
        .iter()
        .flat_map(|e| curves[&(ds.to_string(), (*e).clone())].iter().map(|p| p.0))
        .collect();
    efs.sort_unstable();
    efs.dedup();
    for ef in efs {
        let mut line = format!("| {ef} |");
        for e in &engines {
            let p = curves[&(ds.to_string(), (*e).clone())]
                .iter()
                .find(|p| p.0 == ef);
            let _ = write!(
                line,
                " {} | {} |",
                num(p.map(|p| p.1), 0),
                num(p.map(|p| p.2), 4)
            );
        }
        let _ = writeln!(out, "{line}");
    }
    engines
}

/// Each engine's best QPS at the recall target, Shale's ratio to each peer there, and the
/// exact search's QPS.
fn best_at_target(out: &mut String, s: &Summary, curves: &Curves, ds: &str, engines: &[&String]) {
    let best = |e: &str| -> Option<(usize, f64, f64)> {
        curves
            .get(&(ds.to_string(), e.to_string()))?
            .iter()
            .filter(|p| p.2 >= RECALL_TARGET)
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
    };
    let _ = writeln!(out);
    for e in engines {
        match best(e) {
            Some((ef, qps, r)) => {
                let _ = writeln!(
                    out,
                    "- {e}: best QPS at recall >= {RECALL_TARGET}: {qps:.0} (ef {ef}, recall {r:.4})"
                );
            }
            None => {
                let _ = writeln!(out, "- {e}: no ef reached recall {RECALL_TARGET}");
            }
        }
    }
    for peer in engines {
        if peer.as_str() == "shale" {
            continue;
        }
        if let (Some(a), Some(b)) = (best("shale"), best(peer)) {
            let target = if peer.as_str() == "hnswlib" {
                " (target >= 2.0)"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "- shale/{peer} at recall >= {RECALL_TARGET}: **{:.2}x**{target}",
                a.1 / b.1
            );
        }
    }
    if let Some(r) = cell(s, &format!("knn-exact-{ds}"), "exact") {
        let _ = writeln!(
            out,
            "- exact search (the ground truth): {:.0} QPS on {} thread(s)",
            r.ops_per_sec, r.threads
        );
    }
    let _ = writeln!(out);
}

/// The timed insert window of each engine's 1-thread build.
fn inserts(out: &mut String, s: &Summary, ds: &str) {
    for w in &s.workloads {
        if !w.starts_with(&format!("hnsw-insert-{ds}-at")) {
            continue;
        }
        for e in &s.engines {
            if let Some(r) = cell(s, w, e) {
                let _ = writeln!(
                    out,
                    "- `{w}` {e}: mean {:.1} µs per insert (p50 {:.1}, p99 {:.1}; target <= 200 µs)",
                    r.mean_us, r.p50_us, r.p99_us
                );
            }
        }
    }
    let _ = writeln!(out);
}

/// Embedding throughput per runtime: the model alone and through the engine's bulk path.
fn embedding(out: &mut String, s: &Summary) {
    // (runtime, model alone, through the engine): see semantic.rs for the names.
    let runtimes = [
        ("onnx", "onnx-raw", "shale-onnx"),
        ("candle", "minilm-raw", "shale"),
    ];
    let rows: Vec<_> = runtimes
        .iter()
        .map(|&(rt, raw, bulk)| (rt, cell(s, "embed-bulk", raw), cell(s, "embed-bulk", bulk)))
        .filter(|(_, raw, bulk)| raw.is_some() || bulk.is_some())
        .collect();
    if !rows.is_empty() {
        let _ = writeln!(
            out,
            "### Embedding throughput\n\n| runtime | texts/s, model alone | texts/s, Db bulk path (target >= 600) | ratio (target >= 0.9) |\n|---|---:|---:|---:|"
        );
        for (rt, raw, bulk) in rows {
            let (a, b) = (bulk.map(|r| r.ops_per_sec), raw.map(|r| r.ops_per_sec));
            let _ = writeln!(
                out,
                "| {rt} | {} | {} | {} |",
                num(b, 1),
                num(a, 1),
                ratio(a, b)
            );
        }
        let _ = writeln!(out);
    }
}

/// Semantic query latency end to end, per search engine.
fn semantic_queries(out: &mut String, s: &Summary) {
    let queries: Vec<(&String, &Record)> = s
        .engines
        .iter()
        .filter_map(|e| Some((e, cell(s, "semantic-query", e)?)))
        .collect();
    if !queries.is_empty() {
        let _ = writeln!(
            out,
            "### Semantic query, end to end (embed + search + fetch)\n\n| search | p50 ms (target <= 5) | p99 ms | mean ms | recall@10 vs exact |\n|---|---:|---:|---:|---:|"
        );
        for (e, r) in queries {
            let how = if e.starts_with("exact") {
                "exact"
            } else {
                "HNSW"
            };
            let _ = writeln!(
                out,
                "| {how} ({e}) | {:.2} | {:.2} | {:.2} | {} |",
                r.p50_us / 1e3,
                r.p99_us / 1e3,
                r.mean_us / 1e3,
                num(r.recall, 3)
            );
        }
        let _ = writeln!(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::rec;

    /// A vector record: `ops_per_sec` QPS, with a recall where given.
    fn vrec(engine: &str, workload: &str, qps: f64, recall: Option<f64>) -> Record {
        Record {
            recall,
            ..rec(engine, workload, 0, qps)
        }
    }

    #[test]
    fn section_lists_every_engine_memory_and_filters() {
        let mut hnswlib_build = vrec("hnswlib", "hnsw-build-g1k-t1", 1.0, None);
        hnswlib_build.index_bytes = Some(3 << 20);
        let records = vec![
            vrec("shale", "hnsw-query-g1k-ef10", 900.0, Some(0.9)),
            vrec("faiss-flat", "hnsw-query-g1k-ef10", 800.0, Some(0.8)),
            vrec("shale", "hnsw-build-g1k-t1", 1.0, None),
            hnswlib_build,
            vrec("shale", "hnsw-filter-g1k-sel0.1-ef20", 50.0, Some(1.0)),
            vrec("faiss-flat", "hnsw-filter-g1k-sel0.1-ef20", 70.0, Some(0.1)),
            vrec("faiss-flat", "hnsw-filter-g1k-sel0.1-ef40", 60.0, Some(0.2)),
            vrec("shale", "hnsw-filter-g1k-sel10-ef20", 90.0, Some(0.94)),
            vrec("shale", "hnsw-filter-g1k-sel10-ef40", 80.0, Some(0.96)),
            vrec("shale", "hnsw-filter-g1k-sel10-ef80", 40.0, Some(0.99)),
            vrec("faiss-flat", "hnsw-filter-g1k-sel10-ef40", 40.0, Some(0.95)),
        ];
        let mut md = String::new();
        section(&mut md, &crate::summary::summarize(&records), None);
        assert!(
            md.contains("| 10 | 900 | 0.9000 | 800 | 0.8000 |"),
            "QPS table: {md}"
        );
        assert!(md.contains("| g1k build | shale s | hnswlib s |"), "{md}");
        assert!(md.contains("| shale | not measured | - |"), "{md}");
        assert!(md.contains("| hnswlib | 3.0 |"), "{md}");
        assert!(
            md.contains("| 0.1% | 50 | 1.0000 | 20 | (60) | 0.2000 < | 40 | - |"),
            "filter table, a peer short of the target: {md}"
        );
        assert!(
            md.contains("| 10% | 80 | 0.9600 | 40 | 40 | 0.9500 | 40 | 2.00x |"),
            "filter table, the best QPS at the target: {md}"
        );
    }

    #[test]
    fn query_points_parse() {
        assert_eq!(
            query_point("hnsw-query-glove100k-ef40"),
            Some(("glove100k", 40))
        );
        assert_eq!(query_point("hnsw-build-glove100k-t1"), None);
        assert_eq!(
            filter_point("hnsw-filter-glove100k-sel0.1-ef80"),
            Some(("glove100k", "0.1", 80))
        );
        assert_eq!(filter_point("hnsw-filter-glove100k-sel0.1"), None);
        assert_eq!(query_point("hnsw-filter-glove100k-sel50-ef80"), None);
        assert!(is_vector("embed-bulk") && !is_vector("fillrandom"));
    }
}

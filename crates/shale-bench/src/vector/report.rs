//! The "Vector search" section of the report: QPS against recall@10 per data set, the best
//! QPS at recall >= 0.95, build and insert times, index memory, filtered search per
//! selectivity, embedding throughput and semantic query latency, with Shale's ratio to
//! hnswlib and the targets from issue 5.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::record::Record;
use crate::report::Summary;

/// The recall a configuration must reach to count in "QPS at recall >= 0.95".
pub const RECALL_TARGET: f64 = 0.95;

/// Whether `workload` is one of `shale-bench vector`'s.
pub fn is_vector(workload: &str) -> bool {
    ["hnsw-", "knn-exact-", "embed-", "semantic-"]
        .iter()
        .any(|p| workload.starts_with(p))
}

/// `hnsw-query-glove100k-ef40` -> (`glove100k`, 40).
pub fn query_point(workload: &str) -> Option<(&str, usize)> {
    let rest = workload.strip_prefix("hnsw-query-")?;
    let (ds, ef) = rest.rsplit_once("-ef")?;
    Some((ds, ef.parse().ok()?))
}

/// `hnsw-filter-glove100k-sel0.1` -> (`glove100k`, `0.1`).
pub fn filter_point(workload: &str) -> Option<(&str, &str)> {
    workload.strip_prefix("hnsw-filter-")?.rsplit_once("-sel")
}

/// Per (data set, engine): (ef, QPS, recall) sorted by ef.
pub type Curves = BTreeMap<(String, String), Vec<(usize, f64, f64)>>;

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
            &["shale/hnswlib time (target <= 1.2)"]
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

/// Filtered search: QPS and recall per selectivity and engine.
fn filtered(out: &mut String, s: &Summary, ds: &str) {
    let of_ds = |w| {
        filter_point(w)
            .filter(|(d, _)| *d == ds)
            .map(|(_, sel)| sel)
    };
    let Some((rows, engines)) = table_rows(s, of_ds) else {
        return;
    };
    let _ = writeln!(
        out,
        "### {ds}: filtered search (an id range standing for a key range)\n\n{}",
        table_head("admitted", &engines, &["QPS", "recall"], &[])
    );
    for (sel, w) in rows {
        let mut line = format!("| {sel}% |");
        for e in &engines {
            let r = cell(s, w, e);
            let _ = write!(
                line,
                " {} | {} |",
                num(r.map(|r| r.ops_per_sec), 0),
                num(r.and_then(|r| r.recall), 4)
            );
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "\nRecall against the exact top-10 among the admitted ids; ef and the query count are in \
         each note.\n"
    );
}

/// Append the section to `out` (nothing when there are no vector records).
pub fn section(out: &mut String, s: &Summary, recall_chart: Option<&str>) {
    if !s.workloads.iter().any(|w| is_vector(w)) {
        return;
    }
    let _ = writeln!(out, "\n## Vector search\n");
    let _ = writeln!(
        out,
        "From `shale-bench vector`. Targets (issue 5): QPS at recall@10 >= {RECALL_TARGET} at least \
         hnswlib's with the same M and ef; build time <= 1.2x hnswlib's on 1 and 2 threads; insert \
         <= 0.2 ms at 50k nodes; bulk embedding >= 0.9x the model's raw throughput; semantic query \
         p50 <= 20 ms. Each workload's note (Details) says how it was measured.\n"
    );

    let curves = curves(s);
    let datasets: Vec<String> = {
        let mut d: Vec<String> = curves.keys().map(|(ds, _)| ds.clone()).collect();
        d.dedup();
        d
    };
    for ds in &datasets {
        let engines: Vec<&String> = s
            .engines
            .iter()
            .filter(|e| curves.contains_key(&((*ds).clone(), (*e).clone())))
            .collect();
        let _ = writeln!(
            out,
            "### {ds}: queries per second against recall@10\n\n{}",
            table_head("ef", &engines, &["QPS", "recall"], &[])
        );
        let mut efs: Vec<usize> = engines
            .iter()
            .flat_map(|e| curves[&((*ds).clone(), (*e).clone())].iter().map(|p| p.0))
            .collect();
        efs.sort_unstable();
        efs.dedup();
        for ef in efs {
            let mut line = format!("| {ef} |");
            for e in &engines {
                let p = curves[&((*ds).clone(), (*e).clone())]
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
        let best = |e: &str| -> Option<(usize, f64, f64)> {
            curves
                .get(&((*ds).clone(), e.to_string()))?
                .iter()
                .filter(|p| p.2 >= RECALL_TARGET)
                .copied()
                .max_by(|a, b| a.1.total_cmp(&b.1))
        };
        let _ = writeln!(out);
        for e in &engines {
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
        if let (Some(a), Some(b)) = (best("shale"), best("hnswlib")) {
            let _ = writeln!(
                out,
                "- shale/hnswlib at recall >= {RECALL_TARGET}: **{:.2}x** (target >= 1.0)",
                a.1 / b.1
            );
        }
        if let Some(r) = cell(s, &format!("knn-exact-{ds}"), "exact") {
            let _ = writeln!(
                out,
                "- exact search (the ground truth): {:.0} QPS on {} thread(s)",
                r.ops_per_sec, r.threads
            );
        }
        let _ = writeln!(out);

        builds(out, s, ds);
        memory(out, s, ds);
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
        filtered(out, s, ds);
    }
    if let Some(c) = recall_chart {
        let _ = writeln!(out, "![QPS against recall@10]({c})\n");
    }

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
            vrec("shale", "hnsw-filter-g1k-sel0.1", 50.0, Some(1.0)),
            vrec("faiss-flat", "hnsw-filter-g1k-sel0.1", 70.0, Some(0.1)),
        ];
        let mut md = String::new();
        section(&mut md, &crate::report::summarize(&records), None);
        assert!(
            md.contains("| 10 | 900 | 0.9000 | 800 | 0.8000 |"),
            "QPS table: {md}"
        );
        assert!(md.contains("| g1k build | shale s | hnswlib s |"), "{md}");
        assert!(md.contains("| shale | not measured | - |"), "{md}");
        assert!(md.contains("| hnswlib | 3.0 |"), "{md}");
        assert!(
            md.contains("| 0.1% | 50 | 1.0000 | 70 | 0.1000 |"),
            "filter table: {md}"
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
            filter_point("hnsw-filter-glove100k-sel0.1"),
            Some(("glove100k", "0.1"))
        );
        assert_eq!(query_point("hnsw-filter-glove100k-sel50"), None);
        assert!(is_vector("embed-bulk") && !is_vector("fillrandom"));
    }
}

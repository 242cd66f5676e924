//! The "Vector search" section of the report: QPS against recall@10 per data set, the best
//! QPS at recall >= 0.95, build and insert times, embedding throughput and semantic query
//! latency, each with Shale's ratio to its peer and the target from issue 5.

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
        let _ = writeln!(out, "### {ds}: queries per second against recall@10\n");
        let mut header = String::from("| ef |");
        let mut rule = String::from("|---:|");
        for e in &engines {
            let _ = write!(header, " {e} QPS | {e} recall |");
            rule.push_str("---:|---:|");
        }
        let _ = writeln!(out, "{header}\n{rule}");
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

        let mut builds = Vec::new();
        for w in &s.workloads {
            if let Some(t) = w.strip_prefix(&format!("hnsw-build-{ds}-t")) {
                builds.push((t.to_string(), w.clone()));
            }
        }
        if !builds.is_empty() {
            let _ = writeln!(
                out,
                "| {ds} build | shale s | hnswlib s | shale/hnswlib time (target <= 1.2) |\n|---|---:|---:|---:|"
            );
            for (t, w) in builds {
                let a = cell(s, &w, "shale").map(|r| r.seconds);
                let b = cell(s, &w, "hnswlib").map(|r| r.seconds);
                let _ = writeln!(
                    out,
                    "| {t} thread(s) | {} | {} | {} |",
                    num(a, 2),
                    num(b, 2),
                    ratio(a, b)
                );
            }
            let _ = writeln!(out);
        }
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
    if let Some(c) = recall_chart {
        let _ = writeln!(out, "![QPS against recall@10]({c})\n");
    }

    let raw = cell(s, "embed-bulk", "minilm-raw");
    let bulk = cell(s, "embed-bulk", "shale");
    if raw.is_some() || bulk.is_some() {
        let _ = writeln!(
            out,
            "### Embedding throughput\n\n| texts/s, model alone | texts/s, Db bulk path | ratio (target >= 0.9) |\n|---:|---:|---:|"
        );
        let (a, b) = (bulk.map(|r| r.ops_per_sec), raw.map(|r| r.ops_per_sec));
        let _ = writeln!(out, "| {} | {} | {} |\n", num(b, 1), num(a, 1), ratio(a, b));
    }
    let queries: Vec<(&String, &Record)> = s
        .engines
        .iter()
        .filter_map(|e| Some((e, cell(s, "semantic-query", e)?)))
        .collect();
    if !queries.is_empty() {
        let _ = writeln!(
            out,
            "### Semantic query, end to end (embed + search + fetch)\n\n| search | p50 ms (target <= 20) | p99 ms | mean ms | recall@10 vs exact |\n|---|---:|---:|---:|---:|"
        );
        for (e, r) in queries {
            let how = if e == "exact" { "exact" } else { "HNSW" };
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

    #[test]
    fn query_points_parse() {
        assert_eq!(
            query_point("hnsw-query-glove100k-ef40"),
            Some(("glove100k", 40))
        );
        assert_eq!(query_point("hnsw-build-glove100k-t1"), None);
        assert!(is_vector("embed-bulk") && !is_vector("fillrandom"));
    }
}

//! The median run of each (workload, engine) of a results file: what the report, its
//! vector section and the charts are drawn from.

use std::collections::BTreeMap;

use crate::record::Record;

/// Median record (by ops/s) per (workload, engine), and how many runs it is the median of
/// (for an even count, the lower of the two middle runs).
pub struct Summary {
    pub workloads: Vec<String>,
    pub engines: Vec<String>,
    pub cells: BTreeMap<(String, String), (Record, usize)>,
}

pub fn summarize(records: &[Record]) -> Summary {
    let mut workloads: Vec<String> = Vec::new();
    let mut engines: Vec<String> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<Record>> = BTreeMap::new();
    for r in records {
        if !workloads.contains(&r.workload) {
            workloads.push(r.workload.clone());
        }
        if !engines.contains(&r.engine) {
            engines.push(r.engine.clone());
        }
        groups
            .entry((r.workload.clone(), r.engine.clone()))
            .or_default()
            .push(r.clone());
    }
    // shale first, then peers in the order they appear.
    engines.sort_by_key(|e| e != "shale");
    let cells = groups
        .into_iter()
        .filter_map(|(k, mut v)| {
            v.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
            let n = v.len();
            v.get(n.saturating_sub(1) / 2).cloned().map(|r| (k, (r, n)))
        })
        .collect();
    Summary {
        workloads,
        engines,
        cells,
    }
}

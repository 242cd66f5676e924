//! The JSON-lines results file: read back, and the report and charts rewritten from it.

use std::path::Path;

use crate::engine::BenchResult;
use crate::record::Record;
use crate::{chart, report, summary};

/// Every record of the JSON-lines file at `path` (blank lines skipped).
pub fn read_records(path: &Path) -> BenchResult<Vec<Record>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        out.push(
            serde_json::from_str(line).map_err(|e| format!("{}:{}: {e}", path.display(), i + 1))?,
        );
    }
    Ok(out)
}

/// Rewrite OUT/report.md and its charts from every record in `jsonl`.
pub fn write_report(out: &Path, jsonl: &Path) -> BenchResult<()> {
    let records = read_records(jsonl)?;
    if let Err(why) = report::check_one_configuration(&records) {
        // The report says so at its top too.
        eprintln!("warning: {}: {why}", jsonl.display());
    }
    let chart_path = out.join("ops_per_sec.png");
    let link =
        chart::ops_chart(&summary::summarize(&records), &chart_path)?.then_some("ops_per_sec.png");
    let recall_link = chart::recall_chart(&records, &out.join(chart::RECALL_CHART))?
        .then_some(chart::RECALL_CHART);
    std::fs::write(
        out.join("report.md"),
        report::markdown_with(&records, link, recall_link),
    )?;
    Ok(())
}

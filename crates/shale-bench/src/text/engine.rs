//! What every engine of the text benchmark implements ([`Built`]: an index built, searched
//! one query at a time) and reports ([`TextResult`]).

use crate::metrics::Latencies;

/// One engine's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TextResult {
    pub engine: String,
    pub documents: usize,
    /// The median of `index_builds_docs_per_s`.
    pub index_docs_per_s: f64,
    /// Documents indexed per second until searchable, in each build.
    pub index_builds_docs_per_s: Vec<f64>,
    pub size_bytes: u64,
    pub queries: usize,
    pub qps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Shale: bytes written to the WAL and tables per document.
    pub bytes_written_per_doc: Option<f64>,
    /// Shale: queries whose pruned top 10 equals the exhaustive one.
    pub exhaustive_equal: Option<usize>,
    /// tantivy: documents per second committing (and reloading) every 100.
    pub fresh_docs_per_s: Option<f64>,
}

/// What every engine measures; the rest is set by the engine that has it.
pub struct Measured<'a> {
    pub engine: &'a str,
    pub documents: usize,
    pub index_secs: f64,
    pub size_bytes: u64,
    pub queries: usize,
    /// Queries per second of each pass.
    pub runs: Vec<f64>,
    pub latencies: &'a Latencies,
}

impl TextResult {
    pub fn new(m: Measured<'_>) -> TextResult {
        TextResult {
            engine: m.engine.to_owned(),
            documents: m.documents,
            index_docs_per_s: m.documents as f64 / m.index_secs,
            index_builds_docs_per_s: Vec::new(),
            size_bytes: m.size_bytes,
            queries: m.queries,
            qps: median(m.runs),
            p50_us: m.latencies.quantile_us(0.5),
            p99_us: m.latencies.quantile_us(0.99),
            bytes_written_per_doc: None,
            exhaustive_equal: None,
            fresh_docs_per_s: None,
        }
    }
}

/// The median of `xs` (the upper one of an even count); 0 for none.
pub fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs.get(xs.len() / 2).copied().unwrap_or(0.0)
}

/// An engine with its index built: one query at a time, then what it measures once the
/// query passes are done.
pub trait Built {
    fn search(&mut self, query: &str) -> Result<(), String>;

    /// Seconds from the first document until all were searchable.
    fn index_secs(&self) -> f64;

    /// The engine's result, given each pass's queries per second and the first pass's
    /// latencies.
    fn finish(self: Box<Self>, runs: Vec<f64>, lat: &Latencies) -> Result<TextResult, String>;
}

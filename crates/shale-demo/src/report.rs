//! What the demo prints besides its search results: progress bars, text clipped to a line,
//! and the summary at the end, with what it reports.

use indicatif::{ProgressBar, ProgressStyle};

/// What the summary at the end reports.
#[derive(Default)]
pub struct Summary {
    pub load_puts_per_sec: f64,
    pub glosses: usize,
    pub embedder: String,
    /// Texts embedded by this run, and their rate.
    pub embedded: u64,
    pub embed_per_sec: f64,
    /// Vectors taken over from the previous run.
    pub reused: usize,
    pub query_ms_hnsw: Vec<f64>,
    pub query_ms_exact: Vec<f64>,
    pub disk_bytes: u64,
    pub graph_bytes: u64,
    pub vectors_bytes: u64,
}

/// A progress bar over `len` steps of `what`, its rate in `unit`.
pub fn progress(len: usize, what: &str, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "  {what:<10} [{{bar:40}}] {{pos}}/{{len}} {{per_sec}} {unit}, {{eta}} left"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// The summary at the end of the demo.
pub fn print_summary(s: &Summary) {
    let mb = |b: u64| b as f64 / 1e6;
    let mut hnsw = s.query_ms_hnsw.clone();
    let mut exact = s.query_ms_exact.clone();
    println!("\nSummary");
    println!("  glosses             {}", s.glosses);
    println!(
        "  key-value load      {:.0} puts/s (WAL on, batches of 1000)",
        s.load_puts_per_sec
    );
    println!("  embedder            {}", s.embedder);
    if s.embedded > 0 {
        println!(
            "  embed + index       {:.0} texts/s ({} texts embedded by this run)",
            s.embed_per_sec, s.embedded
        );
    } else {
        println!(
            "  embed + index       nothing to embed: {} vectors reused from the last run",
            s.reused
        );
    }
    println!(
        "  query p50           {:.1} ms through HNSW, {:.1} ms exact (embed + search + fetch)",
        median(&mut hnsw),
        median(&mut exact)
    );
    println!(
        "  index in memory     {:.1} MB graph (codes and links) + {:.1} MB full vectors, mapped",
        mb(s.graph_bytes),
        mb(s.vectors_bytes)
    );
    println!(
        "  on disk             {:.1} MB (glosses, index, vector store, checkpoint)",
        mb(s.disk_bytes)
    );
}

/// The middle of `v` (sorting it); 0 for none.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `s` cut to `n` characters, with an ellipsis when it was longer.
pub fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

//! Shale's demo: the WordNet 3.0 glosses (about 117,000 synsets) as a key-value database,
//! then all of them embedded with a local MiniLM model and searched by meaning, by keywords
//! (a BM25 text index) and by both fused.
//!
//! - `main.rs`: the arguments and the key-value tour; `semantic.rs`: the semantic tour;
//!   `keyword.rs`: its keyword and hybrid searches; `report.rs`: progress bars, clipped
//!   lines and the summary at the end.
//!
//! Run it through `scripts/demo.sh`, which fetches the model and WordNet first. The
//! key-value database is made again on every run; the semantic one is kept, so a second run
//! finds every gloss embedded and starts its searches at once.

mod keyword;
mod report;
mod semantic;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_testkit::wordnet::{self, Gloss};

use report::{clip, print_summary, progress, Summary};

#[derive(Parser, Debug)]
#[command(about = "Shale demo: WordNet glosses, scans, and semantic search")]
struct Args {
    /// Directory holding WordNet's data.noun, data.verb, data.adj, data.adv
    /// (scripts/fetch-wordnet.sh prints it).
    #[arg(long)]
    wordnet: PathBuf,
    /// Where the demo databases go: `kv/` is made again on every run, `semantic/` is kept
    /// (its vectors are reused by the next run).
    #[arg(long, default_value = "target/demo-db")]
    db: PathBuf,
    /// Glosses embedded for semantic search, spread over WordNet (0: all of them).
    #[arg(long, default_value_t = 0)]
    semantic_sample: usize,
    /// Start the semantic database afresh, embedding everything again.
    #[arg(long)]
    fresh: bool,
}

fn main() {
    shale_embed::quiet_candle_threads();
    if let Err(e) = run(&Args::parse()) {
        eprintln!("shale-demo: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let glosses = wordnet::load(&args.wordnet)?;
    println!(
        "WordNet 3.0: {} synsets ({:.1} MB of glosses) from {}\n",
        glosses.len(),
        glosses.iter().map(|g| g.text.len()).sum::<usize>() as f64 / 1e6,
        args.wordnet.display()
    );
    clear_demo_dir(&args.db, args.fresh)?;
    let mut summary = Summary {
        glosses: glosses.len(),
        ..Summary::default()
    };
    summary.load_puts_per_sec =
        key_value_tour(&args.db.join("kv"), &glosses).map_err(|e| e.to_string())?;
    semantic::tour(
        &args.db.join("semantic"),
        &glosses,
        args.semantic_sample,
        &mut summary,
    )?;
    print_summary(&summary);
    Ok(())
}

/// Remove the previous run's key-value database (`kv/` under `dir`; `semantic/` too when
/// `fresh`), refusing a directory that holds anything else: `--db` may name a directory
/// the user cares about.
fn clear_demo_dir(dir: &std::path::Path, fresh: bool) -> Result<(), String> {
    let show = |e: std::io::Error| format!("{}: {e}", dir.display());
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(show(e)),
    };
    let mut ours = Vec::new();
    for entry in entries {
        let entry = entry.map_err(show)?;
        match entry.file_name().to_str() {
            Some("kv") => ours.push(entry.path()),
            Some("semantic") if fresh => ours.push(entry.path()),
            Some("semantic") => {}
            _ => {
                return Err(format!(
                    "{} holds {:?}, not only a previous demo's kv/ and semantic/; \
                     give --db an empty or new directory",
                    dir.display(),
                    entry.file_name()
                ))
            }
        }
    }
    for path in ours {
        std::fs::remove_dir_all(&path).map_err(show)?;
    }
    Ok(())
}

/// Load everything, read a few keys back, scan a prefix, reopen. Returns the load rate.
fn key_value_tour(dir: &Path, glosses: &[Gloss]) -> shale::Result<f64> {
    println!("1. Key-value: every gloss, keyed pos/word/offset");
    let db = Db::open(dir, Options::default())?;
    let bar = progress(glosses.len(), "load", "puts");
    let start = Instant::now();
    for chunk in glosses.chunks(1000) {
        let mut batch = WriteBatch::new();
        for g in chunk {
            batch.put(&g.key, &g.text);
        }
        db.write(batch, WriteOptions::default())?;
        bar.inc(chunk.len() as u64);
    }
    let secs = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let bytes: usize = glosses.iter().map(|g| g.key.len() + g.text.len()).sum();
    println!(
        "  loaded {} glosses in {:.2} s: {:.0} puts/s, {:.1} MB/s (WAL on, batches of 1000)",
        glosses.len(),
        secs,
        glosses.len() as f64 / secs,
        bytes as f64 / 1e6 / secs
    );

    let start = Instant::now();
    let mut found = 0;
    for g in glosses.iter().step_by(97) {
        found += usize::from(db.get(&g.key)?.is_some());
    }
    let gets = glosses.len().div_ceil(97);
    println!(
        "  {found} of {gets} point gets found, {:.1} µs each",
        start.elapsed().as_secs_f64() * 1e6 / gets as f64
    );
    if let Some(g) = glosses.iter().find(|g| g.key.starts_with("noun/dog/")) {
        let value = db.get(&g.key)?.unwrap_or_default();
        println!("  get {} -> {}", g.key, String::from_utf8_lossy(&value));
    }
    println!("  scan prefix noun/light/ (first 5 of every sense of 'light' as a noun):");
    for pair in db.prefix("noun/light/")?.take(5) {
        let (k, v) = pair?;
        println!(
            "    {:<26} {}",
            String::from_utf8_lossy(&k),
            clip(&String::from_utf8_lossy(&v), 70)
        );
    }
    let start = Instant::now();
    let n = db.range::<&[u8]>(..)?.count();
    println!(
        "  full scan: {n} entries in {:.0} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    db.close()?;
    drop(db);
    let start = Instant::now();
    let db = Db::open(dir, Options::default())?;
    let n = db.prefix("verb/")?.count();
    println!(
        "  reopened in {:.0} ms; {n} verbs\n",
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(glosses.len() as f64 / secs)
}

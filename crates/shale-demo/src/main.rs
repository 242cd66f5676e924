//! Shale's demo: the WordNet 3.0 glosses (about 117,000 synsets) as a key-value database,
//! then a sample of them searched by meaning with a local MiniLM model.
//!
//! Run it through `scripts/demo.sh`, which fetches the model and WordNet first.

mod wordnet;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use shale::semantic::{Embedder, Index, IndexOptions, SearchOptions};
use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_embed::MiniLm;

use wordnet::Gloss;

#[derive(Parser, Debug)]
#[command(about = "Shale demo: WordNet glosses, scans, and semantic search")]
struct Args {
    /// Directory holding WordNet's data.noun, data.verb, data.adj, data.adv
    /// (scripts/fetch-wordnet.sh prints it).
    #[arg(long)]
    wordnet: PathBuf,
    /// Where the demo databases go (recreated on every run).
    #[arg(long, default_value = "target/demo-db")]
    db: PathBuf,
    /// Glosses embedded for semantic search (the model embeds ~100-200 a second per core;
    /// all of WordNet would take about ten minutes on two cores).
    #[arg(long, default_value_t = 4000)]
    semantic_sample: usize,
}

/// Questions a person might ask, answered from the glosses by meaning, not by words.
const QUERIES: [&str; 8] = [
    "a large animal that lives in the ocean",
    "an instrument for measuring time",
    "a feeling of great happiness",
    "to run away quickly from danger",
    "a building where books are kept and lent",
    "the scientific study of stars and planets",
    "a sweet food made from roasted cacao seeds",
    "someone who repairs water pipes",
];

/// Synsets the sample always includes, so that the queries above have their answers in it
/// (the rest of the sample is spread evenly over WordNet).
const ANSWERS: [&str; 9] = [
    "noun/whale/",
    "noun/clock/",
    "noun/happiness/",
    "verb/flee/",
    "noun/library/",
    "noun/astronomy/",
    "noun/chocolate/",
    "noun/plumber/",
    "verb/sprint/",
];

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
    clear_demo_dir(&args.db)?;
    key_value_tour(&args.db.join("kv"), &glosses).map_err(|e| e.to_string())?;
    semantic_tour(&args.db.join("semantic"), &glosses, args.semantic_sample)
}

/// Remove the previous run's databases (`kv/` and `semantic/` under `dir`), refusing a
/// directory that holds anything else: `--db` may name a directory the user cares about.
fn clear_demo_dir(dir: &std::path::Path) -> Result<(), String> {
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
            Some("kv" | "semantic") => ours.push(entry.path()),
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

fn progress(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "  {what:<10} [{{bar:40}}] {{pos}}/{{len}} {{per_sec}} eta {{eta}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

/// Load everything, read a few keys back, scan a prefix, reopen.
fn key_value_tour(dir: &Path, glosses: &[Gloss]) -> shale::Result<()> {
    println!("1. Key-value: every gloss, keyed pos/word/offset");
    let db = Db::open(dir, Options::default())?;
    let bar = progress(glosses.len(), "load");
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
    Ok(())
}

/// Embed a sample, search it exactly and through HNSW, reopen from the checkpoint.
fn semantic_tour(dir: &Path, glosses: &[Gloss], sample: usize) -> Result<(), String> {
    println!("2. Semantic search: all-MiniLM-L6-v2 (384 dimensions) run locally");
    let model = MiniLm::from_env().map_err(|e| e.to_string())?;
    let embedder: Arc<dyn Embedder> = Arc::new(model);
    // The glosses are under noun/, verb/, adj/ and adv/: one index over all of them.
    let open = || -> Result<(Arc<Db>, Index), String> {
        let db = Arc::new(Db::open(dir, Options::default()).map_err(|e| e.to_string())?);
        let index = Index::open(&db, "glosses", IndexOptions::text(Arc::clone(&embedder)))
            .map_err(|e| e.to_string())?;
        Ok((db, index))
    };
    let (db, index) = open()?;
    // Every n-th gloss, so the sample spans all of WordNet, plus the queries' answers.
    let step = (glosses.len() / sample.max(1)).max(1);
    let mut chosen: Vec<&Gloss> = glosses.iter().step_by(step).take(sample).collect();
    let answers: Vec<&Gloss> = glosses
        .iter()
        .filter(|g| ANSWERS.iter().any(|a| g.key.starts_with(a)))
        .collect();
    println!(
        "  sample: {} glosses spread over WordNet, plus the {} senses of {}",
        chosen.len(),
        answers.len(),
        ANSWERS
            .iter()
            .map(|a| a.trim_end_matches('/'))
            .collect::<Vec<_>>()
            .join(", ")
    );
    chosen.extend(answers);
    let start = Instant::now();
    for chunk in chosen.chunks(256) {
        let mut batch = WriteBatch::new();
        for g in chunk {
            batch.put(&g.key, &g.text);
        }
        db.write(batch, WriteOptions::default())
            .map_err(|e| e.to_string())?;
    }
    let put_secs = start.elapsed().as_secs_f64();
    println!(
        "  {} glosses written in {:.2} s ({:.0} puts/s): embedding runs in the background",
        chosen.len(),
        put_secs,
        chosen.len() as f64 / put_secs
    );
    let bar = progress(chosen.len(), "embed");
    loop {
        let (applied, queued) = index.progress();
        bar.set_position(applied);
        if applied >= queued {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bar.finish_and_clear();
    let embed_secs = start.elapsed().as_secs_f64();
    println!(
        "  embedded and indexed in {:.1} s: {:.0} texts/s on {} threads",
        embed_secs,
        chosen.len() as f64 / embed_secs,
        shale_embed::default_threads()
    );

    let mut exact_ms = Vec::new();
    let mut hnsw_ms = Vec::new();
    let mut agree = 0;
    for query in QUERIES {
        let t = Instant::now();
        let exact = index
            .search(query, &SearchOptions::k(3).exact())
            .map_err(|e| e.to_string())?;
        exact_ms.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let approx = index
            .search(query, &SearchOptions::k(3))
            .map_err(|e| e.to_string())?;
        hnsw_ms.push(t.elapsed().as_secs_f64() * 1e3);
        agree += usize::from(exact.first().map(|h| &h.key) == approx.first().map(|h| &h.key));
        println!("\n  \"{query}\"");
        for (rank, hit) in approx.iter().enumerate() {
            println!(
                "    {}. {:.3}  {:<28} {}",
                rank + 1,
                hit.score,
                String::from_utf8_lossy(&hit.key),
                clip(hit.text().unwrap_or_default(), 60)
            );
        }
    }
    println!(
        "\n  query latency end to end (embed + search + fetch), median: exact {:.1} ms, \
         HNSW {:.1} ms; same top hit for {agree} of {} queries",
        median(&mut exact_ms),
        median(&mut hnsw_ms),
        QUERIES.len()
    );

    // Restrict a search to one part of speech with a key range.
    let verbs = SearchOptions::k(3).prefix("verb/");
    let hits = index
        .search("to move fast on foot", &verbs)
        .map_err(|e| e.to_string())?;
    println!("\n  \"to move fast on foot\", verbs only:");
    for hit in &hits {
        println!(
            "    {:.3}  {:<28} {}",
            hit.score,
            String::from_utf8_lossy(&hit.key),
            clip(hit.text().unwrap_or_default(), 60)
        );
    }

    // Deletes and overwrites take effect for search at once.
    if let Some(top) = hits.first() {
        db.delete(&top.key).map_err(|e| e.to_string())?;
        let again = index
            .search("to move fast on foot", &verbs)
            .map_err(|e| e.to_string())?;
        let gone = again.iter().all(|h| h.key != top.key);
        println!(
            "  after deleting {}: {}",
            String::from_utf8_lossy(&top.key),
            if gone {
                "no longer found"
            } else {
                "STILL FOUND (bug)"
            }
        );
    }

    db.close().map_err(|e| e.to_string())?;
    drop((db, index));
    let start = Instant::now();
    let (db, index) = open()?;
    let r = index.recovery();
    println!(
        "\n  reopened in {:.0} ms: {} graph nodes taken over from the checkpoint, {} texts to \
         embed again",
        start.elapsed().as_secs_f64() * 1e3,
        r.graph_nodes_reused,
        r.texts_to_embed
    );
    let t = Instant::now();
    let hits = index
        .search(QUERIES[0], &SearchOptions::k(1))
        .map_err(|e| e.to_string())?;
    if let Some(hit) = hits.first() {
        println!(
            "  \"{}\" -> {} ({:.1} ms)",
            QUERIES[0],
            String::from_utf8_lossy(&hit.key),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    db.close().map_err(|e| e.to_string())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

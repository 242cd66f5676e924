//! Shale's demo: the WordNet 3.0 glosses (about 117,000 synsets) as a key-value database,
//! then all of them embedded with a local MiniLM model and searched by meaning, by keywords
//! (a BM25 text index) and by both fused (`keyword.rs`).
//!
//! Run it through `scripts/demo.sh`, which fetches the model and WordNet first. The
//! key-value database is made again on every run; the semantic one is kept, so a second run
//! finds every gloss embedded and starts its searches at once.

mod keyword;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_search::semantic::{Embedder, Index, IndexOptions, SearchOptions};
use shale_testkit::wordnet::{self, Gloss};

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

/// What the summary at the end reports.
#[derive(Default)]
struct Summary {
    load_puts_per_sec: f64,
    glosses: usize,
    embedder: String,
    /// Texts embedded by this run, and their rate.
    embedded: u64,
    embed_per_sec: f64,
    /// Vectors taken over from the previous run.
    reused: usize,
    query_ms_hnsw: Vec<f64>,
    query_ms_exact: Vec<f64>,
    disk_bytes: u64,
    graph_bytes: u64,
    vectors_bytes: u64,
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

/// Synsets a sample (`--semantic-sample`) always includes, so that the queries above have
/// their answers in it (the rest of the sample is spread evenly over WordNet).
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
    clear_demo_dir(&args.db, args.fresh)?;
    let mut summary = Summary {
        glosses: glosses.len(),
        ..Summary::default()
    };
    summary.load_puts_per_sec =
        key_value_tour(&args.db.join("kv"), &glosses).map_err(|e| e.to_string())?;
    semantic_tour(
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

fn progress(len: usize, what: &str, unit: &str) -> ProgressBar {
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

/// Embed the glosses not embedded yet (all of them on a first run), search them exactly and
/// through HNSW, reopen from the checkpoint.
fn semantic_tour(
    dir: &Path,
    glosses: &[Gloss],
    sample: usize,
    summary: &mut Summary,
) -> Result<(), String> {
    let loaded = shale_embed::load_default().map_err(|e| e.to_string())?;
    summary.embedder = format!("all-MiniLM-L6-v2 on {}", loaded.runtime);
    println!(
        "2. Semantic search: all-MiniLM-L6-v2 (384 dimensions) run locally on {}, {} threads",
        loaded.runtime,
        shale_embed::default_threads()
    );
    if let Some(why) = &loaded.fallback_reason {
        println!("  (ONNX Runtime did not load, so candle runs it, about 3x slower: {why})");
    }
    let embedder: Arc<dyn Embedder> = loaded.embedder;
    // The glosses are under noun/, verb/, adj/ and adv/: one index over all of them.
    let open = || -> Result<(Arc<Db>, Index), String> {
        let db = Arc::new(Db::open(dir, Options::default()).map_err(|e| e.to_string())?);
        let index = Index::open(&db, "glosses", IndexOptions::text(Arc::clone(&embedder)))
            .map_err(|e| e.to_string())?;
        Ok((db, index))
    };
    let start = Instant::now();
    let (db, index) = open()?;
    // Opened before the writes: each gloss's document record is written with it.
    let text = shale_search::TextIndex::open(&db, "glosses", shale_search::TextIndexOptions::new())
        .map_err(|e| e.to_string())?;
    let r = index.recovery();
    summary.reused = r.graph_nodes_reused + r.vectors_reinserted;
    if summary.reused > 0 || r.texts_to_embed > 0 {
        println!(
            "  opened the previous run's index in {:.2} s: {} vectors reused, {} texts left to embed",
            start.elapsed().as_secs_f64(),
            summary.reused,
            r.texts_to_embed
        );
    }
    // Every n-th gloss (all of them by default), so a sample spans all of WordNet.
    let step = glosses.len().checked_div(sample).map_or(1, |s| s.max(1));
    let mut chosen: Vec<&Gloss> = glosses
        .iter()
        .step_by(step)
        .take(if sample == 0 { usize::MAX } else { sample })
        .collect();
    if sample != 0 {
        // A sample also holds the queries' answers.
        let answers = glosses
            .iter()
            .filter(|g| {
                ANSWERS
                    .iter()
                    .chain(&keyword::ANSWERS)
                    .any(|a| g.key.starts_with(a))
            })
            .filter(|g| !chosen.iter().any(|c| c.key == g.key));
        let answers: Vec<&Gloss> = answers.collect();
        chosen.extend(answers);
    }
    // Write only what the database does not hold already: a put embeds its text again.
    let start = Instant::now();
    let mut written = 0usize;
    for chunk in chosen.chunks(1000) {
        let mut batch = WriteBatch::new();
        for g in chunk {
            let held = db.get(&g.key).map_err(|e| e.to_string())?;
            if held.as_deref() != Some(g.text.as_bytes()) {
                batch.put(&g.key, &g.text);
                written += 1;
            }
        }
        if !batch.is_empty() {
            db.write(batch, WriteOptions::default())
                .map_err(|e| e.to_string())?;
        }
    }
    let (applied, queued) = index.progress();
    let to_embed = queued - applied;
    if written > 0 {
        println!(
            "  {written} glosses written in {:.2} s: embedding runs in the background",
            start.elapsed().as_secs_f64()
        );
    }
    if to_embed > 0 {
        let bar = progress(to_embed as usize, "embed", "texts/s");
        loop {
            let (now, _) = index.progress();
            bar.set_position(now - applied);
            if now >= queued {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
        index.wait_indexed().map_err(|e| e.to_string())?;
        let secs = start.elapsed().as_secs_f64();
        summary.embedded = to_embed;
        summary.embed_per_sec = to_embed as f64 / secs;
        println!(
            "  embedded and indexed {to_embed} glosses in {:.1} s: {:.0} texts/s",
            secs, summary.embed_per_sec
        );
    } else {
        println!(
            "  all {} glosses already embedded: nothing to do",
            chosen.len()
        );
    }

    let mut agree = 0;
    for query in QUERIES {
        let t = Instant::now();
        let exact = index
            .search(query, &SearchOptions::k(3).exact())
            .map_err(|e| e.to_string())?;
        let exact_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let approx = index
            .search(query, &SearchOptions::k(3))
            .map_err(|e| e.to_string())?;
        let hnsw_ms = t.elapsed().as_secs_f64() * 1e3;
        summary.query_ms_exact.push(exact_ms);
        summary.query_ms_hnsw.push(hnsw_ms);
        agree += usize::from(exact.first().map(|h| &h.key) == approx.first().map(|h| &h.key));
        println!("\n  \"{query}\"  ({hnsw_ms:.1} ms through HNSW, {exact_ms:.1} ms exact)");
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
        "\n  same top hit exactly and through HNSW for {agree} of {} queries",
        QUERIES.len()
    );

    // Restrict a search to one part of speech with a key range.
    let verbs = SearchOptions::k(3).prefix("verb/");
    let t = Instant::now();
    let hits = index
        .search("to move fast on foot", &verbs)
        .map_err(|e| e.to_string())?;
    println!(
        "\n  \"to move fast on foot\", verbs only ({:.1} ms):",
        t.elapsed().as_secs_f64() * 1e3
    );
    for hit in &hits {
        println!(
            "    {:.3}  {:<28} {}",
            hit.score,
            String::from_utf8_lossy(&hit.key),
            clip(hit.text().unwrap_or_default(), 60)
        );
    }

    keyword::tour(&db, &index, &text)?;
    drop(text);

    // Deletes take effect for search at once; the gloss is put back afterwards (one text
    // embedded again), so that the next run finds everything in place.
    if let Some(top) = hits.first() {
        let value = db
            .get(&top.key)
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
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
        db.put(&top.key, &value).map_err(|e| e.to_string())?;
        index.wait_indexed().map_err(|e| e.to_string())?;
    }

    let stats = index.stats();
    summary.graph_bytes = stats.graph_bytes;
    let index_dir = shale_search::semantic::index_dir(dir, "glosses");
    summary.vectors_bytes = std::fs::metadata(index_dir.join("VECTORS")).map_or(0, |m| m.len());
    db.close().map_err(|e| e.to_string())?;
    drop((db, index));
    summary.disk_bytes = dir_bytes(dir);
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

/// The bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

fn print_summary(s: &Summary) {
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

//! The demo's semantic tour: the glosses embedded (only those the previous run did not
//! leave), searched by meaning exactly and through HNSW, within a key range, by keywords and
//! both fused (`keyword.rs`), a delete seen by search at once, and a reopen from the index's
//! checkpoint.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_search::semantic::{Embedder, SearchHit, SearchOptions, VectorIndex, VectorIndexOptions};
use shale_search::TextIndex;
use shale_testkit::wordnet::Gloss;

use crate::keyword;
use crate::report::{clip, progress, Summary};

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

/// The query of the search within a key range, and its range.
const VERB_QUERY: &str = "to move fast on foot";

/// An error as the demo reports it.
fn message(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Embed the glosses not embedded yet (all of them on a first run), search them exactly and
/// through HNSW, reopen from the checkpoint.
pub fn tour(
    dir: &Path,
    glosses: &[Gloss],
    sample: usize,
    summary: &mut Summary,
) -> Result<(), String> {
    let embedder = load_model(summary)?;
    let start = Instant::now();
    let (db, index) = open(dir, &embedder)?;
    // Opened before the writes: each gloss's document record is written with it.
    let text_index =
        TextIndex::open(&db, "glosses", shale_search::TextIndexOptions::new()).map_err(message)?;
    report_reuse(&index, start, summary);
    let chosen = choose(glosses, sample);
    let start = Instant::now();
    let written = write_missing(&db, &chosen)?;
    wait_embedded(&index, written, chosen.len(), start, summary)?;

    exact_against_hnsw(&index, summary)?;
    let verbs = verbs_only(&index)?;
    keyword::tour(&db, &index, &text_index)?;
    drop(text_index);
    if let Some(top) = verbs.first() {
        delete_and_put_back(&db, &index, top)?;
    }

    summary.graph_bytes = index.stats().graph_bytes;
    let index_dir = shale_search::semantic::index_dir(dir, "glosses");
    summary.vectors_bytes = std::fs::metadata(index_dir.join("VECTORS")).map_or(0, |m| m.len());
    db.close().map_err(message)?;
    drop((db, index));
    summary.disk_bytes = dir_bytes(dir);
    reopen(dir, &embedder)
}

/// The default embedder, said in the tour's heading and the summary.
fn load_model(summary: &mut Summary) -> Result<Arc<dyn Embedder>, String> {
    let loaded = shale_embed::load_default().map_err(message)?;
    summary.embedder = format!("all-MiniLM-L6-v2 on {}", loaded.runtime);
    println!(
        "2. Semantic search: all-MiniLM-L6-v2 (384 dimensions) run locally on {}, {} threads",
        loaded.runtime,
        shale_embed::default_threads()
    );
    if let Some(why) = &loaded.fallback_reason {
        println!("  (ONNX Runtime did not load, so candle runs it, about 3x slower: {why})");
    }
    Ok(loaded.embedder)
}

/// The database in `dir` and its semantic index. The glosses are under noun/, verb/, adj/
/// and adv/: one index over all of them.
fn open(dir: &Path, embedder: &Arc<dyn Embedder>) -> Result<(Arc<Db>, VectorIndex), String> {
    let db = Arc::new(Db::open(dir, Options::default()).map_err(message)?);
    let index = VectorIndex::open(
        &db,
        "glosses",
        VectorIndexOptions::text(Arc::clone(embedder)),
    )
    .map_err(message)?;
    Ok((db, index))
}

/// Say what opening the index took over from the previous run.
fn report_reuse(index: &VectorIndex, start: Instant, summary: &mut Summary) {
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
}

/// Every n-th gloss (all of them when `sample` is 0), so a sample spans all of WordNet; a
/// sample also holds the queries' answers.
fn choose(glosses: &[Gloss], sample: usize) -> Vec<&Gloss> {
    let step = glosses.len().checked_div(sample).map_or(1, |s| s.max(1));
    let mut chosen: Vec<&Gloss> = glosses
        .iter()
        .step_by(step)
        .take(if sample == 0 { usize::MAX } else { sample })
        .collect();
    if sample != 0 {
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
    chosen
}

/// Write only what the database does not hold already (a put embeds its text again);
/// returns how many glosses were written.
fn write_missing(db: &Db, chosen: &[&Gloss]) -> Result<usize, String> {
    let mut written = 0usize;
    for chunk in chosen.chunks(1000) {
        let mut batch = WriteBatch::new();
        for g in chunk {
            let held = db.get(&g.key).map_err(message)?;
            if held.as_deref() != Some(g.text.as_bytes()) {
                batch.put(&g.key, &g.text);
                written += 1;
            }
        }
        if !batch.is_empty() {
            db.write(batch, WriteOptions::default()).map_err(message)?;
        }
    }
    Ok(written)
}

/// Follow the background embedding of what was written since `start` with a progress bar
/// until the index holds all of it.
fn wait_embedded(
    index: &VectorIndex,
    written: usize,
    chosen: usize,
    start: Instant,
    summary: &mut Summary,
) -> Result<(), String> {
    let (applied, queued) = index.progress();
    let to_embed = queued - applied;
    if written > 0 {
        println!(
            "  {written} glosses written in {:.2} s: embedding runs in the background",
            start.elapsed().as_secs_f64()
        );
    }
    if to_embed == 0 {
        println!("  all {chosen} glosses already embedded: nothing to do");
        return Ok(());
    }
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
    index.wait_indexed().map_err(message)?;
    let secs = start.elapsed().as_secs_f64();
    summary.embedded = to_embed;
    summary.embed_per_sec = to_embed as f64 / secs;
    println!(
        "  embedded and indexed {to_embed} glosses in {:.1} s: {:.0} texts/s",
        secs, summary.embed_per_sec
    );
    Ok(())
}

/// Each of `QUERIES` searched exactly and through HNSW, timed; prints the HNSW top 3 and
/// how often the two agree on the top hit.
fn exact_against_hnsw(index: &VectorIndex, summary: &mut Summary) -> Result<(), String> {
    let mut agree = 0;
    for query in QUERIES {
        let t = Instant::now();
        let exact = index
            .search(query, &SearchOptions::k(3).exact())
            .map_err(message)?;
        let exact_ms = t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let approx = index.search(query, &SearchOptions::k(3)).map_err(message)?;
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
    Ok(())
}

/// A search restricted to one part of speech with a key range: the verbs.
fn verbs_only(index: &VectorIndex) -> Result<Vec<SearchHit>, String> {
    let t = Instant::now();
    let hits = index
        .search(VERB_QUERY, &SearchOptions::k(3).prefix("verb/"))
        .map_err(message)?;
    println!(
        "\n  \"{VERB_QUERY}\", verbs only ({:.1} ms):",
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
    Ok(hits)
}

/// Deletes take effect for search at once; the gloss is put back afterwards (one text
/// embedded again), so that the next run finds everything in place.
fn delete_and_put_back(db: &Db, index: &VectorIndex, top: &SearchHit) -> Result<(), String> {
    let value = db.get(&top.key).map_err(message)?.unwrap_or_default();
    db.delete(&top.key).map_err(message)?;
    let again = index
        .search(VERB_QUERY, &SearchOptions::k(3).prefix("verb/"))
        .map_err(message)?;
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
    db.put(&top.key, &value).map_err(message)?;
    index.wait_indexed().map_err(message)
}

/// Open the database again and search it: the index starts from its checkpoint.
fn reopen(dir: &Path, embedder: &Arc<dyn Embedder>) -> Result<(), String> {
    let start = Instant::now();
    let (db, index) = open(dir, embedder)?;
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
        .map_err(message)?;
    if let Some(hit) = hits.first() {
        println!(
            "  \"{}\" -> {} ({:.1} ms)",
            QUERIES[0],
            String::from_utf8_lossy(&hit.key),
            t.elapsed().as_secs_f64() * 1e3
        );
    }
    db.close().map_err(message)
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

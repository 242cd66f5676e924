//! `shale-bench text --quality` (feature `semantic`): keywords, meaning and both fused on a
//! retrieval task built from WordNet itself, and the latency of a hybrid query.
//!
//! The task: find the sense a usage example illustrates. Documents are WordNet's synsets as
//! `lemmas: definition` (their quoted examples removed); queries are a seeded sample of the
//! examples ("the dog barked all night"), each with one relevant document, the synset it
//! illustrates. A word of the example is often one of the synset's lemmas, which keywords
//! match but cannot tell between a word's senses; meaning can, from the rest of the
//! sentence. Reported for each retriever and fusion: nDCG@10 (one relevant document:
//! 1 / log2(1 + rank) within the top 10) and hit@10.
//!
//! Documents are embedded by all-MiniLM-L6-v2 through the semantic index (its vectors are
//! kept in `--dir` for the next run); the dense retriever searches exactly, so its figures
//! are the model's, not the graph's. The latency part times `hybrid::search` with the query
//! vector given (HNSW, the default windows) and, beside it, the query's embedding.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_search::hybrid::{self, Fusion, Ranking};
use shale_search::semantic::{SearchOptions, VectorIndex, VectorIndexOptions};
use shale_search::{HybridOptions, KeywordOptions, TextIndex, TextIndexOptions};
use shale_testkit::wordnet::Gloss;

use crate::metrics::Latencies;

/// How deep each retriever's ranking goes into the fusion.
const WINDOW: usize = 100;

/// One retriever's or fusion's figures.
#[derive(Debug, Clone, serde::Serialize)]
pub struct QualityRow {
    pub method: String,
    pub ndcg_at_10: f64,
    pub hit_at_10: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Quality {
    pub documents: usize,
    pub queries: usize,
    pub rows: Vec<QualityRow>,
    pub hybrid_p50_us: f64,
    pub hybrid_p99_us: f64,
    pub embed_p50_us: f64,
    pub keyword_p50_us: f64,
}

/// A synset's document (`lemmas: definition`) and its examples.
fn split(g: &Gloss) -> (String, Vec<String>) {
    let (words, gloss) = g.text.split_once(": ").unwrap_or(("", &g.text));
    let mut parts = gloss.split("; \"");
    let definition = parts.next().unwrap_or("").trim().trim_end_matches(';');
    let examples = parts
        .map(|p| {
            p.trim()
                .trim_end_matches(';')
                .trim_end_matches('"')
                .to_owned()
        })
        .filter(|e| e.split_whitespace().count() >= 3)
        .collect();
    (format!("{words}: {definition}"), examples)
}

fn ndcg(rank: Option<usize>) -> f64 {
    match rank {
        Some(r) if r < 10 => 1.0 / ((r + 2) as f64).log2(),
        _ => 0.0,
    }
}

/// A synset: its key, its document and its examples.
type Synset = (String, String, Vec<String>);

fn err(e: shale::Error) -> String {
    e.to_string()
}

pub fn run(corpus: &[Gloss], queries_wanted: usize, dir: &Path) -> Result<Quality, String> {
    let docs: Vec<Synset> = corpus
        .iter()
        .map(|g| {
            let (doc, examples) = split(g);
            (g.key.clone(), doc, examples)
        })
        .collect();
    let queries = queries(&docs, queries_wanted);
    let loaded = shale_embed::load_default().map_err(|e| e.to_string())?;
    let db = Arc::new(Db::open(dir, Options::default()).map_err(err)?);
    let vectors =
        VectorIndex::open(&db, "senses", VectorIndexOptions::text(loaded.embedder)).map_err(err)?;
    let text = TextIndex::open(&db, "senses", TextIndexOptions::new()).map_err(err)?;
    let started = Instant::now();
    load(&db, &docs)?;
    vectors.wait_indexed().map_err(err)?;
    eprintln!(
        "quality: {} documents indexed and embedded in {:.0} s (all-MiniLM-L6-v2 on {})",
        docs.len(),
        started.elapsed().as_secs_f64(),
        loaded.runtime
    );
    let rows = score(&text, &vectors, &queries)?;
    let mut q = latency(&text, &vectors, &queries)?;
    drop((text, vectors));
    db.close().map_err(err)?;
    q.documents = docs.len();
    q.queries = queries.len();
    q.rows = rows;
    Ok(q)
}

/// Every n-th synset with an example: its key and its first example.
fn queries(docs: &[Synset], wanted: usize) -> Vec<(&str, &str)> {
    let with_examples: Vec<&Synset> = docs.iter().filter(|d| !d.2.is_empty()).collect();
    let step = (with_examples.len() / wanted.max(1)).max(1);
    with_examples
        .iter()
        .step_by(step)
        .take(wanted)
        .filter_map(|d| Some((d.0.as_str(), d.2.first()?.as_str())))
        .collect()
}

/// Put every document the database does not hold already (a put embeds its text again).
fn load(db: &Db, docs: &[Synset]) -> Result<(), String> {
    for chunk in docs.chunks(1000) {
        let mut batch = WriteBatch::new();
        for (key, doc, _) in chunk {
            if db.get(key).map_err(err)?.as_deref() != Some(doc.as_bytes()) {
                batch.put(key, doc);
            }
        }
        if !batch.is_empty() {
            db.write(batch, WriteOptions::default()).map_err(err)?;
        }
    }
    Ok(())
}

/// nDCG@10 and hit@10 of each retriever and fusion over `queries`.
fn score(
    text: &TextIndex,
    vectors: &VectorIndex,
    queries: &[(&str, &str)],
) -> Result<Vec<QualityRow>, String> {
    let names = [
        "BM25",
        "dense (MiniLM, exact)",
        "hybrid RRF (k 60)",
        "hybrid min-max",
    ];
    let mut sums = [(0.0f64, 0.0f64); 4];
    for (relevant, query) in queries {
        let keyword: Ranking = text
            .search(query, &KeywordOptions::k(WINDOW))
            .map_err(err)?
            .into_iter()
            .map(|h| (h.key, h.score))
            .collect();
        let dense: Ranking = vectors
            .search(query, &SearchOptions::k(WINDOW).exact())
            .map_err(err)?
            .into_iter()
            .map(|h| (h.key, f64::from(h.score)))
            .collect();
        let rrf = hybrid::fuse(&keyword, &dense, Fusion::Rrf { k: 60.0 }, (1.0, 1.0), 10);
        let minmax = hybrid::fuse(&keyword, &dense, Fusion::MinMax, (1.0, 1.0), 10);
        let rank_in = |keys: Vec<&[u8]>| keys.iter().position(|k| *k == relevant.as_bytes());
        let ranks = [
            rank_in(keyword.iter().map(|(k, _)| k.as_slice()).collect()),
            rank_in(dense.iter().map(|(k, _)| k.as_slice()).collect()),
            rank_in(rrf.iter().map(|h| h.key.as_slice()).collect()),
            rank_in(minmax.iter().map(|h| h.key.as_slice()).collect()),
        ];
        for (sum, rank) in sums.iter_mut().zip(ranks) {
            sum.0 += ndcg(rank);
            sum.1 += f64::from(u8::from(rank.is_some_and(|r| r < 10)));
        }
    }
    let n = queries.len().max(1) as f64;
    Ok(names
        .iter()
        .zip(&sums)
        .map(|(name, (ndcg, hit))| QualityRow {
            method: (*name).to_owned(),
            ndcg_at_10: ndcg / n,
            hit_at_10: hit / n,
        })
        .collect())
}

/// The query's embedding, then the hybrid search with that vector given, and a keyword
/// search alone, over the first 500 queries.
fn latency(
    text: &TextIndex,
    vectors: &VectorIndex,
    queries: &[(&str, &str)],
) -> Result<Quality, String> {
    let (mut embed, mut fused, mut words) = (Latencies::new(), Latencies::new(), Latencies::new());
    let opts = HybridOptions::k(10);
    for (_, query) in queries.iter().take(500) {
        let v = embed.time(|| vectors.embed(query)).map_err(err)?;
        let hits = fused
            .time(|| hybrid::search(text, vectors, query, Some(v.as_slice()), &opts))
            .map_err(err)?;
        std::hint::black_box(hits);
        let hits = words
            .time(|| text.search(query, &KeywordOptions::k(10)))
            .map_err(err)?;
        std::hint::black_box(hits);
    }
    Ok(Quality {
        documents: 0,
        queries: 0,
        rows: Vec::new(),
        hybrid_p50_us: fused.quantile_us(0.5),
        hybrid_p99_us: fused.quantile_us(0.99),
        embed_p50_us: embed.quantile_us(0.5),
        keyword_p50_us: words.quantile_us(0.5),
    })
}

/// The figures as markdown.
pub fn table(q: &Quality) -> String {
    let mut out = format!(
        "\nWordNet sense retrieval: {} documents (lemmas: definition), {} usage examples as \
         queries, one relevant synset each; windows of {WINDOW} fused\n\n| method | nDCG@10 | \
         hit@10 |\n|---|---:|---:|\n",
        q.documents, q.queries
    );
    for r in &q.rows {
        out.push_str(&format!(
            "| {} | {:.4} | {:.3} |\n",
            r.method, r.ndcg_at_10, r.hit_at_10
        ));
    }
    out.push_str(&format!(
        "\nhybrid query (vector given, HNSW, windows of 20): p50 {:.0} µs, p99 {:.0} µs; the \
         query's embedding p50 {:.0} µs; a keyword query alone p50 {:.0} µs\n",
        q.hybrid_p50_us, q.hybrid_p99_us, q.embed_p50_us, q.keyword_p50_us
    ));
    out
}

//! `shale-bench text`: keyword search over WordNet's 117,659 glosses, Shale's text index
//! against tantivy (feature `tantivy`), one process, one run.
//!
//! For each engine: documents indexed per second until searchable (one writer; the median
//! of `--builds` builds, the engines' builds alternating), the index's size on disk, top-10 queries per second on one thread with their latencies (every
//! engine's index is built first, then their query passes alternate). For Shale
//! also the bytes written per document, and a check that every query's pruned top 10 equals
//! the exhaustive one. For tantivy also the rate when it commits (and reloads its reader)
//! every 100 documents, the nearest it gets to fresh results. `--export DIR` writes the
//! analyzed corpus, the queries and Shale's rankings for `scripts/text-reference.py` (bm25s,
//! the reference scorer).

mod engine;
#[cfg(feature = "semantic")]
mod quality;
#[cfg(feature = "tantivy")]
mod tantivy_peer;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use shale::{Db, Options};
use shale_search::{Analyzer, KeywordOptions, TextIndex, TextIndexOptions};
use shale_testkit::wordnet::{self, Gloss};

use crate::metrics::Latencies;
use engine::{median, Built, Measured, TextResult};

#[derive(Args, Debug, Clone)]
pub struct TextArgs {
    /// Engines, comma-separated: shale, tantivy (the peer needs its feature).
    #[arg(long, default_value = "shale", value_delimiter = ',')]
    pub engines: Vec<String>,
    /// WordNet's data directory (default: what scripts/fetch-wordnet.sh prints).
    #[arg(long)]
    pub wordnet: Option<PathBuf>,
    /// Queries, drawn from the glosses' definitions.
    #[arg(long, default_value_t = 2000)]
    pub queries: usize,
    /// Times each query set runs; the median run is reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Times each engine builds its index; the median rate is reported.
    #[arg(long, default_value_t = 3)]
    pub builds: usize,
    /// Documents of the run that commits every 100 (tantivy).
    #[arg(long, default_value_t = 20_000)]
    pub fresh_docs: usize,
    /// Where the databases go (default: a temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write `results.json` and `report.md` into this folder (`bench-results/<date>-text`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Export the analyzed corpus, the queries and Shale's top 10s here (for bm25s).
    #[arg(long)]
    pub export: Option<PathBuf>,
    /// Only the first 5,000 glosses and 200 queries: a smoke run.
    #[arg(long)]
    pub quick: bool,
    /// Also measure keywords, meaning and hybrid on WordNet's sense retrieval task, and a
    /// hybrid query's latency (feature `semantic`: embeds every gloss with MiniLM once; the
    /// vectors are kept in --quality-dir for the next run).
    #[arg(long)]
    pub quality: bool,
    /// Usage examples asked as queries by --quality.
    #[arg(long, default_value_t = 1000)]
    pub quality_queries: usize,
    /// Where --quality keeps its database.
    #[arg(long, default_value = "target/text-quality-db")]
    pub quality_dir: PathBuf,
}

pub fn run(args: &TextArgs) -> Result<(), String> {
    let (corpus, queries) = corpus_and_queries(args)?;
    let tmp = tempfile_dir(args.dir.as_deref())?;
    let (mut built, builds) = build_rounds(args, &corpus, &queries, &tmp)?;
    let passes = time_queries(&queries, args.repeat, &mut built)?;
    let mut results = Vec::new();
    for ((engine, (runs, lat)), rates) in built.into_iter().zip(passes).zip(builds) {
        let mut result = engine.finish(runs, &lat)?;
        result.index_docs_per_s = median(rates.clone());
        result.index_builds_docs_per_s = rates;
        eprintln!(
            "{}",
            serde_json::to_string(&result).map_err(|e| e.to_string())?
        );
        results.push(result);
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let (quality_table, quality) = match args.quality {
        true => quality_section(args, &corpus)?,
        false => (String::new(), None),
    };
    let table = table(&results) + &quality_table;
    print!("{table}");
    if let Some(out) = &args.out {
        write_out(out, &results, quality, &table, corpus.len(), queries.len())?;
    }
    Ok(())
}

/// WordNet's glosses in key order (the first 5,000 with `--quick`) and the queries drawn
/// from them.
fn corpus_and_queries(args: &TextArgs) -> Result<(Vec<Gloss>, Vec<String>), String> {
    let dir = match &args.wordnet {
        Some(d) => d.clone(),
        None => fetch_wordnet()?,
    };
    let mut corpus = wordnet::load(&dir)?;
    corpus.sort_by(|a, b| a.key.cmp(&b.key));
    let mut nq = args.queries;
    if args.quick {
        corpus.truncate(5_000);
        nq = nq.min(200);
    }
    let queries = queries(&corpus, nq);
    eprintln!(
        "text: {} documents, {} queries",
        corpus.len(),
        queries.len()
    );
    Ok((corpus, queries))
}

/// Every engine builds its index `--builds` times, the engines' builds alternating in an
/// order reversed every round, as their query passes do; the last build of each is kept.
/// Returns those builds and each engine's indexing rates, in `args.engines`' order.
#[expect(
    clippy::type_complexity,
    reason = "the builds and their rates, engine by engine"
)]
fn build_rounds<'a>(
    args: &'a TextArgs,
    corpus: &'a [Gloss],
    queries: &'a [String],
    tmp: &Path,
) -> Result<(Vec<Box<dyn Built + 'a>>, Vec<Vec<f64>>), String> {
    let mut built: Vec<Option<Box<dyn Built + '_>>> = args.engines.iter().map(|_| None).collect();
    let mut builds: Vec<Vec<f64>> = args.engines.iter().map(|_| Vec::new()).collect();
    for round in 0..args.builds.max(1) {
        let mut order: Vec<usize> = (0..args.engines.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for e in order {
            let (Some(engine), Some(slot), Some(rates)) =
                (args.engines.get(e), built.get_mut(e), builds.get_mut(e))
            else {
                continue;
            };
            // The previous build goes first, so that two never share the memory.
            *slot = None;
            let dir = tmp.join(format!("{engine}-{round}"));
            let b = build(engine, corpus, queries, args, &dir)?;
            rates.push(corpus.len() as f64 / b.index_secs());
            *slot = Some(b);
            if round > 0 {
                let _ = std::fs::remove_dir_all(tmp.join(format!("{engine}-{}", round - 1)));
            }
        }
    }
    Ok((built.into_iter().flatten().collect(), builds))
}

/// `--out`: the results as JSON and the report as markdown.
fn write_out(
    out: &Path,
    results: &[TextResult],
    quality: Option<serde_json::Value>,
    table: &str,
    documents: usize,
    queries: usize,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", out.display());
    std::fs::create_dir_all(out).map_err(io)?;
    let command: Vec<String> = std::env::args().collect();
    let json = serde_json::json!({
        "command": command.join(" "),
        "machine": crate::machine::describe(),
        "commit": crate::machine::git_commit(),
        "date": crate::machine::date(),
        "results": results,
        "quality": quality,
    });
    let json = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    std::fs::write(out.join("results.json"), json).map_err(io)?;
    let report = format!(
        "# shale-bench text\n\n`{}`\n\n{documents} documents (WordNet glosses), {queries} queries\n\n{table}",
        command.join(" "),
    );
    std::fs::write(out.join("report.md"), report).map_err(io)
}

/// Build `engine`'s index of `corpus` in `dir`.
fn build<'a>(
    engine: &str,
    corpus: &'a [Gloss],
    queries: &'a [String],
    args: &'a TextArgs,
    dir: &Path,
) -> Result<Box<dyn Built + 'a>, String> {
    Ok(match engine {
        "shale" => Box::new(ShaleBuilt::build(corpus, queries, args, dir)?),
        #[cfg(feature = "tantivy")]
        "tantivy" => Box::new(tantivy_peer::TantivyBuilt::build(
            corpus,
            queries,
            args.fresh_docs,
            dir,
        )?),
        other => return Err(format!("unknown or not compiled engine {other:?}")),
    })
}

/// `--quality`: its markdown and its figures.
#[cfg(feature = "semantic")]
fn quality_section(
    args: &TextArgs,
    corpus: &[Gloss],
) -> Result<(String, Option<serde_json::Value>), String> {
    let q = quality::run(corpus, args.quality_queries, &args.quality_dir)?;
    let json = serde_json::to_value(&q).map_err(|e| e.to_string())?;
    Ok((quality::table(&q), Some(json)))
}

#[cfg(not(feature = "semantic"))]
fn quality_section(
    _: &TextArgs,
    _: &[Gloss],
) -> Result<(String, Option<serde_json::Value>), String> {
    Err("--quality needs the `semantic` feature".into())
}

fn fetch_wordnet() -> Result<PathBuf, String> {
    let out = std::process::Command::new("bash")
        .arg("scripts/fetch-wordnet.sh")
        .output()
        .map_err(|e| format!("scripts/fetch-wordnet.sh: {e}"))?;
    if !out.status.success() {
        return Err("scripts/fetch-wordnet.sh failed (run from the repository root)".into());
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn tempfile_dir(under: Option<&Path>) -> Result<PathBuf, String> {
    let base = under.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let dir = base.join(format!("shale-text-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Queries from WordNet itself: the first three words of every n-th gloss's definition
/// (after the synonyms, before any example), so that queries mix common and rare words
/// as users' do.
fn queries(corpus: &[Gloss], n: usize) -> Vec<String> {
    let step = (corpus.len() / n.max(1)).max(1);
    corpus
        .iter()
        .step_by(step)
        .filter_map(|g| {
            let definition = g.text.split_once(": ")?.1.split(';').next()?;
            let words: Vec<&str> = definition
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() > 2)
                .take(3)
                .collect();
            (!words.is_empty()).then(|| words.join(" "))
        })
        .take(n)
        .collect()
}

/// Shale's text index over the corpus, in a database of its own.
struct ShaleBuilt<'a> {
    corpus: &'a [Gloss],
    queries: &'a [String],
    args: &'a TextArgs,
    db: Arc<Db>,
    index: TextIndex,
    opts: KeywordOptions,
    index_secs: f64,
    size_bytes: u64,
    written: u64,
}

impl<'a> ShaleBuilt<'a> {
    fn build(
        corpus: &'a [Gloss],
        queries: &'a [String],
        args: &'a TextArgs,
        dir: &Path,
    ) -> Result<ShaleBuilt<'a>, String> {
        let db = Arc::new(Db::open(dir, Options::default()).map_err(err)?);
        let index = TextIndex::open(&db, "glosses", TextIndexOptions::new()).map_err(err)?;
        let before = db.stats();
        let started = Instant::now();
        for g in corpus {
            db.put(&g.key, &g.text).map_err(err)?;
        }
        // Until searchable: the index's counts see every put, the last ones' records
        // applied if the index's thread has not yet.
        let indexed = index.stats().documents;
        let index_secs = started.elapsed().as_secs_f64();
        if indexed != corpus.len() as u64 {
            return Err(format!(
                "the index counts {indexed} documents of {} put",
                corpus.len()
            ));
        }
        db.flush().map_err(err)?;
        db.wait_idle().map_err(err)?;
        let after = db.stats();
        let written = (after.wal_bytes - before.wal_bytes)
            + (after.flush_bytes - before.flush_bytes)
            + (after.compaction_bytes_written - before.compaction_bytes_written);
        let size_bytes = db
            .live_files()
            .iter()
            .filter(|f| f.keyspace == "text.glosses")
            .map(|f| f.size)
            .sum();
        Ok(ShaleBuilt {
            corpus,
            queries,
            args,
            db,
            index,
            opts: KeywordOptions::k(10),
            index_secs,
            size_bytes,
            written,
        })
    }
}

fn err(e: shale::Error) -> String {
    e.to_string()
}

impl Built for ShaleBuilt<'_> {
    fn search(&mut self, query: &str) -> Result<(), String> {
        std::hint::black_box(self.index.search(query, &self.opts).map_err(err)?);
        Ok(())
    }

    fn index_secs(&self) -> f64 {
        self.index_secs
    }

    fn finish(self: Box<Self>, runs: Vec<f64>, lat: &Latencies) -> Result<TextResult, String> {
        let rankings = check_exhaustive(&self.index, self.queries)?;
        if let Some(export) = &self.args.export {
            export_for_reference(export, self.corpus, self.queries, &rankings)
                .map_err(|e| e.to_string())?;
        }
        self.db.close().map_err(err)?;
        Ok(TextResult {
            bytes_written_per_doc: Some(self.written as f64 / self.corpus.len() as f64),
            exhaustive_equal: Some(self.queries.len()),
            ..TextResult::new(Measured {
                engine: "shale",
                documents: self.corpus.len(),
                index_secs: self.index_secs,
                size_bytes: self.size_bytes,
                queries: self.queries.len(),
                runs,
                latencies: lat,
            })
        })
    }
}

/// Run every query `repeat` times (at least once) on every engine, the engines' passes
/// interleaved, in an order reversed every pass, so that a slow spell of this noisy machine
/// falls on them alike: each engine's queries per second of every pass, and its first
/// pass's latencies.
fn time_queries(
    queries: &[String],
    repeat: usize,
    engines: &mut [Box<dyn Built + '_>],
) -> Result<Vec<(Vec<f64>, Latencies)>, String> {
    let mut passes: Vec<(Vec<f64>, Option<Latencies>)> =
        engines.iter().map(|_| (Vec::new(), None)).collect();
    for pass in 0..repeat.max(1) {
        let mut order: Vec<usize> = (0..engines.len()).collect();
        if pass % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (Some(engine), Some((runs, first))) = (engines.get_mut(i), passes.get_mut(i))
            else {
                continue;
            };
            let mut lat = Latencies::new();
            let t = Instant::now();
            for q in queries {
                lat.time(|| engine.search(q))?;
            }
            runs.push(queries.len() as f64 / t.elapsed().as_secs_f64());
            first.get_or_insert(lat);
        }
    }
    Ok(passes
        .into_iter()
        .map(|(runs, lat)| (runs, lat.unwrap_or_else(Latencies::new)))
        .collect())
}

/// Each query's pruned top 10, checked against exhaustive scoring: an error names how many
/// differ.
fn check_exhaustive(
    index: &TextIndex,
    queries: &[String],
) -> Result<Vec<Vec<shale_search::KeywordHit>>, String> {
    let opts = KeywordOptions::k(10);
    let mut differ = 0;
    let mut rankings = Vec::with_capacity(queries.len());
    for q in queries {
        let pruned = index.search(q, &opts).map_err(|e| e.to_string())?;
        let exhaustive = index
            .search(q, &opts.clone().exhaustive())
            .map_err(|e| e.to_string())?;
        differ += usize::from(pruned != exhaustive);
        rankings.push(pruned);
    }
    match differ {
        0 => Ok(rankings),
        n => Err(format!(
            "shale: the pruned top 10 differs from exhaustive scoring on {n} of {} queries",
            queries.len()
        )),
    }
}

/// `corpus.jsonl` (each document's key, text and terms, in key order), `queries.jsonl` (each
/// query's terms) and `shale.jsonl` (each query's top 10: keys and scores).
fn export_for_reference(
    dir: &Path,
    corpus: &[Gloss],
    queries: &[String],
    rankings: &[Vec<shale_search::KeywordHit>],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let a = Analyzer::English;
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("corpus.jsonl"))?);
    for g in corpus {
        writeln!(
            f,
            "{}",
            serde_json::json!({"key": g.key, "text": g.text, "terms": a.terms(&g.text)})
        )?;
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("queries.jsonl"))?);
    for q in queries {
        writeln!(
            f,
            "{}",
            serde_json::json!({"query": q, "terms": a.terms(q)})
        )?;
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join("shale.jsonl"))?);
    for hits in rankings {
        let keys: Vec<String> = hits
            .iter()
            .map(|h| String::from_utf8_lossy(&h.key).into_owned())
            .collect();
        let scores: Vec<f64> = hits.iter().map(|h| h.score).collect();
        writeln!(f, "{}", serde_json::json!({"keys": keys, "scores": scores}))?;
    }
    Ok(())
}

/// The results as a markdown table.
fn table(results: &[TextResult]) -> String {
    let mut out = String::from(
        "| engine | documents | indexed docs/s (median of builds) | fresh docs/s (commit every 100) | size MiB | top-10 QPS | p50 µs | p99 µs | bytes written/doc | pruned = exhaustive |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let opt =
        |x: Option<f64>, digits: usize| x.map_or("—".to_owned(), |v| format!("{v:.digits$}"));
    for r in results {
        out.push_str(&format!(
            "| {} | {} | {:.0} | {} | {:.2} | {:.0} | {:.1} | {:.1} | {} | {} |\n",
            r.engine,
            r.documents,
            r.index_docs_per_s,
            opt(r.fresh_docs_per_s, 0),
            r.size_bytes as f64 / (1 << 20) as f64,
            r.qps,
            r.p50_us,
            r.p99_us,
            opt(r.bytes_written_per_doc, 0),
            r.exhaustive_equal
                .map_or("—".to_owned(), |n| format!("{n} of {}", r.queries)),
        ));
    }
    out
}

//! tantivy, the peer: one text field analyzed as Shale's English analyzer is (words,
//! lower case, Lucene's 33 stop words, the same `rust-stemmers` English stemmer; tantivy
//! splits words at non-alphanumeric characters rather than by UAX #29), with positions, and
//! the key as a stored string field. One indexing thread, BM25 with tantivy's defaults
//! (k1 1.2, b 0.75), top 10 by score with each hit's key read from the store, as Shale's
//! hits carry their keys.

use std::path::{Path, PathBuf};
use std::time::Instant;

use shale_testkit::wordnet::Gloss;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{
    doc, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term,
};

use super::engine::{Built, Measured, TextResult};
use crate::metrics::Latencies;

const STOP_WORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];
/// The indexing thread's memory budget (tantivy's default is 50 MB a thread).
const WRITER_BYTES: usize = 50_000_000;

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(255))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(
            STOP_WORDS.iter().map(|w| w.to_string()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

struct Peer {
    index: Index,
    key: Field,
    body: Field,
}

fn create(dir: &Path) -> Result<Peer, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let mut sb = Schema::builder();
    let key = sb.add_text_field("key", STRING | STORED);
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("en")
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let body = sb.add_text_field(
        "body",
        TextOptions::default().set_indexing_options(indexing),
    );
    let index = Index::create_in_dir(dir, sb.build()).map_err(|e| e.to_string())?;
    index.tokenizers().register("en", analyzer());
    Ok(Peer { index, key, body })
}

fn writer(p: &Peer) -> Result<IndexWriter, String> {
    p.index
        .writer_with_num_threads(1, WRITER_BYTES)
        .map_err(|e| e.to_string())
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn err(e: tantivy::TantivyError) -> String {
    e.to_string()
}

fn manual_reader(p: &Peer) -> Result<IndexReader, String> {
    p.index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(err)
}

/// tantivy's index over the corpus, committed once, with a searcher on it.
pub struct TantivyBuilt<'a> {
    corpus: &'a [Gloss],
    queries: usize,
    /// Documents of the run that commits every 100.
    fresh_docs: usize,
    dir: PathBuf,
    peer: Peer,
    _reader: IndexReader,
    searcher: Searcher,
    analyzer: TextAnalyzer,
    index_secs: f64,
    size_bytes: u64,
}

impl<'a> TantivyBuilt<'a> {
    pub fn build(
        corpus: &'a [Gloss],
        queries: &[String],
        fresh_docs: usize,
        dir: &Path,
    ) -> Result<TantivyBuilt<'a>, String> {
        let (peer, reader, index_secs) = bulk(corpus, &dir.join("bulk"))?;
        let size_bytes = dir_size(&dir.join("bulk"));
        Ok(TantivyBuilt {
            corpus,
            queries: queries.len(),
            fresh_docs,
            dir: dir.to_owned(),
            searcher: reader.searcher(),
            _reader: reader,
            peer,
            analyzer: analyzer(),
            index_secs,
            size_bytes,
        })
    }
}

impl Built for TantivyBuilt<'_> {
    fn search(&mut self, q: &str) -> Result<(), String> {
        let query = or_query(&mut self.analyzer, self.peer.body, q);
        let top = self
            .searcher
            .search(&query, &TopDocs::with_limit(10).order_by_score())
            .map_err(err)?;
        for (_, addr) in top {
            let d: TantivyDocument = self.searcher.doc(addr).map_err(err)?;
            std::hint::black_box(d.get_first(self.peer.key).and_then(|v| v.as_str()));
        }
        Ok(())
    }

    fn index_secs(&self) -> f64 {
        self.index_secs
    }

    fn finish(self: Box<Self>, runs: Vec<f64>, lat: &Latencies) -> Result<TextResult, String> {
        let n = self.fresh_docs.min(self.corpus.len());
        let fresh_secs = fresh(
            self.corpus.get(..n).unwrap_or(self.corpus),
            &self.dir.join("fresh"),
        )?;
        Ok(TextResult {
            fresh_docs_per_s: Some(n as f64 / fresh_secs),
            ..TextResult::new(Measured {
                engine: "tantivy",
                documents: self.corpus.len(),
                index_secs: self.index_secs,
                size_bytes: self.size_bytes,
                queries: self.queries,
                runs,
                latencies: lat,
            })
        })
    }
}

/// Index `corpus`, committing once at the end; the index, a reader on it, and the seconds
/// until it was searchable.
fn bulk(corpus: &[Gloss], dir: &Path) -> Result<(Peer, IndexReader, f64), String> {
    let p = create(dir)?;
    let mut w = writer(&p)?;
    let started = Instant::now();
    for g in corpus {
        w.add_document(doc!(p.key => g.key.as_str(), p.body => g.text.as_str()))
            .map_err(err)?;
    }
    w.commit().map_err(err)?;
    let reader = manual_reader(&p)?;
    let secs = started.elapsed().as_secs_f64();
    w.wait_merging_threads().map_err(err)?;
    reader.reload().map_err(err)?;
    Ok((p, reader, secs))
}

/// Index `corpus` committing and reloading a reader every 100 documents; the seconds.
fn fresh(corpus: &[Gloss], dir: &Path) -> Result<f64, String> {
    let p = create(dir)?;
    let mut w = writer(&p)?;
    let reader = manual_reader(&p)?;
    let started = Instant::now();
    for (i, g) in corpus.iter().enumerate() {
        w.add_document(doc!(p.key => g.key.as_str(), p.body => g.text.as_str()))
            .map_err(err)?;
        if (i + 1) % 100 == 0 || i + 1 == corpus.len() {
            w.commit().map_err(err)?;
            reader.reload().map_err(err)?;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    w.wait_merging_threads().map_err(err)?;
    Ok(secs)
}

/// The query's distinct terms, any of them.
fn or_query(an: &mut TextAnalyzer, body: Field, q: &str) -> BooleanQuery {
    let mut terms: Vec<String> = Vec::new();
    let mut ts = an.token_stream(q);
    while ts.advance() {
        let t = ts.token().text.clone();
        if !terms.contains(&t) {
            terms.push(t);
        }
    }
    BooleanQuery::new(
        terms
            .into_iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(body, &t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect(),
    )
}

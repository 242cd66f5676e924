//! BM25's parameters and its two formulas, `idf(t)` and `w(t, d)`, as Lucene defines them
//! since 8.0 (`query/mod.rs` says how a query sums them), and the corpus statistics they
//! take.

use std::collections::BTreeMap;

/// BM25's parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25 {
    /// Term-frequency saturation. Default 1.2.
    pub k1: f64,
    /// Length normalisation, 0 (none) to 1 (full). Default 0.75.
    pub b: f64,
}

impl Default for Bm25 {
    fn default() -> Self {
        Bm25 { k1: 1.2, b: 0.75 }
    }
}

impl Bm25 {
    /// `idf(t)` for a term in `df` of `n` documents.
    pub fn idf(n: u64, df: u64) -> f64 {
        // Exact: counts stay far below 2^53.
        let (n, df) = (n as f64, df as f64);
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// `w(t, d)` for a term of weight `idf` found `tf` times in a document of `len` tokens.
    pub fn weight(&self, idf: f64, tf: u32, len: u32, avg_len: f64) -> f64 {
        let tf = f64::from(tf);
        idf * (tf * (self.k1 + 1.0))
            / (tf + self.k1 * (1.0 - self.b + self.b * f64::from(len) / avg_len))
    }
}

/// The statistics BM25 scores a query with: the live documents (N), their tokens, and each
/// of the query's terms' document frequency (`df`). A corpus split over several indexes
/// (the shards of a key space) is scored with the sums of its parts' statistics, so each
/// document gets the score, bit for bit, that one index holding every document would give
/// it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorpusStats {
    pub docs: u64,
    pub tokens: u64,
    /// The document frequency of each distinct term of the query, as the analyzer
    /// produced it (a term no document holds may be absent).
    pub df: BTreeMap<String, u64>,
}

impl CorpusStats {
    /// Add `part`'s statistics (another index over part of the corpus) to these.
    pub fn add(&mut self, part: &CorpusStats) {
        self.docs += part.docs;
        self.tokens += part.tokens;
        for (term, df) in &part.df {
            *self.df.entry(term.clone()).or_default() += df;
        }
    }
}

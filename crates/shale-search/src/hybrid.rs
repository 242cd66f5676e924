//! Hybrid queries: a keyword and a vector retriever over the same keys, fused into one
//! ranking.
//!
//! ```text
//!   query ──► TextIndex::search_at (top keyword_window, snapshot S) ──┐
//!         └─► semantic VectorIndex::search_vector (top vector_window) ──────┤ each vector hit
//!                            checked at S: its value still holds the text it was found by
//!                                                                      ▼
//!                              fuse: reciprocal rank, or min-max normalised scores ──► top k
//! ```
//!
//! Both retrievers see every acknowledged write, and every hit is checked against one
//! snapshot S, the one the keyword side read: a hybrid result never holds a deleted or
//! replaced document. A text whose embedding is still queued is found by its keywords at
//! once and by its meaning once embedded (the semantic index's rule).
//!
//! **Reciprocal rank fusion** (Cormack et al., 2009): `score(d) = Σ w_i / (k + rank_i(d))`
//! over the retrievers that returned d, ranks from 1, k = 60 by default: it needs no
//! calibration between BM25 scores and cosine similarities. **Min-max fusion**: each
//! retriever's scores scaled to [0, 1] over its own window (all 1 if they are equal), then
//! `score(d) = Σ w_i * scaled_i(d)`, as Weaviate's "relative score" fusion.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use crate::semantic::{SearchOptions, VectorIndex};
use shale::{Error, ReadOptions, Result, Snapshot};

use crate::text::{KeywordOptions, TextIndex};

/// How two rankings become one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fusion {
    /// Reciprocal rank fusion with constant `k` (default 60).
    Rrf { k: f64 },
    /// Scores scaled to [0, 1] per retriever, then weighted and summed.
    MinMax,
}

impl Default for Fusion {
    fn default() -> Self {
        Fusion::Rrf { k: 60.0 }
    }
}

/// What a hybrid search looks at and returns.
#[derive(Debug, Clone)]
pub struct HybridOptions {
    /// Hits wanted. Default 10.
    pub k: usize,
    pub fusion: Fusion,
    /// Each retriever's weight in the fusion. Default 1 and 1.
    pub keyword_weight: f64,
    pub vector_weight: f64,
    /// How many hits each retriever contributes before fusion. Default `2k`, at least 20.
    pub keyword_window: usize,
    pub vector_window: usize,
    /// The keyword retriever's options (its `k` is `keyword_window`; mode, BM25, range).
    pub keyword: KeywordOptions,
    /// The vector retriever's options (its `k` is `vector_window`; ef, exact, range).
    pub vector: SearchOptions,
}

impl HybridOptions {
    /// `k` hits by reciprocal rank fusion, each retriever's window 2k (at least 20).
    pub fn k(k: usize) -> HybridOptions {
        let window = (2 * k).max(20);
        HybridOptions {
            k,
            fusion: Fusion::default(),
            keyword_weight: 1.0,
            vector_weight: 1.0,
            keyword_window: window,
            vector_window: window,
            keyword: KeywordOptions::k(window),
            vector: SearchOptions::k(window),
        }
    }

    pub fn fusion(mut self, fusion: Fusion) -> HybridOptions {
        self.fusion = fusion;
        self
    }

    pub fn weights(mut self, keyword: f64, vector: f64) -> HybridOptions {
        self.keyword_weight = keyword;
        self.vector_weight = vector;
        self
    }

    pub fn windows(mut self, keyword: usize, vector: usize) -> HybridOptions {
        self.keyword_window = keyword;
        self.vector_window = vector;
        self
    }

    /// Only keys in `[lower, upper)`, for both retrievers.
    pub fn range(mut self, lower: impl AsRef<[u8]>, upper: impl AsRef<[u8]>) -> HybridOptions {
        self.keyword = self.keyword.range(lower.as_ref(), upper.as_ref());
        self.vector = self.vector.range(lower.as_ref(), upper.as_ref());
        self
    }

    fn check(&self) -> Result<()> {
        let mut problems = Vec::new();
        for (name, w) in [
            ("keyword_weight", self.keyword_weight),
            ("vector_weight", self.vector_weight),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                problems.push(format!("{name} = {w} must be finite and >= 0"));
            }
        }
        if let Fusion::Rrf { k } = self.fusion {
            if !(k.is_finite() && k >= 0.0) {
                problems.push(format!("the RRF constant k = {k} must be finite and >= 0"));
            }
        }
        if self.k > crate::text::MAX_K {
            problems.push(format!(
                "k = {} is over the limit of {}",
                self.k,
                crate::text::MAX_K
            ));
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(Error::InvalidOptions(problems)),
        }
    }
}

/// One hybrid result: the fused score, and where each retriever ranked it (from 1).
#[derive(Debug, Clone, PartialEq)]
pub struct HybridHit {
    pub key: Vec<u8>,
    pub score: f64,
    /// Rank and BM25 score in the keyword window.
    pub keyword: Option<(usize, f64)>,
    /// Rank and similarity in the vector window.
    pub vector: Option<(usize, f64)>,
    /// The document (the text, or a vector value's payload) as it was at the search's
    /// snapshot; `None` from [`fuse`], which has only the rankings.
    pub document: Option<Vec<u8>>,
}

/// One retriever's ranking: keys and scores, best first.
pub type Ranking = Vec<(Vec<u8>, f64)>;

/// Fuse `keyword` and `vector` rankings with `weights`, best first, the top `k` (ties by
/// key).
pub fn fuse(
    keyword: &Ranking,
    vector: &Ranking,
    fusion: Fusion,
    weights: (f64, f64),
    k: usize,
) -> Vec<HybridHit> {
    let mut hits: HashMap<&[u8], HybridHit> = HashMap::new();
    for (list, weight, is_keyword) in [(keyword, weights.0, true), (vector, weights.1, false)] {
        let (lo, hi) = list
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (_, s)| {
                (lo.min(*s), hi.max(*s))
            });
        for (i, (key, score)) in list.iter().enumerate() {
            let rank = i + 1;
            let part = match fusion {
                Fusion::Rrf { k } => weight / (k + rank as f64),
                Fusion::MinMax if hi > lo => weight * (score - lo) / (hi - lo),
                Fusion::MinMax => weight,
            };
            let hit = hits.entry(key.as_slice()).or_insert_with(|| HybridHit {
                key: key.clone(),
                score: 0.0,
                keyword: None,
                vector: None,
                document: None,
            });
            hit.score += part;
            match is_keyword {
                true => hit.keyword = Some((rank, *score)),
                false => hit.vector = Some((rank, *score)),
            }
        }
    }
    let mut out: Vec<HybridHit> = hits.into_values().collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key.cmp(&b.key)));
    out.truncate(k);
    out
}

/// The `opts.k` documents that best match `query` by keywords and by meaning, fused. The
/// query is embedded by the vector index's model unless `vector` is given.
///
/// # Errors
/// `InvalidOptions` for options out of range; `InvalidArgument` if the two indexes cover
/// different keyspaces; either retriever's errors.
pub fn search(
    text: &TextIndex,
    vectors: &VectorIndex,
    query: &str,
    vector: Option<&[f32]>,
    opts: &HybridOptions,
) -> Result<Vec<HybridHit>> {
    let mut found = retrieve(text, vectors, query, vector, opts)?;
    let mut hits = fuse(
        &found.keyword,
        &found.vector,
        opts.fusion,
        (opts.keyword_weight, opts.vector_weight),
        opts.k,
    );
    for hit in &mut hits {
        hit.document = found.document(&hit.key)?;
    }
    Ok(hits)
}

/// Both retrievers' windows for one query, before fusion, with the document of every key
/// in them. A corpus split over several indexes (the shards of a key space) is searched
/// by taking each part's windows (the keyword side scored with the whole corpus's
/// [`crate::CorpusStats`]), merging each retriever's with [`merge`], and fusing once:
/// the hits, scores and documents of one index holding every document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Windows {
    pub keyword: Ranking,
    pub vector: Ranking,
    pub documents: HashMap<Vec<u8>, Vec<u8>>,
}

/// [`search`]'s two windows for `query`, unfused.
///
/// # Errors
/// As [`search`].
pub fn windows(
    text: &TextIndex,
    vectors: &VectorIndex,
    query: &str,
    vector: Option<&[f32]>,
    opts: &HybridOptions,
) -> Result<Windows> {
    let mut found = retrieve(text, vectors, query, vector, opts)?;
    let mut documents = HashMap::new();
    let keys: Vec<Vec<u8>> = found
        .keyword
        .iter()
        .chain(&found.vector)
        .map(|(key, _)| key.clone())
        .collect();
    for key in keys {
        if let Entry::Vacant(slot) = documents.entry(key) {
            if let Some(document) = found.document(slot.key())? {
                slot.insert(document);
            }
        }
    }
    Ok(Windows {
        keyword: found.keyword,
        vector: found.vector,
        documents,
    })
}

/// The best `window` of several rankings of disjoint keys: by score, then by key, as
/// each retriever ranks.
pub fn merge(parts: impl IntoIterator<Item = Ranking>, window: usize) -> Ranking {
    let mut all: Ranking = parts.into_iter().flatten().collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    all.truncate(window);
    all
}

/// Both retrievers' rankings, checked against one snapshot.
struct Retrieved<'a> {
    keyword: Ranking,
    vector: Ranking,
    /// The vector hits' documents.
    documents: HashMap<Vec<u8>, Vec<u8>>,
    snapshot: Snapshot,
    vectors: &'a VectorIndex,
}

impl Retrieved<'_> {
    /// The document `key` holds at the snapshot: a vector hit's as it was found, any
    /// other read.
    fn document(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(document) = self.documents.remove(key) {
            return Ok(Some(document));
        }
        let at = ReadOptions::at(&self.snapshot);
        let value = match self.vectors.keyspace() {
            Some(ks) => ks.get_opt(key, &at)?,
            None => self.vectors.db().get_opt(key, &at)?,
        };
        Ok(value.map(|v| document_bytes(&v).to_vec()))
    }
}

fn retrieve<'a>(
    text: &TextIndex,
    vectors: &'a VectorIndex,
    query: &str,
    vector: Option<&[f32]>,
    opts: &HybridOptions,
) -> Result<Retrieved<'a>> {
    opts.check()?;
    let same_keyspace = match (text.keyspace(), vectors.keyspace()) {
        (None, None) => true,
        (Some(a), Some(b)) => a.id() == b.id(),
        _ => false,
    };
    if !same_keyspace {
        return Err(Error::InvalidArgument(format!(
            "text index {:?} and vector index {:?} cover different keyspaces",
            text.name(),
            vectors.name()
        )));
    }
    let mut kw = opts.keyword.clone();
    kw.k = opts.keyword_window;
    kw.highlight = false;
    let (keyword_hits, snapshot) = text.search_at(query, &kw)?;
    let mut vo = opts.vector.clone();
    vo.k = opts.vector_window;
    let vector_hits = match (vector, opts.vector_window) {
        (_, 0) => Vec::new(),
        (Some(v), _) => vectors.search_vector(v, &vo)?,
        (None, _) => vectors.search(query, &vo)?,
    };
    let mut found = Retrieved {
        keyword: keyword_hits.into_iter().map(|h| (h.key, h.score)).collect(),
        vector: Vec::with_capacity(vector_hits.len()),
        documents: HashMap::new(),
        snapshot,
        vectors,
    };
    // A vector hit counts only if, at the keyword side's snapshot, its key still holds
    // the text it was found by.
    for hit in vector_hits {
        if found.document(&hit.key)?.as_deref() == Some(hit.document.as_slice()) {
            found.vector.push((hit.key.clone(), f64::from(hit.score)));
            found.documents.insert(hit.key, hit.document);
        }
    }
    Ok(found)
}

/// A value's document as the vector index reports it: a vector value's payload, else the
/// value itself.
fn document_bytes(value: &[u8]) -> &[u8] {
    match crate::semantic::decode_vector_value(value) {
        Some(Ok(v)) => v.payload,
        _ => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranking(keys: &[&str]) -> Ranking {
        keys.iter()
            .enumerate()
            .map(|(i, k)| (k.as_bytes().to_vec(), 10.0 - i as f64))
            .collect()
    }

    #[test]
    fn rrf_rewards_agreement_and_breaks_ties_by_key() {
        let hits = fuse(
            &ranking(&["a", "b", "c"]),
            &ranking(&["c", "b", "d"]),
            Fusion::Rrf { k: 60.0 },
            (1.0, 1.0),
            10,
        );
        let keys: Vec<&[u8]> = hits.iter().map(|h| h.key.as_slice()).collect();
        let score = |k: &str| hits.iter().find(|h| h.key == k.as_bytes()).map(|h| h.score);
        assert_eq!(score("b"), Some(1.0 / 62.0 + 1.0 / 62.0));
        assert_eq!(score("c"), Some(1.0 / 63.0 + 1.0 / 61.0));
        assert_eq!(score("d"), Some(1.0 / 63.0));
        assert_eq!(keys[0], b"c");
        assert_eq!(
            hits.iter().find(|h| h.key == b"c").and_then(|h| h.keyword),
            Some((3, 8.0))
        );
    }

    #[test]
    fn min_max_scales_each_list_and_weights_it() {
        let hits = fuse(
            &vec![(b"a".to_vec(), 30.0), (b"b".to_vec(), 10.0)],
            &vec![(b"b".to_vec(), 0.9), (b"c".to_vec(), 0.5)],
            Fusion::MinMax,
            (1.0, 2.0),
            10,
        );
        let score = |k: &[u8]| hits.iter().find(|h| h.key == k).map(|h| h.score);
        assert_eq!(score(b"a"), Some(1.0));
        assert_eq!(score(b"b"), Some(2.0));
        assert_eq!(score(b"c"), Some(0.0));
        assert_eq!(hits[0].key, b"b");
    }
}

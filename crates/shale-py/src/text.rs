//! `shale.TextIndex` (`DB.text_index`): keyword (BM25) search over the keys under a prefix,
//! exact at every write; `shale.KeywordHit`, one of its answers; and the keyword and hybrid
//! modes of `VectorIndex.search`.
//!
//! Like `VectorIndex`, a Python `TextIndex` holds the database handle and the index's name: each
//! call finds the engine's index in the open database under its read lock, with the GIL
//! released.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use shale_search::{
    Analyzer, Bm25, Fusion, HybridOptions, KeywordOptions, Match, TextIndexOptions,
};

use crate::convert::{opt_bytes, search_count};
use crate::errors::{new_err, run, Failure};
use crate::search::SearchHit;
use crate::shared::Shared;

/// `DB.text_index(name, prefix=, keyspace=, analyzer=)`.
pub(crate) fn open(
    py: Python<'_>,
    shared: &Arc<Shared>,
    name: &str,
    prefix: Option<Vec<u8>>,
    keyspace: Option<String>,
    analyzer: &str,
) -> PyResult<TextIndex> {
    let Some(analyzer) = Analyzer::from_name(analyzer) else {
        return Err(new_err(
            py,
            "InvalidArgumentError",
            format!("analyzer must be \"simple\", \"english\" or \"cjk\", got {analyzer:?}"),
        ));
    };
    let mut opts = TextIndexOptions::new().analyzer(analyzer);
    opts.prefix = prefix.unwrap_or_default();
    opts.keyspace = keyspace;
    let index = run(py, || shared.open_text_index(name, opts))?;
    Ok(TextIndex {
        shared: Arc::clone(shared),
        name: name.to_owned(),
        prefix: index.prefix().to_vec(),
        analyzer: index.analyzer(),
    })
}

/// A keyword index of a database. Made by `DB.text_index(name, ...)`.
#[pyclass(module = "shale", frozen)]
pub(crate) struct TextIndex {
    shared: Arc<Shared>,
    name: String,
    prefix: Vec<u8>,
    analyzer: Analyzer,
}

/// The keyword options of a search: `match`, the key range, BM25's `k1` and `b`.
pub(crate) fn keyword_options(
    py: Python<'_>,
    k: usize,
    mode: &str,
    range: (Option<Vec<u8>>, Option<Vec<u8>>),
    k1: f64,
    b: f64,
) -> PyResult<KeywordOptions> {
    let mode = match mode {
        "any" => Match::Any,
        "all" => Match::All,
        "phrase" => Match::Phrase,
        other => {
            return Err(new_err(
                py,
                "InvalidArgumentError",
                format!("match must be \"any\", \"all\" or \"phrase\", got {other:?}"),
            ))
        }
    };
    let mut opts = KeywordOptions::k(k).mode(mode);
    opts.bm25 = Bm25 { k1, b };
    (opts.lower_bound, opts.upper_bound) = range;
    Ok(opts)
}

#[pymethods]
impl TextIndex {
    /// The `k` documents that best match `text`, best first: any of its words (`match=
    /// "any"`, ranked by BM25), all of them (`"all"`), or the words as a phrase
    /// (`"phrase"`). `start`/`end` and `prefix` restrict the keys; `highlight=True` returns
    /// each hit's text and the spans of its matching words; `k1` and `b` are BM25's.
    #[pyo3(signature = (
        text, *, k = None, r#match = "any", start = None, end = None, prefix = None,
        highlight = false, k1 = 1.2, b = 0.75,
    ))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn search(
        &self,
        py: Python<'_>,
        text: String,
        k: Option<&Bound<'_, PyAny>>,
        r#match: &str,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        highlight: bool,
        k1: f64,
        b: f64,
    ) -> PyResult<Vec<KeywordHit>> {
        let k = k.map_or(Ok(10), |k| search_count(py, "k", k))?;
        let range = crate::range::key_range(
            opt_bytes(start, "start")?,
            opt_bytes(end, "end")?,
            opt_bytes(prefix, "prefix")?,
        );
        let mut opts = keyword_options(py, k, r#match, range, k1, b)?;
        opts.highlight = highlight;
        let name = &self.name;
        let hits = run(py, || {
            self.shared
                .with_text_index(name, |ix| Ok(ix.search(&text, &opts)?))
        })?;
        Ok(hits.into_iter().map(KeywordHit::from).collect())
    }

    /// `{"documents", "terms", "tokens"}`: what the index holds.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = run(py, || {
            self.shared.with_text_index(&self.name, |ix| Ok(ix.stats()))
        })?;
        let d = PyDict::new(py);
        d.set_item("documents", s.documents)?;
        d.set_item("terms", s.terms)?;
        d.set_item("tokens", s.tokens)?;
        Ok(d)
    }

    /// `{"records_kept", "documents_analyzed", "records_deleted"}`: what its open found.
    fn recovery<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = run(py, || {
            self.shared
                .with_text_index(&self.name, |ix| Ok(ix.recovery()))
        })?;
        let d = PyDict::new(py);
        d.set_item("records_kept", r.records_kept)?;
        d.set_item("documents_analyzed", r.documents_analyzed)?;
        d.set_item("records_deleted", r.records_deleted)?;
        Ok(d)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let s = run(py, || {
            self.shared.with_text_index(&self.name, |ix| Ok(ix.stats()))
        })?;
        Ok(usize::try_from(s.documents).unwrap_or(usize::MAX))
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    #[getter]
    fn prefix<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.prefix)
    }

    #[getter]
    fn analyzer(&self) -> &'static str {
        self.analyzer.name()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "TextIndex(name={:?}, prefix={}, analyzer={:?})",
            self.name,
            PyBytes::new(py, &self.prefix).repr()?,
            self.analyzer.name()
        ))
    }
}

/// One keyword search result.
#[pyclass(module = "shale", frozen)]
pub(crate) struct KeywordHit {
    key: Vec<u8>,
    score: f64,
    text: Option<String>,
    /// Character spans of `text`.
    highlights: Vec<(usize, usize)>,
}

impl From<shale_search::KeywordHit> for KeywordHit {
    fn from(hit: shale_search::KeywordHit) -> Self {
        // Byte spans to character offsets, as Python strings index.
        let highlights = match &hit.text {
            Some(text) => hit
                .highlights
                .iter()
                .map(|r| {
                    let at = |byte: usize| text.get(..byte).map_or(0, |s| s.chars().count());
                    (at(r.start), at(r.end))
                })
                .collect(),
            None => Vec::new(),
        };
        KeywordHit {
            key: hit.key,
            score: hit.score,
            text: hit.text,
            highlights,
        }
    }
}

#[pymethods]
impl KeywordHit {
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.key)
    }

    /// The BM25 score.
    #[getter]
    fn score(&self) -> f64 {
        self.score
    }

    /// The document's text (with `highlight=True`), else `None`.
    #[getter]
    fn text(&self) -> Option<&str> {
        self.text.as_deref()
    }

    /// `(start, end)` character spans of `text` whose words match the query.
    #[getter]
    fn highlights(&self) -> Vec<(usize, usize)> {
        self.highlights.clone()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "KeywordHit(key={}, score={:.4})",
            PyBytes::new(py, &self.key).repr()?,
            self.score
        ))
    }
}

/// `VectorIndex.search(text, mode="keyword" | "hybrid", ...)`: the text index of the same name
/// alone, or fused with the semantic index `vectors`.
#[allow(clippy::too_many_arguments, reason = "the options of one search")]
pub(crate) fn search_mode(
    py: Python<'_>,
    shared: &Shared,
    vectors: &str,
    mode: &str,
    text: &str,
    vector: Option<Vec<f32>>,
    opts: &shale_search::semantic::SearchOptions,
    fusion: &str,
) -> PyResult<Vec<SearchHit>> {
    let fusion = match fusion {
        "rrf" => Fusion::default(),
        "minmax" => Fusion::MinMax,
        other => {
            return Err(new_err(
                py,
                "InvalidArgumentError",
                format!("fusion must be \"rrf\" or \"minmax\", got {other:?}"),
            ))
        }
    };
    let range = (opts.lower_bound.clone(), opts.upper_bound.clone());
    let keyword = keyword_options(py, opts.k, "any", range, 1.2, 0.75)?;
    let hits = run(py, || {
        shared.with_text_index(vectors, |text_index| match mode {
            "keyword" => {
                let mut kw = keyword.clone();
                kw.highlight = true;
                Ok(text_index
                    .search(text, &kw)?
                    .into_iter()
                    .map(|h| {
                        SearchHit::new(
                            h.key,
                            h.score as f32,
                            h.text.unwrap_or_default().into_bytes(),
                        )
                    })
                    .collect())
            }
            _ => shared.with_named_index(vectors, |vector_index| {
                let mut hybrid = HybridOptions::k(opts.k).fusion(fusion);
                hybrid.keyword = keyword.clone();
                hybrid.vector = opts.clone();
                let fused = shale_search::hybrid::search(
                    text_index,
                    vector_index,
                    text,
                    vector.as_deref(),
                    &hybrid,
                )?;
                fused
                    .into_iter()
                    .map(|h| with_document(vector_index, h))
                    .collect::<Result<Vec<_>, Failure>>()
            }),
        })
    })?;
    Ok(hits)
}

/// A fused hit as a `SearchHit`, with its value's document (a vector value's payload).
fn with_document(
    index: &shale_search::semantic::VectorIndex,
    hit: shale_search::HybridHit,
) -> Result<SearchHit, Failure> {
    let value = match index.keyspace() {
        Some(ks) => ks.get(&hit.key)?,
        None => index.db().get(&hit.key)?,
    }
    .unwrap_or_default();
    let document = match shale_search::semantic::decode_vector_value(&value) {
        Some(Ok(v)) => v.payload.to_vec(),
        _ => value,
    };
    Ok(SearchHit::new(hit.key, hit.score as f32, document))
}

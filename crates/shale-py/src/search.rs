//! `shale.SearchHit`: one answer of `DB.search` and `VectorIndex.search` (its score a BM25 score
//! or a fused one in the keyword and hybrid modes).

use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[pyclass(module = "shale", frozen)]
pub(crate) struct SearchHit {
    key: Vec<u8>,
    score: f32,
    /// The text of a text value, the payload of a vector value.
    document: Vec<u8>,
}

impl SearchHit {
    pub(crate) fn new(key: Vec<u8>, score: f32, document: Vec<u8>) -> SearchHit {
        SearchHit {
            key,
            score,
            document,
        }
    }
}

impl From<shale_search::semantic::SearchHit> for SearchHit {
    fn from(hit: shale_search::semantic::SearchHit) -> Self {
        SearchHit {
            key: hit.key,
            score: hit.score,
            document: hit.document,
        }
    }
}

#[pymethods]
impl SearchHit {
    /// The key whose value matched.
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.key)
    }

    /// The document as text: the value of a text value; a vector value's payload if it is
    /// UTF-8, else `None`.
    #[getter]
    fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.document).ok()
    }

    /// The value's document as bytes: the text of a text value, the payload of a vector
    /// value.
    #[getter]
    fn document<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.document)
    }

    /// How close the value is to the query, higher is closer: the cosine similarity in
    /// [-1, 1] (metric "cosine"), the inner product ("dot"), or minus the squared
    /// Euclidean distance ("l2").
    #[getter]
    fn score(&self) -> f32 {
        self.score
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let key = PyBytes::new(py, &self.key).repr()?;
        let document = match self.text() {
            Some(text) => format!("text={}", pyo3::types::PyString::new(py, text).repr()?),
            None => format!("document={}", PyBytes::new(py, &self.document).repr()?),
        };
        Ok(format!(
            "SearchHit(key={key}, score={:.4}, {document})",
            self.score
        ))
    }
}

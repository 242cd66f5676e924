//! `shale.SearchHit`: one answer of `DB.search`.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

#[pyclass(module = "shale", frozen)]
pub(crate) struct SearchHit {
    key: Vec<u8>,
    text: String,
    score: f32,
}

impl From<shale::semantic::SearchHit> for SearchHit {
    fn from(hit: shale::semantic::SearchHit) -> Self {
        SearchHit {
            text: String::from_utf8_lossy(&hit.document).into_owned(),
            key: hit.key,
            score: hit.score,
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

    /// The value, as text.
    #[getter]
    fn text(&self) -> &str {
        &self.text
    }

    /// Cosine similarity to the query, in [-1, 1]; higher is closer.
    #[getter]
    fn score(&self) -> f32 {
        self.score
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let key = PyBytes::new(py, &self.key).repr()?;
        let text = pyo3::types::PyString::new(py, &self.text).repr()?;
        Ok(format!(
            "SearchHit(key={key}, score={:.4}, text={text})",
            self.score
        ))
    }
}

//! `shale.MiniLM`: all-MiniLM-L6-v2, the model the indexes embed texts with, for callers
//! that embed texts themselves (the embeddings of `shale.langchain` and
//! `shale.llama_index`, so that a store can use Shale's model in place of a framework's).

use std::path::PathBuf;
use std::sync::Arc;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2};
use pyo3::prelude::*;

use shale_search::semantic::Embedder;

use crate::errors::{new_err, run};

/// The embedding model, loaded once; `embed` runs without the GIL and may be called from
/// many threads.
#[pyclass(module = "shale", name = "MiniLM", frozen)]
pub(crate) struct MiniLm {
    model: Arc<dyn Embedder>,
}

#[pymethods]
impl MiniLm {
    /// Load the model from `model_dir`, else `$SHALE_MODEL_DIR` or the cache that
    /// `scripts/fetch-model.sh` fills (ONNX Runtime, else candle); `EmbeddingError` if its
    /// files are missing or damaged.
    #[new]
    #[pyo3(signature = (model_dir = None))]
    fn new(py: Python<'_>, model_dir: Option<PathBuf>) -> PyResult<Self> {
        Ok(MiniLm {
            model: crate::convert::minilm(py, model_dir.as_deref())?,
        })
    }

    /// The number of components of each embedding (384).
    #[getter]
    fn dim(&self) -> usize {
        self.model.dim()
    }

    /// Names the model and what decides its vectors, as the indexes record it.
    #[getter]
    fn model_id(&self) -> String {
        self.model.model_id()
    }

    /// The embeddings of `texts`, one row each: a float32 array of shape
    /// `(len(texts), dim)`.
    fn embed<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<String>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let model = &self.model;
        let rows = run(py, || Ok(model.embed(&refs)?))?;
        let dim = self.model.dim();
        if rows.len() != texts.len() || rows.iter().any(|row| row.len() != dim) {
            let why = format!(
                "the model answered {} rows for {} texts",
                rows.len(),
                texts.len()
            );
            return Err(new_err(py, "EmbeddingError", why));
        }
        let flat: Vec<f32> = rows.into_iter().flatten().collect();
        let array = Array2::from_shape_vec((texts.len(), dim), flat)
            .map_err(|e| new_err(py, "EmbeddingError", e.to_string()))?;
        Ok(array.into_pyarray(py))
    }

    fn __repr__(&self) -> String {
        format!("shale.MiniLM({:?})", self.model.model_id())
    }
}

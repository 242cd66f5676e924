//! A Python callable as the engine's [`Embedder`]: `f(list[str]) -> array (n, dim)`.
//!
//! Threads: the engine calls [`Embedder::embed`] from the index's worker threads (and from
//! the thread of a text search), never holding a lock of its own. `embed` attaches to the
//! interpreter (takes the GIL) for the call and lets it go after, so a Python thread
//! blocked in `wait_indexed()` or a search (which run with the GIL released) cannot
//! deadlock with it.
//!
//! Invariants:
//! - An exception in the callable, or an answer of the wrong shape, is an `Error::Index`:
//!   the index's failure (`EmbeddingError`), never a panic.
//! - While a thread runs the callable, [`inside_embedder`] is true on it, and the bindings
//!   refuse calls into the database from it: `wait_indexed()` there would wait for the
//!   batch the thread itself is embedding, and a write could wait for room in the queue
//!   that only this worker can make.

use std::cell::Cell;

use numpy::{AllowTypeChange, PyArrayLike2};
use pyo3::prelude::*;
use pyo3::types::PyList;

use shale_search::semantic::Embedder;

thread_local! {
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// True while this thread runs a Python embedder or compaction filter.
pub(crate) fn inside_embedder() -> bool {
    INSIDE.with(Cell::get)
}

/// Sets [`inside_embedder`] for its lifetime (restoring the previous value: a text search
/// made by an embedder is refused before it gets here, but nesting stays correct).
pub(crate) struct Inside(bool);

impl Inside {
    pub(crate) fn enter() -> Inside {
        Inside(INSIDE.with(|c| c.replace(true)))
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        INSIDE.with(|c| c.set(self.0));
    }
}

/// A Python callable that embeds texts.
pub(crate) struct PyEmbedder {
    callable: Py<PyAny>,
    dim: usize,
    model_id: String,
}

impl std::fmt::Debug for PyEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyEmbedder")
            .field("model_id", &self.model_id)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl PyEmbedder {
    /// Wrap `callable`. `model_id` names the model (default: `python:<module>.<qualname>`
    /// of the callable); `dim` its dimension (default: the width of its answer to one
    /// probe text, [`PROBE`]).
    ///
    /// # Errors
    /// `TypeError` if `callable` is not callable; `EmbeddingError` if the probe fails.
    pub(crate) fn new(
        callable: &Bound<'_, PyAny>,
        model_id: Option<String>,
        dim: Option<usize>,
    ) -> PyResult<PyEmbedder> {
        let py = callable.py();
        if !callable.is_callable() {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "embedder must be None, \"minilm\" or a callable, not {}",
                callable.get_type().name()?
            )));
        }
        let model_id = match model_id {
            Some(id) => id,
            None => default_model_id(callable)?,
        };
        let dim = match dim {
            Some(dim) => dim,
            None => {
                let rows = call(py, callable, &[PROBE], None, &model_id)
                    .map_err(|e| crate::errors::to_py(py, e.into()))?;
                rows.first().map_or(0, Vec::len)
            }
        };
        Ok(PyEmbedder {
            callable: callable.clone().unbind(),
            dim,
            model_id,
        })
    }
}

/// The text `PyEmbedder::new` embeds once to learn the dimension when none is given.
pub(crate) const PROBE: &str = "shale";

/// `python:<module>.<qualname>` of a function, or of the class of a callable object.
fn default_model_id(callable: &Bound<'_, PyAny>) -> PyResult<String> {
    let named = if callable.hasattr("__qualname__")? {
        callable.clone()
    } else {
        callable.get_type().into_any()
    };
    let qualname: String = named.getattr("__qualname__")?.extract()?;
    let module: Option<String> = named
        .getattr("__module__")
        .ok()
        .and_then(|m| m.extract().ok());
    Ok(match module {
        Some(module) => format!("python:{module}.{qualname}"),
        None => format!("python:{qualname}"),
    })
}

/// Call the embedder on `texts` and check its answer: `texts.len()` rows of `dim` (if
/// known) finite-or-not floats (the engine checks the values).
fn call(
    py: Python<'_>,
    callable: &Bound<'_, PyAny>,
    texts: &[&str],
    dim: Option<usize>,
    model_id: &str,
) -> shale::Result<Vec<Vec<f32>>> {
    let failed = |what: String| shale::Error::Index(format!("the embedder {model_id} {what}"));
    let list = PyList::new(py, texts).map_err(|e| failed(format!("got no list: {e}")))?;
    let answer = callable
        .call1((list,))
        .map_err(|e| failed(format!("raised {e}")))?;
    let array: PyArrayLike2<'_, f32, AllowTypeChange> = answer.extract().map_err(|e| {
        failed(format!(
            "returned {}, not a 2-d array of floats: {e}",
            type_name(&answer)
        ))
    })?;
    let view = array.as_array();
    let (rows, cols) = view.dim();
    if rows != texts.len() || dim.is_some_and(|d| d != cols) {
        let want = dim.map_or_else(|| "dim".to_string(), |d| d.to_string());
        return Err(failed(format!(
            "returned an array of shape ({rows}, {cols}) for {} texts; expected ({}, {want})",
            texts.len(),
            texts.len()
        )));
    }
    Ok(view.rows().into_iter().map(|row| row.to_vec()).collect())
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

impl Embedder for PyEmbedder {
    fn dim(&self) -> usize {
        self.dim
    }

    fn model_id(&self) -> String {
        self.model_id.clone()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        let _inside = Inside::enter();
        Python::try_attach(|py| {
            call(
                py,
                self.callable.bind(py),
                texts,
                Some(self.dim),
                &self.model_id,
            )
        })
        .unwrap_or_else(|| {
            Err(shale::Error::Index(format!(
                "the embedder {} cannot run: the Python interpreter is not running",
                self.model_id
            )))
        })
    }
}

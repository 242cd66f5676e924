//! A Python callable as the engine's compaction filter (`shale.open(...,
//! compaction_filter=f)`): `f(level, key, value)` answers `True` to keep the value, `False`
//! to remove the key, or bytes to keep in its place.
//!
//! Threads: compactions call it from the engine's background threads (and from the thread
//! of `DB.compact`), which attach to the interpreter for each call. While it runs,
//! [`crate::embedder::inside_embedder`] is true on that thread, so a call from it into the
//! database is refused rather than wait for the compaction that is waiting for it.
//!
//! A filter never loses data by mistake: an exception, or an answer that is neither a bool
//! nor bytes (a forgotten `return` is `None`), keeps the value, and is reported as
//! Python reports an error it cannot raise (`sys.unraisablehook`).

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes};

use shale::{CompactionFilter, FilterDecision};

pub(crate) struct PyFilter {
    callable: Py<PyAny>,
}

impl PyFilter {
    /// Wrap `callable`.
    ///
    /// # Errors
    /// A description if it is not callable.
    pub(crate) fn new(callable: &Bound<'_, PyAny>) -> Result<PyFilter, String> {
        if !callable.is_callable() {
            return Err(format!(
                "compaction_filter must be callable as f(level, key, value), got {callable}"
            ));
        }
        Ok(PyFilter {
            callable: callable.clone().unbind(),
        })
    }

    fn decide(answer: &Bound<'_, PyAny>) -> Option<FilterDecision> {
        if let Ok(keep) = answer.cast::<PyBool>() {
            return Some(match keep.is_true() {
                true => FilterDecision::Keep,
                false => FilterDecision::Remove,
            });
        }
        if let Ok(bytes) = answer.cast::<PyBytes>() {
            return Some(FilterDecision::Change(bytes.as_bytes().to_vec()));
        }
        if let Ok(bytes) = answer.cast::<PyByteArray>() {
            return Some(FilterDecision::Change(bytes.to_vec()));
        }
        None
    }
}

impl CompactionFilter for PyFilter {
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision {
        let _inside = crate::embedder::Inside::enter();
        Python::try_attach(|py| {
            let callable = self.callable.bind(py);
            let answer = callable.call1((level, PyBytes::new(py, key), PyBytes::new(py, value)));
            let error = match answer {
                Ok(answer) => match PyFilter::decide(&answer) {
                    Some(decision) => return decision,
                    None => pyo3::exceptions::PyTypeError::new_err(format!(
                        "a compaction filter answers True, False or bytes, not {answer}; \
                         the value is kept"
                    )),
                },
                Err(e) => e,
            };
            error.write_unraisable(py, Some(callable));
            FilterDecision::Keep
        })
        // No interpreter (it is shutting down): keep, as for an error.
        .unwrap_or(FilterDecision::Keep)
    }
}

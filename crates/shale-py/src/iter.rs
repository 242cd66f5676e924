//! `shale.Iterator`: the Python iterator over a range of a `DB` or a `Snapshot`.
//!
//! It owns the engine's `RangeIter` (which pins the memtables and files it reads) and an
//! `Arc` of the database handle, so it stays valid however long Python keeps it; each
//! step runs without the GIL, under the handle's read lock, and raises `ClosedError`
//! once the database is closed. A snapshot iterator also holds its snapshot.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::errors::run;
use crate::shared::Shared;

/// What each step yields.
#[derive(Clone, Copy)]
pub(crate) enum Mode {
    Items,
    Keys,
    Values,
}

#[pyclass(name = "Iterator", module = "shale", frozen)]
pub(crate) struct KvIter {
    shared: Arc<Shared>,
    /// Keeps a snapshot's sequence number pinned while its iterator lives.
    _snapshot: Option<Arc<shale::Snapshot>>,
    /// `None` once exhausted.
    range: Mutex<Option<shale::RangeIter>>,
    mode: Mode,
}

impl KvIter {
    pub(crate) fn new(
        shared: Arc<Shared>,
        snapshot: Option<Arc<shale::Snapshot>>,
        range: shale::RangeIter,
        mode: Mode,
    ) -> KvIter {
        KvIter {
            shared,
            _snapshot: snapshot,
            range: Mutex::new(Some(range)),
            mode,
        }
    }
}

#[pymethods]
impl KvIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let (shared, range) = (&self.shared, &self.range);
        let pair = run(py, || {
            let step = shared.with(|_| {
                let mut range = range.lock().unwrap_or_else(PoisonError::into_inner);
                Ok(range.as_mut().and_then(Iterator::next).transpose()?)
            });
            if !matches!(step, Ok(Some(_))) {
                // Exhausted, failed or closed: release the pinned files now.
                *range.lock().unwrap_or_else(PoisonError::into_inner) = None;
            }
            step
        })?;
        let Some((key, value)) = pair else {
            return Ok(None);
        };
        Ok(Some(match self.mode {
            Mode::Items => {
                PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])?.into_any()
            }
            Mode::Keys => PyBytes::new(py, &key).into_any(),
            Mode::Values => PyBytes::new(py, &value).into_any(),
        }))
    }
}

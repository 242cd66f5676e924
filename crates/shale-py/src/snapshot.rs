//! `shale.Snapshot`: reads at one point in time.
//!
//! Holds the engine's snapshot in an `Arc` shared with the iterators made from it, so
//! `release()` (or leaving the `with` block) unpins it as soon as those are gone too.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;

use crate::errors::new_err;
use crate::read::{read_methods, ReadView};
use crate::shared::Shared;

#[pyclass(module = "shale", frozen)]
pub(crate) struct Snapshot {
    shared: Arc<Shared>,
    /// `None` once released.
    snap: Mutex<Option<Arc<shale::Snapshot>>>,
}

impl Snapshot {
    pub(crate) fn new(shared: Arc<Shared>, snap: shale::Snapshot) -> Snapshot {
        Snapshot {
            shared,
            snap: Mutex::new(Some(Arc::new(snap))),
        }
    }

    fn pinned(&self, py: Python<'_>) -> PyResult<Arc<shale::Snapshot>> {
        self.snap
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                new_err(
                    py,
                    "InvalidArgumentError",
                    "this snapshot was released".to_string(),
                )
            })
    }

    /// Reads at the snapshot; `InvalidArgumentError` once it is released.
    fn view(&self, py: Python<'_>) -> PyResult<ReadView<'_>> {
        Ok(ReadView::new(&self.shared, Some(self.pinned(py)?)))
    }
}

read_methods!(Snapshot);

#[pymethods]
impl Snapshot {
    /// As `DB.cursor`, at the snapshot.
    #[pyo3(signature = (start = None, end = None))]
    fn cursor(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::cursor::Cursor> {
        self.view(py)?.cursor(py, start, end)
    }

    /// Unpin the snapshot (once its iterators are gone too): compaction may then drop
    /// the old versions it kept for it. Idempotent.
    fn release(&self) {
        self.snap
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.release();
        false
    }

    fn __repr__(&self) -> String {
        match &*self.snap.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(s) => format!("<shale.Snapshot seq={}>", s.seq().0),
            None => "<shale.Snapshot (released)>".to_string(),
        }
    }
}

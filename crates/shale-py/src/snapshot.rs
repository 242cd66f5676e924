//! `shale.Snapshot`: reads at one point in time.
//!
//! Holds the engine's snapshot in an `Arc` shared with the iterators made from it, so
//! `release()` (or leaving the `with` block) unpins it as soon as those are gone too.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{opt_bytes, to_bytes};
use crate::db::{bounds, prefix_bounds, Bounds};
use crate::errors::{key_error, new_err, run};
use crate::iter::{KvIter, Mode};
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

    fn read(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
        let key = to_bytes(key, "key")?;
        let snap = self.pinned(py)?;
        let shared = &self.shared;
        run(py, || {
            shared.with(|db| Ok(db.get_opt(&key, &shale::ReadOptions::at(&snap))?))
        })
    }

    fn iter(&self, py: Python<'_>, bounds: Bounds, reverse: bool, mode: Mode) -> PyResult<KvIter> {
        let snap = self.pinned(py)?;
        let shared = &self.shared;
        let range = run(py, || {
            shared.with(|db| Ok(db.range_opt(bounds, &shale::ReadOptions::at(&snap))?))
        })?;
        let range = if reverse { range.rev() } else { range };
        Ok(KvIter::new(Arc::clone(shared), Some(snap), range, mode))
    }
}

#[pymethods]
impl Snapshot {
    /// The value of `key` at the snapshot, or `default`.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(match self.read(py, key)? {
            Some(v) => Some(PyBytes::new(py, &v).into_any()),
            None => default,
        })
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        match self.read(py, key)? {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(key_error(py, &to_bytes(key, "key")?)),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.read(py, key)?.is_some())
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Items)
    }

    fn items(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Items)
    }

    fn keys(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Keys)
    }

    fn values(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Values)
    }

    /// As `DB.range`, at the snapshot.
    #[pyo3(signature = (start = None, end = None, reverse = false))]
    fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<KvIter> {
        let b = bounds(opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        self.iter(py, b, reverse, Mode::Items)
    }

    /// As `DB.prefix`, at the snapshot.
    #[pyo3(signature = (prefix, reverse = false))]
    fn prefix(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>, reverse: bool) -> PyResult<KvIter> {
        let b = prefix_bounds(to_bytes(prefix, "prefix")?);
        self.iter(py, b, reverse, Mode::Items)
    }

    /// As `DB.cursor`, at the snapshot.
    #[pyo3(signature = (start = None, end = None))]
    fn cursor(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::cursor::Cursor> {
        let (start, end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        let snap = self.pinned(py)?;
        crate::cursor::open(py, &self.shared, Some(snap), start, end)
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

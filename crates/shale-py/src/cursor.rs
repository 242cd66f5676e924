//! `shale.Cursor`: the engine's `DbIterator` for Python, positioned by hand (`seek`,
//! `seek_for_prev`, `seek_to_first`, `seek_to_last`) and moved by `next` and `prev`.
//!
//! Like `shale.Iterator` it owns the engine's cursor and an `Arc` of the handle: valid as
//! long as Python keeps it, each move without the GIL under the handle's read lock, and
//! `ClosedError` once the database is closed. A snapshot's cursor holds its snapshot.

use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::to_bytes;
use crate::errors::{new_err, run};
use crate::shared::Shared;

#[pyclass(module = "shale", frozen)]
pub(crate) struct Cursor {
    shared: Arc<Shared>,
    /// Keeps a snapshot's sequence number pinned while its cursor lives.
    _snapshot: Option<Arc<shale::Snapshot>>,
    cursor: Mutex<shale::DbIterator>,
}

impl Cursor {
    pub(crate) fn new(
        shared: Arc<Shared>,
        snapshot: Option<Arc<shale::Snapshot>>,
        cursor: shale::DbIterator,
    ) -> Cursor {
        Cursor {
            shared,
            _snapshot: snapshot,
            cursor: Mutex::new(cursor),
        }
    }

    /// Run `f` on the engine's cursor without the GIL, under the handle's read lock.
    fn step(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut shale::DbIterator) -> shale::Result<()> + Send,
    ) -> PyResult<()> {
        let (shared, cursor) = (&self.shared, &self.cursor);
        run(py, || {
            shared.with(|_| {
                let mut cursor = cursor.lock().unwrap_or_else(PoisonError::into_inner);
                Ok(f(&mut cursor)?)
            })
        })
    }

    /// The current entry's key or value, or `InvalidArgumentError` when not positioned.
    fn current<'py>(&self, py: Python<'py>, value: bool) -> PyResult<Bound<'py, PyBytes>> {
        let cursor = self.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        if !cursor.valid() {
            return Err(new_err(
                py,
                "InvalidArgumentError",
                "the cursor is not on an entry (check valid first)".to_string(),
            ));
        }
        Ok(PyBytes::new(
            py,
            if value { cursor.value() } else { cursor.key() },
        ))
    }
}

/// A cursor over `[start, end)` (`None`: unbounded) of the database, at `snapshot` if one
/// is given; unpositioned.
pub(crate) fn open(
    py: Python<'_>,
    shared: &Arc<Shared>,
    snapshot: Option<Arc<shale::Snapshot>>,
    start: Option<Vec<u8>>,
    end: Option<Vec<u8>>,
) -> PyResult<Cursor> {
    let at = snapshot.clone();
    let cursor = run(py, || {
        shared.with(|db| {
            let opts = shale::ReadOptions {
                snapshot: at.as_deref(),
                lower_bound: start,
                upper_bound: end,
                ..shale::ReadOptions::default()
            };
            Ok(db.iter(&opts)?)
        })
    })?;
    Ok(Cursor::new(Arc::clone(shared), snapshot, cursor))
}

#[pymethods]
impl Cursor {
    /// True while the cursor is on an entry.
    #[getter]
    fn valid(&self) -> bool {
        self.cursor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .valid()
    }

    /// The current entry's key (`InvalidArgumentError` when not `valid`).
    #[getter]
    fn key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.current(py, false)
    }

    /// The current entry's value (`InvalidArgumentError` when not `valid`).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.current(py, true)
    }

    /// Move to the first key `>= key`.
    fn seek(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        self.step(py, |c| c.seek(&key))
    }

    /// Move to the last key `<= key`.
    fn seek_for_prev(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        self.step(py, |c| c.seek_for_prev(&key))
    }

    /// Move to the first key (within the cursor's bounds).
    fn seek_to_first(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, shale::DbIterator::seek_to_first)
    }

    /// Move to the last key (within the cursor's bounds).
    fn seek_to_last(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, shale::DbIterator::seek_to_last)
    }

    /// Move to the next key (requires `valid`).
    fn next(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, shale::DbIterator::next)
    }

    /// Move to the previous key (requires `valid`).
    fn prev(&self, py: Python<'_>) -> PyResult<()> {
        self.step(py, shale::DbIterator::prev)
    }
}

//! `shale.WriteBatch`: writes gathered in Python and committed atomically by `write()`.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::convert::{to_bytes, write_options};
use crate::errors::run;
use crate::keyspace::Keyspace;
use crate::pending::Pending;
use crate::shared::Shared;

/// Puts and deletes applied together by `write()`, or on leaving a `with` block.
#[pyclass(module = "shale", frozen)]
pub(crate) struct WriteBatch {
    shared: Arc<Shared>,
    /// Ended once written or discarded.
    batch: Pending<shale::WriteBatch>,
    sync: bool,
}

impl WriteBatch {
    pub(crate) fn new(shared: Arc<Shared>, sync: bool) -> WriteBatch {
        WriteBatch {
            shared,
            batch: Pending::new(
                shale::WriteBatch::new(),
                "this batch was already written or discarded",
            ),
            sync,
        }
    }

    fn edit(&self, py: Python<'_>, f: impl FnOnce(&mut shale::WriteBatch)) -> PyResult<()> {
        self.batch.with(py, |b| {
            f(b);
            Ok(())
        })
    }

    fn commit(&self, py: Python<'_>, batch: shale::WriteBatch) -> PyResult<()> {
        let shared = &self.shared;
        let opts = write_options(self.sync);
        run(py, || shared.with(|db| Ok(db.write(batch, opts)?)))
    }
}

/// The keyspace a batch entry goes to: the default one unless given.
fn keyspace_id(keyspace: Option<PyRef<'_, Keyspace>>) -> shale::KeyspaceId {
    keyspace.map_or(shale::KeyspaceId::DEFAULT, |ks| ks.id())
}

#[pymethods]
impl WriteBatch {
    /// Queue `key = value`, in `keyspace` (a `Keyspace` of this database) if given.
    #[pyo3(signature = (key, value, keyspace = None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (key, value) = (to_bytes(key, "key")?, to_bytes(value, "value")?);
        let ks = keyspace_id(keyspace);
        self.edit(py, |b| b.put_in(ks, key, value))
    }

    /// Queue the removal of `key`, from `keyspace` if given.
    #[pyo3(signature = (key, keyspace = None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        let ks = keyspace_id(keyspace);
        self.edit(py, |b| b.delete_in(ks, key))
    }

    /// Queue the removal of every key `k` with `start <= k < end`, from `keyspace` if
    /// given.
    #[pyo3(signature = (start, end, keyspace = None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (start, end) = (to_bytes(start, "start")?, to_bytes(end, "end")?);
        let ks = keyspace_id(keyspace);
        self.edit(py, |b| b.delete_range_in(ks, start, end))
    }

    /// Apply every queued change atomically. The batch cannot be used afterwards.
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        let Some(batch) = self.batch.take() else {
            return Err(self.batch.ended(py));
        };
        self.commit(py, batch)
    }

    /// Drop every queued change.
    fn discard(&self) {
        self.batch.take();
    }

    /// Changes queued.
    fn __len__(&self) -> usize {
        self.batch.peek(|b| b.map_or(0, shale::WriteBatch::len))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Write the batch if the block ended normally, discard it if it raised.
    #[pyo3(signature = (exc_type, _exc_value, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        // `write()` inside the block already committed it: nothing left to do.
        self.batch.exit(exc_type, |batch| self.commit(py, batch))
    }

    fn __repr__(&self) -> String {
        format!("<shale.WriteBatch {} changes>", self.__len__())
    }
}

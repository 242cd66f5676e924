//! `shale.Keyspace`: one keyspace of a `DB`, read and written like the `DB` itself (a
//! dict-like handle). Made by `DB.keyspace(name, ...)`; its calls raise `ClosedError` once
//! the database is closed, and `InvalidArgumentError` once the keyspace is dropped.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors::run;
use crate::read::{read_methods, ReadView};
use crate::shared::Shared;
use crate::write::{write_methods, WriteView};

#[pyclass(name = "Keyspace", module = "shale", frozen)]
pub(crate) struct Keyspace {
    shared: Arc<Shared>,
    ks: shale::Keyspace,
}

impl Keyspace {
    pub(crate) fn new(shared: Arc<Shared>, ks: shale::Keyspace) -> Keyspace {
        Keyspace { shared, ks }
    }

    /// The engine's keyspace id, for a `WriteBatch` entry.
    pub(crate) fn id(&self) -> shale::KeyspaceId {
        self.ks.id()
    }

    /// The engine's handle, for a transaction.
    pub(crate) fn engine(&self) -> &shale::Keyspace {
        &self.ks
    }

    fn view(&self, _py: Python<'_>) -> PyResult<ReadView<'_>> {
        Ok(ReadView::of_keyspace(&self.shared, &self.ks))
    }

    fn writer(&self) -> WriteView<'_> {
        WriteView::of_keyspace(&self.shared, &self.ks)
    }
}

read_methods!(Keyspace);
write_methods!(Keyspace);

#[pymethods]
impl Keyspace {
    /// The keyspace's name.
    #[getter]
    fn name(&self) -> String {
        self.ks.name().to_owned()
    }

    /// The options its tables are built with, as a dict (the keyword arguments of
    /// `DB.keyspace`).
    fn options<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let o = self.ks.options();
        let dict = PyDict::new(py);
        dict.set_item("write_buffer_size", o.write_buffer_size)?;
        dict.set_item("block_size", o.block_size)?;
        dict.set_item("filter_bits_per_key", o.filter_bits_per_key)?;
        dict.set_item(
            "compression",
            crate::convert::compression_name(o.compression),
        )?;
        Ok(dict)
    }

    /// The values of `keys`, in the same order, `None` for a missing key; all read at one
    /// moment.
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        self.view(py)?.multi_get(py, keys)
    }

    /// Compact the keyspace's keys in `[start, end]` (`None`: unbounded) down the levels.
    #[pyo3(signature = (start = None, end = None))]
    fn compact(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let start = crate::convert::opt_bytes(start, "start")?;
        let end = crate::convert::opt_bytes(end, "end")?;
        let (shared, ks) = (&self.shared, &self.ks);
        run(py, || {
            shared.with(|_| Ok(ks.compact_range(start.as_deref(), end.as_deref())?))
        })
    }

    fn __repr__(&self) -> String {
        format!("<shale.Keyspace {:?}>", self.ks.name())
    }
}

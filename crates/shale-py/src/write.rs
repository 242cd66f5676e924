//! The writes `DB` and `Keyspace` share: put, delete, a range delete, `d[k] = v` and
//! `del d[k]`. A [`WriteView`] writes to the default keyspace or to one named keyspace;
//! [`write_methods!`] gives a handle the dict-like write methods over its view.
//!
//! Threads: every engine call runs with the GIL released ([`crate::errors::run`]) under a
//! read lock of the database ([`Shared::with`]), so it raises `ClosedError` once the
//! database is closed.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::convert::{to_bytes, write_options};
use crate::errors::{key_error, run};
use crate::shared::Shared;

/// The database as one of its writers sees it.
pub(crate) struct WriteView<'a> {
    shared: &'a Arc<Shared>,
    /// `None`: the default keyspace.
    keyspace: Option<&'a shale::Keyspace>,
}

impl<'a> WriteView<'a> {
    /// Writes to the default keyspace.
    pub(crate) fn new(shared: &'a Arc<Shared>) -> Self {
        WriteView {
            shared,
            keyspace: None,
        }
    }

    /// Writes to keyspace `ks`.
    pub(crate) fn of_keyspace(shared: &'a Arc<Shared>, ks: &'a shale::Keyspace) -> Self {
        WriteView {
            shared,
            keyspace: Some(ks),
        }
    }

    pub(crate) fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let (key, value) = (to_bytes(key, "key")?, to_bytes(value, "value")?);
        let mut batch = shale::WriteBatch::new();
        match self.keyspace {
            Some(ks) => batch.put_in(ks, key, value),
            None => batch.put(key, value),
        }
        self.write(py, batch, sync)
    }

    pub(crate) fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        let mut batch = shale::WriteBatch::new();
        match self.keyspace {
            Some(ks) => batch.delete_in(ks, key),
            None => batch.delete(key),
        }
        self.write(py, batch, sync)
    }

    pub(crate) fn delete_range(
        &self,
        py: Python<'_>,
        start: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let (start, end) = (to_bytes(start, "start")?, to_bytes(end, "end")?);
        let mut batch = shale::WriteBatch::new();
        match self.keyspace {
            Some(ks) => batch.delete_range_in(ks, start, end),
            None => batch.delete_range(start, end),
        }
        self.write(py, batch, sync)
    }

    /// Delete `key`, raising `KeyError` if it is missing.
    pub(crate) fn delete_item(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        let (shared, keyspace) = (self.shared, self.keyspace);
        let existed = run(py, || {
            shared.with(|db| {
                // The check and the delete are two calls: a concurrent writer may slip
                // between them, as with a dict shared by threads.
                let existed = match keyspace {
                    Some(ks) => ks.get(&key)?.is_some(),
                    None => db.get(&key)?.is_some(),
                };
                if existed {
                    match keyspace {
                        Some(ks) => ks.delete(&key)?,
                        None => db.delete(&key)?,
                    }
                }
                Ok(existed)
            })
        })?;
        if existed {
            Ok(())
        } else {
            Err(key_error(py, &key))
        }
    }

    fn write(&self, py: Python<'_>, batch: shale::WriteBatch, sync: bool) -> PyResult<()> {
        let shared = self.shared;
        run(py, || {
            shared.with(|db| Ok(db.write(batch, write_options(sync))?))
        })
    }
}

/// The dict-like write methods of a handle, each a call on the handle's
/// `fn writer(&self) -> WriteView`: `DB` and `Keyspace` expand it once each, as another
/// `#[pymethods]` block of their class.
macro_rules! write_methods {
    ($handle:ty) => {
        #[pyo3::pymethods]
        impl $handle {
            /// Set `key` to `value`; `sync=True` makes it durable before returning.
            #[pyo3(signature = (key, value, sync = false))]
            fn put(
                &self,
                py: pyo3::Python<'_>,
                key: &pyo3::Bound<'_, pyo3::PyAny>,
                value: &pyo3::Bound<'_, pyo3::PyAny>,
                sync: bool,
            ) -> pyo3::PyResult<()> {
                self.writer().put(py, key, value, sync)
            }

            /// Remove `key` (no error if it is missing).
            #[pyo3(signature = (key, sync = false))]
            fn delete(
                &self,
                py: pyo3::Python<'_>,
                key: &pyo3::Bound<'_, pyo3::PyAny>,
                sync: bool,
            ) -> pyo3::PyResult<()> {
                self.writer().delete(py, key, sync)
            }

            /// Remove every key `k` with `start <= k < end`, in one write whatever their
            /// number.
            #[pyo3(signature = (start, end, sync = false))]
            fn delete_range(
                &self,
                py: pyo3::Python<'_>,
                start: &pyo3::Bound<'_, pyo3::PyAny>,
                end: &pyo3::Bound<'_, pyo3::PyAny>,
                sync: bool,
            ) -> pyo3::PyResult<()> {
                self.writer().delete_range(py, start, end, sync)
            }

            fn __setitem__(
                &self,
                py: pyo3::Python<'_>,
                key: &pyo3::Bound<'_, pyo3::PyAny>,
                value: &pyo3::Bound<'_, pyo3::PyAny>,
            ) -> pyo3::PyResult<()> {
                self.writer().put(py, key, value, false)
            }

            /// `del d[key]`: like `dict`, a missing key raises `KeyError` (`delete` does
            /// not).
            fn __delitem__(
                &self,
                py: pyo3::Python<'_>,
                key: &pyo3::Bound<'_, pyo3::PyAny>,
            ) -> pyo3::PyResult<()> {
                self.writer().delete_item(py, key)
            }
        }
    };
}
pub(crate) use write_methods;

//! The reads `DB`, `Keyspace` and `Snapshot` share: a value by key (with a default, as
//! `d[k]`, as `k in d`), iterators over all keys, a range or a prefix, and cursors. A
//! [`ReadView`] reads the latest state, or the state at a snapshot it pins, of the default
//! keyspace or of one named keyspace; [`read_methods!`] gives a handle the dict-like read
//! methods over its view.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::{opt_bytes, to_bytes};
use crate::errors::{key_error, run};
use crate::iter::{KvIter, Mode};
use crate::range::{bounds, prefix_bounds, Bounds};
use crate::shared::Shared;

/// The database as one of its readers sees it.
pub(crate) struct ReadView<'a> {
    shared: &'a Arc<Shared>,
    /// `None`: the latest state.
    snapshot: Option<Arc<shale::Snapshot>>,
    /// `None`: the default keyspace.
    keyspace: Option<&'a shale::Keyspace>,
}

impl<'a> ReadView<'a> {
    pub(crate) fn new(shared: &'a Arc<Shared>, snapshot: Option<Arc<shale::Snapshot>>) -> Self {
        ReadView {
            shared,
            snapshot,
            keyspace: None,
        }
    }

    /// The latest state of keyspace `ks`.
    pub(crate) fn of_keyspace(shared: &'a Arc<Shared>, ks: &'a shale::Keyspace) -> Self {
        ReadView {
            shared,
            snapshot: None,
            keyspace: Some(ks),
        }
    }

    fn value(&self, py: Python<'_>, key: &[u8]) -> PyResult<Option<Vec<u8>>> {
        let (shared, snapshot, keyspace) = (self.shared, self.snapshot.as_deref(), self.keyspace);
        run(py, || {
            shared.with(|db| {
                let opts = shale::ReadOptions {
                    snapshot,
                    ..shale::ReadOptions::default()
                };
                Ok(match keyspace {
                    Some(ks) => ks.get_opt(key, &opts)?,
                    None => db.get_opt(key, &opts)?,
                })
            })
        })
    }

    /// `get(key, default)`.
    pub(crate) fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(match self.value(py, &to_bytes(key, "key")?)? {
            Some(v) => Some(PyBytes::new(py, &v).into_any()),
            None => default,
        })
    }

    /// `multi_get(keys)`: the values of `keys` (any iterable of bytes or str), in order,
    /// `None` for a missing key, all read at one moment.
    pub(crate) fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let keys = keys
            .try_iter()?
            .map(|key| to_bytes(&key?, "key"))
            .collect::<PyResult<Vec<_>>>()?;
        let (shared, snapshot, keyspace) = (self.shared, self.snapshot.as_deref(), self.keyspace);
        let values = run(py, || {
            shared.with(|db| {
                let opts = shale::ReadOptions {
                    snapshot,
                    ..shale::ReadOptions::default()
                };
                Ok(match keyspace {
                    Some(ks) => ks.multi_get(&keys, &opts)?,
                    None => db.multi_get(&keys, &opts)?,
                })
            })
        })?;
        Ok(values
            .into_iter()
            .map(|v| v.map(|v| PyBytes::new(py, &v)))
            .collect())
    }

    /// `d[key]`: a missing key raises `KeyError`.
    pub(crate) fn item<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let key = to_bytes(key, "key")?;
        match self.value(py, &key)? {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(key_error(py, &key)),
        }
    }

    /// `key in d`.
    pub(crate) fn contains(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.value(py, &to_bytes(key, "key")?)?.is_some())
    }

    /// Every pair, key or value (`mode`), in key order.
    pub(crate) fn all(&self, py: Python<'_>, mode: Mode) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, mode)
    }

    /// `range(start, end, reverse)`.
    pub(crate) fn range(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        reverse: bool,
    ) -> PyResult<KvIter> {
        let b = bounds(opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        self.iter(py, b, reverse, Mode::Items)
    }

    /// `prefix(prefix, reverse)`.
    pub(crate) fn prefix(
        &self,
        py: Python<'_>,
        prefix: &Bound<'_, PyAny>,
        reverse: bool,
    ) -> PyResult<KvIter> {
        let b = prefix_bounds(to_bytes(prefix, "prefix")?);
        self.iter(py, b, reverse, Mode::Items)
    }

    /// `cursor(start, end)`.
    pub(crate) fn cursor(
        self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::cursor::Cursor> {
        let (start, end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        crate::cursor::open(py, self.shared, self.snapshot, start, end)
    }

    fn iter(&self, py: Python<'_>, bounds: Bounds, reverse: bool, mode: Mode) -> PyResult<KvIter> {
        let (shared, snapshot, keyspace) = (self.shared, self.snapshot.as_deref(), self.keyspace);
        let range = run(py, || {
            shared.with(|db| {
                let opts = shale::ReadOptions {
                    snapshot,
                    ..shale::ReadOptions::default()
                };
                Ok(match keyspace {
                    Some(ks) => ks.range_opt(bounds, &opts)?,
                    None => db.range_opt(bounds, &opts)?,
                })
            })
        })?;
        let range = if reverse { range.rev() } else { range };
        Ok(KvIter::new(
            Arc::clone(self.shared),
            self.snapshot.clone(),
            range,
            mode,
        ))
    }
}

/// The dict-like read methods of a handle, each a call on the handle's
/// `fn view(&self, py) -> PyResult<ReadView>`: `DB`, `Keyspace` and `Snapshot` expand it
/// once each, as a second `#[pymethods]` block of their class.
macro_rules! read_methods {
    ($handle:ty) => {
        #[pyo3::pymethods]
        impl $handle {
            /// The value of `key`, or `default` when it is missing.
            #[pyo3(signature = (key, default = None))]
            fn get<'py>(
                &self,
                py: pyo3::Python<'py>,
                key: &pyo3::Bound<'py, pyo3::PyAny>,
                default: Option<pyo3::Bound<'py, pyo3::PyAny>>,
            ) -> pyo3::PyResult<Option<pyo3::Bound<'py, pyo3::PyAny>>> {
                self.view(py)?.get(py, key, default)
            }

            fn __getitem__<'py>(
                &self,
                py: pyo3::Python<'py>,
                key: &pyo3::Bound<'py, pyo3::PyAny>,
            ) -> pyo3::PyResult<pyo3::Bound<'py, pyo3::types::PyBytes>> {
                self.view(py)?.item(py, key)
            }

            fn __contains__(
                &self,
                py: pyo3::Python<'_>,
                key: &pyo3::Bound<'_, pyo3::PyAny>,
            ) -> pyo3::PyResult<bool> {
                self.view(py)?.contains(py, key)
            }

            /// `(key, value)` pairs in key order.
            fn __iter__(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<$crate::iter::KvIter> {
                self.view(py)?.all(py, $crate::iter::Mode::Items)
            }

            /// `(key, value)` pairs in key order.
            fn items(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<$crate::iter::KvIter> {
                self.view(py)?.all(py, $crate::iter::Mode::Items)
            }

            /// Keys in order.
            fn keys(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<$crate::iter::KvIter> {
                self.view(py)?.all(py, $crate::iter::Mode::Keys)
            }

            /// Values in key order.
            fn values(&self, py: pyo3::Python<'_>) -> pyo3::PyResult<$crate::iter::KvIter> {
                self.view(py)?.all(py, $crate::iter::Mode::Values)
            }

            /// `(key, value)` pairs with `start <= key < end` (`None`: unbounded), in key
            /// order or, with `reverse=True`, from the last key down.
            #[pyo3(signature = (start = None, end = None, reverse = false))]
            fn range(
                &self,
                py: pyo3::Python<'_>,
                start: Option<&pyo3::Bound<'_, pyo3::PyAny>>,
                end: Option<&pyo3::Bound<'_, pyo3::PyAny>>,
                reverse: bool,
            ) -> pyo3::PyResult<$crate::iter::KvIter> {
                self.view(py)?.range(py, start, end, reverse)
            }

            /// `(key, value)` pairs whose key starts with `prefix`, in key order (or
            /// reversed).
            #[pyo3(signature = (prefix, reverse = false))]
            fn prefix(
                &self,
                py: pyo3::Python<'_>,
                prefix: &pyo3::Bound<'_, pyo3::PyAny>,
                reverse: bool,
            ) -> pyo3::PyResult<$crate::iter::KvIter> {
                self.view(py)?.prefix(py, prefix, reverse)
            }
        }
    };
}
pub(crate) use read_methods;

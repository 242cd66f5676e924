//! `shale.Transaction`: an optimistic transaction (`shale::Transaction`), used as a `with`
//! block that commits when it ends normally and discards its writes when it raises.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::convert::to_bytes;
use crate::errors::run;
use crate::keyspace::Keyspace;
use crate::pending::Pending;

#[pyclass(module = "shale", frozen)]
pub(crate) struct Transaction {
    /// Ended once committed or discarded.
    txn: Pending<shale::Transaction>,
}

impl Transaction {
    pub(crate) fn new(txn: shale::Transaction) -> Transaction {
        Transaction {
            txn: Pending::new(txn, "this transaction has ended (committed or discarded)"),
        }
    }

    /// Run `f` on the transaction, or raise if it has ended.
    fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut shale::Transaction) -> PyResult<T>,
    ) -> PyResult<T> {
        self.txn.with(py, f)
    }
}

#[pymethods]
impl Transaction {
    /// The value of `key` (in `keyspace` if given): this transaction's own write, else the
    /// value at its snapshot (`default` if missing). The key is checked for changes at
    /// commit.
    #[pyo3(signature = (key, default = None, keyspace = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
        keyspace: Option<PyRef<'py, Keyspace>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let key = to_bytes(key, "key")?;
        let ks = keyspace.as_deref().map(Keyspace::engine);
        let value = self.with(py, |txn| {
            run(py, || {
                Ok(match ks {
                    Some(ks) => txn.get_in(ks, &key)?,
                    None => txn.get(&key)?,
                })
            })
        })?;
        Ok(match value {
            Some(v) => Some(PyBytes::new(py, &v).into_any()),
            None => default,
        })
    }

    /// Set `key` (in `keyspace` if given) to `value` when the transaction commits.
    #[pyo3(signature = (key, value, keyspace = None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let (key, value) = (to_bytes(key, "key")?, to_bytes(value, "value")?);
        let ks = keyspace.as_deref().map(Keyspace::engine);
        self.with(py, |txn| match ks {
            Some(ks) => run(py, || Ok(txn.put_in(ks, key, value)?)),
            None => {
                txn.put(key, value);
                Ok(())
            }
        })
    }

    /// Delete `key` (in `keyspace` if given) when the transaction commits.
    #[pyo3(signature = (key, keyspace = None))]
    fn delete(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        keyspace: Option<PyRef<'_, Keyspace>>,
    ) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        let ks = keyspace.as_deref().map(Keyspace::engine);
        self.with(py, |txn| match ks {
            Some(ks) => run(py, || Ok(txn.delete_in(ks, key)?)),
            None => {
                txn.delete(key);
                Ok(())
            }
        })
    }

    /// Write the transaction's writes atomically; `ConflictError` (nothing written) if a
    /// key it read or wrote changed since it began.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        let Some(txn) = self.txn.take() else {
            return Err(self.txn.ended(py));
        };
        run(py, || Ok(txn.commit()?))
    }

    /// Discard the transaction's writes.
    fn discard(&self) {
        self.txn.take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commit if the block ended normally (unless it committed or discarded already),
    /// discard if it raised.
    #[pyo3(signature = (exc_type, _exc_value, _traceback))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _exc_value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.txn.exit(exc_type, |txn| run(py, || Ok(txn.commit()?)))
    }
}

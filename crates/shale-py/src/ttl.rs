//! `shale.TtlDB`: a database whose values may expire (`shale::TtlDb`).

use std::path::PathBuf;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

use crate::convert::{opt_bytes, options, to_bytes};
use crate::errors::{new_err, run};

#[pyclass(name = "TtlDB", module = "shale", frozen)]
pub(crate) struct TtlDb {
    /// `None` once closed.
    db: RwLock<Option<shale::TtlDb>>,
    path: PathBuf,
}

/// Open (or create) the TTL database in `path`; keyword options as for `open` (not
/// `semantic`).
pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<TtlDb> {
    let (opts, model) = options(py, kwargs)?;
    if model.is_some() {
        return Err(new_err(
            py,
            "InvalidArgumentError",
            "a TTL database has no semantic index".to_string(),
        ));
    }
    let db = run(py, || Ok(shale::TtlDb::open(&path, opts)?))?;
    Ok(TtlDb {
        db: RwLock::new(Some(db)),
        path,
    })
}

impl TtlDb {
    /// Run `f` on the open database without the GIL, or raise `ClosedError`.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&shale::TtlDb) -> shale::Result<T> + Send,
    ) -> PyResult<T> {
        let db = &self.db;
        run(py, || {
            let guard = db.read().unwrap_or_else(PoisonError::into_inner);
            match guard.as_ref() {
                Some(db) => Ok(f(db)?),
                None => Err(shale::Error::Closed.into()),
            }
        })
    }
}

#[pymethods]
impl TtlDb {
    /// The value of `key`, or `default` when it is missing or has expired.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let key = to_bytes(key, "key")?;
        Ok(match self.with(py, |db| db.get(&key))? {
            Some(v) => Some(PyBytes::new(py, &v).into_any()),
            None => default,
        })
    }

    /// Set `key` to `value`; with `ttl` (seconds), reads find nothing once it has passed.
    #[pyo3(signature = (key, value, ttl = None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        ttl: Option<f64>,
    ) -> PyResult<()> {
        let (key, value) = (to_bytes(key, "key")?, to_bytes(value, "value")?);
        let ttl = match ttl {
            Some(secs) => Some(Duration::try_from_secs_f64(secs).map_err(|_| {
                new_err(
                    py,
                    "InvalidArgumentError",
                    format!("ttl must be a number of seconds >= 0, not {secs}"),
                )
            })?),
            None => None,
        };
        self.with(py, |db| match ttl {
            Some(ttl) => db.put_with_ttl(&key, &value, ttl),
            None => db.put(&key, &value),
        })
    }

    /// Remove `key`.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        self.with(py, |db| db.delete(&key))
    }

    /// The live `(key, value)` pairs with `start <= key < end` (`None`: unbounded), in key
    /// order, as a list.
    #[pyo3(signature = (start = None, end = None))]
    fn range<'py>(
        &self,
        py: Python<'py>,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let bounds = crate::range::bounds(opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        let pairs = self.with(py, |db| {
            db.range(bounds)?.collect::<shale::Result<Vec<_>>>()
        })?;
        pairs
            .iter()
            .map(|(k, v)| PyTuple::new(py, [PyBytes::new(py, k), PyBytes::new(py, v)]))
            .collect()
    }

    /// Close the database; later calls raise `ClosedError`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let db = &self.db;
        run(py, || {
            let taken = db.write().unwrap_or_else(PoisonError::into_inner).take();
            match taken {
                Some(db) => Ok(db.close()?),
                None => Ok(()),
            }
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<shale.TtlDB {:?}>", self.path)
    }
}

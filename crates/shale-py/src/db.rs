//! `shale.DB` and `shale.WriteBatch`.
//!
//! Threads: a `DB` is shared freely between Python threads. Every engine call runs with
//! the GIL released ([`crate::errors::run`]) under a read lock of [`Shared::db`]; `close`
//! takes the write lock, so it waits for calls in progress and every later call (on the
//! DB, or on an iterator, snapshot or batch made from it) raises `ClosedError`. Closing
//! drops the engine's `Db`, which releases the directory's lock: the same process may
//! open the directory again at once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::convert::{opt_bytes, to_bytes};
use crate::errors::{key_error, run, Failure};
use crate::iter::{KvIter, Mode};
use crate::search::SearchHit;
use crate::snapshot::Snapshot;

/// An open database and, with `semantic=True`, its default index.
pub(crate) struct Open {
    db: Arc<shale::Db>,
    index: Option<shale::semantic::Index>,
}

/// The name of the index `semantic=True` opens over every key.
const DEFAULT_INDEX: &str = "default";

/// The engine's `Db`, shared by a `DB` and everything made from it.
pub(crate) struct Shared {
    db: RwLock<Option<Open>>,
    pub(crate) path: PathBuf,
}

impl Shared {
    /// Run `f` on the open database; `Closed` once `close` ran. Call without the GIL.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&shale::Db) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let guard = self.db.read().unwrap_or_else(PoisonError::into_inner);
        match guard.as_ref() {
            Some(open) => f(&open.db),
            None => Err(Failure::Engine(shale::Error::Closed)),
        }
    }

    /// Run `f` on the default index; `InvalidArgument` without `semantic=True`.
    pub(crate) fn with_index<T>(
        &self,
        f: impl FnOnce(&shale::semantic::Index) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let guard = self.db.read().unwrap_or_else(PoisonError::into_inner);
        match guard.as_ref() {
            Some(Open {
                index: Some(index), ..
            }) => f(index),
            Some(_) => Err(Failure::Engine(shale::Error::InvalidArgument(
                "semantic search is off for this database (open it with semantic=True)".into(),
            ))),
            None => Err(Failure::Engine(shale::Error::Closed)),
        }
    }

    fn close(&self) -> Result<(), Failure> {
        // The write lock is held through the engine's close, so that a second `close`
        // (or any call) in another thread returns only once the directory is released.
        let mut db = self.db.write().unwrap_or_else(PoisonError::into_inner);
        match db.take() {
            // Closing joins the background threads (the index's first) and releases the
            // lock file.
            Some(open) => {
                drop(open.index);
                Ok(open.db.close()?)
            }
            None => Ok(()),
        }
    }
}

/// An open Shale database. Made by `shale.open(path, **options)`.
#[pyclass(name = "DB", module = "shale", frozen)]
pub(crate) struct Db {
    shared: Arc<Shared>,
}

/// `(start, end)` as the engine's half-open key range.
pub(crate) type Bounds = (std::ops::Bound<Vec<u8>>, std::ops::Bound<Vec<u8>>);

pub(crate) fn bounds(start: Option<Vec<u8>>, end: Option<Vec<u8>>) -> Bounds {
    use std::ops::Bound;
    (
        start.map_or(Bound::Unbounded, Bound::Included),
        end.map_or(Bound::Unbounded, Bound::Excluded),
    )
}

/// The smallest key after every key that starts with `prefix` (`None`: there is none).
pub(crate) fn prefix_bounds(prefix: Vec<u8>) -> Bounds {
    use std::ops::Bound;
    let mut end = prefix.clone();
    let upper = loop {
        match end.pop() {
            Some(last) if last < 0xff => {
                end.push(last + 1);
                break Bound::Excluded(end);
            }
            Some(_) => continue,
            None => break Bound::Unbounded,
        }
    };
    (Bound::Included(prefix), upper)
}

pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Db> {
    let (opts, model) = crate::convert::options(py, options)?;
    let db = run(py, || {
        let db = Arc::new(shale::Db::open(&path, opts)?);
        let index = match model {
            Some(model) => Some(shale::semantic::Index::open(
                &db,
                DEFAULT_INDEX,
                shale::semantic::IndexOptions::text(model),
            )?),
            None => None,
        };
        Ok(Open { db, index })
    })?;
    Ok(Db {
        shared: Arc::new(Shared {
            db: RwLock::new(Some(db)),
            path,
        }),
    })
}

impl Db {
    fn write_opts(sync: bool) -> shale::WriteOptions {
        shale::WriteOptions {
            sync,
            ..shale::WriteOptions::default()
        }
    }

    fn iter(&self, py: Python<'_>, bounds: Bounds, reverse: bool, mode: Mode) -> PyResult<KvIter> {
        let shared = &self.shared;
        let range = run(py, || {
            shared.with(|db| Ok(db.range_opt(bounds, &shale::ReadOptions::default())?))
        })?;
        Ok(KvIter::new(
            Arc::clone(shared),
            None,
            if reverse { range.rev() } else { range },
            mode,
        ))
    }
}

#[pymethods]
impl Db {
    /// The value of `key`, or `default` when it is missing.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let key = to_bytes(key, "key")?;
        let shared = &self.shared;
        let value = run(py, || shared.with(|db| Ok(db.get(&key)?)))?;
        Ok(match value {
            Some(v) => Some(PyBytes::new(py, &v).into_any()),
            None => default,
        })
    }

    /// Set `key` to `value`; `sync=True` makes it durable before returning.
    #[pyo3(signature = (key, value, sync = false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        sync: bool,
    ) -> PyResult<()> {
        let mut batch = shale::WriteBatch::new();
        batch.put(to_bytes(key, "key")?, to_bytes(value, "value")?);
        let shared = &self.shared;
        run(py, || {
            shared.with(|db| Ok(db.write(batch, Self::write_opts(sync))?))
        })
    }

    /// Remove `key` (no error if it is missing).
    #[pyo3(signature = (key, sync = false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, sync: bool) -> PyResult<()> {
        let mut batch = shale::WriteBatch::new();
        batch.delete(to_bytes(key, "key")?);
        let shared = &self.shared;
        run(py, || {
            shared.with(|db| Ok(db.write(batch, Self::write_opts(sync))?))
        })
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let key = to_bytes(key, "key")?;
        let shared = &self.shared;
        match run(py, || shared.with(|db| Ok(db.get(&key)?)))? {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(key_error(py, &key)),
        }
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value, false)
    }

    /// `del db[key]`: like `dict`, a missing key raises `KeyError` (`delete` does not).
    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        let shared = &self.shared;
        let existed = run(py, || {
            shared.with(|db| {
                // The check and the delete are two calls: a concurrent writer may slip
                // between them, as with a dict shared by threads.
                let existed = db.get(&key)?.is_some();
                if existed {
                    db.delete(&key)?;
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

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = to_bytes(key, "key")?;
        let shared = &self.shared;
        run(py, || shared.with(|db| Ok(db.get(&key)?.is_some())))
    }

    /// `(key, value)` pairs in key order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Items)
    }

    /// `(key, value)` pairs in key order.
    fn items(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Items)
    }

    /// Keys in order.
    fn keys(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Keys)
    }

    /// Values in key order.
    fn values(&self, py: Python<'_>) -> PyResult<KvIter> {
        self.iter(py, bounds(None, None), false, Mode::Values)
    }

    /// `(key, value)` pairs with `start <= key < end` (`None`: unbounded), in key order
    /// or, with `reverse=True`, from the last key down.
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

    /// `(key, value)` pairs whose key starts with `prefix`, in key order.
    #[pyo3(signature = (prefix, reverse = false))]
    fn prefix(&self, py: Python<'_>, prefix: &Bound<'_, PyAny>, reverse: bool) -> PyResult<KvIter> {
        let b = prefix_bounds(to_bytes(prefix, "prefix")?);
        self.iter(py, b, reverse, Mode::Items)
    }

    /// A write batch: `with db.batch() as b: b.put(k, v); b.delete(k2)` commits all of it
    /// atomically when the block ends, and nothing if the block raises.
    #[pyo3(signature = (sync = false))]
    fn batch(&self, sync: bool) -> WriteBatch {
        WriteBatch {
            shared: Arc::clone(&self.shared),
            batch: Mutex::new(Some(shale::WriteBatch::new())),
            sync,
        }
    }

    /// A consistent view of the database as it is now; release it with `release()` or
    /// by using it as a context manager.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let shared = &self.shared;
        let snap = run(py, || shared.with(|db| Ok(db.snapshot())))?;
        Ok(Snapshot::new(Arc::clone(shared), snap))
    }

    /// The `k` values (default 10) closest in meaning to `query` (needs `semantic=True`),
    /// best first.
    /// `exact=True` compares with every value instead of walking the HNSW graph;
    /// `start`/`end` restrict the keys searched (`start <= key < end`).
    #[pyo3(signature = (query, k = None, exact = false, start = None, end = None, ef = None))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn search(
        &self,
        py: Python<'_>,
        query: &str,
        k: Option<&Bound<'_, PyAny>>,
        exact: bool,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        ef: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<SearchHit>> {
        let k = k.map_or(Ok(10), |k| search_count(py, "k", k))?;
        let opts = shale::semantic::SearchOptions {
            lower_bound: opt_bytes(start, "start")?,
            upper_bound: opt_bytes(end, "end")?,
            ef: ef.map(|ef| search_count(py, "ef", ef)).transpose()?,
            exact,
            ..shale::semantic::SearchOptions::k(k)
        };
        let shared = &self.shared;
        let hits = run(py, || {
            shared.with_index(|index| Ok(index.search(query, &opts)?))
        })?;
        Ok(hits.into_iter().map(SearchHit::from).collect())
    }

    /// Block until every value written so far is embedded and searchable.
    fn wait_indexed(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        run(py, || shared.with_index(|index| Ok(index.wait_indexed()?)))
    }

    /// Write every memtable to an SSTable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        run(py, || shared.with(|db| Ok(db.flush()?)))
    }

    /// Compact the keys in `[start, end]` (`None`: unbounded) down the levels, dropping
    /// overwritten values and tombstones; runs in the calling thread.
    #[pyo3(signature = (start = None, end = None))]
    fn compact(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (start, end) = (opt_bytes(start, "start")?, opt_bytes(end, "end")?);
        let shared = &self.shared;
        run(py, || {
            shared.with(|db| Ok(db.compact_range(start.as_deref(), end.as_deref())?))
        })
    }

    /// The engine's counters, plus `level_files` (SSTables per level), `sst_bytes` and,
    /// with semantic search on, `index_applied` / `index_queued`, `index_id_space` and
    /// `index_tracked_keys`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let shared = &self.shared;
        let (stats, levels, sst_bytes) = run(py, || {
            shared.with(|db| Ok((db.stats(), db.level_file_counts(), db.sst_bytes())))
        })?;
        let index = run(py, || {
            shared.with_index(|index| Ok((index.progress(), index.stats())))
        })
        .ok();
        let dict = crate::stats::to_dict(py, &stats)?;
        dict.set_item("level_files", levels)?;
        dict.set_item("sst_bytes", sst_bytes)?;
        if let Some(((applied, queued), index)) = index {
            dict.set_item("index_applied", applied)?;
            dict.set_item("index_queued", queued)?;
            dict.set_item("index_id_space", index.id_space)?;
            dict.set_item("index_tracked_keys", index.tracked_keys)?;
        }
        Ok(dict)
    }

    /// Sync the WAL, stop background work and release the directory. Idempotent; later
    /// calls raise `ClosedError`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        run(py, || shared.close())
    }

    /// True once `close()` ran.
    #[getter]
    fn closed(&self) -> bool {
        // Called with the GIL held: never wait for the lock. Only `close` holds it for
        // writing, so a lock held that way means a close in progress: closed.
        match self.shared.db.try_read() {
            Ok(db) => db.is_none(),
            Err(std::sync::TryLockError::Poisoned(db)) => db.into_inner().is_none(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }

    /// The directory of the database.
    #[getter]
    fn path(&self) -> String {
        self.shared.path.to_string_lossy().into_owned()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        let state = if self.closed() { " (closed)" } else { "" };
        format!("<shale.DB {:?}{state}>", self.shared.path)
    }
}

/// Puts and deletes applied together by `write()`, or on leaving a `with` block.
#[pyclass(module = "shale", frozen)]
pub(crate) struct WriteBatch {
    shared: Arc<Shared>,
    /// `None` once written or discarded.
    batch: Mutex<Option<shale::WriteBatch>>,
    sync: bool,
}

impl WriteBatch {
    fn edit(&self, py: Python<'_>, f: impl FnOnce(&mut shale::WriteBatch)) -> PyResult<()> {
        let mut batch = self.batch.lock().unwrap_or_else(PoisonError::into_inner);
        match batch.as_mut() {
            Some(b) => {
                f(b);
                Ok(())
            }
            None => Err(crate::errors::new_err(
                py,
                "InvalidArgumentError",
                "this batch was already written or discarded".to_string(),
            )),
        }
    }
}

#[pymethods]
impl WriteBatch {
    /// Queue `key = value`.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (key, value) = (to_bytes(key, "key")?, to_bytes(value, "value")?);
        self.edit(py, |b| b.put(key, value))
    }

    /// Queue the removal of `key`.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        self.edit(py, |b| b.delete(key))
    }

    /// Apply every queued change atomically. The batch cannot be used afterwards.
    fn write(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self
            .batch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(batch) = taken else {
            return Err(crate::errors::new_err(
                py,
                "InvalidArgumentError",
                "this batch was already written or discarded".to_string(),
            ));
        };
        let shared = &self.shared;
        let opts = Db::write_opts(self.sync);
        run(py, || shared.with(|db| Ok(db.write(batch, opts)?)))
    }

    /// Drop every queued change.
    fn discard(&self) {
        self.batch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Changes queued.
    fn __len__(&self) -> usize {
        self.batch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(0, shale::WriteBatch::len)
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
        if exc_type.is_none() {
            let pending = self
                .batch
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some();
            // `write()` inside the block already committed it: nothing left to do.
            if pending {
                self.write(py)?;
            }
        } else {
            self.discard();
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<shale.WriteBatch {} changes>", self.__len__())
    }
}

/// A search's `k` or `ef`: any Python int, checked here so that a negative or huge one is
/// an `InvalidArgumentError`, like the engine's own bound, and not an `OverflowError`
/// from the conversion.
fn search_count(py: Python<'_>, name: &str, n: &Bound<'_, PyAny>) -> PyResult<usize> {
    if let Some(n) = n
        .extract::<u64>()
        .ok()
        .and_then(|n| usize::try_from(n).ok())
    {
        return Ok(n); // the engine refuses what is above its bound
    }
    if n.cast::<pyo3::types::PyInt>().is_err() {
        let why = format!("search {name} must be an int, not {}", n.get_type().name()?);
        return Err(pyo3::exceptions::PyTypeError::new_err(why));
    }
    let why = if n.lt(0)? {
        format!("search {name} = {n} must not be negative")
    } else {
        format!(
            "search {name} = {n} is above the limit {}",
            shale::vector::hnsw::MAX_EF
        )
    };
    Err(crate::errors::new_err(py, "InvalidArgumentError", why))
}

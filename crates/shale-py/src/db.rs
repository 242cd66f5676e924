//! `shale.DB`.
//!
//! Threads: a `DB` is shared freely between Python threads. Every engine call runs with
//! the GIL released ([`crate::errors::run`]) under a read lock of `Shared::db`
//! (`shared.rs`); `close`
//! takes the write lock, so it waits for calls in progress and every later call (on the
//! DB, or on an iterator, snapshot, batch or index made from it) raises `ClosedError`.
//! Closing closes the indexes first, then drops the engine's `Db`, which releases the
//! directory's lock: the same process may open the directory again at once.
//!
//! A database whose last handle Python drops without `close()` is closed by the drop,
//! with the GIL released too: the index workers may need it to finish a batch with a
//! Python embedder. Databases with a Python embedder are also closed at interpreter exit
//! ([`crate::shared::close_for_exit`]), while their workers can still run Python.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::batch::WriteBatch;
use crate::convert::{opt_bytes, search_count};
use crate::errors::run;
use crate::read::{read_methods, ReadView};
use crate::search::SearchHit;
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use crate::write::{write_methods, WriteView};

/// An open Shale database. Made by `shale.open(path, **options)`.
#[pyclass(name = "DB", module = "shale", frozen)]
pub(crate) struct Db {
    shared: Arc<Shared>,
}

pub(crate) fn open(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Db> {
    let (opts, model) = crate::convert::options(py, options)?;
    let shared = Arc::new(run(py, || Shared::new(path, opts, model))?);
    if shared.python_filter {
        shared.register_for_exit();
    }
    Ok(Db { shared })
}

impl Db {
    /// Reads of the latest state.
    fn view(&self, _py: Python<'_>) -> PyResult<ReadView<'_>> {
        Ok(ReadView::new(&self.shared, None))
    }

    /// Writes to the default keyspace.
    fn writer(&self) -> WriteView<'_> {
        WriteView::new(&self.shared)
    }
}

read_methods!(Db);
write_methods!(Db);

#[pymethods]
impl Db {
    /// The values of `keys` (any iterable of bytes or str), in the same order, `None` for
    /// a missing key; all read at one moment, faster than a loop of `get`.
    fn multi_get<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        self.view(py)?.multi_get(py, keys)
    }

    /// A cursor over `start <= key < end` (`None`: unbounded), unpositioned: `seek`,
    /// `seek_for_prev`, `seek_to_first` or `seek_to_last` it, then `next`/`prev`, reading
    /// `key` and `value` while `valid`.
    #[pyo3(signature = (start = None, end = None))]
    fn cursor(
        &self,
        py: Python<'_>,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<crate::cursor::Cursor> {
        self.view(py)?.cursor(py, start, end)
    }

    /// A write batch: `with db.batch() as b: b.put(k, v); b.delete(k2)` commits all of it
    /// atomically when the block ends, and nothing if the block raises.
    #[pyo3(signature = (sync = false))]
    fn batch(&self, sync: bool) -> WriteBatch {
        WriteBatch::new(Arc::clone(&self.shared), sync)
    }

    /// A consistent view of the database as it is now; release it with `release()` or
    /// by using it as a context manager.
    fn snapshot(&self, py: Python<'_>) -> PyResult<Snapshot> {
        let shared = &self.shared;
        let snap = run(py, || shared.with(|db| Ok(db.snapshot())))?;
        Ok(Snapshot::new(Arc::clone(shared), snap))
    }

    /// An optimistic transaction at a snapshot of now: `with db.transaction() as txn:`
    /// commits when the block ends (`ConflictError` if a key it read or wrote changed
    /// meanwhile; run it again) and discards its writes if the block raises.
    fn transaction(&self, py: Python<'_>) -> PyResult<crate::transaction::Transaction> {
        let shared = &self.shared;
        let txn = run(py, || shared.with(|db| Ok(db.transaction())))?;
        Ok(crate::transaction::Transaction::new(txn))
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
        let opts = shale_search::semantic::SearchOptions {
            lower_bound: opt_bytes(start, "start")?,
            upper_bound: opt_bytes(end, "end")?,
            ef: ef.map(|ef| search_count(py, "ef", ef)).transpose()?,
            exact,
            ..shale_search::semantic::SearchOptions::k(k)
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

    /// Open the semantic index `name` over the keys that start with `prefix`, creating it
    /// if it does not exist (see `shale.VectorIndex`). `embedder` is `None` (an index of vectors
    /// given with `put_vector`; `dim` is required for a new one), `"minilm"`
    /// (all-MiniLM-L6-v2 from `model_dir`, else `$SHALE_MODEL_DIR`) or a callable
    /// `f(list[str]) -> array (n, dim)` (`model_id` names it; `dim`, if not given, is learnt
    /// by embedding one text). `keyspace` names the keyspace whose keys it covers. `prefix`,
    /// `keyspace`, `dim`, `metric`, `m`, `ef_construction` and `ef_search` left out are an
    /// existing index's own (else `b""`, the default keyspace, -, `"cosine"`, 16, 200, 64);
    /// given, they redefine it (its vectors are reused).
    #[pyo3(signature = (
        name, *, prefix = None, keyspace = None, embedder = None, dim = None, metric = None, m = None,
        ef_construction = None, ef_search = None, embed_threads = 2, batch_size = 1024,
        queue_bytes = None, model_dir = None, model_id = None,
    ))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn index(
        &self,
        py: Python<'_>,
        name: &str,
        prefix: Option<&Bound<'_, PyAny>>,
        keyspace: Option<String>,
        embedder: Option<&Bound<'_, PyAny>>,
        dim: Option<usize>,
        metric: Option<&str>,
        m: Option<usize>,
        ef_construction: Option<usize>,
        ef_search: Option<usize>,
        embed_threads: usize,
        batch_size: usize,
        queue_bytes: Option<usize>,
        model_dir: Option<PathBuf>,
        model_id: Option<String>,
    ) -> PyResult<crate::index::VectorIndex> {
        let args = crate::index::IndexArgs {
            prefix: opt_bytes(prefix, "prefix")?,
            keyspace,
            embedder,
            dim,
            metric,
            m,
            ef_construction,
            ef_search,
            embed_threads,
            batch_size,
            queue_bytes,
            model_dir,
            model_id,
        };
        crate::index::open(py, &self.shared, name, args)
    }

    /// The text index `name`: keyword (BM25) search over the keys under `prefix` (of
    /// `keyspace`), made if it does not exist, with `analyzer` "english" (stop words,
    /// stemming), "simple" or "cjk" (Chinese, Japanese and Korean as character bigrams).
    /// Every write of this handle keeps it exact from then on: a put is found, a delete is
    /// gone, as the write returns. Values written while it was not open are indexed when
    /// it opens. An index opened with other options than it was made with is rebuilt.
    #[pyo3(signature = (name, *, prefix = None, keyspace = None, analyzer = "english"))]
    fn text_index(
        &self,
        py: Python<'_>,
        name: &str,
        prefix: Option<&Bound<'_, PyAny>>,
        keyspace: Option<String>,
        analyzer: &str,
    ) -> PyResult<crate::text::TextIndex> {
        let prefix = opt_bytes(prefix, "prefix")?;
        crate::text::open(py, &self.shared, name, prefix, keyspace, analyzer)
    }

    /// The keyspace `name` (a dict-like handle of its own keys), made if it does not exist
    /// with the database's options, or with those given here: `write_buffer_size`,
    /// `block_size`, `filter_bits_per_key`, `compression` (as `open` takes them). Options
    /// given for an existing keyspace replace those of its own (the tables it writes from
    /// then on use them); the others stay.
    #[pyo3(signature = (name, *, write_buffer_size = None, block_size = None, filter_bits_per_key = None, compression = None))]
    fn keyspace(
        &self,
        py: Python<'_>,
        name: &str,
        write_buffer_size: Option<usize>,
        block_size: Option<usize>,
        filter_bits_per_key: Option<u32>,
        compression: Option<&str>,
    ) -> PyResult<crate::keyspace::Keyspace> {
        let codec = compression
            .map(|c| crate::convert::compression("compression", c))
            .transpose()
            .map_err(|e| crate::errors::new_err(py, "InvalidArgumentError", e))?;
        let given = write_buffer_size.is_some()
            || block_size.is_some()
            || filter_bits_per_key.is_some()
            || codec.is_some();
        let shared = &self.shared;
        let ks = run(py, || {
            shared.with(|db| {
                if !given {
                    return Ok(db.keyspace(name)?);
                }
                // Options left out are the keyspace's own, or a new one's database's.
                let base = match db.keyspace_names().iter().any(|n| n == name) {
                    true => db.keyspace(name)?.options(),
                    false => shale::KeyspaceOptions::from_db(db.options()),
                };
                let opts = shale::KeyspaceOptions {
                    write_buffer_size: write_buffer_size.unwrap_or(base.write_buffer_size),
                    block_size: block_size.unwrap_or(base.block_size),
                    filter_bits_per_key: filter_bits_per_key.unwrap_or(base.filter_bits_per_key),
                    compression: codec.unwrap_or(base.compression),
                };
                Ok(db.keyspace_with(name, opts)?)
            })
        })?;
        Ok(crate::keyspace::Keyspace::new(Arc::clone(&self.shared), ks))
    }

    /// The names of every keyspace, `"default"` first.
    fn keyspaces(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let shared = &self.shared;
        run(py, || shared.with(|db| Ok(db.keyspace_names())))
    }

    /// Drop keyspace `name` and everything in it (one manifest edit, whatever its size).
    fn drop_keyspace(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let shared = &self.shared;
        run(py, || shared.with(|db| Ok(db.drop_keyspace(name)?)))
    }

    /// Write every memtable to an SSTable.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let shared = &self.shared;
        run(py, || shared.with(|db| Ok(db.flush()?)))
    }

    /// Write an openable copy of the database as of now into `path`, which must not exist:
    /// its SSTables hard-linked (fast whatever the size), and the indexes open on it.
    fn checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let shared = &self.shared;
        run(py, || shared.with(|db| Ok(db.checkpoint(&path)?)))
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
        self.shared.closed()
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

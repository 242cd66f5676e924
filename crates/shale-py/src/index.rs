//! `shale.VectorIndex`: a named semantic index over the keys under one prefix (`DB.index`).
//!
//! A Python `VectorIndex` holds the database handle and the index's name, not the engine's
//! index: every call finds it by name in the open database ([`Shared::with_named_index`])
//! under the database's read lock, with the GIL released. So a call waits for nothing but
//! the engine, `DB.close()` waits for calls in progress, and after it every call raises
//! `ClosedError` (the name, prefix, dim and metric stay readable).
//!
//! Vectors come in as numpy arrays (`vectors.rs`); a batch of vectors is one `WriteBatch`,
//! atomic like any other. A batch search reads the caller's query matrix in place while
//! the GIL is released, as numpy's own functions do: another thread must not write to
//! that array meanwhile.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::Arc;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use shale_search::semantic::{
    SearchOptions, VectorIndexDefinition, VectorIndexOptions, USER_VECTORS,
};
use shale_search::vector::Metric;

use crate::convert::{opt_bytes, search_count, to_bytes};
use crate::embedder::PyEmbedder;
use crate::errors::{new_err, run, to_py, Failure};
use crate::range::key_range;
use crate::search::SearchHit;
use crate::shared::Shared;
use crate::vectors::{c_order, matrix, rows};

/// `DB.index`'s keyword arguments.
pub(crate) struct IndexArgs<'a, 'py> {
    pub prefix: Option<Vec<u8>>,
    /// The keyspace it covers (`None`: the recorded one, else the default keyspace).
    pub keyspace: Option<String>,
    pub embedder: Option<&'a Bound<'py, PyAny>>,
    pub dim: Option<usize>,
    pub metric: Option<&'a str>,
    pub m: Option<usize>,
    pub ef_construction: Option<usize>,
    pub ef_search: Option<usize>,
    pub embed_threads: usize,
    pub batch_size: usize,
    pub queue_bytes: Option<usize>,
    pub model_dir: Option<PathBuf>,
    pub model_id: Option<String>,
}

/// What turns an index's texts into vectors.
enum Model<'a, 'py> {
    /// None: the index holds vectors given with `put_vector`.
    Vectors,
    MiniLm,
    Python(&'a Bound<'py, PyAny>),
}

/// `DB.index(name, ...)`: open (or create) the index and keep it in the open database.
pub(crate) fn open(
    py: Python<'_>,
    shared: &Arc<Shared>,
    name: &str,
    args: IndexArgs<'_, '_>,
) -> PyResult<VectorIndex> {
    // Every problem of the arguments in one error, like `open`'s options; the engine adds
    // its own (ranges, the name) when the index opens.
    let mut problems = Vec::new();
    let metric = args.metric.and_then(|name| {
        Metric::parse(name)
            .map_err(|_| {
                problems.push(format!(
                    "metric must be \"cosine\", \"dot\" or \"l2\", got {name:?}"
                ));
            })
            .ok()
    });
    // What an existing index was defined with fills in what the call leaves out.
    let recorded = run(py, || {
        shared.with(|db| {
            Ok(shale_search::semantic::VectorIndex::definition(db, name)
                .ok()
                .flatten())
        })
    })?;
    let dim = args.dim.or(recorded.as_ref().map(|r| r.dim));
    let model = Model::parse(args.embedder, &mut problems)?;
    model.check(name, &args, dim, recorded.as_ref(), &mut problems);
    if !problems.is_empty() {
        return Err(to_py(
            py,
            Failure::Engine(shale::Error::InvalidOptions(problems)),
        ));
    }

    let embedder: Option<Arc<dyn shale_search::semantic::Embedder>> = match model {
        Model::Vectors => None,
        Model::MiniLm => Some(crate::convert::minilm(py, args.model_dir.as_deref())?),
        Model::Python(callable) => Some(Arc::new(PyEmbedder::new(
            callable,
            args.model_id.clone(),
            dim,
        )?)),
    };
    let python_embedder = matches!(model, Model::Python(_));
    let opts = index_options(&args, embedder, dim, metric, recorded.as_ref());
    let index = run(py, || shared.open_index(name, opts, python_embedder))?;
    Ok(VectorIndex {
        shared: Arc::clone(shared),
        name: index.name().to_string(),
        prefix: index.prefix().to_vec(),
        keyspace: index
            .keyspace()
            .map_or(shale::KeyspaceId::DEFAULT, shale::Keyspace::id),
        dim: index.dim(),
        metric: index.metric(),
    })
}

impl<'a, 'py> Model<'a, 'py> {
    /// The model the `embedder` argument names; a string other than "minilm" is one of
    /// `problems`.
    fn parse(
        embedder: Option<&'a Bound<'py, PyAny>>,
        problems: &mut Vec<String>,
    ) -> PyResult<Model<'a, 'py>> {
        let Some(e) = embedder.filter(|e| !e.is_none()) else {
            return Ok(Model::Vectors);
        };
        Ok(match e.cast::<PyString>() {
            Ok(s) if s.to_cow()?.eq_ignore_ascii_case("minilm") => Model::MiniLm,
            Ok(s) => {
                problems.push(format!(
                    "embedder must be None, \"minilm\" or a callable, got {:?}",
                    s.to_cow()?
                ));
                Model::Vectors
            }
            Err(_) => Model::Python(e),
        })
    }

    /// The problems of opening index `name` with this model and `args`, given what an
    /// existing index was defined with (`recorded`), after those found so far.
    fn check(
        &self,
        name: &str,
        args: &IndexArgs<'_, '_>,
        dim: Option<usize>,
        recorded: Option<&VectorIndexDefinition>,
        problems: &mut Vec<String>,
    ) {
        // Opened without a model, an index of text could hold none of what it holds.
        if let Some(r) = recorded.filter(|r| r.model_id != USER_VECTORS) {
            if matches!(self, Model::Vectors) && problems.is_empty() {
                problems.push(format!(
                    "index {name:?} holds text embedded by model {:?}: give its embedder",
                    r.model_id
                ));
            }
        }
        if matches!(self, Model::Vectors) && dim.is_none() && problems.is_empty() {
            problems.push("an index without embedder needs dim (the vectors' dimension)".into());
        }
        if args.model_dir.is_some() && !matches!(self, Model::MiniLm) {
            problems.push("model_dir is only used with embedder=\"minilm\"".into());
        }
        if args.model_id.is_some() && !matches!(self, Model::Python(_)) {
            problems.push("model_id is only used with a callable embedder".into());
        }
    }
}

/// The engine's options for the index: the call's arguments, then what an existing index
/// was defined with (`recorded`), then the defaults.
fn index_options(
    args: &IndexArgs<'_, '_>,
    embedder: Option<Arc<dyn shale_search::semantic::Embedder>>,
    dim: Option<usize>,
    metric: Option<Metric>,
    recorded: Option<&VectorIndexDefinition>,
) -> VectorIndexOptions {
    let mut opts = match embedder {
        Some(embedder) => {
            let mut opts = VectorIndexOptions::text(embedder);
            // A dim that disagrees with the model's is the engine's to report.
            opts.dim = dim.unwrap_or(opts.dim);
            opts
        }
        None => VectorIndexOptions::vectors(dim.unwrap_or_default()),
    };
    opts.prefix = (args.prefix.clone())
        .or_else(|| recorded.map(|r| r.prefix.clone()))
        .unwrap_or_default();
    opts.keyspace = (args.keyspace.clone()).or_else(|| recorded.and_then(|r| r.keyspace.clone()));
    opts.hnsw = match (args.m, recorded) {
        (Some(m), _) => shale_search::vector::HnswParams::with_m(m),
        (None, Some(r)) => r.hnsw,
        (None, None) => opts.hnsw,
    };
    opts.hnsw.metric = metric
        .or(recorded.map(|r| r.hnsw.metric))
        .unwrap_or_default();
    if let Some(ef) = args.ef_construction {
        opts.hnsw.ef_construction = ef;
    }
    if let Some(ef) = args.ef_search {
        opts.hnsw.ef_search = ef;
    }
    opts.embed_threads = args.embed_threads;
    opts.batch_size = args.batch_size;
    if let Some(bytes) = args.queue_bytes {
        opts.queue_bytes = bytes;
    }
    opts
}

/// A semantic index of a database. Made by `DB.index(name, ...)`.
#[pyclass(module = "shale", frozen)]
pub(crate) struct VectorIndex {
    shared: Arc<Shared>,
    name: String,
    prefix: Vec<u8>,
    /// The keyspace of its keys, where its vectors are written.
    keyspace: shale::KeyspaceId,
    dim: usize,
    metric: Metric,
}

impl VectorIndex {
    /// Run `f` on the engine's index, without the GIL.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&shale_search::semantic::VectorIndex) -> Result<T, Failure> + Send,
    ) -> PyResult<T> {
        let (shared, name) = (&self.shared, &self.name);
        run(py, || shared.with_named_index(name, f))
    }

    /// `InvalidArgumentError` unless `key` is under the index's prefix.
    fn check_key(&self, py: Python<'_>, key: &[u8]) -> PyResult<()> {
        if key.starts_with(&self.prefix) {
            return Ok(());
        }
        Err(new_err(
            py,
            "InvalidArgumentError",
            format!(
                "key {:?} is outside index {:?} (prefix {:?})",
                String::from_utf8_lossy(key),
                self.name,
                String::from_utf8_lossy(&self.prefix)
            ),
        ))
    }

    /// `InvalidArgumentError` unless `cols` is the index's dimension.
    fn check_dim(&self, py: Python<'_>, what: &str, cols: usize) -> PyResult<()> {
        if cols == self.dim {
            return Ok(());
        }
        Err(new_err(
            py,
            "InvalidArgumentError",
            format!(
                "{what} have {cols} components; index {:?} has dim {}",
                self.name, self.dim
            ),
        ))
    }

    fn write(&self, py: Python<'_>, batch: shale::WriteBatch, sync: bool) -> PyResult<()> {
        let opts = shale::WriteOptions {
            sync,
            ..shale::WriteOptions::default()
        };
        self.with(py, |index| Ok(index.db().write(batch, opts)?))
    }

    /// The search options of `search` and `search_batch`.
    fn search_options(
        py: Python<'_>,
        k: Option<&Bound<'_, PyAny>>,
        exact: bool,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        ef: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<SearchOptions> {
        let k = k.map_or(Ok(10), |k| search_count(py, "k", k))?;
        let (lower_bound, upper_bound) = key_range(
            opt_bytes(start, "start")?,
            opt_bytes(end, "end")?,
            opt_bytes(prefix, "prefix")?,
        );
        Ok(SearchOptions {
            lower_bound,
            upper_bound,
            ef: ef.map(|ef| search_count(py, "ef", ef)).transpose()?,
            exact,
            ..SearchOptions::k(k)
        })
    }
}

#[pymethods]
impl VectorIndex {
    /// Set `key` (under the index's prefix) to `vector` (`dim` numbers) with `payload`,
    /// the bytes searches return as the hit's `document`. No model runs.
    #[pyo3(signature = (key, vector, payload = None, sync = false))]
    fn put_vector(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        vector: &Bound<'_, PyAny>,
        payload: Option<&Bound<'_, PyAny>>,
        sync: bool,
    ) -> PyResult<()> {
        let key = to_bytes(key, "key")?;
        self.check_key(py, &key)?;
        let vector = crate::vectors::vector(vector, "vector")?;
        self.check_dim(py, "the vector's", vector.len())?;
        let payload = opt_bytes(payload, "payload")?.unwrap_or_default();
        let mut batch = shale::WriteBatch::new();
        batch.put_in(
            self.keyspace,
            key,
            shale_search::semantic::vector_value(&vector, &payload),
        );
        self.write(py, batch, sync)
    }

    /// Set each of `keys` to the row of `vectors` (an array (len(keys), dim)) with the
    /// payload of the same position (`payloads`: `None` for none), in one atomic batch:
    /// all of them are written, or (a bad key or vector) none.
    #[pyo3(signature = (keys, vectors, payloads = None, sync = false))]
    fn put_vectors(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        vectors: &Bound<'_, PyAny>,
        payloads: Option<&Bound<'_, PyAny>>,
        sync: bool,
    ) -> PyResult<()> {
        let keys = keys
            .try_iter()?
            .map(|k| {
                let key = to_bytes(&k?, "key")?;
                self.check_key(py, &key)?;
                Ok(key)
            })
            .collect::<PyResult<Vec<_>>>()?;
        let payloads = match payloads.filter(|p| !p.is_none()) {
            Some(p) => p
                .try_iter()?
                .map(|p| to_bytes(&p?, "payload"))
                .collect::<PyResult<Vec<_>>>()?,
            None => vec![Vec::new(); keys.len()],
        };
        let array = matrix(vectors, "vectors")?;
        let view = c_order(array.as_array());
        let (n, cols) = view.dim();
        if n != keys.len() || payloads.len() != keys.len() {
            return Err(new_err(
                py,
                "InvalidArgumentError",
                format!(
                    "{} keys, {n} vectors and {} payloads: they must be as many",
                    keys.len(),
                    payloads.len()
                ),
            ));
        }
        self.check_dim(py, "the vectors", cols)?;
        let mut batch = shale::WriteBatch::new();
        for ((key, row), payload) in keys.into_iter().zip(rows(&view, cols)?).zip(&payloads) {
            batch.put_in(
                self.keyspace,
                key,
                shale_search::semantic::vector_value(row, payload),
            );
        }
        self.write(py, batch, sync)
    }

    /// The `k` values nearest to the query, best first: `text` (embedded by the index's
    /// model) or `vector` (`dim` numbers), one of them. `exact=True` scores every value
    /// instead of walking the HNSW graph; `start`/`end` (`start <= key < end`) and
    /// `prefix` (whole keys, the index's prefix included) restrict the keys searched;
    /// `ef` is the graph search's candidate list size.
    ///
    /// `mode="keyword"` searches the text index of the same name (`DB.text_index`) by BM25
    /// instead; `mode="hybrid"` runs both and fuses their rankings (`fusion="rrf"`,
    /// reciprocal rank, or `"minmax"`, scaled scores), the query embedded unless `vector` is
    /// given too. Every hit of either mode is checked against one snapshot: none is a
    /// deleted or replaced document.
    #[pyo3(signature = (
        text = None, *, vector = None, k = None, exact = false, start = None, end = None,
        prefix = None, ef = None, mode = "vector", fusion = "rrf",
    ))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn search(
        &self,
        py: Python<'_>,
        text: Option<String>,
        vector: Option<&Bound<'_, PyAny>>,
        k: Option<&Bound<'_, PyAny>>,
        exact: bool,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        prefix: Option<&Bound<'_, PyAny>>,
        ef: Option<&Bound<'_, PyAny>>,
        mode: &str,
        fusion: &str,
    ) -> PyResult<Vec<SearchHit>> {
        let opts = Self::search_options(py, k, exact, start, end, prefix, ef)?;
        let vector = vector
            .filter(|v| !v.is_none())
            .map(|v| crate::vectors::vector(v, "vector"))
            .transpose()?;
        match (mode, &text) {
            ("vector", _) => {}
            ("keyword" | "hybrid", Some(text)) => {
                if let Some(v) = &vector {
                    self.check_dim(py, "the query vector's", v.len())?;
                }
                return crate::text::search_mode(
                    py,
                    &self.shared,
                    &self.name,
                    mode,
                    text,
                    vector,
                    &opts,
                    fusion,
                );
            }
            ("keyword" | "hybrid", None) => {
                return Err(PyTypeError::new_err(format!(
                    "mode={mode:?} needs the query text"
                )))
            }
            (other, _) => {
                return Err(new_err(
                    py,
                    "InvalidArgumentError",
                    format!("mode must be \"vector\", \"keyword\" or \"hybrid\", got {other:?}"),
                ))
            }
        }
        let hits = match (text, vector) {
            (Some(text), None) => self.with(py, |index| Ok(index.search(&text, &opts)?))?,
            (None, Some(vector)) => {
                self.check_dim(py, "the query vector's", vector.len())?;
                self.with(py, |index| Ok(index.search_vector(&vector, &opts)?))?
            }
            _ => {
                return Err(PyTypeError::new_err(
                    "search takes a text or a vector=, one of them",
                ))
            }
        };
        Ok(hits.into_iter().map(SearchHit::from).collect())
    }

    /// `search(vector=row)` for each row of `queries` (an array (n, dim)), on up to
    /// `threads` threads (default: the machine's cores). Returns `(keys, scores)`: `keys`
    /// a list of n lists of k keys, `scores` a float32 array (n, k), best first in each
    /// row. A row with fewer than k hits is padded: key `None`, score NaN.
    #[pyo3(signature = (
        queries, k = None, *, exact = false, start = None, end = None, prefix = None,
        ef = None, threads = None,
    ))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn search_batch<'py>(
        &self,
        py: Python<'py>,
        queries: &Bound<'py, PyAny>,
        k: Option<&Bound<'py, PyAny>>,
        exact: bool,
        start: Option<&Bound<'py, PyAny>>,
        end: Option<&Bound<'py, PyAny>>,
        prefix: Option<&Bound<'py, PyAny>>,
        ef: Option<&Bound<'py, PyAny>>,
        threads: Option<usize>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyArray2<f32>>)> {
        let opts = Self::search_options(py, k, exact, start, end, prefix, ef)?;
        let array = matrix(queries, "queries")?;
        let view = c_order(array.as_array());
        let (n, cols) = view.dim();
        if n > 0 {
            self.check_dim(py, "the queries", cols)?;
        }
        let queries = rows(&view, cols)?;
        let threads = threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get));
        let found = self.with(
            py,
            |index| Ok(index.search_batch(&queries, &opts, threads)?),
        )?;

        let k = opts.k;
        // k may be large (up to the engine's bound) while few hits exist: a padded matrix
        // too large for memory is a MemoryError, not an abort.
        let mut scores = Vec::new();
        scores.try_reserve_exact(n.saturating_mul(k)).map_err(|_| {
            pyo3::exceptions::PyMemoryError::new_err(format!(
                "search_batch: {n} x {k} scores do not fit in memory; ask for a smaller k"
            ))
        })?;
        scores.resize(n.saturating_mul(k), f32::NAN);
        let keys = PyList::empty(py);
        for (hits, row) in found.iter().zip(scores.chunks_mut(k.max(1))) {
            let line = PyList::empty(py);
            for (i, slot) in row.iter_mut().enumerate() {
                match hits.get(i) {
                    Some(hit) => {
                        *slot = hit.score;
                        line.append(PyBytes::new(py, &hit.key))?;
                    }
                    None => line.append(py.None())?,
                }
            }
            keys.append(line)?;
        }
        if k == 0 {
            // `chunks_mut` above saw no rows: each row's list is still owed.
            for _ in 0..n {
                keys.append(PyList::empty(py))?;
            }
        }
        let scores = Array2::from_shape_vec((n, k), scores)
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        Ok((keys, scores.into_pyarray(py)))
    }

    /// Block until every value written so far is embedded and searchable.
    fn wait_indexed(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |index| Ok(index.wait_indexed()?))
    }

    /// Values in the index, once everything written so far is applied (waits like
    /// `wait_indexed`).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |index| Ok(index.len()?))
    }

    /// Write the graph's checkpoint now (also done in the background and at close).
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |index| Ok(index.checkpoint()?))
    }

    /// Counters and sizes of the index, without waiting: `live` values, `queued` changes
    /// not yet applied (`queued_bytes`), `stalls`/`stall_micros` of writes that waited for
    /// room in the queue, `checkpoints`, `last_checkpoint_micros`, `graph_bytes`,
    /// `id_space`, `tracked_keys`, and `applied_since_open`/`queued_since_open`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (stats, progress) = self.with(py, |index| Ok((index.stats(), index.progress())))?;
        crate::stats::index_stats_to_dict(py, &stats, progress)
    }

    /// How the open found the index: graph nodes reused, vectors reinserted, texts to
    /// embed again, and the damage it repaired.
    fn recovery<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let recovery = self.with(py, |index| Ok(index.recovery()))?;
        crate::stats::index_recovery_to_dict(py, &recovery)
    }

    /// The index's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The key prefix the index covers (`b""`: every key).
    #[getter]
    fn prefix<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.prefix)
    }

    /// The dimension of its vectors.
    #[getter]
    fn dim(&self) -> usize {
        self.dim
    }

    /// `"cosine"`, `"dot"` or `"l2"`.
    #[getter]
    fn metric(&self) -> &'static str {
        self.metric.name()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let name = PyString::new(py, &self.name).repr()?;
        let prefix = PyBytes::new(py, &self.prefix).repr()?;
        Ok(format!(
            "<shale.VectorIndex {name} prefix={prefix} dim={} {}>",
            self.dim,
            self.metric.name()
        ))
    }
}

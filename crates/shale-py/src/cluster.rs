//! `shale.Cluster`: a replicated cluster through `shale-client`, with the calls of an
//! embedded `DB` (get, put, delete, batches, ranges, search, index definitions). The
//! package's `shale.connect` builds one; `python/shale/_cluster.py` adds the batch
//! context manager and the paging iterators over `_write` and `_scan`.
//!
//! Every call runs on one tokio runtime of the process (two worker threads, made at the
//! first connect) with the GIL released, so Python threads call concurrently, and writes
//! go in the client's session: a retried write applies once.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use shale_client::{pb, Client, ClientError};

use crate::convert::{opt_bytes, to_bytes};
use crate::errors::{new_err, run, Failure};
use crate::search::SearchHit;

/// The runtime every cluster's calls run on.
fn runtime() -> Result<&'static tokio::runtime::Runtime, Failure> {
    static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("shale-client")
                .enable_all()
                .build()
                .map_err(|e| format!("starting the client's runtime: {e}"))
        })
        .as_ref()
        .map_err(|e| Failure::Client(ClientError::Config(e.clone())))
}

/// Run `call` on the runtime with the GIL released; a client error becomes its exception.
fn call<T, F>(py: Python<'_>, call: F) -> PyResult<T>
where
    T: Send,
    F: std::future::Future<Output = Result<T, ClientError>> + Send,
{
    run(py, || runtime()?.block_on(call).map_err(Failure::Client))
}

/// A connection to a replicated Shale cluster.
#[pyclass(module = "shale", frozen)]
pub(crate) struct Cluster {
    client: Arc<Client>,
    endpoints: Vec<String>,
}

/// Connect to the cluster whose nodes listen at `addresses` (`host:port`); see
/// `shale.connect`.
#[pyfunction]
#[pyo3(signature = (addresses, token = None, tls_ca = None, deadline = 10.0, sessions = true))]
pub(crate) fn _connect(
    py: Python<'_>,
    addresses: Vec<String>,
    token: Option<String>,
    tls_ca: Option<PathBuf>,
    deadline: f64,
    sessions: bool,
) -> PyResult<Cluster> {
    if !(deadline.is_finite() && deadline > 0.0 && deadline <= 86_400.0) {
        let why = format!("deadline = {deadline} s: more than 0, at most a day");
        return Err(new_err(py, "InvalidArgumentError", why));
    }
    let pem = match &tls_ca {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            new_err(
                py,
                "InvalidArgumentError",
                format!("tls_ca {}: {e}", path.display()),
            )
        })?),
        None => None,
    };
    let endpoints = addresses.clone();
    // Nothing is reached yet: each node's connection is made at its first call.
    let mut client =
        Client::new(addresses, token).map_err(|e| crate::errors::to_py(py, Failure::Client(e)))?;
    if let Some(pem) = pem {
        client = client.with_tls(pem);
    }
    if !sessions {
        client = client.without_sessions();
    }
    let client = client.with_deadline(Duration::from_secs_f64(deadline));
    Ok(Cluster {
        client: Arc::new(client),
        endpoints,
    })
}

fn metric(py: Python<'_>, name: &str) -> PyResult<pb::Metric> {
    match name {
        "cosine" => Ok(pb::Metric::Cosine),
        "dot" => Ok(pb::Metric::Dot),
        "l2" => Ok(pb::Metric::L2),
        other => Err(new_err(
            py,
            "InvalidArgumentError",
            format!("metric {other:?}: one of \"cosine\", \"dot\", \"l2\""),
        )),
    }
}

fn model(py: Python<'_>, name: &str) -> PyResult<pb::Model> {
    match name {
        "vectors" => Ok(pb::Model::Vectors),
        "minilm" => Ok(pb::Model::Minilm),
        "hash" => Ok(pb::Model::Hash),
        other => Err(new_err(
            py,
            "InvalidArgumentError",
            format!("model {other:?}: one of \"vectors\", \"minilm\", \"hash\""),
        )),
    }
}

fn analyzer(py: Python<'_>, name: Option<&str>) -> PyResult<pb::Analyzer> {
    match name {
        None => Ok(pb::Analyzer::NoKeywords),
        Some("simple") => Ok(pb::Analyzer::Simple),
        Some("english") => Ok(pb::Analyzer::English),
        Some("cjk") => Ok(pb::Analyzer::Cjk),
        Some(other) => Err(new_err(
            py,
            "InvalidArgumentError",
            format!("keywords {other:?}: None or one of \"simple\", \"english\", \"cjk\""),
        )),
    }
}

fn choice<T: Copy>(py: Python<'_>, what: &str, name: &str, options: &[(&str, T)]) -> PyResult<T> {
    options
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            new_err(
                py,
                "InvalidArgumentError",
                format!("{what} {name:?}: one of {names:?}"),
            )
        })
}

fn u32_arg(py: Python<'_>, what: &str, n: u64) -> PyResult<u32> {
    u32::try_from(n).map_err(|_| {
        new_err(
            py,
            "InvalidArgumentError",
            format!("{what} = {n} is above {}", u32::MAX),
        )
    })
}

#[pymethods]
impl Cluster {
    /// The addresses this connection was given.
    #[getter]
    fn addresses(&self) -> Vec<String> {
        self.endpoints.clone()
    }

    /// The value of `key` (read linearizably), or `default` when it is missing.
    #[pyo3(signature = (key, default = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let key = to_bytes(key, "key")?;
        let client = &self.client;
        match call(py, client.get(&key))? {
            Some(v) => Ok(Some(PyBytes::new(py, &v).into_any())),
            None => Ok(default),
        }
    }

    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = to_bytes(key, "key")?;
        let client = &self.client;
        match call(py, client.get(&bytes))? {
            Some(v) => Ok(PyBytes::new(py, &v)),
            None => Err(crate::errors::key_error(py, &bytes)),
        }
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = to_bytes(key, "key")?;
        let client = &self.client;
        Ok(call(py, client.get(&key))?.is_some())
    }

    /// Set `key` to `value` on every replica; returns the log index it applied at.
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let (key, value) = (to_bytes(key, "key")?, to_bytes(value, "value")?);
        let client = &self.client;
        call(py, client.put(&key, &value))
    }

    fn __setitem__(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.put(py, key, value).map(drop)
    }

    /// Remove `key` (nothing to remove is no error); returns the log index.
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        let key = to_bytes(key, "key")?;
        let client = &self.client;
        call(py, client.delete(&key))
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        self.delete(py, key).map(drop)
    }

    /// Apply `ops`, a list of `(key, value)` (`value` `None`: delete the key), atomically;
    /// returns the log index. `Cluster.batch()` builds one.
    fn _write(
        &self,
        py: Python<'_>,
        ops: Vec<(Bound<'_, PyAny>, Option<Bound<'_, PyAny>>)>,
    ) -> PyResult<u64> {
        let ops = ops
            .iter()
            .map(|(k, v)| Ok((to_bytes(k, "key")?, opt_bytes(v.as_ref(), "value")?)))
            .collect::<PyResult<Vec<_>>>()?;
        let client = &self.client;
        call(py, client.batch(&ops))
    }

    /// Set `key` to `new_value` (delete it for `None`) if its value is `expected` (`None`:
    /// absent); returns `(swapped, value before)`.
    fn compare_and_set<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        expected: Option<Bound<'py, PyAny>>,
        new_value: Option<Bound<'py, PyAny>>,
    ) -> PyResult<(bool, Option<Bound<'py, PyBytes>>)> {
        let key = to_bytes(key, "key")?;
        let expected = opt_bytes(expected.as_ref(), "expected")?;
        let new_value = opt_bytes(new_value.as_ref(), "new_value")?;
        let client = &self.client;
        let outcome = call(
            py,
            client.compare_and_set(&key, expected.as_deref(), new_value.as_deref()),
        )?;
        let current = outcome.current.map(|v| PyBytes::new(py, &v));
        Ok((outcome.swapped, current))
    }

    /// One page of `start <= key < end` (`None`: to the end): up to `limit` pairs, and
    /// where the next page starts if there is more. `range` and `prefix` page with it.
    #[pyo3(signature = (start, end = None, limit = 1000))]
    #[allow(clippy::type_complexity, reason = "a Python tuple")]
    fn _scan<'py>(
        &self,
        py: Python<'py>,
        start: &Bound<'py, PyAny>,
        end: Option<Bound<'py, PyAny>>,
        limit: u64,
    ) -> PyResult<(
        Vec<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)>,
        Option<Bound<'py, PyBytes>>,
    )> {
        let start = to_bytes(start, "start")?;
        let end = opt_bytes(end.as_ref(), "end")?;
        let limit = u32_arg(py, "limit", limit)?;
        let client = &self.client;
        let (pairs, next) = call(py, client.scan(&start, end.as_deref(), limit))?;
        let pairs = pairs
            .iter()
            .map(|(k, v)| (PyBytes::new(py, k), PyBytes::new(py, v)))
            .collect();
        Ok((pairs, next.map(|n| PyBytes::new(py, &n))))
    }

    /// Define the index `name` over the keys under `prefix` on every replica; returns the
    /// log index. `model` is `"vectors"` (values are `shale.vector_value` records of `dim`
    /// components), `"minilm"` (texts, embedded by the leader's and every replica's
    /// all-MiniLM-L6-v2) or `"hash"` (texts, word hashing, for tests); `keywords` adds a
    /// keyword (BM25) index with that analyzer (`"simple"`, `"english"`, `"cjk"`).
    /// Defining an index again as it is succeeds.
    #[pyo3(signature = (name, *, prefix, model = "vectors", dim = None, metric = "cosine", keywords = None))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn define_index(
        &self,
        py: Python<'_>,
        name: &str,
        prefix: &Bound<'_, PyAny>,
        model: &str,
        dim: Option<u64>,
        metric: &str,
        keywords: Option<&str>,
    ) -> PyResult<u64> {
        let model = self::model(py, model)?;
        let dim = match (dim, model) {
            (Some(d), _) => u32_arg(py, "dim", d)?,
            (None, pb::Model::Minilm) => 384,
            (None, pb::Model::Hash) => 128,
            (None, pb::Model::Vectors) => {
                let why = "an index of vectors needs its dim".to_string();
                return Err(new_err(py, "InvalidArgumentError", why));
            }
        };
        let req = pb::DefineIndexRequest {
            name: name.to_owned(),
            prefix: to_bytes(prefix, "prefix")?,
            dim,
            metric: self::metric(py, metric)?.into(),
            model: model.into(),
            keywords: analyzer(py, keywords)?.into(),
        };
        let client = &self.client;
        call(py, client.define_index_with(req))
    }

    /// The `k` best values of index `index` for `query` (a text) or `vector`, best first,
    /// read linearizably. `mode` is `"meaning"` (by the index's model, or `vector`),
    /// `"keywords"` (BM25 over `query`: exact and current at every acknowledged write) or
    /// `"hybrid"` (both, fused by `fusion`, `"rrf"` or `"minmax"`, over `window` hits
    /// each); `match` (`"any"`, `"all"`, `"phrase"`) says which documents the keywords
    /// admit; `start`/`end` bound the keys; `ef` and `exact` as for `DB.search`.
    #[pyo3(signature = (
        index, query = None, *, vector = None, k = 10, mode = "meaning", r#match = "any",
        fusion = "rrf", window = None, ef = None, exact = false, start = None, end = None,
    ))]
    #[allow(clippy::too_many_arguments, reason = "Python keyword arguments")]
    fn search(
        &self,
        py: Python<'_>,
        index: &str,
        query: Option<String>,
        vector: Option<&Bound<'_, PyAny>>,
        k: u64,
        mode: &str,
        r#match: &str,
        fusion: &str,
        window: Option<u64>,
        ef: Option<u64>,
        exact: bool,
        start: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<SearchHit>> {
        let modes = [
            ("meaning", pb::SearchMode::Meaning),
            ("keywords", pb::SearchMode::Keywords),
            ("hybrid", pb::SearchMode::Hybrid),
        ];
        let matches = [
            ("any", pb::TermMatch::Any),
            ("all", pb::TermMatch::All),
            ("phrase", pb::TermMatch::Phrase),
        ];
        let fusions = [("rrf", pb::Fusion::Rrf), ("minmax", pb::Fusion::MinMax)];
        let vector = vector
            .filter(|v| !v.is_none())
            .map(|v| crate::vectors::vector(v, "vector"))
            .transpose()?
            .unwrap_or_default();
        if query.is_none() && vector.is_empty() {
            let why = "a search needs a query text or a vector".to_string();
            return Err(new_err(py, "InvalidArgumentError", why));
        }
        let req = pb::SearchRequest {
            index: index.to_owned(),
            vector,
            k: u32_arg(py, "k", k)?,
            ef: ef.map(|ef| u32_arg(py, "ef", ef)).transpose()?,
            exact,
            from: opt_bytes(start, "start")?,
            to: opt_bytes(end, "end")?,
            text: query,
            mode: choice(py, "mode", mode, &modes)?.into(),
            r#match: choice(py, "match", r#match, &matches)?.into(),
            fusion: choice(py, "fusion", fusion, &fusions)?.into(),
            window: window.map(|w| u32_arg(py, "window", w)).transpose()?,
        };
        let client = &self.client;
        let hits = call(py, client.search_with(req))?;
        Ok(hits
            .into_iter()
            .map(|h| SearchHit::new(h.key, h.score, h.payload))
            .collect())
    }

    /// Write an online backup of the cluster to `path` (at least every write acknowledged
    /// before the call; `shale-server --restore` starts a new cluster from it); returns
    /// its size in bytes.
    fn backup(&self, py: Python<'_>, path: PathBuf) -> PyResult<u64> {
        let client = &self.client;
        call(py, client.backup(&path))
    }

    /// The view of the node at `address`: its id, the leader it knows, its applied index,
    /// term and indexing backlog (not linearizable).
    fn status<'py>(&self, py: Python<'py>, address: &str) -> PyResult<Bound<'py, PyDict>> {
        let client = &self.client;
        let s = call(py, client.status_of(address))?;
        let d = PyDict::new(py);
        d.set_item("node_id", s.node_id)?;
        d.set_item("leader_id", s.leader_id)?;
        d.set_item("leader_address", s.leader_addr)?;
        d.set_item("applied_index", s.applied_index)?;
        d.set_item("term", s.term)?;
        d.set_item("indexing_backlog", s.indexing_backlog)?;
        Ok(d)
    }

    /// The shards of the key space, in key order, as the first node reached knows them:
    /// one dict each with `group`, `start`, `end` (`None`: every key from `start` on),
    /// `version` and `leader_address` (not linearizable).
    fn shards<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let client = &self.client;
        let shards = call(py, client.shards())?;
        shards
            .into_iter()
            .map(|s| {
                let d = shard_dict(py, s.group, &s.start, s.end.as_deref(), s.version)?;
                d.set_item("leader_address", s.leader_addr)?;
                Ok(d)
            })
            .collect()
    }

    /// Split group `group`'s shard at key `at`: the group keeps the keys below it, and the
    /// new group `child` (an id no group has) serves those from it on, on the same
    /// replicas. Returns the two shards as dicts like :meth:`shards`'s, without leaders.
    fn split<'py>(
        &self,
        py: Python<'py>,
        group: u64,
        at: &[u8],
        child: u64,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let client = &self.client;
        let split = call(py, client.split(group, at, child))?;
        [split.kept, split.child]
            .into_iter()
            .flatten()
            .map(|s| shard_dict(py, s.group, &s.start, s.end.as_deref(), s.version))
            .collect()
    }

    /// Move group `group`'s replica from node `from_node` to node `to_node`, listening at
    /// `address` (a node started with the cluster's splits): it catches up as a learner,
    /// the leadership leaves `from_node`, then one membership change replaces it. Returns
    /// the group's voters after the change.
    fn move_replica(
        &self,
        py: Python<'_>,
        group: u64,
        from_node: u64,
        to_node: u64,
        address: &str,
    ) -> PyResult<Vec<u64>> {
        let client = &self.client;
        let m = call(py, client.move_replica(group, from_node, to_node, address))?;
        Ok(m.voters)
    }

    fn __repr__(&self) -> String {
        format!("shale.Cluster({:?})", self.endpoints)
    }
}

/// A shard as a dict: `group`, `start`, `end` (`None`: every key from `start` on), `version`.
fn shard_dict<'py>(
    py: Python<'py>,
    group: u64,
    start: &[u8],
    end: Option<&[u8]>,
    version: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("group", group)?;
    d.set_item("start", PyBytes::new(py, start))?;
    d.set_item("end", end.map(|e| PyBytes::new(py, e)))?;
    d.set_item("version", version)?;
    Ok(d)
}

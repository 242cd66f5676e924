//! Python bindings for Shale: the extension module `shale._shale`, wrapped by the Python
//! package in `python/shale` (which defines the exception classes and re-exports these).
//!
//! - `db.rs`: `DB` (open, dict-like access, ranges, search, stats, close); `batch.rs`:
//!   `WriteBatch`; `shared.rs`: the engine's `Db` they share, and its closing.
//! - `iter.rs`, `snapshot.rs`, `search.rs`, `index.rs`, `text.rs`: what `DB` hands out.
//! - `embedder.rs`: a Python callable as the engine's `Embedder`; `model.rs`: `MiniLM`, the
//!   engine's model for Python callers.
//! - `convert.rs`: Python arguments to keys, values and `Options`; `range.rs`: key ranges;
//!   `vectors.rs`: numpy arrays in and out.
//! - `cluster.rs`: `Cluster`, a replicated cluster through `shale-client`.
//! - `errors.rs`: engine and cluster errors to exceptions; `errors::run`, the GIL-free gate every
//!   engine call passes through.
//!
//! Build it with maturin (`scripts/test-python.sh` does); `cargo build` also compiles it,
//! without the `extension-module` feature, so the workspace builds need no libpython.

// Arguments from Python never reach an unchecked unwrap or index.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

mod batch;
mod cluster;
mod convert;
mod cursor;
mod db;
mod embedder;
mod errors;
mod filter;
mod index;
mod iter;
mod keyspace;
mod model;
mod pending;
mod range;
mod read;
mod search;
mod shared;
mod snapshot;
mod stats;
mod text;
mod transaction;
mod ttl;
mod vectors;
mod write;

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Open (or create) the database in `path`. Keyword options are `shale.Options`' fields
/// (see the package docs); `semantic=True` loads the MiniLM model and indexes values.
#[pyfunction]
#[pyo3(signature = (path, **options))]
fn open(py: Python<'_>, path: PathBuf, options: Option<&Bound<'_, PyDict>>) -> PyResult<db::Db> {
    db::open(py, path, options)
}

/// Open (or create) the database in `path` whose values may expire (`shale::TtlDb`):
/// `put(key, value, ttl=seconds)`. Keyword options as for `open`, but not `semantic`.
#[pyfunction]
#[pyo3(signature = (path, **options))]
fn open_ttl(
    py: Python<'_>,
    path: PathBuf,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<ttl::TtlDb> {
    ttl::open(py, path, options)
}

/// Rebuild the damaged database in `path` from whatever of its files can still be read
/// (`Db::repair`; see docs/durability.md) and return its report as a `dict`. Keyword options
/// as for `open`; they set the format of the tables repair writes.
#[pyfunction]
#[pyo3(signature = (path, **options))]
fn repair<'py>(
    py: Python<'py>,
    path: PathBuf,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let (opts, _) = convert::options(py, options)?;
    let report = errors::run(py, || Ok(shale::Db::repair(&path, &opts)?))?;
    stats::repair_to_dict(py, &report)
}

/// `vector` and `payload` as the value `VectorIndex.put_vector` writes, for writing vectors with
/// other keys in one `DB.batch()` (under an index's prefix, like `put_vector`).
#[pyfunction]
#[pyo3(signature = (vector, payload = None))]
fn vector_value<'py>(
    py: Python<'py>,
    vector: &Bound<'py, PyAny>,
    payload: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let vector = vectors::vector(vector, "vector")?;
    let payload = convert::opt_bytes(payload, "payload")?.unwrap_or_default();
    Ok(pyo3::types::PyBytes::new(
        py,
        &shale_search::semantic::vector_value(&vector, &payload),
    ))
}

/// The vector and payload of a value `vector_value` made (as `VectorIndex.put_vector` writes
/// it): a float32 array and bytes. `InvalidArgumentError` for any other value.
#[pyfunction]
fn decode_vector_value<'py>(
    py: Python<'py>,
    value: &[u8],
) -> PyResult<(
    Bound<'py, numpy::PyArray1<f32>>,
    Bound<'py, pyo3::types::PyBytes>,
)> {
    match shale_search::semantic::decode_vector_value(value) {
        Some(Ok(v)) => Ok((
            numpy::PyArray1::from_vec(py, v.vector),
            pyo3::types::PyBytes::new(py, v.payload),
        )),
        Some(Err(why)) => Err(errors::new_err(
            py,
            "InvalidArgumentError",
            format!("a malformed vector value: {why}"),
        )),
        None => Err(errors::new_err(
            py,
            "InvalidArgumentError",
            "not a vector value".into(),
        )),
    }
}

/// Close the databases that have an index with a Python embedder; the package registers
/// it with `atexit` (see `shared.rs`).
#[pyfunction]
fn _close_for_exit(py: Python<'_>) {
    shared::close_for_exit(py);
}

#[pymodule]
fn _shale(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Before any of our threads exist: candle's elementwise pool gets one thread unless
    // the user chose otherwise (see shale_embed::quiet_candle_threads).
    shale_embed::quiet_candle_threads();
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(open_ttl, m)?)?;
    m.add_class::<ttl::TtlDb>()?;
    m.add_function(wrap_pyfunction!(repair, m)?)?;
    m.add_function(wrap_pyfunction!(vector_value, m)?)?;
    m.add_function(wrap_pyfunction!(decode_vector_value, m)?)?;
    m.add_function(wrap_pyfunction!(_close_for_exit, m)?)?;
    m.add_class::<db::Db>()?;
    m.add_class::<batch::WriteBatch>()?;
    m.add_class::<keyspace::Keyspace>()?;
    m.add_class::<iter::KvIter>()?;
    m.add_class::<cursor::Cursor>()?;
    m.add_class::<snapshot::Snapshot>()?;
    m.add_class::<transaction::Transaction>()?;
    m.add_class::<search::SearchHit>()?;
    m.add_class::<index::VectorIndex>()?;
    m.add_class::<text::TextIndex>()?;
    m.add_class::<text::KeywordHit>()?;
    m.add_class::<cluster::Cluster>()?;
    m.add_class::<model::MiniLm>()?;
    m.add_function(wrap_pyfunction!(cluster::_connect, m)?)?;
    Ok(())
}

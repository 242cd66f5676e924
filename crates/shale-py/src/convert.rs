//! Python values to engine values: keys and values as bytes, `open()`'s keyword options.

use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};

use crate::errors::{to_py, Failure};

/// A key or value: `bytes`, `bytearray`, `memoryview`-free; `str` is encoded as UTF-8.
/// Copied, so the engine call that follows can run without the GIL while Python code
/// mutates the `bytearray`.
pub(crate) fn to_bytes(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if let Ok(s) = obj.cast::<PyString>() {
        Ok(s.to_cow()?.as_bytes().to_vec())
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        Ok(b.to_vec())
    } else {
        Err(PyTypeError::new_err(format!(
            "{what} must be bytes, bytearray or str, not {}",
            obj.get_type().name()?
        )))
    }
}

/// `None` or a key.
pub(crate) fn opt_bytes(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(to_bytes(o, what)?)),
        _ => Ok(None),
    }
}

/// The options `shale.open` takes by keyword, with the engine's defaults for the rest, and
/// the MiniLM model when `semantic=True` asks for the default index. Every unknown name
/// and every ill-typed value is reported at once, like `Options::validate` does for values
/// out of range.
pub(crate) fn options(
    py: Python<'_>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<(
    shale::Options,
    Option<Arc<dyn shale_search::semantic::Embedder>>,
)> {
    let mut opts = shale::Options::default();
    let mut problems = Vec::new();
    let mut semantic = false;
    let mut model_dir: Option<std::path::PathBuf> = None;
    if let Some(kwargs) = kwargs {
        for (name, value) in kwargs.iter() {
            let name: String = name.extract()?;
            if let Err(why) = set_option(&mut opts, &mut semantic, &mut model_dir, &name, &value) {
                problems.push(why);
            }
        }
    }
    if !problems.is_empty() {
        // With the engine's own complaints about the values that were set, so that one
        // exception lists everything (and carries `.problems` like the engine's).
        if let Err(more) = opts.validate() {
            problems.extend(more);
        }
        return Err(to_py(
            py,
            Failure::Engine(shale::Error::InvalidOptions(problems)),
        ));
    }
    if semantic {
        return Ok((opts, Some(minilm(py, model_dir.as_deref())?)));
    } else if model_dir.is_some() {
        let mut problems = vec!["model_dir is only used with semantic=True".to_string()];
        if let Err(more) = opts.validate() {
            problems.extend(more);
        }
        return Err(to_py(
            py,
            Failure::Engine(shale::Error::InvalidOptions(problems)),
        ));
    }
    Ok((opts, None))
}

/// Set the option `name` (a field of `shale.Options`, or `semantic` or `model_dir`) to
/// `value`.
fn set_option(
    opts: &mut shale::Options,
    semantic: &mut bool,
    model_dir: &mut Option<std::path::PathBuf>,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> Result<(), String> {
    match name {
        "semantic" => *semantic = get(name, value, "bool")?,
        "model_dir" => {
            *model_dir = (!value.is_none())
                .then(|| get::<std::path::PathBuf>(name, value, "a path"))
                .transpose()?;
        }
        "keyspace_compaction_filters" => set_keyspace_filters(opts, name, value)?,
        "compaction_filter" => {
            opts.compaction_filter = match value.is_none() {
                true => None,
                false => Some(std::sync::Arc::new(crate::filter::PyFilter::new(value)?)),
            }
        }
        "compression" | "bottommost_compression" | "compression_per_level" => {
            set_compression(opts, name, value)?;
        }
        _ => set_plain(opts, name, value)?,
    }
    Ok(())
}

/// `value` as a `T`, which the messages call `kind`.
fn get<'a, T: pyo3::conversion::FromPyObjectOwned<'a>>(
    name: &str,
    value: &Bound<'a, PyAny>,
    kind: &str,
) -> Result<T, String> {
    // bool is an int subclass in Python: refuse it where a number is meant.
    if kind != "bool" && value.cast::<pyo3::types::PyBool>().is_ok() {
        return Err(format!("{name} must be {kind}, not bool"));
    }
    value
        .extract::<T>()
        .map_err(|_| format!("{name} must be {kind}, got {value}"))
}

/// `keyspace_compaction_filters`: a dict of keyspace name to callable.
fn set_keyspace_filters(
    opts: &mut shale::Options,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> Result<(), String> {
    let filters = value
        .cast::<PyDict>()
        .map_err(|_| format!("{name} must be a dict of keyspace name to callable"))?;
    opts.keyspace_compaction_filters = filters
        .iter()
        .map(|(ks, f)| {
            let ks: String = ks
                .extract()
                .map_err(|_| format!("{name}: a keyspace name must be a str, got {ks}"))?;
            let filter = crate::filter::PyFilter::new(&f)?;
            Ok((ks, Arc::new(filter) as Arc<dyn shale::CompactionFilter>))
        })
        .collect::<Result<_, String>>()?;
    Ok(())
}

/// `compression`, `bottommost_compression` and `compression_per_level`.
fn set_compression(
    opts: &mut shale::Options,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> Result<(), String> {
    match name {
        "compression" => {
            opts.compression = compression(name, &get::<String>(name, value, "a str")?)?;
        }
        "bottommost_compression" => {
            opts.bottommost_compression = (!value.is_none())
                .then(|| compression(name, &get::<String>(name, value, "a str or None")?))
                .transpose()?;
        }
        _ => {
            opts.compression_per_level = get::<Vec<String>>(name, value, "a list of str")?
                .iter()
                .map(|c| compression(name, c))
                .collect::<Result<_, _>>()?;
        }
    }
    Ok(())
}

/// The options that are a plain bool or number.
fn set_plain(
    opts: &mut shale::Options,
    name: &str,
    value: &Bound<'_, PyAny>,
) -> Result<(), String> {
    const INT: &str = "a non-negative int";
    match name {
        "create_if_missing" => opts.create_if_missing = get(name, value, "bool")?,
        "error_if_exists" => opts.error_if_exists = get(name, value, "bool")?,
        "read_only" => opts.read_only = get(name, value, "bool")?,
        "write_buffer_size" => opts.write_buffer_size = get(name, value, INT)?,
        "max_write_buffers" => opts.max_write_buffers = get(name, value, INT)?,
        "max_file_size" => opts.max_file_size = get(name, value, INT)?,
        "block_size" => opts.block_size = get(name, value, INT)?,
        "block_restart_interval" => opts.block_restart_interval = get(name, value, INT)?,
        "filter_bits_per_key" => opts.filter_bits_per_key = get(name, value, INT)?,
        "cache_size" => opts.cache_size = get(name, value, INT)?,
        "max_open_files" => opts.max_open_files = get(name, value, INT)?,
        "mmap_reads" => opts.mmap_reads = get(name, value, "bool")?,
        "max_manifest_file_size" => opts.max_manifest_file_size = get(name, value, INT)?,
        "level0_compaction_trigger" => opts.level0_compaction_trigger = get(name, value, INT)?,
        "level0_slowdown_trigger" => opts.level0_slowdown_trigger = get(name, value, INT)?,
        "level0_stop_trigger" => opts.level0_stop_trigger = get(name, value, INT)?,
        "max_bytes_for_level_base" => opts.max_bytes_for_level_base = get(name, value, INT)?,
        "level_size_multiplier" => opts.level_size_multiplier = get(name, value, INT)?,
        "background_threads" => opts.background_threads = get(name, value, INT)?,
        "rate_limit_bytes_per_sec" => opts.rate_limit_bytes_per_sec = get(name, value, INT)?,
        "rate_limit_auto_tune" => opts.rate_limit_auto_tune = get(name, value, "bool")?,
        _ => return Err(format!("unknown option {name:?}")),
    }
    Ok(())
}

/// `"lz4"`, `"snappy"`, `"none"`, `"zstd"` (level 3) or `"zstd:LEVEL"`, the value of the
/// option `option`.
pub(crate) fn compression(option: &str, name: &str) -> Result<shale::Compression, String> {
    let lower = name.to_ascii_lowercase();
    match lower.as_str() {
        "lz4" => Ok(shale::Compression::Lz4),
        "snappy" => Ok(shale::Compression::Snappy),
        "none" => Ok(shale::Compression::None),
        "zstd" => Ok(shale::Compression::Zstd(3)),
        other => match other.strip_prefix("zstd:").map(str::parse::<i32>) {
            Some(Ok(level)) => Ok(shale::Compression::Zstd(level)),
            _ => Err(format!(
                "{option} must be \"lz4\", \"zstd\", \"zstd:LEVEL\", \"snappy\" or \"none\", \
                 got {name:?}"
            )),
        },
    }
}

/// The name `compression` takes for `c`.
pub(crate) fn compression_name(c: shale::Compression) -> String {
    match c {
        shale::Compression::None => "none".into(),
        shale::Compression::Lz4 => "lz4".into(),
        shale::Compression::Snappy => "snappy".into(),
        shale::Compression::Zstd(level) => format!("zstd:{level}"),
    }
}

/// A search's `k` or `ef`: any Python int, checked here so that a negative or huge one is
/// an `InvalidArgumentError`, like the engine's own bound, and not an `OverflowError`
/// from the conversion.
pub(crate) fn search_count(py: Python<'_>, name: &str, n: &Bound<'_, PyAny>) -> PyResult<usize> {
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
            shale_search::vector::hnsw::MAX_EF
        )
    };
    Err(crate::errors::new_err(py, "InvalidArgumentError", why))
}

/// all-MiniLM-L6-v2 on the default runtime (`shale_embed::load_default_from`: ONNX Runtime,
/// else candle), from `dir` or else `$SHALE_MODEL_DIR`. Reading and checking ~90 MB of
/// weights runs without the GIL.
pub(crate) fn minilm(
    py: Python<'_>,
    dir: Option<&std::path::Path>,
) -> PyResult<Arc<dyn shale_search::semantic::Embedder>> {
    crate::errors::run(py, || Ok(shale_embed::load_default_from(dir)?.embedder))
}

/// The engine's write options for a call's `sync` argument.
pub(crate) fn write_options(sync: bool) -> shale::WriteOptions {
    shale::WriteOptions {
        sync,
        ..shale::WriteOptions::default()
    }
}

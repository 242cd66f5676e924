//! all-MiniLM-L6-v2 on ONNX Runtime: the same tokenisation, batching and pooling as the
//! candle reference ([`crate::text`]), with the transformer run by ONNX Runtime's CPU
//! kernels on `model.onnx`, a graph written from the very same weights
//! (`scripts/minilm-to-onnx.py`). The vectors are the reference's to within float rounding
//! (`tests/embed/onnx_quality_guard.rs`), at three to four times its speed (BENCHMARKS.md).
//!
//! ONNX Runtime is loaded at run time (`ort`'s `load-dynamic`) from
//! `libonnxruntime.so.1.31.1` in the model directory, which `scripts/fetch-model.sh` takes out
//! of the PyPI wheel; its sha256 is checked before it is loaded. One runtime and one
//! environment serve the whole process: the first [`OnnxMiniLm::load`] loads them, later ones
//! reuse them (the pinned hash makes every copy of the file the same library).
//!
//! Threads: each `OnnxMiniLm` owns a rayon pool (default two threads) and one ONNX Runtime
//! session per pool thread, each session single-threaded and never spinning. A call's
//! batches run side by side on the pool, each on the session of the thread it runs on, so
//! two batches never wait for one session and no thread spins while another works (on a
//! shared machine a spinning pool costs throughput, as candle's did). The sessions share one
//! copy of the packed weights. `OnnxMiniLm` is `Send + Sync`.
//!
//! Invariants: as [`crate::MiniLm`]: every vector has [`DIM`] components and unit norm,
//! input longer than [`crate::MAX_TOKENS`] is truncated, and a vector does not depend on its
//! batch beyond float rounding.

use std::fmt;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use ort::environment::Environment;
use ort::session::builder::{GraphOptimizationLevel, PrepackedWeights, SessionBuilder};
use ort::session::Session;
use ort::value::Tensor;
use shale::error::{Error, Result};
use shale_search::semantic::Embedder;
use tokenizers::Encoding;

use crate::batcher::Batcher;
use crate::model_files::{self, damaged, read_verified};
use crate::text::{self, default_threads, DIM};

/// How many texts one ONNX Runtime run takes in [`Embedder::embed`]. On WordNet glosses
/// and two cores 16 was the fastest measured (8 within noise of it, 32 slower): a
/// smaller batch pads less, most of all in an index's calls, each of which sorts only
/// its own texts (bench-results/LOG.md, 2026-11-28).
pub const ONNX_BATCH_SIZE: usize = 16;

/// The process's one ONNX Runtime environment, made by the first successful load.
static ENVIRONMENT: Mutex<Option<Environment>> = Mutex::new(None);

/// The all-MiniLM-L6-v2 sentence embedding model on ONNX Runtime.
pub struct OnnxMiniLm {
    /// One per pool thread, indexed by `rayon::current_thread_index`.
    sessions: Vec<Mutex<Session>>,
    batcher: Batcher,
}

impl fmt::Debug for OnnxMiniLm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnnxMiniLm")
            .field("dir", &self.dir())
            .field("threads", &self.threads())
            .field("batch_size", &self.batch_size())
            .finish_non_exhaustive()
    }
}

fn ort_error(what: &str, e: impl fmt::Display) -> Error {
    Error::Index(format!("ONNX Runtime: {what}: {e}"))
}

/// The process's environment, loading ONNX Runtime from `dir` if nothing loaded it yet.
fn environment(dir: &Path) -> Result<Environment> {
    let mut env = ENVIRONMENT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(env) = env.as_ref() {
        return Ok(env.clone());
    }
    let lib = dir.join(model_files::ORT_LIBRARY.name);
    // Check the bytes before dlopen runs their initialisers; the check reads the file whole.
    read_verified(dir, model_files::ORT_LIBRARY)?;
    let built = ort::init_from(&lib)
        .map_err(|e| damaged(&lib, e))?
        .with_name("shale-embed")
        .build()
        .map_err(|e| ort_error("cannot start", e))?;
    *env = Some(built.clone());
    Ok(built)
}

impl OnnxMiniLm {
    /// Load the model from `dir` (the directory `scripts/fetch-model.sh` prints), with
    /// [`default_threads`] threads.
    ///
    /// # Errors
    /// `Error::Index`, saying to run `scripts/fetch-model.sh`, when `tokenizer.json`,
    /// `model.onnx` or the ONNX Runtime library is missing, is not the file fetched, or does
    /// not load.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        Self::load_with_threads(dir, default_threads())
    }

    /// Load the model from `SHALE_MODEL_DIR`, or from the default cache directory
    /// `${SHALE_CACHE:-$HOME/.cache/shale}/models/all-MiniLM-L6-v2`.
    ///
    /// # Errors
    /// As [`OnnxMiniLm::load`].
    pub fn from_env() -> Result<Self> {
        Self::load(model_files::model_dir_from_env()?)
    }

    /// As [`OnnxMiniLm::load`], running inference on `threads` threads (at least one).
    ///
    /// # Errors
    /// As [`OnnxMiniLm::load`]; also `Error::Index` if the threads cannot be started.
    pub fn load_with_threads(dir: impl AsRef<Path>, threads: usize) -> Result<Self> {
        let dir = dir.as_ref();
        let threads = threads.max(1);
        let tokenizer = text::load_tokenizer(dir)?;
        let model_path = dir.join(model_files::ONNX_MODEL.name);
        let model = read_verified(dir, model_files::ONNX_MODEL)?;
        let env = environment(dir)?;
        let prepacked = PrepackedWeights::new();
        let mut sessions = Vec::with_capacity(threads);
        for _ in 0..threads {
            let session = session_builder(&env, &prepacked)
                .and_then(|mut b| b.commit_from_memory(&model).map_err(|e| e.to_string()))
                .map_err(|e| damaged(&model_path, e))?;
            sessions.push(Mutex::new(session));
        }
        let batcher = Batcher::new(dir, tokenizer, threads, "shale-onnx", ONNX_BATCH_SIZE)?;
        Ok(OnnxMiniLm { sessions, batcher })
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        self.batcher.dir()
    }

    /// The number of threads inference runs on.
    pub fn threads(&self) -> usize {
        self.batcher.threads()
    }

    /// The number of texts [`Embedder::embed`] puts into one run.
    pub fn batch_size(&self) -> usize {
        self.batcher.batch_size()
    }

    /// Set how many texts [`Embedder::embed`] puts into one run (at least one).
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batcher.set_batch_size(batch_size);
    }

    /// Embed `texts` in exactly one run, every text padded to the longest: the raw batch,
    /// for measuring and tests. [`Embedder::embed`] is what callers want.
    ///
    /// # Errors
    /// `Error::Index` if tokenisation or inference fails.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.batcher.embed_batch(texts, |batch| self.forward(batch))
    }

    /// One run over `batch` (not empty), padded to its longest encoding, on the session of
    /// the pool thread this runs on.
    fn forward(&self, batch: &[&Encoding]) -> Result<Vec<Vec<f32>>> {
        let p = text::pack::<i64>(batch);
        let shape = [p.rows, p.cols];
        let inputs = [
            ("input_ids", p.ids),
            ("attention_mask", p.mask),
            ("token_type_ids", p.type_ids),
        ];
        let mut values = Vec::with_capacity(inputs.len());
        for (name, data) in inputs {
            let tensor = Tensor::from_array((shape, data)).map_err(|e| ort_error(name, e))?;
            values.push((name, tensor));
        }
        let slot = rayon::current_thread_index().unwrap_or(0) % self.sessions.len().max(1);
        let session = self
            .sessions
            .get(slot)
            .ok_or_else(|| Error::Index("no ONNX Runtime session".into()))?;
        let mut session = session.lock().unwrap_or_else(PoisonError::into_inner);
        let outputs = session
            .run(values)
            .map_err(|e| ort_error("inference failed", e))?;
        let hidden = outputs
            .get("last_hidden_state")
            .ok_or_else(|| ort_error("inference failed", "no output last_hidden_state"))?;
        let (_, hidden) = hidden
            .try_extract_tensor::<f32>()
            .map_err(|e| ort_error("inference failed", e))?;
        text::mean_pool_normalise(batch, p.cols, DIM, hidden)
    }
}

/// A builder for one session: every graph optimisation, one thread that never spins, and
/// the packed weights shared with the other sessions.
fn session_builder(
    env: &Environment,
    prepacked: &PrepackedWeights,
) -> std::result::Result<SessionBuilder, String> {
    let text = |e: ort::Error<SessionBuilder>| e.to_string();
    Session::builder(env)
        .map_err(|e| e.to_string())?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(text)?
        .with_intra_threads(1)
        .map_err(text)?
        .with_inter_threads(1)
        .map_err(text)?
        .with_intra_op_spinning(false)
        .map_err(text)?
        .with_prepacked_weights(prepacked)
        .map_err(text)
}

impl Embedder for OnnxMiniLm {
    fn dim(&self) -> usize {
        DIM
    }

    /// The same id as [`crate::MiniLm`]'s: the same weights give the same vectors.
    fn model_id(&self) -> String {
        text::model_id()
    }

    /// Tokenises everything, sorts by length so that each batch pads little, runs batches
    /// of [`OnnxMiniLm::batch_size`] on the pool's threads at once, and returns the
    /// vectors in the order of `texts`.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.batcher.embed(texts, |batch| self.forward(batch))
    }
}

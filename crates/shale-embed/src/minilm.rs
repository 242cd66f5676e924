//! all-MiniLM-L6-v2 on the CPU with candle: tokenize, run BERT over a padded batch, mean
//! pool over the attention mask, L2-normalise. The same steps as sentence-transformers'
//! `Transformer -> Pooling(mean) -> Normalize` for this model, so the vectors agree with it.
//!
//! Threads: each `MiniLm` owns a rayon pool of its own (default: two threads, or one on a
//! one-core machine) and runs every tokenisation and forward pass inside it, so the
//! tokenizer, the batches of one `embed` call and candle's matrix multiplications run on
//! those threads and never on the global rayon pool that the rest of the engine may use.
//! Two things candle sizes for the whole process, once, from the environment, and a
//! `MiniLm` cannot: how many pieces a matrix multiplication is cut into, and a global pool
//! (threads named `candle-bp-N`) for large elementwise operations. Both follow
//! `RAYON_NUM_THREADS` (the pool also `CANDLE_NUM_THREADS`), else the number of physical
//! cores: two on the project's machines, which matches the default here.
//! `MiniLm` is `Send + Sync`; concurrent calls to `embed` share its pool.
//!
//! Invariants: every vector has [`DIM`] components and unit L2 norm; a text longer than
//! [`crate::MAX_TOKENS`] tokens (counting `[CLS]` and `[SEP]`) is truncated, as sentence-transformers
//! does; a text's vector does not depend on the batch it was embedded in beyond float
//! rounding (padding is masked out of attention and of the mean).

use std::fmt;
use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use shale::error::{Error, Result};
use shale_search::semantic::Embedder;
use tokenizers::Encoding;

use crate::batcher::Batcher;
use crate::model_files::{self, damaged, read_verified};
use crate::text::{self, default_threads, DIM};

/// How many texts [`Embedder::embed`] puts into one forward pass.
pub const DEFAULT_BATCH_SIZE: usize = 32;

/// The all-MiniLM-L6-v2 sentence embedding model.
pub struct MiniLm {
    model: BertModel,
    batcher: Batcher,
}

impl fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MiniLm")
            .field("dir", &self.dir())
            .field("threads", &self.threads())
            .field("batch_size", &self.batch_size())
            .finish_non_exhaustive()
    }
}

impl MiniLm {
    /// Load the model from `dir` (the directory `scripts/fetch-model.sh` prints), with
    /// [`default_threads`] threads.
    ///
    /// # Errors
    /// `Error::Index`, saying to run `scripts/fetch-model.sh`, when a file is missing,
    /// has the wrong size or sha256, or does not parse.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self> {
        Self::load_with_threads(dir, default_threads())
    }

    /// Load the model from `SHALE_MODEL_DIR`, or from the default cache directory
    /// `${SHALE_CACHE:-$HOME/.cache/shale}/models/all-MiniLM-L6-v2`.
    ///
    /// # Errors
    /// As [`MiniLm::load`].
    pub fn from_env() -> Result<Self> {
        Self::load(model_files::model_dir_from_env()?)
    }

    /// As [`MiniLm::load`], running inference on `threads` threads (at least one).
    ///
    /// # Errors
    /// As [`MiniLm::load`]; also `Error::Index` if the thread pool cannot be started.
    pub fn load_with_threads(dir: impl AsRef<Path>, threads: usize) -> Result<Self> {
        let dir = dir.as_ref();
        let config_bytes = read_verified(dir, model_files::CONFIG)?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|e| damaged(&dir.join(model_files::CONFIG.name), e))?;

        let tokenizer = text::load_tokenizer(dir)?;

        let weights_path = dir.join(model_files::WEIGHTS.name);
        let weights = read_verified(dir, model_files::WEIGHTS)?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| damaged(&weights_path, e))?;
        let model = BertModel::load(vb, &config).map_err(|e| damaged(&weights_path, e))?;

        let batcher = Batcher::new(dir, tokenizer, threads, "shale-embed", DEFAULT_BATCH_SIZE)?;
        Ok(MiniLm { model, batcher })
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        self.batcher.dir()
    }

    /// The number of threads inference runs on.
    pub fn threads(&self) -> usize {
        self.batcher.threads()
    }

    /// The number of texts [`Embedder::embed`] puts into one forward pass.
    pub fn batch_size(&self) -> usize {
        self.batcher.batch_size()
    }

    /// Set how many texts [`Embedder::embed`] puts into one forward pass (at least one).
    /// Larger batches amortise more per-pass work but pad more when lengths differ.
    pub fn set_batch_size(&mut self, batch_size: usize) {
        self.batcher.set_batch_size(batch_size);
    }

    /// Embed `texts` in exactly one forward pass, every text padded to the longest: the
    /// raw batch, for measuring. [`Embedder::embed`] is what callers want: it groups texts
    /// of similar length into batches of [`MiniLm::batch_size`].
    ///
    /// # Errors
    /// `Error::Index` if tokenisation or inference fails.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.batcher.embed_batch(texts, |batch| self.forward(batch))
    }

    /// One forward pass over `batch` (not empty), padded to its longest encoding.
    fn forward(&self, batch: &[&Encoding]) -> Result<Vec<Vec<f32>>> {
        let p = text::pack::<u32>(batch);
        self.pooled(p.rows, p.cols, p.ids, p.type_ids, p.mask)
            .map_err(|e| Error::Index(format!("inference failed: {e}")))
    }

    fn pooled(
        &self,
        rows: usize,
        cols: usize,
        ids: Vec<u32>,
        type_ids: Vec<u32>,
        mask: Vec<u32>,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let device = &self.model.device;
        let ids = Tensor::from_vec(ids, (rows, cols), device)?;
        let type_ids = Tensor::from_vec(type_ids, (rows, cols), device)?;
        let mask = Tensor::from_vec(mask, (rows, cols), device)?;
        // (rows, cols, DIM): one hidden state per token.
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?;
        // Mean over the real tokens only: padding has mask 0.
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
        let mean = summed.broadcast_div(&counts)?;
        // x / max(|x|, 1e-12), as torch.nn.functional.normalize.
        let norm = mean
            .sqr()?
            .sum_keepdim(1)?
            .sqrt()?
            .clamp(1e-12f32, f32::MAX)?;
        mean.broadcast_div(&norm)?.to_vec2::<f32>()
    }
}

impl Embedder for MiniLm {
    fn dim(&self) -> usize {
        DIM
    }

    /// The model's name, the sha256 of each file `load` verified, and the steps around it:
    /// the same id as [`crate::OnnxMiniLm`]'s, which computes the same vectors.
    fn model_id(&self) -> String {
        text::model_id()
    }

    /// Tokenises everything, sorts by length so that each batch pads little, runs batches
    /// of [`MiniLm::batch_size`] on the pool's threads at once (besides the threads each
    /// matrix multiplication uses: the two together keep both cores busy for a bulk
    /// import, where one pass alone leaves its single-threaded steps idle on the other),
    /// and returns the vectors in the order of `texts`.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        self.batcher.embed(texts, |batch| self.forward(batch))
    }
}

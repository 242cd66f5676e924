//! What both runtimes hold around their model: the tokenizer, a rayon pool of their own, the
//! batch size and the directory the files came from, and the two ways a call goes through
//! them (one raw batch, or [`text::embed_by_length`]). A runtime hands in only its forward
//! pass.
//!
//! Threads: every tokenisation and forward pass runs inside the pool, never on the global
//! rayon pool; concurrent calls share it. `Batcher` is `Send + Sync`.
//!
//! Invariants: the pool has `threads` threads, at least one; the batch size is at least one.

use std::path::{Path, PathBuf};

use shale::error::{Error, Result};
use tokenizers::{Encoding, Tokenizer};

use crate::text;

pub(crate) struct Batcher {
    tokenizer: Tokenizer,
    pool: rayon::ThreadPool,
    threads: usize,
    batch_size: usize,
    dir: PathBuf,
}

impl Batcher {
    /// Start a pool of `threads` threads (at least one) named `{thread_prefix}-N`.
    ///
    /// # Errors
    /// `Error::Index` if the pool cannot be started.
    pub(crate) fn new(
        dir: &Path,
        tokenizer: Tokenizer,
        threads: usize,
        thread_prefix: &'static str,
        batch_size: usize,
    ) -> Result<Self> {
        let threads = threads.max(1);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(move |i| format!("{thread_prefix}-{i}"))
            .build()
            .map_err(|e| Error::Index(format!("cannot start {threads} threads: {e}")))?;
        Ok(Batcher {
            tokenizer,
            pool,
            threads,
            batch_size: batch_size.max(1),
            dir: dir.to_path_buf(),
        })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    pub(crate) fn batch_size(&self) -> usize {
        self.batch_size
    }

    pub(crate) fn set_batch_size(&mut self, batch_size: usize) {
        self.batch_size = batch_size.max(1);
    }

    /// Tokenise `texts` and run `forward` once over all of them, padded to the longest; no
    /// texts, no pass.
    ///
    /// # Errors
    /// The error of the tokenizer or of `forward`.
    pub(crate) fn embed_batch<F>(&self, texts: &[&str], forward: F) -> Result<Vec<Vec<f32>>>
    where
        F: Fn(&[&Encoding]) -> Result<Vec<Vec<f32>>> + Sync + Send,
    {
        self.pool.install(|| {
            let encodings = text::tokenize(&self.tokenizer, texts)?;
            let refs: Vec<&Encoding> = encodings.iter().collect();
            if refs.is_empty() {
                return Ok(Vec::new());
            }
            forward(&refs)
        })
    }

    /// [`text::embed_by_length`] on this pool, in batches of the batch size.
    ///
    /// # Errors
    /// The first error of the tokenizer or of `forward`.
    pub(crate) fn embed<F>(&self, texts: &[&str], forward: F) -> Result<Vec<Vec<f32>>>
    where
        F: Fn(&[&Encoding]) -> Result<Vec<Vec<f32>>> + Sync + Send,
    {
        self.pool
            .install(|| text::embed_by_length(&self.tokenizer, texts, self.batch_size, forward))
    }
}

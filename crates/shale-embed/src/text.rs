//! What every runtime does around the model, so that they agree: tokenise as
//! sentence-transformers does, sort a call's texts by length and cut them into batches that
//! pad little, pack a batch into row-major token arrays, and mean-pool and L2-normalise the
//! hidden states; and what they share besides: the vectors' width, the default thread count
//! and the model id, which names these steps.
//!
//! Threads: [`embed_by_length`] runs a call's batches side by side on the pool it is given;
//! the rest are plain functions.
//!
//! Invariants: a batch is padded to its longest encoding and the padding has attention mask
//! 0, so it is masked out of attention and of the mean; vectors come back in input order.

use std::path::Path;

use rayon::prelude::*;
use shale::error::{Error, Result};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use crate::model_files::{self, damaged, read_verified};

/// Dimensions of every vector.
pub const DIM: usize = 384;

/// The default thread count: two, or one on a one-core machine.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

/// The longest input, in tokens including `[CLS]` and `[SEP]`; longer texts are truncated.
/// This is the model's `max_seq_length` in sentence-transformers.
pub const MAX_TOKENS: usize = 256;

/// The id both embedders give their vectors ([`shale_search::semantic::Embedder::model_id`]): the
/// model, the sha256 of the files that decide its vectors, and the steps around it. The
/// runtime is not in it: `model.onnx` holds the very floats of `model.safetensors`, and both
/// runtimes give the same vector to within float rounding (3e-7 a component, as one runtime
/// gives between two batches; `tests/embed/onnx_quality_guard.rs` holds them to it), so an index
/// built by one is reused by the other instead of embedded again.
pub(crate) fn model_id() -> String {
    format!(
        "all-MiniLM-L6-v2 {}:{} {}:{} {}:{} max_tokens:{} mean-pool l2-normalise",
        model_files::WEIGHTS.name,
        model_files::WEIGHTS.sha256,
        model_files::TOKENIZER.name,
        model_files::TOKENIZER.sha256,
        model_files::CONFIG.name,
        model_files::CONFIG.sha256,
        MAX_TOKENS,
    )
}

/// Load and check `tokenizer.json` from `dir`, set to truncate at [`MAX_TOKENS`] and not pad.
///
/// # Errors
/// `Error::Index`, saying to run `scripts/fetch-model.sh`, when the file is missing, is not
/// the one fetched, or does not parse.
pub(crate) fn load_tokenizer(dir: &Path) -> Result<Tokenizer> {
    let path = dir.join(model_files::TOKENIZER.name);
    let mut tokenizer = Tokenizer::from_bytes(read_verified(dir, model_files::TOKENIZER)?)
        .map_err(|e| damaged(&path, e))?;
    // tokenizer.json as shipped pads every input to 128 tokens and truncates at 128;
    // sentence-transformers truncates at 256 and pads each batch to its longest input,
    // which `pack` does by hand.
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS,
            ..TruncationParams::default()
        }))
        .map_err(|e| damaged(&path, e))?;
    tokenizer.with_padding(None);
    Ok(tokenizer)
}

/// Tokenise `texts` (on the current rayon pool).
///
/// # Errors
/// `Error::Index` if the tokenizer fails.
pub(crate) fn tokenize(tokenizer: &Tokenizer, texts: &[&str]) -> Result<Vec<Encoding>> {
    tokenizer
        .encode_batch(texts.to_vec(), true)
        .map_err(|e| Error::Index(format!("tokenizer failed: {e}")))
}

/// Tokenise `texts`, sort them by token count, cut them into batches of `batch_size`, run
/// `forward` on the batches side by side on the current rayon pool, and return the vectors
/// in the order of `texts`. Sorting is what keeps padding small: a batch of WordNet glosses
/// in input order pads to about twice its real tokens (BENCHMARKS.md).
///
/// The longest batches go first and each batch is a task of its own, so the threads share
/// the work to the end: a call ends with short batches on every thread, not with the
/// longest ones on one thread while the others wait.
///
/// # Errors
/// The first error of the tokenizer or of `forward`.
pub(crate) fn embed_by_length<F>(
    tokenizer: &Tokenizer,
    texts: &[&str],
    batch_size: usize,
    forward: F,
) -> Result<Vec<Vec<f32>>>
where
    F: Fn(&[&Encoding]) -> Result<Vec<Vec<f32>>> + Sync,
{
    let encodings = tokenize(tokenizer, texts)?;
    let mut order: Vec<usize> = (0..encodings.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(encodings.get(i).map_or(0, Encoding::len)));
    let batches: Vec<&[usize]> = order.chunks(batch_size.max(1)).collect();
    let vectors: Vec<Vec<Vec<f32>>> = batches
        .par_iter()
        .with_max_len(1)
        .map(|batch| {
            let batch: Vec<&Encoding> = batch.iter().filter_map(|&i| encodings.get(i)).collect();
            forward(&batch)
        })
        .collect::<Result<_>>()?;
    let mut out = vec![Vec::new(); encodings.len()];
    for (&i, vector) in order.iter().zip(vectors.into_iter().flatten()) {
        if let Some(slot) = out.get_mut(i) {
            *slot = vector;
        }
    }
    Ok(out)
}

/// A batch as the model's three inputs, each `rows * cols` row-major, padded with zeros to
/// the longest encoding.
pub(crate) struct Packed<T> {
    pub rows: usize,
    pub cols: usize,
    pub ids: Vec<T>,
    pub type_ids: Vec<T>,
    pub mask: Vec<T>,
}

/// Pack `batch` (none of it empty: every encoding holds at least `[CLS]` and `[SEP]`).
pub(crate) fn pack<T: From<u32> + Copy + Default>(batch: &[&Encoding]) -> Packed<T> {
    let rows = batch.len();
    let cols = batch.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
    let mut ids = vec![T::default(); rows * cols];
    let mut type_ids = vec![T::default(); rows * cols];
    let mut mask = vec![T::default(); rows * cols];
    for (((enc, ids), type_ids), mask) in batch
        .iter()
        .zip(ids.chunks_exact_mut(cols))
        .zip(type_ids.chunks_exact_mut(cols))
        .zip(mask.chunks_exact_mut(cols))
    {
        copy_prefix(ids, enc.get_ids());
        copy_prefix(type_ids, enc.get_type_ids());
        copy_prefix(mask, enc.get_attention_mask());
    }
    Packed {
        rows,
        cols,
        ids,
        type_ids,
        mask,
    }
}

fn copy_prefix<T: From<u32>>(dst: &mut [T], src: &[u32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = T::from(*s);
    }
}

/// Mean-pool `hidden` (`batch.len()` rows of `cols` tokens of `dim` floats, row-major) over
/// each encoding's attention mask and scale every mean to unit length: the steps of
/// sentence-transformers' `Pooling(mean) -> Normalize` (counts clamped at 1e-9, norms at
/// 1e-12, as torch does).
///
/// # Errors
/// `Error::Index` if `hidden` is not `batch.len() * cols * dim` long.
pub(crate) fn mean_pool_normalise(
    batch: &[&Encoding],
    cols: usize,
    dim: usize,
    hidden: &[f32],
) -> Result<Vec<Vec<f32>>> {
    if hidden.len() != batch.len() * cols * dim {
        return Err(Error::Index(format!(
            "inference returned {} floats for {} texts of {cols} tokens of {dim}",
            hidden.len(),
            batch.len()
        )));
    }
    let mut out = Vec::with_capacity(batch.len());
    for (enc, row) in batch.iter().zip(hidden.chunks_exact(cols * dim)) {
        let mut mean = vec![0f32; dim];
        let mut count = 0f32;
        for (&m, token) in enc.get_attention_mask().iter().zip(row.chunks_exact(dim)) {
            if m != 0 {
                count += 1.0;
                for (acc, x) in mean.iter_mut().zip(token) {
                    *acc += x;
                }
            }
        }
        let count = count.max(1e-9);
        mean.iter_mut().for_each(|x| *x /= count);
        let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
        mean.iter_mut().for_each(|x| *x /= norm);
        out.push(mean);
    }
    Ok(out)
}

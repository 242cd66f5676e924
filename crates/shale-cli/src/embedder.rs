//! Which embedding model the CLI hands to `Options::semantic`.
//!
//! The engine only knows the [`Embedder`] trait; this file picks an implementation:
//! - `minilm`: all-MiniLM-L6-v2 from the `shale-embed` crate (see [`minilm`], the one spot
//!   that names it);
//! - `hash`: [`HashEmbedder`], a deterministic bag-of-words feature hasher with no model
//!   files. It finds values that share words with the query, not meanings; it exists for
//!   tests and for trying the commands on a machine without the model.
//!
//! The two have different dimensions (384 and [`HashEmbedder::DIM`]), so a database
//! indexed with one and opened with the other re-embeds every value at open instead of
//! mixing vectors of two models.

use std::sync::Arc;

use shale::vector::Embedder;

use crate::error::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EmbedderKind {
    /// all-MiniLM-L6-v2 (crate shale-embed).
    Minilm,
    /// Word hashing: deterministic, no model files, matches words rather than meanings.
    Hash,
}

pub fn make(kind: EmbedderKind) -> Result<Arc<dyn Embedder>> {
    match kind {
        EmbedderKind::Minilm => minilm(),
        EmbedderKind::Hash => Ok(Arc::new(HashEmbedder)),
    }
}

/// The real model, all-MiniLM-L6-v2 (`shale-embed`), from `SHALE_MODEL_DIR` or the cache
/// `scripts/fetch-model.sh` fills; its error says how to fetch it.
fn minilm() -> Result<Arc<dyn Embedder>> {
    Ok(Arc::new(shale_embed::MiniLm::from_env()?))
}

/// Signed feature hashing of lower-cased words into [`HashEmbedder::DIM`] dimensions,
/// L2-normalised. Deterministic across runs and platforms (FNV-1a, no random seed).
#[derive(Debug, Clone, Copy, Default)]
pub struct HashEmbedder;

impl HashEmbedder {
    pub const DIM: usize = 128;

    fn embed_one(text: &str) -> Vec<f32> {
        let mut v = vec![0f32; Self::DIM];
        let words = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty());
        for word in words {
            let h = word
                .to_lowercase()
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
                });
            // Bucket from the low bits, sign from the top bit: unrelated words cancel out
            // on average instead of all adding up.
            let bucket = (h % Self::DIM as u64) as usize;
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            if let Some(x) = v.get_mut(bucket) {
                *x += sign;
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 {
            // No words: any fixed unit vector keeps the "unit length" promise.
            if let Some(x) = v.first_mut() {
                *x = 1.0;
            }
        } else {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

impl Embedder for HashEmbedder {
    fn dim(&self) -> usize {
        Self::DIM
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        Ok(texts.iter().map(|t| Self::embed_one(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_length_and_deterministic() {
        let e = HashEmbedder;
        let v = e.embed(&["The cat sat", "the CAT sat", ""]).unwrap();
        for x in &v {
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5);
        }
        assert_eq!(v[0], v[1], "case does not matter");
    }
}

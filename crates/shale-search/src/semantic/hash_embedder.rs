//! [`HashEmbedder`]: a deterministic stand-in for a model, for tests and for trying
//! semantic search on a machine without model files. It matches values that share words
//! with the query, not meanings.

use super::Embedder;

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

    fn model_id(&self) -> String {
        "shale HashEmbedder v1: FNV-1a feature hashing of lower-cased words".into()
    }

    fn embed(&self, texts: &[&str]) -> shale::error::Result<Vec<Vec<f32>>> {
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

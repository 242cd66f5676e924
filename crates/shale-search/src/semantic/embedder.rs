//! [`Embedder`]: how an index turns text into vectors. The engine depends on no inference
//! library: the real all-MiniLM-L6-v2 lives in the `shale-embed` crate, Python passes a
//! callable, and tests plug in [`super::HashEmbedder`].

use shale::error::Result;

/// Turns text into vectors. Implementations must be deterministic: the same text always
/// gives the same vector, so that an index rebuilt after a crash matches the one lost.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The number of dimensions of every vector this embedder returns.
    fn dim(&self) -> usize;

    /// Names the model and everything else that decides its vectors (weights, tokenizer,
    /// truncation, pooling): two embedders with different vectors for one text must have
    /// different ids. The vector store records it (docs/format.md section 10), and an open
    /// with another id embeds every value again rather than mix two models' vectors in one
    /// index. Not empty, at most [`super::MAX_MODEL_ID_BYTES`] bytes.
    fn model_id(&self) -> String;

    /// Embed `texts`, one vector of [`Embedder::dim`] finite components per text, in
    /// order. Under the cosine metric the index scales them to unit length itself.
    ///
    /// # Errors
    /// `Error::Index` if the model fails.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

//! Semantic search: text values embedded into vectors by a model and found again by
//! k-nearest-neighbour search, exactly (brute force) or approximately (HNSW).
//!
//! The model sits behind [`Embedder`] so that the engine does not depend on any one
//! inference library: the real all-MiniLM-L6-v2 lives in the `shale-embed` crate, and
//! unit tests may plug in a small deterministic embedder.

mod semantic;

pub use semantic::{
    decode_vector, encode_vector, text_hash, SearchHit, SearchOptions, SemanticOptions,
};
pub(crate) use semantic::{Change, Semantic};

use crate::error::Result;

/// Turns text into vectors. Implementations must be deterministic: the same text always
/// gives the same vector, so that an index rebuilt after a crash matches the one lost.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The number of dimensions of every vector this embedder returns.
    fn dim(&self) -> usize;

    /// Embed `texts`, one unit-length (L2-normalised) vector per text, in order.
    ///
    /// # Errors
    /// `Error::Embedding` if the model fails.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

//! Semantic search: text values embedded into vectors by a model and found again by
//! k-nearest-neighbour search, exactly (brute force) or approximately (HNSW).
//!
//! The model sits behind [`Embedder`] so that the engine does not depend on any one
//! inference library: the real all-MiniLM-L6-v2 lives in the `shale-embed` crate, and
//! unit tests may plug in a small deterministic embedder.
//!
//! Search works on unit vectors under cosine similarity:
//! - [`distance`]: the dot product, written so the compiler vectorises it;
//! - [`exact`]: brute force, the reference and the tool for small candidate sets;
//! - [`hnsw`]: the approximate graph index ([`Hnsw`]), concurrent inserts, tombstones,
//!   and its checksummed file (`format.rs`, described in docs/format.md).

use std::cmp::Ordering;

mod checkpoint;
mod hash_embedder;
mod key_index;
mod model_file;
mod pending;
mod semantic;
mod value;

pub use hash_embedder::HashEmbedder;
pub use model_file::{ModelRecord, MAX_MODEL_ID_BYTES, MODEL_FORMAT_VERSION, MODEL_MAGIC};
pub(crate) use pending::Change;
pub use semantic::{IndexRecovery, SearchHit, SearchOptions, SemanticOptions};
pub(crate) use semantic::{Method, Semantic};
pub use value::{decode_vector, encode_vector, text_hash};

use crate::error::Result;

/// The subdirectory of a database directory that holds its vector store (a database of
/// its own, with the graph checkpoint beside it).
pub const STORE_DIR: &str = "vectors";

mod chunks;
pub mod distance;
pub mod exact;
mod format;
pub mod hnsw;
mod metric;
pub mod quant;
mod store;
#[cfg(test)]
mod tests;
mod vector_file;

pub use format::{GRAPH_FORMAT_VERSION, GRAPH_HEADER_LEN, GRAPH_MAGIC};
pub use hnsw::{Hnsw, HnswParams, RECLAIM_FRACTION};
pub use metric::{squared_l2, Metric};
pub use vector_file::VectorFile;

/// A node of a vector index: a dense id chosen by the owner of the index (who maps it to a
/// key), so that node data lives in arrays indexed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// One search result: a node and its cosine similarity with the query.
///
/// Orders by rank: a greater `Neighbor` is a better match (higher score, then lower id), so
/// sorting results in descending order lists them best first, ties by id.
#[derive(Debug, Clone, Copy)]
pub struct Neighbor {
    /// The node found.
    pub id: NodeId,
    /// Cosine similarity with the query, in `[-1, 1]` up to rounding.
    pub score: f32,
}

impl Ord for Neighbor {
    fn cmp(&self, other: &Neighbor) -> Ordering {
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.id.cmp(&self.id))
    }
}

impl PartialOrd for Neighbor {
    fn partial_cmp(&self, other: &Neighbor) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Neighbor {
    fn eq(&self, other: &Neighbor) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Neighbor {}

/// Where the full-precision vectors of a graph's nodes are: the graph keeps only their
/// codes, and asks a source for the few it re-scores ([`Hnsw::search_rescored`]) or for
/// every one ([`Hnsw::exact_search`]).
pub trait VectorSource: Sync {
    /// The vector of node `id` as the metric stores it (unit length under
    /// [`Metric::Cosine`]), or `None` if the source has none.
    fn vector(&self, id: NodeId) -> Option<&[f32]>;
}

/// Turns text into vectors. Implementations must be deterministic: the same text always
/// gives the same vector, so that an index rebuilt after a crash matches the one lost.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The number of dimensions of every vector this embedder returns.
    fn dim(&self) -> usize;

    /// Names the model and everything else that decides its vectors (weights, tokenizer,
    /// truncation, pooling): two embedders with different vectors for one text must have
    /// different ids. The vector store records it (docs/format.md section 10), and an open
    /// with another id embeds every value again rather than mix two models' vectors in one
    /// index. Not empty, at most [`MAX_MODEL_ID_BYTES`] bytes.
    fn model_id(&self) -> String;

    /// Embed `texts`, one unit-length (L2-normalised) vector per text, in order.
    ///
    /// # Errors
    /// `Error::Embedding` if the model fails.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

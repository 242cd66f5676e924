//! Vector search, the math under the semantic index (`semantic/`): vectors compared under
//! a [`Metric`], found again by k-nearest-neighbour search, exactly or through an HNSW
//! graph of int8 codes. Nothing here knows about keys, text or the database: the semantic
//! layer maps keys to node ids and owns the files.
//!
//! - [`distance`]: dot products and normalisation, written so the compiler vectorises them;
//! - [`Metric`]: cosine, dot product or Euclidean distance, and what a score means;
//! - [`quant`]: the int8 codes the graph keeps and the kernels that score them;
//! - [`exact`]: brute force, the reference and the tool for small candidate sets;
//! - [`hnsw`]: the approximate graph index ([`Hnsw`]), concurrent inserts, tombstones,
//!   and its checksummed file (`format.rs`, described in docs/format.md);
//! - [`VectorFile`]: the full vectors of a graph's nodes, by id, in a mapped file.

use std::cmp::Ordering;

mod chunks;
pub mod distance;
pub mod exact;
mod format;
pub mod hnsw;
mod metric;
pub mod quant;
mod slab;
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

/// Which nodes a search may return ([`Hnsw::search_rescored`]), and about what share of the
/// graph's nodes that is, when the caller knows (else the search samples the graph to
/// guess: the share decides how it walks).
#[derive(Clone, Copy)]
pub struct Filter<'a> {
    pub accept: &'a dyn Fn(NodeId) -> bool,
    /// The share of the nodes `accept` takes, 0 to 1.
    pub share: Option<f64>,
}

impl<'a> Filter<'a> {
    /// A filter of unknown share.
    pub fn new(accept: &'a dyn Fn(NodeId) -> bool) -> Filter<'a> {
        Filter {
            accept,
            share: None,
        }
    }
}

/// Where the full-precision vectors of a graph's nodes are: the graph keeps only their
/// codes, and asks a source for the few it re-scores ([`Hnsw::search_rescored`]) or for
/// every one ([`Hnsw::exact_search`]).
pub trait VectorSource: Sync {
    /// The vector of node `id` as the metric stores it (unit length under
    /// [`Metric::Cosine`]), or `None` if the source has none.
    fn vector(&self, id: NodeId) -> Option<&[f32]>;
}

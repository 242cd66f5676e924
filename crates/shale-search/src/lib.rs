//! Search over a Shale database, as a layer on its public API: semantic indexes that find
//! values by meaning ([`semantic`], over the HNSW graph of [`vector`]), keyword (BM25) text
//! indexes that are exact and current at every acknowledged write ([`text`]), and hybrid
//! queries that fuse the two ([`hybrid`]).
//!
//! The engine knows nothing of vectors or text: each index follows the database through the
//! engine's one seam for derived data, [`shale::WriteHook`]; a text index's records are
//! ordinary entries of a keyspace of its own, a semantic index's vectors a database of
//! their own. See `docs/architecture.md`, "Semantic search" and "Keyword and hybrid
//! search".

// Bytes from disk and arguments from users never reach an unchecked unwrap or index.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

/// Fuzz entry points, one per decoder (used by `fuzz/` and `tests/search/fuzz_smoke.rs`).
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod hybrid;
pub mod semantic;
mod sync;
pub mod text;
pub mod vector;

pub use hybrid::{Fusion, HybridHit, HybridOptions};
pub use text::{
    Analyzer, Bm25, CorpusStats, KeywordHit, KeywordOptions, Match, TextIndex, TextIndexOptions,
    TextIndexStats,
};

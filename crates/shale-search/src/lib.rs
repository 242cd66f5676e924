//! Search over a Shale database, as a layer on its public API: keyword (BM25) text
//! indexes that are exact and current at every acknowledged write, and hybrid queries
//! that fuse them with a semantic (vector) index.
//!
//! The engine knows nothing of text: a text index follows the database through the
//! engine's one seam for derived data, [`shale::WriteHook`], and its records are ordinary
//! entries of a keyspace of its own. See `docs/architecture.md`, "Search layer".

// Bytes from disk and arguments from users never reach an unchecked unwrap or index.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

/// Fuzz entry points, one per decoder (used by `fuzz/` and `tests/fuzz_smoke.rs`).
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod hybrid;
pub mod text;

pub use hybrid::{Fusion, HybridHit, HybridOptions};
pub use text::{
    Analyzer, Bm25, KeywordHit, KeywordOptions, Match, TextIndex, TextIndexOptions, TextIndexStats,
};

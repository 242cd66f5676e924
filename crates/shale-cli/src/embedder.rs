//! Which embedding model the CLI hands to `Options::semantic`.
//!
//! The engine only knows the [`Embedder`] trait; this file picks an implementation:
//! - `minilm`: all-MiniLM-L6-v2 from the `shale-embed` crate (see [`minilm`], the one spot
//!   that names it);
//! - `hash`: [`HashEmbedder`] (from the library), a deterministic word hasher with no model
//!   files. It finds values that share words with the query, not meanings; it exists for
//!   tests and for trying the commands on a machine without the model.
//!
//! The two have different dimensions (384 and [`HashEmbedder::DIM`]), so a database
//! indexed with one and opened with the other re-embeds every value at open instead of
//! mixing vectors of two models.

use std::sync::Arc;

use shale::semantic::{Embedder, HashEmbedder};

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

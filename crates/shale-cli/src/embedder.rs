//! Which embedding model the CLI hands to `VectorIndexOptions` (`--embedder`).
//!
//! The engine only knows the [`Embedder`] trait; this file picks an implementation, or
//! none:
//! - `minilm`: all-MiniLM-L6-v2 from the `shale-embed` crate (see [`minilm`], the one spot
//!   that names it);
//! - `hash`: [`HashEmbedder`] (from the library), a deterministic word hasher with no model
//!   files. It finds values that share words with the query, not meanings; it exists for
//!   tests and for trying the commands on a machine without the model;
//! - `none`: an index of vectors given by the user (`import --format npy`, vector values),
//!   which refuses text; `--dim` gives its dimension.
//!
//! The two models have different ids (and dimensions: 384 and [`HashEmbedder::DIM`]), so an
//! index built with one and opened with the other embeds every text again at open instead
//! of mixing vectors of two models.

use std::sync::Arc;

use shale_search::semantic::{Embedder, HashEmbedder};

use crate::error::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EmbedderKind {
    /// all-MiniLM-L6-v2 (crate shale-embed).
    Minilm,
    /// Word hashing: deterministic, no model files, matches words rather than meanings.
    Hash,
    /// No model: the index holds vectors given by the user (needs --dim).
    None,
}

/// The model `kind` names (`None` for `none`).
pub fn make(kind: EmbedderKind) -> Result<Option<Arc<dyn Embedder>>> {
    match kind {
        EmbedderKind::Minilm => minilm().map(Some),
        EmbedderKind::Hash => Ok(Some(Arc::new(HashEmbedder))),
        EmbedderKind::None => Ok(None),
    }
}

/// The real model, all-MiniLM-L6-v2 (`shale-embed`), from `SHALE_MODEL_DIR` or the cache
/// `scripts/fetch-model.sh` fills, on ONNX Runtime (else candle: both give the same
/// vectors); its error says how to fetch it.
fn minilm() -> Result<Arc<dyn Embedder>> {
    Ok(shale_embed::load_default()?.embedder)
}

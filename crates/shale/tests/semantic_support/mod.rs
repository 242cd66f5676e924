//! Shared by the semantic search tests (`semantic.rs`, `semantic_persistence.rs`): an
//! embedder that counts what it embeds, a database opened with it, and a few texts.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use shale::vector::{Embedder, HashEmbedder, SemanticOptions};
use shale::{Db, Options};

/// The library's word-hashing embedder (texts sharing words are close), counting the
/// texts it embedded.
#[derive(Debug, Default)]
pub struct BagOfWords {
    pub embedded: AtomicUsize,
}

impl Embedder for BagOfWords {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    fn model_id(&self) -> String {
        HashEmbedder.model_id()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        self.embedded.fetch_add(texts.len(), Ordering::Relaxed);
        HashEmbedder.embed(texts)
    }
}

pub fn open(path: &std::path::Path, embedder: &Arc<BagOfWords>) -> Db {
    let embedder: Arc<dyn Embedder> = Arc::clone(embedder) as Arc<dyn Embedder>;
    Db::open(
        path,
        Options {
            semantic: Some(SemanticOptions::new(embedder)),
            ..Options::default()
        },
    )
    .unwrap()
}

pub const ANIMALS: [&str; 6] = [
    "the cat sleeps on the warm mat",
    "a dog barks at the mail carrier",
    "fish swim in the cold river",
    "birds sing at dawn in the forest",
    "the horse runs across the green field",
    "a cow grazes near the old barn",
];

pub fn key(i: usize) -> String {
    format!("doc{i:03}")
}

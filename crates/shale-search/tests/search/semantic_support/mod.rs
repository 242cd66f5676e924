//! Shared by the semantic search tests (`semantic.rs`, `semantic_persistence.rs`,
//! `semantic_index.rs`, `semantic_restart.rs`): an embedder that counts what it embeds, a
//! database with one index over all of its keys ([`SemanticDb`]), a few texts, and seeded
//! random vectors.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use shale::{Db, Options, Result};
use shale_search::semantic::{
    Embedder, HashEmbedder, SearchOptions, VectorIndex, VectorIndexOptions, VectorIndexRecovery,
};

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

/// The name of the index the tests open over every key of their database.
pub const INDEX: &str = "all";

/// The directory of that index: its vector store, `GRAPH`, `MODEL` and `VECTORS`.
pub fn store_dir(db_dir: &std::path::Path) -> std::path::PathBuf {
    shale_search::semantic::index_dir(db_dir, INDEX)
}

/// A database and an index over all of its keys, with the calls the semantic tests make
/// (a search by text, exact or through the graph, the index's counters) written on the
/// index's API. Dereferences to the database for its own calls.
pub struct SemanticDb {
    pub db: Arc<Db>,
    pub index: VectorIndex,
}

/// A hit of [`SemanticDb`]'s searches: every value of these tests is text.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub key: Vec<u8>,
    pub text: String,
    pub score: f32,
}

impl std::ops::Deref for SemanticDb {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

impl SemanticDb {
    /// Open the database at `path` with `opts`, then index [`INDEX`] over every key with
    /// `embedder`.
    pub fn open(
        path: impl AsRef<std::path::Path>,
        opts: Options,
        embedder: Arc<dyn Embedder>,
    ) -> Result<SemanticDb> {
        SemanticDb::open_with(path, opts, VectorIndexOptions::text(embedder))
    }

    /// [`SemanticDb::open`] with the index's options.
    pub fn open_with(
        path: impl AsRef<std::path::Path>,
        opts: Options,
        index: VectorIndexOptions,
    ) -> Result<SemanticDb> {
        let db = Arc::new(Db::open(path, opts)?);
        let index = VectorIndex::open(&db, INDEX, index)?;
        Ok(SemanticDb { db, index })
    }

    /// The `k` nearest by exact search.
    pub fn search_knn(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        self.search_text(query, k, &SearchOptions::default(), true)
    }

    /// The `k` nearest through the graph.
    pub fn search_knn_hnsw(&self, query: &str, k: usize) -> Result<Vec<Hit>> {
        self.search_text(query, k, &SearchOptions::default(), false)
    }

    /// The `k` nearest among the keys `opts` admits (its `k` and `exact` replaced).
    pub fn search_text(
        &self,
        query: &str,
        k: usize,
        opts: &SearchOptions,
        exact: bool,
    ) -> Result<Vec<Hit>> {
        let opts = SearchOptions {
            k,
            exact,
            ..opts.clone()
        };
        Ok(self
            .index
            .search(query, &opts)?
            .into_iter()
            .map(|h| Hit {
                text: h.text().expect("a text value").to_owned(),
                key: h.key,
                score: h.score,
            })
            .collect())
    }

    pub fn indexed_len(&self) -> Result<usize> {
        self.index.len()
    }

    pub fn wait_indexed(&self) -> Result<()> {
        self.index.wait_indexed()
    }

    pub fn index_recovery(&self) -> Result<VectorIndexRecovery> {
        Ok(self.index.recovery())
    }

    pub fn index_id_space(&self) -> Result<usize> {
        Ok(self.index.stats().id_space as usize)
    }

    pub fn index_tracked_keys(&self) -> Result<usize> {
        Ok(self.index.stats().tracked_keys as usize)
    }
}

pub fn open(path: &std::path::Path, embedder: &Arc<BagOfWords>) -> SemanticDb {
    let embedder: Arc<dyn Embedder> = Arc::clone(embedder) as Arc<dyn Embedder>;
    SemanticDb::open(path, Options::default(), embedder).unwrap()
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

/// Floats uniform in `[-0.5, 0.5)` from splitmix64, so that a failure reproduces from the
/// printed seed.
pub fn rng(seed: u64) -> impl FnMut() -> f32 {
    let mut r = shale_rng::SplitMix64::new(seed);
    move || (r.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5
}

/// `n` random vectors of `dim` dimensions.
pub fn vectors(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut next = rng(seed);
    (0..n).map(|_| (0..dim).map(|_| next()).collect()).collect()
}

/// A database with the default options.
pub fn open_db(path: &std::path::Path) -> Arc<Db> {
    Arc::new(Db::open(path, Options::default()).unwrap())
}

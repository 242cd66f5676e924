//! [`VectorIndexOptions`], what an index is and how it works, and [`SearchOptions`], what one
//! search looks at.

use std::sync::Arc;
use std::time::Duration;

use super::model_file::{VectorIndexDefinition, USER_VECTORS};
use super::Embedder;
use crate::vector::{HnswParams, Metric};
use shale::error::Error;

/// What an index covers and how it embeds, stores and checkpoints. Build one with
/// [`VectorIndexOptions::text`] or [`VectorIndexOptions::vectors`], then the setters.
#[derive(Clone)]
pub struct VectorIndexOptions {
    /// The keys the index covers: every key that starts with it (empty: every key).
    pub prefix: Vec<u8>,
    /// The keyspace those keys are in; `None`: the default keyspace.
    pub keyspace: Option<String>,
    /// The model that turns text values into vectors; `None` for an index of vectors given
    /// by the user ([`super::VectorIndex::put_vector`]), which refuses text values.
    pub embedder: Option<Arc<dyn Embedder>>,
    /// The dimension of the vectors: the embedder's, if there is one.
    pub dim: usize,
    /// The HNSW graph's parameters and the metric (`hnsw.metric`). Default:
    /// [`HnswParams::with_m`]`(16)`, cosine.
    pub hnsw: HnswParams,
    /// Threads that embed and apply queued changes (each runs batches of `batch_size`).
    /// Default: 2.
    pub embed_threads: usize,
    /// Most texts one worker embeds per model call. Larger calls use the model better (a
    /// model like MiniLM sorts a call's texts by length and pads less; see BENCHMARKS.md);
    /// a worker never waits to fill a call, so a lone write is embedded at once. Default:
    /// 1024.
    pub batch_size: usize,
    /// The bound on the queue of changes not yet applied, in bytes of keys and values.
    /// Past half of it, writes of indexed values are slowed in proportion to how far past
    /// they are; at the bound they wait until the workers make room. Default: 64 MiB.
    pub queue_bytes: usize,
    /// Write the graph's checkpoint after this many inserts since the last one... Default:
    /// 50,000.
    pub checkpoint_inserts: usize,
    /// ...or this long after the last one, if anything was inserted since. Default: 60 s.
    pub checkpoint_interval: Duration,
}

impl std::fmt::Debug for VectorIndexOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndexOptions")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .field("keyspace", &self.keyspace)
            .field("embedder", &self.embedder)
            .field("dim", &self.dim)
            .field("hnsw", &self.hnsw)
            .field("embed_threads", &self.embed_threads)
            .field("batch_size", &self.batch_size)
            .field("queue_bytes", &self.queue_bytes)
            .field("checkpoint_inserts", &self.checkpoint_inserts)
            .field("checkpoint_interval", &self.checkpoint_interval)
            .finish()
    }
}

impl VectorIndexOptions {
    /// An index of text values embedded by `embedder` (and of vector records of its
    /// dimension), over every key.
    pub fn text(embedder: Arc<dyn Embedder>) -> VectorIndexOptions {
        let dim = embedder.dim();
        VectorIndexOptions {
            embedder: Some(embedder),
            ..VectorIndexOptions::vectors(dim)
        }
    }

    /// An index of vectors of `dim` dimensions given by the user, over every key.
    pub fn vectors(dim: usize) -> VectorIndexOptions {
        VectorIndexOptions {
            prefix: Vec::new(),
            keyspace: None,
            embedder: None,
            dim,
            hnsw: HnswParams::with_m(16),
            embed_threads: 2,
            batch_size: 1024,
            queue_bytes: 64 << 20,
            checkpoint_inserts: 50_000,
            checkpoint_interval: Duration::from_secs(60),
        }
    }

    /// Cover only the keys that start with `prefix`.
    pub fn prefix(mut self, prefix: impl AsRef<[u8]>) -> VectorIndexOptions {
        self.prefix = prefix.as_ref().to_vec();
        self
    }

    /// Cover the keys (under the prefix) of keyspace `name` instead of the default
    /// keyspace's; the open makes the keyspace if it does not exist.
    pub fn keyspace(mut self, name: impl Into<String>) -> VectorIndexOptions {
        self.keyspace = Some(name.into());
        self
    }

    /// Score by `metric`.
    pub fn metric(mut self, metric: Metric) -> VectorIndexOptions {
        self.hnsw.metric = metric;
        self
    }

    /// The options of the index `definition` describes (prefix, dimension, graph), with
    /// `embedder`, and the other settings at their defaults.
    ///
    /// # Errors
    /// `InvalidArgument` if `embedder` is not the model that made the index's vectors: one
    /// is needed for an index of texts (its model id and dimension the definition's), none
    /// for an index of the user's vectors.
    pub fn from_definition(
        definition: &VectorIndexDefinition,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> shale::Result<VectorIndexOptions> {
        let user_vectors = definition.model_id == USER_VECTORS;
        let base = match embedder {
            None if user_vectors => VectorIndexOptions::vectors(definition.dim),
            None => {
                return Err(Error::invalid(format!(
                    "the index's vectors come from model {:?}: it needs that embedder",
                    definition.model_id
                )))
            }
            Some(e) if user_vectors => {
                return Err(Error::invalid(format!(
                    "the index holds the user's vectors, not a model's; embedder {:?} \
                     would re-embed nothing it holds",
                    e.model_id()
                )))
            }
            Some(e) if e.model_id() != definition.model_id || e.dim() != definition.dim => {
                return Err(Error::invalid(format!(
                    "the index's vectors come from model {:?} ({} dimensions), not from \
                     {:?} ({} dimensions); open it with VectorIndex::open to embed everything \
                     again",
                    definition.model_id,
                    definition.dim,
                    e.model_id(),
                    e.dim()
                )))
            }
            Some(e) => VectorIndexOptions::text(e),
        };
        Ok(VectorIndexOptions {
            prefix: definition.prefix.clone(),
            keyspace: definition.keyspace.clone(),
            hnsw: definition.hnsw,
            ..base
        })
    }

    /// What the index is: the model, prefix and graph these options define (the other
    /// settings are not part of it).
    pub fn definition(&self) -> VectorIndexDefinition {
        VectorIndexDefinition {
            dim: self.dim,
            model_id: self
                .embedder
                .as_ref()
                .map_or_else(|| USER_VECTORS.to_owned(), |e| e.model_id()),
            prefix: self.prefix.clone(),
            keyspace: self.keyspace.clone(),
            hnsw: self.hnsw,
        }
    }

    /// Report every problem of the options into `problems`.
    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        if !(1..=64).contains(&self.embed_threads) {
            problems.push(format!(
                "embed_threads = {} must be between 1 and 64",
                self.embed_threads
            ));
        }
        if !(1..=4096).contains(&self.batch_size) {
            problems.push(format!(
                "batch_size = {} must be between 1 and 4096",
                self.batch_size
            ));
        }
        if self.queue_bytes < 4096 {
            problems.push(format!(
                "queue_bytes = {} must be at least 4096",
                self.queue_bytes
            ));
        }
        if self.checkpoint_inserts == 0 {
            problems.push("checkpoint_inserts must be at least 1".into());
        }
        if self.prefix.len() > shale::options::MAX_KEY_BYTES {
            problems.push(format!(
                "prefix of {} bytes is longer than a key may be",
                self.prefix.len()
            ));
        }
        if let Err(Error::InvalidOptions(p)) = self.hnsw.validate() {
            problems.extend(p);
        }
        if !(1..=crate::vector::hnsw::MAX_DIM).contains(&self.dim) {
            problems.push(format!(
                "dim = {} must be between 1 and {}",
                self.dim,
                crate::vector::hnsw::MAX_DIM
            ));
        }
        if let Some(embedder) = &self.embedder {
            let model_id = embedder.model_id();
            if model_id.is_empty() || model_id.len() > super::MAX_MODEL_ID_BYTES {
                problems.push(format!(
                    "the embedder's model id has {} bytes; it must have 1 to {}",
                    model_id.len(),
                    super::MAX_MODEL_ID_BYTES
                ));
            }
            if embedder.dim() != self.dim {
                problems.push(format!(
                    "dim = {} but the embedder's dimension is {}",
                    self.dim,
                    embedder.dim()
                ));
            }
        }
    }
}

/// What a search looks at and returns.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// Hits wanted. Default 10.
    pub k: usize,
    /// Only keys `>= lower_bound` (within the index's prefix).
    pub lower_bound: Option<Vec<u8>>,
    /// Only keys `< upper_bound`.
    pub upper_bound: Option<Vec<u8>>,
    /// HNSW candidate list size (`None`: the index's `ef_search`); larger is slower and
    /// finds more of the true nearest neighbours.
    pub ef: Option<usize>,
    /// Score every candidate with its full vector instead of walking the graph: exact, and
    /// slower on large indexes; equal scores come in key order. A narrow key range is
    /// scanned (every node in it scored) either way.
    pub exact: bool,
    /// How many of the graph's best candidates by code are scored again with their full
    /// vectors (at least `k`; `None`: `2k`).
    pub rerank: Option<usize>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions::k(10)
    }
}

impl SearchOptions {
    /// `k` hits, every other option at its default.
    pub fn k(k: usize) -> SearchOptions {
        SearchOptions {
            k,
            lower_bound: None,
            upper_bound: None,
            ef: None,
            exact: false,
            rerank: None,
        }
    }

    /// Only keys in `[lower, upper)`.
    pub fn range(mut self, lower: impl AsRef<[u8]>, upper: impl AsRef<[u8]>) -> SearchOptions {
        self.lower_bound = Some(lower.as_ref().to_vec());
        self.upper_bound = Some(upper.as_ref().to_vec());
        self
    }

    /// Only keys that start with `prefix` (within the index's own prefix).
    pub fn prefix(mut self, prefix: impl AsRef<[u8]>) -> SearchOptions {
        let prefix = prefix.as_ref();
        self.lower_bound = Some(prefix.to_vec());
        self.upper_bound = shale::prefix_successor(prefix);
        self
    }

    /// Exact (brute-force) search.
    pub fn exact(mut self) -> SearchOptions {
        self.exact = true;
        self
    }

    /// The candidate list size of the graph search.
    pub fn ef(mut self, ef: usize) -> SearchOptions {
        self.ef = Some(ef);
        self
    }
}

//! What an index reports about itself: how its open found it ([`VectorIndexRecovery`]) and its
//! counters and sizes ([`VectorIndexStats`]). Plain values, filled in by the core and the open.

/// How the open found the index, for stats and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VectorIndexRecovery {
    /// Nodes taken over from the graph checkpoint.
    pub graph_nodes_reused: usize,
    /// Vectors inserted into the graph again (no checkpoint, or newer than it).
    pub vectors_reinserted: usize,
    /// Texts queued for embedding (no stored vector matched their text).
    pub texts_to_embed: usize,
    /// Stored vectors deleted because their key has no indexed value any more.
    pub orphans_deleted: usize,
    /// True if a graph checkpoint existed but could not be read (it was rebuilt).
    pub graph_damaged: bool,
    /// The damage found in the vector store itself (`Corruption`, or a file its manifest
    /// lists missing, at its open or in its scan), if any: its files were deleted and every
    /// value is indexed again.
    pub store_damage: Option<String>,
    /// Stored vectors deleted because the store named another model than the embedder's
    /// (or none); their texts are among `texts_to_embed`.
    pub other_model_vectors: usize,
    /// Microseconds the open spent on the index (reconcile, graph load and inserts; not the
    /// embedding of queued texts, which runs afterwards).
    pub open_micros: u64,
}

/// Counters and sizes of an index ([`super::VectorIndex::stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VectorIndexStats {
    /// Values in the index now (changes still queued not counted).
    pub live: usize,
    /// Changes queued and not yet applied, and the bytes of their keys and values.
    pub queued: u64,
    pub queued_bytes: u64,
    /// Writes that waited for room in the queue
    /// ([`VectorIndexOptions::queue_bytes`](super::VectorIndexOptions::queue_bytes)), and the
    /// microseconds they waited in all (slowed down or stopped).
    pub stalls: u64,
    pub stall_micros: u64,
    /// Checkpoints written since open, and the microseconds the last one took.
    pub checkpoints: u64,
    pub last_checkpoint_micros: u64,
    /// Bytes of memory the graph holds (codes and links; `Hnsw::memory_bytes`).
    pub graph_bytes: u64,
    /// One more than the highest node id handed out (see `keyed_graph.rs`).
    pub id_space: u64,
    /// Keys the index keeps a state for: one per value, plus recent deletes.
    pub tracked_keys: u64,
}

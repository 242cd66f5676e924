//! The semantic index of a database: every text value embedded into a vector, kept
//! consistent with the key-value data through writes, deletes, overwrites and crashes.
//!
//! ```text
//!   Db::write ──(key, seq, text?)──► pending queue ──► embed workers (batches, off the
//!   write path)                      (tickets)          write path) ──► apply: vectors +
//!                                                                       graph + store
//!   Db::search ── wait until every ticket issued before it is applied ── search ──
//!             ── check each hit against the key-value data (text hash) ──► hits
//! ```
//!
//! The key-value data is the truth. The index is derived from it and may lag: writes are
//! acknowledged before their text is embedded, so bulk loads run at the engine's speed,
//! not the model's. A search first waits until everything acknowledged before it has been
//! applied (read-your-writes), then re-reads every hit's value and drops hits whose text
//! hash no longer matches (deleted or replaced meanwhile): a search never returns a key
//! that is deleted or whose text was replaced.
//!
//! Durability: vectors are written to their own key space, a second LSM tree in the
//! `vectors/` subdirectory (its own WAL, memtables and SSTables), keyed by the user key,
//! valued `text hash + vector`. After any crash, open reconciles the two trees in one
//! merged scan: a vector whose text hash matches the value is reused, a value without a
//! matching vector is embedded again, a vector without a value is deleted. So recovery
//! never trusts the index over the data, and the model runs only for what was lost. A
//! store's vectors are reused only by the model that made them: `vectors/MODEL` names it
//! (`model_file.rs`), and an open with another model embeds every value again.
//!
//! Locks: `pending` (queue, tickets and horizon) and `index` (vectors and key map). Both
//! are held only in the order `index`, then `pending` (a worker reads the horizon under
//! the index's write lock); no code takes `index` while it holds `pending`. The embedder
//! runs with neither held.
//!
//! Deleted keys: the key map remembers a deleted key's sequence number so that an older
//! change of the key, applied late (writers queue after their write returns, so not in
//! sequence order, and two workers apply batches out of order), cannot revive it. It
//! forgets the key once the **horizon** has passed the delete: every writer registers a
//! lower bound of its sequence numbers before it writes and holds it until its changes
//! are applied, so nothing older than the least bound held can still arrive.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

use super::checkpoint;
use super::distance::has_direction;
use super::distance::normalize;
use super::key_index::{Applied, Index};
use super::pending::{Change, Pending, Registration};
use super::value::{decode_vector, encode_vector, text_hash};
use super::{Embedder, HnswParams, Metric, NodeId};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::sync::lock;

mod open;

/// How a database with semantic search embeds and indexes its values.
#[derive(Clone)]
pub struct SemanticOptions {
    /// The model that turns text into unit vectors.
    pub embedder: Arc<dyn Embedder>,
    /// Threads that embed pending texts (each runs batches of `batch_size`). Default: 2.
    pub embed_threads: usize,
    /// Most texts one worker embeds per model call. Larger calls use the model better (a
    /// model like MiniLM sorts a call's texts by length and pads less): on two cores, a
    /// bulk load of 1,500 WordNet glosses ran at 0.91 to 0.97 of the model's own speed
    /// (one call over all the texts) with 1024, 0.81 to 0.83 with 256, and half the speed
    /// with 32. A worker never waits to fill a call, so a lone write is embedded at once;
    /// the price of a large call is only that a bulk load's index catches up in larger
    /// steps. Default: 1024.
    pub batch_size: usize,
    /// The HNSW graph's parameters (`m`, `m_max`, `m_max0`, `ef_construction`,
    /// `ef_search`, `ml`). Default: [`HnswParams::with_m`]`(16)`.
    pub hnsw: HnswParams,
}

impl SemanticOptions {
    /// Defaults around `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        SemanticOptions {
            embedder,
            embed_threads: 2,
            batch_size: 1024,
            hnsw: HnswParams::with_m(16),
        }
    }

    pub(crate) fn validate(&self, problems: &mut Vec<String>) {
        if !(1..=64).contains(&self.embed_threads) {
            problems.push(format!(
                "semantic.embed_threads = {} must be between 1 and 64",
                self.embed_threads
            ));
        }
        if !(1..=4096).contains(&self.batch_size) {
            problems.push(format!(
                "semantic.batch_size = {} must be between 1 and 4096",
                self.batch_size
            ));
        }
        if let Err(Error::InvalidOptions(p)) = self.hnsw.validate() {
            problems.extend(p);
        }
        let model_id = self.embedder.model_id();
        if model_id.is_empty() || model_id.len() > super::MAX_MODEL_ID_BYTES {
            problems.push(format!(
                "the embedder's model id has {} bytes; it must have 1 to {}",
                model_id.len(),
                super::MAX_MODEL_ID_BYTES
            ));
        }
        if !(1..=65_536).contains(&self.embedder.dim()) {
            problems.push(format!(
                "the embedder's dimension {} must be between 1 and 65536",
                self.embedder.dim()
            ));
        }
    }
}

impl std::fmt::Debug for SemanticOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemanticOptions")
            .field("embedder", &self.embedder)
            .field("embed_threads", &self.embed_threads)
            .field("batch_size", &self.batch_size)
            .field("hnsw", &self.hnsw)
            .finish()
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub key: Vec<u8>,
    pub text: String,
    /// Cosine similarity to the query, in `[-1, 1]`.
    pub score: f32,
}

/// What a search looks at.
#[derive(Debug, Clone, Default)]
pub struct SearchOptions {
    /// Only keys `>= lower_bound`.
    pub lower_bound: Option<Vec<u8>>,
    /// Only keys `< upper_bound`.
    pub upper_bound: Option<Vec<u8>>,
    /// HNSW candidate list size (`None`: the graph's `ef_search`); larger is slower and
    /// finds more of the true nearest neighbours.
    pub ef: Option<usize>,
}

impl SearchOptions {
    pub(super) fn admits(&self, key: &[u8]) -> bool {
        self.lower_bound.as_deref().is_none_or(|lo| key >= lo)
            && self.upper_bound.as_deref().is_none_or(|hi| key < hi)
    }
}

/// A filter narrower than this fraction of the live nodes (or than `EXACT_BELOW` nodes)
/// is searched exactly: walking the graph would visit most of it anyway.
const EXACT_FRACTION: f64 = 0.05;
const EXACT_BELOW: usize = 2_000;

/// Which search to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Exact,
    /// HNSW with this candidate list size (`None`: the graph's `ef_search`).
    Hnsw(Option<usize>),
}

/// How the last open found the index, for stats and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexRecovery {
    /// Nodes taken over from the graph checkpoint.
    pub graph_nodes_reused: usize,
    /// Stored vectors inserted into the graph again (no checkpoint, or newer than it).
    pub vectors_reinserted: usize,
    /// Values queued for embedding (no stored vector matched their text).
    pub texts_to_embed: usize,
    /// Stored vectors deleted because their key has no value any more.
    pub orphans_deleted: usize,
    /// True if a graph checkpoint existed but could not be read (it was rebuilt).
    pub graph_damaged: bool,
    /// The damage found in the vector store itself (`Corruption`, or a file its manifest
    /// lists missing, at its open or in its scan), if any: its files were deleted and every
    /// value is embedded again.
    pub store_damage: Option<String>,
    /// Stored vectors deleted because the store named another model than the embedder's
    /// (or named none: a store written before the model file existed, or a damaged file);
    /// their values are among `texts_to_embed`.
    pub other_model_vectors: usize,
}

/// The semantic index of one database.
pub(crate) struct Semantic {
    opts: SemanticOptions,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    pending: Mutex<Pending>,
    /// Signalled when changes are queued, applied, or shutdown starts.
    cv: Condvar,
    index: RwLock<Index>,
    /// The vectors' own key space.
    store: crate::Db,
    workers: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
    recovery: IndexRecovery,
}

fn read(index: &RwLock<Index>) -> RwLockReadGuard<'_, Index> {
    index.read().unwrap_or_else(|e| e.into_inner())
}

fn write(index: &RwLock<Index>) -> RwLockWriteGuard<'_, Index> {
    index.write().unwrap_or_else(|e| e.into_inner())
}

impl Semantic {
    /// Claim, before a write, that its changes will have sequence numbers of at least
    /// `lower` (see [`Registration`]).
    pub fn register(&self, lower: u64) -> Registration<'_> {
        Registration::new(&self.pending, lower)
    }

    /// Queue the changes of the write `registration` was taken for, for the embed workers
    /// (in the order given).
    pub fn enqueue(&self, changes: Vec<Change>, registration: Registration<'_>) {
        registration.queue(changes);
        self.cv.notify_all();
    }

    /// Wait until every change queued before this call is applied.
    fn catch_up(&self) -> Result<()> {
        let mut p = lock(&self.pending);
        let target = p.next_ticket.saturating_sub(1);
        while p.applied_through < target && p.failure.is_none() && !p.shutting_down {
            p = self.cv.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        if let Some(why) = &p.failure {
            return Err(Error::Embedding(why.clone()));
        }
        if p.applied_through < target {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// One embed worker: take a batch of changes, embed its texts, apply it.
    fn work(&self) {
        loop {
            let (first, changes) = {
                let mut p = lock(&self.pending);
                while p.queue.is_empty() && !p.shutting_down {
                    p = self.cv.wait(p).unwrap_or_else(|e| e.into_inner());
                }
                if p.shutting_down {
                    return;
                }
                let n = p.queue.len().min(self.opts.batch_size);
                let taken: Vec<(u64, Change)> = p.queue.drain(..n).collect();
                let first = taken.first().map_or(0, |(t, _)| *t);
                let last = taken.last().map_or(0, |(t, _)| *t);
                p.in_flight.insert(first, last);
                (first, taken.into_iter().map(|(_, c)| c).collect::<Vec<_>>())
            };
            // A panicking embedder must not take the worker down with its batch in flight:
            // searches would wait for that batch forever. It becomes the index's failure.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.embed_and_apply(&changes)
            }))
            .unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(Error::Embedding(format!("an embed worker panicked: {why}")))
            });
            let mut p = lock(&self.pending);
            p.in_flight.remove(&first);
            if let Err(e) = result {
                p.failure.get_or_insert_with(|| e.to_string());
            }
            p.recompute_applied();
            drop(p);
            self.cv.notify_all();
        }
    }

    /// Embed the texts of `changes` (no lock held), record them in the index and the
    /// store (index write lock: a few map updates), insert the vectors into the graph
    /// (index read lock: other workers insert at the same time), then, under the write
    /// lock again, mark them inserted, forget the deletes below the horizon and rebuild
    /// the graph if tombstones fill too much of it.
    fn embed_and_apply(&self, changes: &[Change]) -> Result<()> {
        let texts: Vec<&str> = changes.iter().filter_map(|c| c.text.as_deref()).collect();
        let vectors = if texts.is_empty() {
            Vec::new()
        } else {
            self.opts.embedder.embed(&texts)?
        };
        let dim = self.opts.embedder.dim();
        if vectors.len() != texts.len() || vectors.iter().any(|v| v.len() != dim) {
            return Err(Error::Embedding(format!(
                "the embedder returned {} vectors for {} texts (dimension {dim} expected)",
                vectors.len(),
                texts.len()
            )));
        }
        // Checked before anything is stored: a stored vector the graph refuses would stop
        // every later open's reconcile.
        if let Some(i) = vectors.iter().position(|v| !has_direction(v)) {
            return Err(Error::Embedding(format!(
                "the embedder returned a vector with no direction (all zeros, or a NaN or \
                 infinite component) for the text {:?}",
                texts.get(i).copied().unwrap_or_default()
            )));
        }
        let mut vectors = vectors.into_iter();
        let mut inserts: Vec<(u32, Vec<f32>)> = Vec::new();
        let mut batch = crate::WriteBatch::new();
        {
            let mut index = write(&self.index);
            for change in changes {
                match &change.text {
                    Some(text) => {
                        let Some(vector) = vectors.next() else { break };
                        let hash = text_hash(text.as_bytes());
                        if let Applied::Put(id) =
                            index.apply(&change.key, change.seq, Some(hash))?
                        {
                            batch.put(&change.key, encode_vector(hash, id, &vector));
                            inserts.push((id, vector));
                        }
                    }
                    None => {
                        if index.apply(&change.key, change.seq, None)? == Applied::Deleted {
                            batch.delete(&change.key);
                        }
                    }
                }
            }
            // Under the write lock, so the store sees a key's changes in the order the
            // index applied them.
            self.store.write(batch, crate::WriteOptions::default())?;
        }
        self.insert_vectors(&inserts)?;
        let mut index = write(&self.index);
        index.inserted(inserts.iter().map(|(id, _)| *id));
        // Read under the index's write lock, so that no change is applied meanwhile (the
        // order index, then pending is the only one in which both are held).
        let horizon = lock(&self.pending).horizon();
        index.forget_deleted_before(horizon);
        index.reclaim(self.opts.embed_threads.max(1))?;
        Ok(())
    }

    /// Insert vectors under ids `apply` handed out. A node that a newer change killed
    /// before its insert is tombstoned right after it.
    fn insert_vectors(&self, inserts: &[(u32, Vec<f32>)]) -> Result<()> {
        let index = read(&self.index);
        for (id, vector) in inserts {
            index.graph.insert(NodeId(*id), vector)?;
            if !index.is_live(*id) {
                let _ = index.graph.mark_deleted(NodeId(*id));
            }
        }
        Ok(())
    }

    /// The `k` nearest live vectors to `query` among the keys `opts` admits:
    /// `(key, text hash, score)`, best first.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        opts: &SearchOptions,
        method: Method,
    ) -> Result<Vec<(Vec<u8>, u64, f32)>> {
        self.catch_up()?;
        let index = read(&self.index);
        if query.len() != index.graph.dim() {
            return Err(Error::invalid(format!(
                "query vector has {} dimensions, the index {}",
                query.len(),
                index.graph.dim()
            )));
        }
        let filter = |id: NodeId| index.admits(id, opts);
        let bounded = opts.lower_bound.is_some() || opts.upper_bound.is_some();
        let method = match method {
            Method::Hnsw(ef) if bounded => {
                // A narrow range is cheaper (and exact) to scan than to walk the graph for.
                // Counting stops at the threshold, so a wide range costs little here.
                let threshold = EXACT_BELOW.max((EXACT_FRACTION * index.live as f64) as usize);
                let admitted = index
                    .nodes
                    .iter()
                    .filter(|n| n.is_live() && opts.admits(&n.key))
                    .take(threshold)
                    .count();
                let narrow = admitted < threshold;
                if narrow {
                    Method::Exact
                } else {
                    Method::Hnsw(ef)
                }
            }
            m => m,
        };
        let (dim, metric) = (index.graph.dim(), index.graph.metric());
        let query = metric.prepare(query, dim, "query vector")?;
        let found = match method {
            Method::Exact => {
                drop(index);
                self.exact_search(&query, k, opts, dim, metric)?
            }
            Method::Hnsw(ef) => {
                let found = index.graph.search(&query, k, ef, Some(&filter))?;
                let candidates: Vec<(Vec<u8>, u64)> = found
                    .into_iter()
                    .filter_map(|n| {
                        let node = index.nodes.get(n.id.0 as usize)?;
                        Some((node.key.clone(), node.text_hash))
                    })
                    .collect();
                drop(index);
                self.rescore(&query, candidates, dim, metric)?
            }
        };
        Ok(found)
    }

    /// The full vector the store holds for `key`, as the metric compares it.
    fn stored_vector(
        &self,
        key: &[u8],
        dim: usize,
        metric: Metric,
    ) -> Result<Option<(u64, Vec<f32>)>> {
        let Some(value) = self.store.get(key)? else {
            return Ok(None);
        };
        Ok(decode_vector(&value, dim).and_then(|(hash, _, mut v)| {
            (!metric.normalizes() || normalize(&mut v)).then_some((hash, v))
        }))
    }

    /// Score `candidates` with their full vectors from the store, best first.
    fn rescore(
        &self,
        query: &[f32],
        candidates: Vec<(Vec<u8>, u64)>,
        dim: usize,
        metric: Metric,
    ) -> Result<Vec<(Vec<u8>, u64, f32)>> {
        let mut out = Vec::new();
        for (key, hash) in candidates {
            if let Some((stored_hash, v)) = self.stored_vector(&key, dim, metric)? {
                if stored_hash == hash {
                    let score = metric.score(query, &v);
                    out.push((key, hash, score));
                }
            }
        }
        out.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }

    /// Exact search: every stored vector whose key `opts` admits, scored in full precision.
    fn exact_search(
        &self,
        query: &[f32],
        k: usize,
        opts: &SearchOptions,
        dim: usize,
        metric: Metric,
    ) -> Result<Vec<(Vec<u8>, u64, f32)>> {
        let lower = opts.lower_bound.clone().unwrap_or_default();
        let range = match &opts.upper_bound {
            Some(upper) => self.store.range(lower.as_slice()..upper.as_slice())?,
            None => self.store.range(lower.as_slice()..)?,
        };
        let mut scored: Vec<(Vec<u8>, u64, f32)> = Vec::new();
        let mut worst = f32::NEG_INFINITY;
        for pair in range {
            let (key, value) = pair?;
            let Some((hash, _, mut v)) = decode_vector(&value, dim) else {
                continue;
            };
            if metric.normalizes() && !normalize(&mut v) {
                continue;
            }
            let score = metric.score(query, &v);
            if scored.len() >= k && score < worst {
                continue;
            }
            scored.push((key, hash, score));
            if scored.len() >= 2 * k.max(16) {
                scored.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
                scored.truncate(k);
                worst = scored.last().map_or(f32::NEG_INFINITY, |c| c.2);
            }
        }
        scored.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    /// Embed one query text.
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        self.opts
            .embedder
            .embed(&[text])?
            .pop()
            .ok_or_else(|| Error::Embedding("the embedder returned no vector".into()))
    }

    /// Live vectors in the index (after everything queued so far is applied).
    pub fn len(&self) -> Result<usize> {
        self.catch_up()?;
        Ok(read(&self.index).live)
    }

    /// See [`Index::id_space`] (does not wait).
    pub fn id_space(&self) -> usize {
        read(&self.index).id_space()
    }

    /// Keys the index keeps a state for (does not wait): one per indexed value, plus the
    /// deleted keys whose deletes are too recent to forget.
    pub fn tracked_keys(&self) -> usize {
        read(&self.index).keys.len()
    }

    /// `(applied, queued)`: changes applied so far and changes queued so far, counted
    /// since open (for progress reports; does not wait).
    pub fn progress(&self) -> (u64, u64) {
        let p = lock(&self.pending);
        (p.applied_through, p.next_ticket.saturating_sub(1))
    }

    /// How the last open found the index.
    pub fn recovery(&self) -> IndexRecovery {
        self.recovery.clone()
    }

    /// Write the graph to its checkpoint file: a temporary file, synced, renamed over the
    /// old one, and the directory synced, so a crash leaves one whole checkpoint or the
    /// previous one. Inserts wait meanwhile; searches go on.
    pub fn checkpoint(&self) -> Result<()> {
        let index = read(&self.index);
        checkpoint::write(self.fs.as_ref(), &self.dir, &index.graph)
    }

    /// Stop the workers once their current batches are applied, checkpoint the graph and
    /// close the vector store. Changes still queued are not lost: they are in the
    /// key-value data, and the next open embeds every value that has no matching vector.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        lock(&self.pending).shutting_down = true;
        self.cv.notify_all();
        for handle in std::mem::take(&mut *lock(&self.workers)) {
            let _ = handle.join();
        }
        let checkpoint = self.checkpoint();
        checkpoint.and(self.store.close())
    }

    /// Wait until everything queued so far is embedded and applied (a bulk load can call
    /// this before closing, so that the next open has nothing to embed).
    pub fn wait_indexed(&self) -> Result<()> {
        self.catch_up()
    }
}

//! An index's moving parts: the write hook that queues changes (`hook.rs`), the workers
//! that embed and apply them, and the search over the graph and the full vectors.
//!
//! ```text
//!   IndexHook (attached to the Db) ──► Queue (pending changes, condvar) ◄── IndexCore
//!     admit: wait for room                                       workers: take, embed,
//!     check: refuse what cannot be indexed                       apply; checkpoints
//!     committed: queue, in commit order                          searches: catch up, search
//! ```
//!
//! The hook is attached before the core exists (`open.rs`): the core reconciles the data as
//! of the attach, while the hook already queues every later write.
//!
//! Locks: `queue.pending` and `index` (the key map and the graph). Both are held only in
//! the order `index`, then `pending` (a worker reads the horizon under the index's write
//! lock); no code takes `index` while it holds `pending`. The embedder runs with neither
//! held. The hook's `check` and `committed` run under the database's log lock and take
//! only `pending`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::checkpoint;
use super::keyed_graph::{Applied, KeyRange, KeyedGraph};
use super::model_file::MODEL_FILE;
use super::pending::{Change, Payload, Queue};
use super::spec::Spec;
use super::stats::{VectorIndexRecovery, VectorIndexStats};
use super::value::encode_stored;
use super::{SearchOptions, VectorIndexOptions};
use crate::sync::lock;
use crate::vector::{exact, Filter, Metric, Neighbor, NodeId, VectorFile, VectorSource};
use shale::error::{Error, Result};
use shale::fs::FileSystem;
use shale::Db;
use shale::WriteBatch;

/// The cost of one unit of `ef` in a graph walk, in nodes a scan scores for the same time
/// (measured on 50-d and 384-d codes alike: a walk scores each node it visits as a scan
/// does, and visits about this many per unit of ef with their links).
///
/// A key range holding a share `s` of the `n` live nodes is **scanned**, every node in it
/// scored, when that is cheaper than walking the graph with a pool widened `1 / s` times:
/// when `s * n < WALK_COST_PER_EF * ef / s`. At 100,000 nodes and ef 80 the crossover is
/// near 28%; at a million, near 9% (see BENCHMARKS.md, filtered search).
const WALK_COST_PER_EF: f64 = 100.0;

/// When the graph was last checkpointed and what happened since.
#[derive(Debug)]
struct Checkpoints {
    last: Instant,
    inserts_since: usize,
    count: u64,
    last_micros: u64,
    /// A worker is writing one: the others do not start another.
    running: bool,
}

/// The index itself: key map, graph, full vectors, store and workers.
pub(crate) struct IndexCore {
    pub(super) spec: Spec,
    pub(super) opts: VectorIndexOptions,
    pub(super) fs: Arc<dyn FileSystem>,
    /// `indexes/<name>/`: the vector store's directory, with `GRAPH`, `MODEL` and
    /// `VECTORS` beside its files.
    pub(super) dir: PathBuf,
    pub(super) queue: Arc<Queue>,
    pub(super) index: RwLock<KeyedGraph>,
    pub(super) vectors: VectorFile,
    /// The vectors' own key space: key -> value hash, node, embedding.
    pub(super) store: Db,
    pub(super) workers: Mutex<Vec<JoinHandle<()>>>,
    pub(super) closed: AtomicBool,
    pub(super) recovery: VectorIndexRecovery,
    checkpoints: Mutex<Checkpoints>,
    /// Held while a checkpoint is written: one at a time (they share `GRAPH.tmp`).
    writing: Mutex<()>,
}

pub(super) fn read(index: &RwLock<KeyedGraph>) -> RwLockReadGuard<'_, KeyedGraph> {
    index.read().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn write(index: &RwLock<KeyedGraph>) -> RwLockWriteGuard<'_, KeyedGraph> {
    index.write().unwrap_or_else(|e| e.into_inner())
}

/// One candidate of a search: a key, the hash of the value its vector came from, and its
/// score.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub key: Vec<u8>,
    pub hash: u64,
    pub score: f32,
}

impl IndexCore {
    /// A core around parts the open made; no workers yet.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one struct, made by open.rs"
    )]
    pub(super) fn new(
        spec: Spec,
        opts: VectorIndexOptions,
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        queue: Arc<Queue>,
        index: KeyedGraph,
        vectors: VectorFile,
        store: Db,
    ) -> IndexCore {
        IndexCore {
            spec,
            opts,
            fs,
            dir,
            queue,
            index: RwLock::new(index),
            vectors,
            store,
            workers: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            recovery: VectorIndexRecovery::default(),
            checkpoints: Mutex::new(Checkpoints {
                last: Instant::now(),
                inserts_since: 0,
                count: 0,
                last_micros: 0,
                running: false,
            }),
            writing: Mutex::new(()),
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }

    pub(super) fn prefix(&self) -> &[u8] {
        &self.spec.prefix
    }

    /// The name of the keyspace the index covers; `None`: the default keyspace.
    pub(super) fn keyspace_name(&self) -> Option<&str> {
        self.opts.keyspace.as_deref()
    }

    pub(super) fn dim(&self) -> usize {
        self.spec.dim
    }

    pub(super) fn metric(&self) -> Metric {
        self.spec.metric
    }

    /// `Ok` if `opts` describe this index (a second `VectorIndex::open` of it).
    pub(super) fn same_options(&self, opts: &VectorIndexOptions) -> Result<()> {
        let model = |o: &VectorIndexOptions| o.embedder.as_ref().map(|e| e.model_id());
        let shape = |o: &VectorIndexOptions| crate::vector::HnswParams {
            ef_search: 0,
            ..o.hnsw
        };
        if opts.prefix == self.opts.prefix
            && opts.keyspace == self.opts.keyspace
            && opts.dim == self.opts.dim
            && model(opts) == model(&self.opts)
            && shape(opts) == shape(&self.opts)
        {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "index {:?} is open with other options: {:?}",
                self.spec.name, self.opts
            )))
        }
    }

    /// `InvalidArgument` unless `key` is under the index's prefix.
    pub(super) fn check_key(&self, key: &[u8]) -> Result<()> {
        if self.spec.covers(key) {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "key {:?} is outside index {:?} (prefix {:?})",
                String::from_utf8_lossy(key),
                self.spec.name,
                String::from_utf8_lossy(&self.spec.prefix)
            )))
        }
    }

    pub(super) fn check_vector(&self, v: &[f32]) -> Result<()> {
        self.spec.check_vector(v)
    }

    /// Start the embed workers.
    pub(super) fn start(self: &Arc<Self>) -> Result<()> {
        let mut workers = Vec::new();
        for i in 0..self.opts.embed_threads {
            let core = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name(format!("shale-index-{i}"))
                .spawn(move || core.work());
            match spawned {
                Ok(handle) => workers.push(handle),
                Err(e) => {
                    *lock(&self.workers) = workers;
                    let _ = self.close();
                    return Err(Error::io("spawn index thread", &self.dir, e));
                }
            }
        }
        *lock(&self.workers) = workers;
        Ok(())
    }

    /// Wait until every change queued before this call is applied.
    pub(super) fn catch_up(&self) -> Result<()> {
        let mut p = self.queue.lock();
        let target = p.last_ticket();
        while p.applied_through < target && p.failure.is_none() && !p.shutting_down {
            p = self.queue.cv.wait(p).unwrap_or_else(|e| e.into_inner());
        }
        if let Some(why) = &p.failure {
            return Err(Error::Index(why.clone()));
        }
        if p.applied_through < target {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// One worker: take a batch of changes, embed its texts, apply it; checkpoint when due.
    fn work(&self) {
        loop {
            let taken = {
                let mut p = self.queue.lock();
                loop {
                    if p.shutting_down {
                        return;
                    }
                    if let Some(batch) = p.take(self.opts.batch_size) {
                        break Some(batch);
                    }
                    let due = self.checkpoint_wait();
                    let (guard, timeout) = self
                        .queue
                        .cv
                        .wait_timeout(p, due)
                        .unwrap_or_else(|e| e.into_inner());
                    p = guard;
                    if timeout.timed_out() && p.queue.is_empty() {
                        break None;
                    }
                }
            };
            let Some((first, changes)) = taken else {
                // Idle: the interval may have passed with inserts since the last checkpoint.
                self.checkpoint_if_due();
                continue;
            };
            let bytes: usize = changes.iter().map(Change::bytes).sum();
            let started = Instant::now();
            // A panicking embedder must not take the worker down with its batch in flight:
            // searches would wait for that batch forever. It becomes the index's failure.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.embed_and_apply(changes)
            }))
            .unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(Error::Index(format!("an index worker panicked: {why}")))
            });
            let secs = started.elapsed().as_secs_f64().max(1e-6);
            let mut p = self.queue.lock();
            p.finish(first);
            p.drain_bytes_per_sec = 0.8 * p.drain_bytes_per_sec + 0.2 * (bytes as f64 / secs);
            if let Err(e) = result {
                p.failure.get_or_insert_with(|| e.to_string());
            }
            drop(p);
            self.queue.cv.notify_all();
            self.checkpoint_if_due();
        }
    }

    /// Embed the texts of `changes` (no lock held), record them in the key map and the
    /// store (index write lock: a few map updates), write their full vectors and insert
    /// their codes (index read lock: other workers insert at the same time), then, under
    /// the write lock again, mark them inserted, forget the deletes below the horizon and
    /// rebuild the graph if tombstones fill too much of it.
    fn embed_and_apply(&self, changes: Vec<Change>) -> Result<()> {
        let embedded = self.embed_texts(&changes)?;
        let inserts = self.apply_changes(changes, embedded)?;
        self.insert_vectors(&inserts)?;
        let mut index = write(&self.index);
        index.inserted(inserts.iter().map(|(id, _)| *id));
        // Read under the index's write lock, so that no change is applied meanwhile (the
        // order index, then pending is the only one in which both are held).
        let horizon = self.queue.lock().horizon();
        index.forget_deleted_before(horizon);
        index.reclaim(self.opts.embed_threads.max(1))?;
        drop(index);
        lock(&self.checkpoints).inserts_since += inserts.len();
        Ok(())
    }

    /// The embeddings of the texts among `changes`, in their order, each checked before
    /// anything is stored: a stored vector the graph refuses would stop every later
    /// open's reconcile.
    fn embed_texts(&self, changes: &[Change]) -> Result<Vec<Vec<f32>>> {
        let texts: Vec<&str> = changes
            .iter()
            .filter_map(|c| match &c.payload {
                Payload::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        let embedded = if texts.is_empty() {
            Vec::new()
        } else {
            let embedder =
                self.opts.embedder.as_ref().ok_or_else(|| {
                    Error::Index("a text reached an index without embedder".into())
                })?;
            embedder.embed(&texts)?
        };
        if embedded.len() != texts.len() {
            return Err(Error::Index(format!(
                "the embedder returned {} vectors for {} texts",
                embedded.len(),
                texts.len()
            )));
        }
        for (v, text) in embedded.iter().zip(&texts) {
            if let Err(e) = self.spec.check_vector(v) {
                return Err(Error::Index(format!(
                    "the embedder's vector for the text {text:?} cannot be indexed: {e}"
                )));
            }
        }
        Ok(embedded)
    }

    /// Apply `changes` to the key map and the vector store under the index's write lock,
    /// a text's change with its vector from `embedded` (in order). Returns the nodes to
    /// insert into the graph, with their vectors.
    fn apply_changes(
        &self,
        changes: Vec<Change>,
        mut embedded: Vec<Vec<f32>>,
    ) -> Result<Vec<(u32, Vec<f32>)>> {
        embedded.reverse();
        let mut inserts: Vec<(u32, Vec<f32>)> = Vec::new();
        let mut batch = WriteBatch::new();
        let mut index = write(&self.index);
        for change in changes {
            let vector = match change.payload {
                Payload::Text(_) => embedded.pop().map(|v| (v, true)),
                Payload::Vector(v) => Some((v, false)),
                Payload::Delete => None,
                Payload::DeleteRange { end } => {
                    for key in index.apply_range_delete(&change.key, &end, change.seq)? {
                        batch.delete(&key);
                    }
                    continue;
                }
            };
            match vector {
                Some((vector, from_text)) => {
                    if let Applied::Put(id) =
                        index.apply(&change.key, change.seq, Some(change.hash))?
                    {
                        // A text's embedding is stored; a vector value's vector is the
                        // value itself.
                        let stored: &[f32] = if from_text { &vector } else { &[] };
                        batch.put(&change.key, encode_stored(change.hash, id, stored));
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
        // Under the write lock, so the store sees a key's changes in the order the index
        // applied them.
        self.store.write(batch, shale::WriteOptions::default())?;
        drop(index);
        Ok(inserts)
    }

    /// Write the full vectors of `inserts` and insert their codes under the ids `apply`
    /// handed out. A node that a newer change killed before its insert is tombstoned right
    /// after it.
    pub(super) fn insert_vectors(&self, inserts: &[(u32, Vec<f32>)]) -> Result<()> {
        let index = read(&self.index);
        for (id, vector) in inserts {
            let prepared = self.spec.metric.prepare(vector, self.spec.dim, "vector")?;
            // Before the insert publishes the node: a search that finds it finds its vector.
            self.vectors.write(NodeId(*id), &prepared)?;
            // The vector as given: the graph prepares it itself, once, as the open's check
            // of a checkpointed node's code does (preparing twice can move a code's byte).
            index.graph.insert(NodeId(*id), vector)?;
            if !index.is_live(*id) {
                let _ = index.graph.mark_deleted(NodeId(*id));
            }
        }
        Ok(())
    }

    /// The `fetch` live nodes nearest `query` among those `opts` admit, by brute force,
    /// best first; equal scores in key order (not node order), so that the answer does not
    /// depend on the order the keys were written in, and best-first lists of indexes that
    /// split the keys between them merge (by score, then key) into this one.
    fn exact_neighbors(
        &self,
        index: &KeyedGraph,
        query: &[f32],
        fetch: usize,
        opts: &SearchOptions,
    ) -> Vec<Neighbor> {
        let nodes: Vec<u32> = index.live_in(opts).map(|(_, node)| node).collect();
        // Ranked by the node's place in key order, which stands in for its id.
        let scored = nodes.iter().enumerate().filter_map(|(at, &node)| {
            Some(Neighbor {
                id: NodeId(u32::try_from(at).ok()?),
                score: self
                    .spec
                    .metric
                    .score(query, self.vectors.vector(NodeId(node))?),
            })
        });
        exact::top_k(scored, fetch)
            .into_iter()
            .filter_map(|n| {
                Some(Neighbor {
                    id: NodeId(*nodes.get(n.id.0 as usize)?),
                    score: n.score,
                })
            })
            .collect()
    }

    /// The best `fetch` candidates for `query` among the keys `opts` admits, best first:
    /// through the graph and re-scored, or exactly over the full vectors.
    pub(super) fn candidates(
        &self,
        query: &[f32],
        fetch: usize,
        opts: &SearchOptions,
    ) -> Result<Vec<Candidate>> {
        let query = self
            .spec
            .metric
            .prepare(query, self.spec.dim, "query vector")?;
        let Some(range) = KeyRange::new(&self.spec.prefix, opts) else {
            return Ok(Vec::new());
        };
        let index = read(&self.index);
        let bounded = leaves_out_keys(&index, &range);
        let rerank = opts.rerank.unwrap_or(2 * fetch).max(fetch);
        // A narrow range is cheaper to scan than to walk the graph for (`WALK_COST_PER_EF`).
        // Its share is estimated from a sample; one that looks empty is scanned.
        let share = if bounded {
            index.range_share(&range)
        } else {
            1.0
        };
        let ef = opts.ef.unwrap_or(index.graph.params().ef_search).max(fetch) as f64;
        let scan = bounded && share * share * (index.live as f64) < WALK_COST_PER_EF * ef;
        let found: Vec<Neighbor> = if opts.exact {
            self.exact_neighbors(&index, &query, fetch, opts)
        } else if scan {
            let ids = index.live_in(opts).map(|(_, node)| NodeId(node));
            index.graph.scan(
                &query,
                ids,
                fetch,
                &self.vectors as &dyn VectorSource,
                rerank,
            )?
        } else {
            let filter = |id: NodeId| index.admits(id, &range);
            index.graph.search_rescored(
                &query,
                fetch,
                opts.ef,
                bounded.then_some(Filter {
                    accept: &filter,
                    share: Some(share),
                }),
                &self.vectors as &dyn VectorSource,
                rerank,
            )?
        };
        Ok(found
            .into_iter()
            .filter_map(|n| {
                let node = index.nodes.get(n.id.0 as usize)?;
                node.is_live().then(|| Candidate {
                    key: node.key.clone(),
                    hash: node.value_hash,
                    score: n.score,
                })
            })
            .collect())
    }

    /// Embed one query text.
    pub(super) fn embed_query(&self, text: &str) -> Result<Vec<f32>> {
        let embedder = self.opts.embedder.as_ref().ok_or_else(|| {
            Error::invalid(format!(
                "index {:?} has no embedder: search it by vector",
                self.spec.name
            ))
        })?;
        embedder
            .embed(&[text])?
            .pop()
            .ok_or_else(|| Error::Index("the embedder returned no vector".into()))
    }

    /// Live values in the index now.
    pub(super) fn live(&self) -> usize {
        read(&self.index).live
    }

    /// `(applied, queued)` tickets since open.
    pub(super) fn progress(&self) -> (u64, u64) {
        let p = self.queue.lock();
        (p.applied_through, p.last_ticket())
    }

    pub(super) fn recovery(&self) -> VectorIndexRecovery {
        self.recovery.clone()
    }

    pub(super) fn stats(&self) -> VectorIndexStats {
        let (live, graph_bytes, id_space, tracked_keys) = {
            let index = read(&self.index);
            (
                index.live,
                index.graph.memory_bytes() as u64,
                index.id_space() as u64,
                index.keys.len() as u64,
            )
        };
        let p = self.queue.lock();
        let c = lock(&self.checkpoints);
        VectorIndexStats {
            live,
            queued: p.queue.len() as u64,
            queued_bytes: p.queued_bytes as u64,
            stalls: p.stalls,
            stall_micros: p.stall_micros,
            checkpoints: c.count,
            last_checkpoint_micros: c.last_micros,
            graph_bytes,
            id_space,
            tracked_keys,
        }
    }

    /// How long a waiting worker may sleep before a checkpoint could be due.
    fn checkpoint_wait(&self) -> Duration {
        let c = lock(&self.checkpoints);
        if c.inserts_since == 0 {
            return self.opts.checkpoint_interval;
        }
        self.opts
            .checkpoint_interval
            .saturating_sub(c.last.elapsed())
            .max(Duration::from_millis(1))
    }

    /// Write the checkpoint if enough was inserted since the last one, or long enough ago.
    /// One worker writes it; the others carry on.
    fn checkpoint_if_due(&self) {
        {
            let mut c = lock(&self.checkpoints);
            let due = c.inserts_since >= self.opts.checkpoint_inserts
                || (c.inserts_since > 0 && c.last.elapsed() >= self.opts.checkpoint_interval);
            if !due || c.running {
                return;
            }
            c.running = true;
        }
        // The checkpoint is derived data: a failed one costs the next open some inserts,
        // not correctness; the next one tries again.
        let _ = self.checkpoint();
        lock(&self.checkpoints).running = false;
    }

    /// Write the graph to its checkpoint file: a temporary file, synced, renamed over the
    /// old one, and the directory synced, so a crash leaves one whole checkpoint or the
    /// previous one. Inserts wait meanwhile; searches go on.
    pub(super) fn checkpoint(&self) -> Result<()> {
        let _writing = lock(&self.writing);
        let started = Instant::now();
        let inserts = {
            let index = read(&self.index);
            let inserts = lock(&self.checkpoints).inserts_since;
            checkpoint::write(self.fs.as_ref(), &self.dir, &index.graph)?;
            inserts
        };
        let mut c = lock(&self.checkpoints);
        c.inserts_since = c.inserts_since.saturating_sub(inserts);
        c.last = Instant::now();
        c.count += 1;
        c.last_micros = started.elapsed().as_micros() as u64;
        Ok(())
    }

    /// Copy the index into `dir` (which must not exist), for [`Db::checkpoint`]: the
    /// vector store (its own checkpoint), `MODEL`, and the graph as `GRAPH`, all as of one
    /// moment (inserts wait meanwhile; searches go on). `VECTORS` is left out: it is a
    /// cache that the copy's open writes again from the store.
    pub(super) fn copy_into(&self, dir: &Path) -> Result<()> {
        let index = read(&self.index);
        self.store.checkpoint(dir)?;
        let fs = self.fs.as_ref();
        shale::fs::copy_file(fs, &self.dir.join(MODEL_FILE), &dir.join(MODEL_FILE))?;
        checkpoint::write(fs, dir, &index.graph)
    }

    /// Stop the workers once their current batches are applied, checkpoint the graph and
    /// close the vector store. Changes still queued are not lost: they are in the
    /// key-value data, and the next open indexes every value that has no matching vector.
    pub(super) fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.queue.lock().shutting_down = true;
        self.queue.cv.notify_all();
        for handle in std::mem::take(&mut *lock(&self.workers)) {
            let _ = handle.join();
        }
        let checkpoint = self.checkpoint();
        checkpoint.and(self.store.close())
    }
}

/// Whether `range` leaves out some key of `index`: a range that holds every key bounds
/// nothing.
fn leaves_out_keys(index: &KeyedGraph, range: &KeyRange) -> bool {
    !range.is_everything()
        && !(index.keys.first_key_value())
            .zip(index.keys.last_key_value())
            .is_some_and(|((first, _), (last, _))| {
                range.admits(index.word(first), || first) && range.admits(index.word(last), || last)
            })
}

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
//! never trusts the index over the data, and the model runs only for what was lost.
//!
//! Locks: `pending` (queue and tickets) and `index` (vectors and key map) are never held
//! together, except that `index` may be taken while no `pending` guard is alive; the
//! embedder runs with neither held.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

use xxhash_rust::xxh3::xxh3_64;

use super::Embedder;
use crate::error::{Error, Result};
use crate::sync::lock;

/// How a database with semantic search embeds and indexes its values.
#[derive(Clone)]
pub struct SemanticOptions {
    /// The model that turns text into unit vectors.
    pub embedder: Arc<dyn Embedder>,
    /// Threads that embed pending texts (each runs batches of `batch_size`). Default: 2.
    pub embed_threads: usize,
    /// Texts embedded per model call: larger batches use the model better, smaller ones
    /// make fresh writes searchable sooner. Default: 32.
    pub batch_size: usize,
}

impl SemanticOptions {
    /// Defaults around `embedder`.
    pub fn new(embedder: Arc<dyn Embedder>) -> Self {
        SemanticOptions {
            embedder,
            embed_threads: 2,
            batch_size: 32,
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
}

impl SearchOptions {
    fn admits(&self, key: &[u8]) -> bool {
        self.lower_bound.as_deref().is_none_or(|lo| key >= lo)
            && self.upper_bound.as_deref().is_none_or(|hi| key < hi)
    }
}

/// A write the index has yet to apply.
#[derive(Debug)]
pub(crate) struct Change {
    pub key: Vec<u8>,
    pub seq: u64,
    /// The new text, or `None` for a delete.
    pub text: Option<String>,
}

/// The queue of changes, numbered by tickets in the order they were queued.
#[derive(Default)]
struct Pending {
    queue: VecDeque<(u64, Change)>,
    /// The ticket the next change gets; tickets start at 1.
    next_ticket: u64,
    /// Ticket ranges taken by workers and not yet applied: first -> last.
    in_flight: BTreeMap<u64, u64>,
    /// Every ticket up to this one is applied.
    applied_through: u64,
    shutting_down: bool,
    /// The first embedding failure; searches report it.
    failure: Option<String>,
}

impl Pending {
    fn recompute_applied(&mut self) {
        let oldest_waiting = self.queue.front().map(|(t, _)| *t);
        let oldest_running = self.in_flight.keys().next().copied();
        self.applied_through = match (oldest_waiting, oldest_running) {
            (None, None) => self.next_ticket.saturating_sub(1),
            (Some(a), None) | (None, Some(a)) => a - 1,
            (Some(a), Some(b)) => a.min(b) - 1,
        };
    }
}

/// What the index knows about a key.
#[derive(Debug, Clone, Copy)]
struct KeyState {
    /// Sequence number of the write this state reflects; older changes are ignored.
    seq: u64,
    /// The node holding its vector; `None` after a delete.
    node: Option<u32>,
}

/// The vectors and the key map.
#[derive(Default)]
struct Index {
    dim: usize,
    /// Node `i`'s vector is `vectors[i * dim..(i + 1) * dim]`.
    vectors: Vec<f32>,
    /// Per node: its key, the hash of its text, and whether it is live.
    nodes: Vec<Node>,
    live: usize,
    keys: HashMap<Vec<u8>, KeyState>,
}

#[derive(Debug)]
struct Node {
    key: Vec<u8>,
    text_hash: u64,
    live: bool,
}

impl Index {
    fn vector(&self, node: u32) -> &[f32] {
        let start = node as usize * self.dim;
        self.vectors.get(start..start + self.dim).unwrap_or(&[])
    }

    /// Record `key`'s new state if `seq` is newer than what the index holds; returns
    /// false (and changes nothing) for a stale change.
    fn apply(&mut self, key: &[u8], seq: u64, new: Option<(u64, &[f32])>) -> bool {
        if let Some(old) = self.keys.get(key) {
            if old.seq > seq {
                return false;
            }
            if let Some(node) = old.node.and_then(|n| self.nodes.get_mut(n as usize)) {
                node.live = false;
                self.live -= 1;
            }
        }
        let node = new.map(|(text_hash, vector)| {
            let id = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
            self.vectors.extend_from_slice(vector);
            self.nodes.push(Node {
                key: key.to_vec(),
                text_hash,
                live: true,
            });
            self.live += 1;
            id
        });
        self.keys.insert(key.to_vec(), KeyState { seq, node });
        true
    }

    /// The `k` live nodes most similar to `query` among those `opts` admits.
    fn exact(&self, query: &[f32], k: usize, opts: &SearchOptions) -> Vec<(u32, f32)> {
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
        for (id, node) in self.nodes.iter().enumerate() {
            if !node.live || !opts.admits(&node.key) {
                continue;
            }
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            let score = dot(query, self.vector(id));
            if best.len() == k && best.last().is_some_and(|&(_, s)| s >= score) {
                continue;
            }
            let at = best.partition_point(|&(_, s)| s >= score);
            best.insert(at, (id, score));
            best.truncate(k);
        }
        best
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Four independent sums let the compiler vectorise without reassociating floats.
    let mut acc = [0f32; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for ((a, xi), yi) in acc.iter_mut().zip(x).zip(y) {
            *a += xi * yi;
        }
    }
    let tail: f32 = ra.iter().zip(rb).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// The value the vector store keeps for a key: `text_hash:u64 dim:u32 f32[dim]`,
/// little-endian (docs/format.md, section 8).
pub fn encode_vector(text_hash: u64, vector: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + 4 * vector.len());
    out.extend_from_slice(&text_hash.to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(vector.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// `(text_hash, vector)` of a store value, or `None` if it is malformed or of another
/// dimension (then the text is simply embedded again).
pub fn decode_vector(bytes: &[u8], dim: usize) -> Option<(u64, Vec<f32>)> {
    let mut d = crate::codec::Decoder::new(bytes);
    let hash = d.u64("text hash").ok()?;
    let n = d.u32("dimension").ok()? as usize;
    if n != dim || d.remaining().len() != 4 * n {
        return None;
    }
    let vector = d
        .remaining()
        .chunks_exact(4)
        .map(|c| c.try_into().ok().map(f32::from_le_bytes))
        .collect::<Option<Vec<f32>>>()?;
    Some((hash, vector))
}

/// The hash that ties a stored vector to the text it was embedded from: xxh3-64.
pub fn text_hash(text: &[u8]) -> u64 {
    xxh3_64(text)
}

/// The semantic index of one database.
pub(crate) struct Semantic {
    opts: SemanticOptions,
    pending: Mutex<Pending>,
    /// Signalled when changes are queued, applied, or shutdown starts.
    cv: Condvar,
    index: RwLock<Index>,
    /// The vectors' own key space.
    store: crate::Db,
    workers: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
}

impl Semantic {
    /// Open the vector store in `dir/vectors` and reconcile it with `values`, the live
    /// `(key, value)` pairs of the database in key order; start the embed workers.
    pub fn open(
        dir: &Path,
        db_opts: &crate::Options,
        opts: SemanticOptions,
        values: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        seq: u64,
    ) -> Result<Arc<Semantic>> {
        let store_opts = crate::Options {
            semantic: None,
            write_buffer_size: db_opts.write_buffer_size.min(16 << 20),
            ..db_opts.clone()
        };
        let store = crate::Db::open(dir.join("vectors"), store_opts)?;
        let dim = opts.embedder.dim();
        let semantic = Arc::new(Semantic {
            opts,
            pending: Mutex::new(Pending {
                next_ticket: 1,
                ..Pending::default()
            }),
            cv: Condvar::new(),
            index: RwLock::new(Index {
                dim,
                ..Index::default()
            }),
            store,
            workers: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        });
        semantic.reconcile(values, seq)?;
        let mut workers = Vec::new();
        for i in 0..semantic.opts.embed_threads {
            let s = Arc::clone(&semantic);
            let handle = std::thread::Builder::new()
                .name(format!("shale-embed-{i}"))
                .spawn(move || s.work())
                .map_err(|e| Error::io("spawn embed thread", dir, e))?;
            workers.push(handle);
        }
        *lock(&semantic.workers) = workers;
        Ok(semantic)
    }

    /// Merge the database's values with the stored vectors: reuse matching vectors, queue
    /// the rest for embedding, delete vectors whose value is gone.
    fn reconcile(
        &self,
        values: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        seq: u64,
    ) -> Result<()> {
        let mut stored = self.store.range::<&[u8]>(..)?.peekable();
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        let dim = index.dim;
        let mut to_embed = Vec::new();
        let mut orphans = Vec::new();
        for pair in values {
            let (key, value) = pair?;
            // Stored vectors for keys before this one have no value: delete them.
            while let Some(Ok((skey, _))) = stored.peek() {
                if skey.as_slice() >= key.as_slice() {
                    break;
                }
                orphans.push(skey.clone());
                stored.next();
            }
            let Ok(text) = String::from_utf8(value) else {
                // Written before semantic search was on: not text, not indexed.
                continue;
            };
            let hash = text_hash(text.as_bytes());
            let reusable = match stored.peek() {
                Some(Ok((skey, svalue))) if *skey == key => {
                    let found = decode_vector(svalue, dim).filter(|(h, _)| *h == hash);
                    stored.next();
                    found
                }
                _ => None,
            };
            match reusable {
                Some((h, vector)) => {
                    index.apply(&key, seq, Some((h, &vector)));
                }
                None => to_embed.push(Change {
                    key,
                    seq,
                    text: Some(text),
                }),
            }
        }
        for rest in stored {
            orphans.push(rest?.0);
        }
        drop(index);
        if !orphans.is_empty() {
            let mut batch = crate::WriteBatch::new();
            for key in orphans {
                batch.delete(key);
            }
            self.store.write(batch, crate::WriteOptions::default())?;
        }
        self.enqueue(to_embed);
        Ok(())
    }

    /// Queue changes for the embed workers (in the order given).
    pub fn enqueue(&self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let mut p = lock(&self.pending);
        for change in changes {
            let ticket = p.next_ticket;
            p.next_ticket += 1;
            p.queue.push_back((ticket, change));
        }
        drop(p);
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
            let result = self.embed_and_apply(&changes);
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
        let mut vectors = vectors.into_iter();
        let mut batch = crate::WriteBatch::new();
        let mut index = self.index.write().unwrap_or_else(|e| e.into_inner());
        for change in changes {
            match &change.text {
                Some(text) => {
                    let Some(vector) = vectors.next() else { break };
                    let hash = text_hash(text.as_bytes());
                    if index.apply(&change.key, change.seq, Some((hash, &vector))) {
                        batch.put(&change.key, encode_vector(hash, &vector));
                    }
                }
                None => {
                    if index.apply(&change.key, change.seq, None) {
                        batch.delete(&change.key);
                    }
                }
            }
        }
        // Written under the index lock, so the store sees a key's changes in the order
        // the index applied them.
        let written = self.store.write(batch, crate::WriteOptions::default());
        drop(index);
        written
    }

    /// The `k` nearest live vectors to `query` (exact): `(key, text hash, score)`.
    pub fn search_exact(
        &self,
        query: &[f32],
        k: usize,
        opts: &SearchOptions,
    ) -> Result<Vec<(Vec<u8>, u64, f32)>> {
        self.catch_up()?;
        let index = self.index.read().unwrap_or_else(|e| e.into_inner());
        if query.len() != index.dim {
            return Err(Error::invalid(format!(
                "query vector has {} dimensions, the index {}",
                query.len(),
                index.dim
            )));
        }
        Ok(index
            .exact(query, k, opts)
            .into_iter()
            .filter_map(|(id, score)| {
                let node = index.nodes.get(id as usize)?;
                Some((node.key.clone(), node.text_hash, score))
            })
            .collect())
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
        Ok(self.index.read().unwrap_or_else(|e| e.into_inner()).live)
    }

    /// Stop the workers once their current batches are applied and close the vector
    /// store. Changes still queued are not lost: they are in the key-value data, and the
    /// next open embeds every value that has no matching vector.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        lock(&self.pending).shutting_down = true;
        self.cv.notify_all();
        for handle in std::mem::take(&mut *lock(&self.workers)) {
            let _ = handle.join();
        }
        self.store.close()
    }

    /// Wait until everything queued so far is embedded and applied (a bulk load can call
    /// this before closing, so that the next open has nothing to embed).
    pub fn wait_indexed(&self) -> Result<()> {
        self.catch_up()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_reject_other_dimensions() {
        let v = [0.5f32, -0.25, 1.0];
        let bytes = encode_vector(42, &v);
        assert_eq!(decode_vector(&bytes, 3), Some((42, v.to_vec())));
        assert_eq!(decode_vector(&bytes, 4), None);
        assert_eq!(decode_vector(&bytes[..bytes.len() - 1], 3), None);
    }

    #[test]
    fn stale_changes_are_ignored() {
        let mut index = Index {
            dim: 2,
            ..Index::default()
        };
        assert!(index.apply(b"k", 5, Some((1, &[1.0, 0.0]))));
        assert!(!index.apply(b"k", 4, None), "an older delete must not win");
        assert_eq!(index.live, 1);
        assert!(index.apply(b"k", 6, None));
        assert_eq!(index.live, 0);
        assert!(!index.apply(b"k", 5, Some((1, &[1.0, 0.0]))));
        assert_eq!(index.live, 0);
    }

    #[test]
    fn exact_search_orders_by_score_and_respects_bounds() {
        let mut index = Index {
            dim: 2,
            ..Index::default()
        };
        index.apply(b"a", 1, Some((0, &[1.0, 0.0])));
        index.apply(b"b", 1, Some((0, &[0.6, 0.8])));
        index.apply(b"c", 1, Some((0, &[0.0, 1.0])));
        let all = SearchOptions::default();
        let got: Vec<u32> = index
            .exact(&[1.0, 0.0], 2, &all)
            .iter()
            .map(|h| h.0)
            .collect();
        assert_eq!(got, vec![0, 1]);
        let from_b = SearchOptions {
            lower_bound: Some(b"b".to_vec()),
            ..SearchOptions::default()
        };
        let got: Vec<u32> = index
            .exact(&[1.0, 0.0], 5, &from_b)
            .iter()
            .map(|h| h.0)
            .collect();
        assert_eq!(got, vec![1, 2]);
    }
}

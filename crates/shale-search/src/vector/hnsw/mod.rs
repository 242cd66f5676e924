//! Hierarchical Navigable Small World graph (Malkov & Yashunin, "Efficient and robust
//! approximate nearest neighbor search using Hierarchical Navigable Small World graphs",
//! 2016/2018), over the int8 codes of `quant.rs` under any [`Metric`].
//!
//! ```text
//!   level 2:   e ─────────────── x                 few nodes, long links
//!   level 1:   e ──── a ──────── x ──── b
//!   level 0:   e ─ c ─ a ─ d ─ f ─ x ─ g ─ b ─ h   every node, up to m_max0 links each
//! ```
//!
//! A node's top level is drawn from an exponential distribution (`floor(-ln(U) * ml)`); a
//! search descends greedily from the entry point (a node on the top level) one level at a
//! time, then runs a best-first search with a candidate list of `ef` on level 0. Insertion
//! searches the same way with `ef_construction`, keeps `m` neighbours chosen by the paper's
//! heuristic (Algorithm 4: a candidate is kept only if it is closer to the new node than to
//! every neighbour already kept, which spreads links in all directions), links them both ways,
//! and prunes a neighbour's list back to `m_max` (`m_max0` on level 0) with the same
//! heuristic. As in hnswlib, candidates are not extended and pruned connections are not kept
//! (Algorithm 4's `extendCandidates` and `keepPrunedConnections` are both false).
//!
//! # Codes, not vectors
//!
//! The graph keeps each vector as its int8 code (`quant.rs`: a quarter of the `f32`s' bytes)
//! and scores codes everywhere: searches, inserts and neighbour selection. The full vectors
//! are the owner's (the semantic index keeps them in its store); a search's scores are
//! therefore approximate, good for ranking, and an owner that returns scores re-scores the
//! few results with the full vectors.
//!
//! # Thread safety
//!
//! Everything takes `&self`; `Hnsw` is `Sync`. Inserts run concurrently with each other and
//! with searches, as in hnswlib: each node's neighbour lists have their own lock, held only
//! while that one list is rewritten (never two at once, so locks cannot deadlock), searches read
//! lists without locks (see `store.rs` for why a torn read is harmless), and a global lock is
//! held for a whole insert only by an insert whose node will become the new entry point.
//! [`Hnsw::write_to`] waits for inserts and deletes in flight and holds new ones off while
//! it writes, so a file always holds a consistent graph.
//!
//! # Determinism
//!
//! A node's level is a hash of the seed and its id, so it does not depend on timing. With one
//! inserting thread, the same seed, ids, vectors and insertion order always build the same
//! graph. With several, the graph depends on the interleaving (its quality does not).
//!
//! # Deletes
//!
//! [`Hnsw::mark_deleted`] tombstones a node: searches still walk through it (removing it would
//! cut paths between its neighbours) but never return it. Tombstones cost search time and
//! take neighbour slots, so once [`Hnsw::needs_reclaim`] says more than
//! [`RECLAIM_FRACTION`] of the nodes are tombstones, the owner should replace the index by
//! [`Hnsw::rebuilt`], which inserts the live nodes into a fresh graph. An overwritten value is
//! a delete of the old id plus an insert of a new one; an id is never reused in one graph.

mod bulk;
mod insert;
mod params;
mod persist;
mod scratch;
mod search;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use super::quant::{self, Query};
use super::store::{NodeStore, MAX_LEVEL};
use super::{Metric, NodeId};
use crate::sync::lock;
pub use params::{HnswParams, MAX_DIM, MAX_EF};
use scratch::Scratch;
use shale::error::{Error, Result};

/// A filter (tombstones included) that accepts at least this share of the nodes is searched
/// by an unfiltered walk with a candidate pool `1 / share` times larger, whose accepted
/// nodes are kept; a narrower one by hnswlib's filtered walk (see `Hnsw::candidates`).
const POOL_SHARE: f64 = 0.1;

/// Above this fraction of tombstoned nodes, [`Hnsw::needs_reclaim`] says to rebuild.
///
/// Why a quarter: a tombstone is still visited by every search that reaches it, so at 25% a
/// search does roughly a third more distance computations for the same recall, and the
/// tombstones hold a quarter of the neighbour slots. A rebuild costs as much as building the
/// live nodes again; below this fraction it does not pay for itself.
pub const RECLAIM_FRACTION: f64 = 0.25;

/// The entry point and top level, packed so that a search reads both with one load:
/// `(top_level + 1) << 32 | id`, or 0 when the graph is empty.
fn pack_entry(id: u32, level: u8) -> u64 {
    (u64::from(level) + 1) << 32 | u64::from(id)
}

fn unpack_entry(word: u64) -> Option<(u32, u8)> {
    let level = (word >> 32).checked_sub(1)?;
    Some((word as u32, u8::try_from(level).ok()?))
}

/// An HNSW graph over vectors of one dimension. See the module documentation.
pub struct Hnsw {
    params: HnswParams,
    dim: usize,
    code_len: usize,
    nodes: NodeStore,
    /// See [`pack_entry`].
    entry: AtomicU64,
    /// Held by an insert whose node may become the entry point, for its whole insert.
    entry_lock: Mutex<()>,
    /// Inserts and deletes hold it shared; `write_to` holds it exclusively.
    mutation: RwLock<()>,
    /// One more than the largest id ever claimed (0 when empty).
    id_bound: AtomicU64,
    len: AtomicUsize,
    deleted: AtomicUsize,
    scratch: Mutex<Vec<Scratch>>,
}

impl std::fmt::Debug for Hnsw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hnsw")
            .field("dim", &self.dim)
            .field("params", &self.params)
            .field("len", &self.len())
            .field("deleted", &self.deleted_count())
            .finish_non_exhaustive()
    }
}

impl Hnsw {
    /// An empty graph for vectors of `dim` dimensions.
    ///
    /// # Errors
    /// `Error::InvalidOptions` if a parameter or `dim` is out of range.
    pub fn new(dim: usize, params: HnswParams) -> Result<Hnsw> {
        let mut problems = match params.validate() {
            Ok(()) => Vec::new(),
            Err(Error::InvalidOptions(p)) => p,
            Err(e) => return Err(e),
        };
        if dim == 0 || dim > MAX_DIM {
            problems.push(format!("hnsw dim = {dim} (must be 1..={MAX_DIM})"));
        }
        if !problems.is_empty() {
            return Err(Error::InvalidOptions(problems));
        }
        let code_len = quant::code_len(dim);
        Ok(Hnsw {
            params,
            dim,
            code_len,
            nodes: NodeStore::new(code_len, params.m_max, params.m_max0),
            entry: AtomicU64::new(0),
            entry_lock: Mutex::new(()),
            mutation: RwLock::new(()),
            id_bound: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            deleted: AtomicUsize::new(0),
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// The parameters the graph was built with.
    pub fn params(&self) -> &HnswParams {
        &self.params
    }

    /// Change the default candidate list size of a search: the one parameter that does
    /// not shape the graph.
    ///
    /// # Errors
    /// `InvalidOptions` outside `1..=MAX_EF`.
    pub fn set_ef_search(&mut self, ef_search: usize) -> Result<()> {
        HnswParams {
            ef_search,
            ..self.params
        }
        .validate()?;
        self.params.ef_search = ef_search;
        Ok(())
    }

    /// The dimension of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Nodes in the graph, tombstoned ones included.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// True when no node was ever inserted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Tombstoned nodes.
    pub fn deleted_count(&self) -> usize {
        self.deleted.load(Ordering::Acquire)
    }

    /// Nodes a search may return: `len() - deleted_count()`.
    ///
    /// The integration layer compares this with the size of a filter's candidate set: when a
    /// filter admits only a small fraction of the live nodes (below a few percent), a
    /// filtered graph search visits most of the graph to fill its `ef` list, and
    /// [`Hnsw::exact_search`] over the candidates is faster, and exact.
    pub fn live_count(&self) -> usize {
        self.len().saturating_sub(self.deleted_count())
    }

    /// True once tombstones exceed [`RECLAIM_FRACTION`] of the nodes.
    pub fn needs_reclaim(&self) -> bool {
        let len = self.len();
        len > 0 && self.deleted_count() as f64 > RECLAIM_FRACTION * len as f64
    }

    /// Whether `id` is in the graph (tombstoned or not).
    pub fn contains(&self, id: NodeId) -> bool {
        self.nodes.level(id.0).is_some()
    }

    /// Whether `id` is in the graph and tombstoned.
    pub fn is_deleted(&self, id: NodeId) -> bool {
        self.nodes.is_deleted(id.0)
    }

    /// The code of `id` (`quant.rs`), tombstoned or not.
    pub fn code(&self, id: NodeId) -> Option<&[u8]> {
        self.nodes.code(id.0)
    }

    /// The vector `id`'s code stands for (approximately the one inserted, as the metric
    /// stores it: unit length for `Cosine`), tombstoned or not.
    pub fn decoded(&self, id: NodeId) -> Option<Vec<f32>> {
        Some(quant::decode(self.nodes.code(id.0)?, self.dim))
    }

    /// The code `v` gets in this graph: what [`Hnsw::insert`] stores and [`Hnsw::code`]
    /// returns for it.
    ///
    /// # Errors
    /// As [`Hnsw::insert`] for a bad vector.
    pub fn encode(&self, v: &[f32]) -> Result<Vec<u8>> {
        let v = self.params.metric.prepare(v, self.dim, "vector")?;
        self.encode_prepared(&v)
    }

    /// [`Hnsw::encode`] of a vector [`Metric::prepare`] already made ready for the graph's
    /// metric.
    ///
    /// # Errors
    /// `InvalidArgument` if `v` has another length than the graph's dimension.
    pub fn encode_prepared(&self, v: &[f32]) -> Result<Vec<u8>> {
        if v.len() != self.dim {
            return Err(Error::invalid(format!(
                "vector has {} dimensions, the graph has {}",
                v.len(),
                self.dim
            )));
        }
        let mut code = vec![0u8; self.code_len];
        quant::encode(v, &mut code);
        Ok(code)
    }

    /// The metric the graph compares vectors by.
    pub fn metric(&self) -> Metric {
        self.params.metric
    }

    /// One more than the largest id in the graph. The semantic index keeps ids nearly dense
    /// (it reuses the ids a rebuild frees), so this sizes a bitmap.
    pub fn id_bound(&self) -> u64 {
        self.id_bound.load(Ordering::Acquire)
    }

    /// Bytes of memory the graph holds for its nodes: codes, states, locks and neighbour
    /// lists, in whole chunks as allocated, and the touched pages of the chunk directory.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.memory_bytes()
    }

    /// A query for this graph's codes.
    fn query(&self, v: &[f32], what: &str) -> Result<Query> {
        let v = self.params.metric.prepare(v, self.dim, what)?;
        Ok(Query::new(&v, self.params.metric))
    }

    /// The query that compares other codes with the stored code `code`.
    fn code_query(&self, code: &[u8]) -> Query {
        Query::from_code(code, self.dim, self.params.metric)
    }

    /// The level of node `id`: `floor(-ln(U) * ml)` with `U` uniform in (0, 1] drawn from a
    /// hash of the seed and the id, so that it does not depend on which thread inserts first.
    fn level_for(&self, id: u32) -> u8 {
        // splitmix64's output number `id + 1` from `seed`. (Hashing `seed ^ id` instead sent
        // id 0 under seed 0 to the hash 0, which is the maximum level.)
        let golden = 0x9e37_79b9_7f4a_7c15_u64;
        let mut z = (self.params.seed).wrapping_add((u64::from(id) + 1).wrapping_mul(golden));
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let u = ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64; // (0, 1]
        let level = (-u.ln() * self.params.ml).floor();
        if level >= f64::from(MAX_LEVEL) {
            MAX_LEVEL
        } else {
            level as u8
        }
    }

    fn cap(&self, level: u8) -> usize {
        if level == 0 {
            self.params.m_max0
        } else {
            self.params.m_max
        }
    }

    fn take_scratch(&self) -> Scratch {
        let pooled = lock(&self.scratch).pop();
        let mut s = pooled.unwrap_or_default();
        let bound = usize::try_from(self.id_bound()).unwrap_or(usize::MAX);
        s.visited.start(bound);
        s
    }

    fn give_scratch(&self, s: Scratch) {
        lock(&self.scratch).push(s);
    }

    /// The graph's distance from `q` to node `id`: minus the score, so smaller is closer.
    #[inline]
    fn dist_to(&self, q: &Query, id: u32) -> Option<f32> {
        Some(-q.score(self.nodes.code(id)?))
    }

    /// Every id in the graph (tombstoned included), ascending.
    pub fn ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        let bound = u32::try_from(self.id_bound()).unwrap_or(u32::MAX);
        let max = self.id_bound() == 1u64 << 32;
        (0..bound)
            .chain(max.then_some(u32::MAX))
            .filter(|&id| self.nodes.level(id).is_some())
            .map(NodeId)
    }

    /// Tombstone `id`: searches stop returning it at once.
    ///
    /// Returns `true` if this call deleted it, `false` if it already was.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if `id` is not in the graph.
    pub fn mark_deleted(&self, id: NodeId) -> Result<bool> {
        let _shared = self
            .mutation
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match self.nodes.mark_deleted(id.0) {
            None => Err(Error::invalid(format!("node {} is not in the index", id.0))),
            Some(true) => {
                self.deleted.fetch_add(1, Ordering::AcqRel);
                Ok(true)
            }
            Some(false) => Ok(false),
        }
    }

    /// The level of `id`, for tests and the format example.
    pub fn level(&self, id: NodeId) -> Option<u8> {
        self.nodes.level(id.0)
    }

    /// The neighbours of `id` on `level`, for tests, the format example and diagnostics.
    pub fn neighbours(&self, id: NodeId, level: u8) -> Vec<NodeId> {
        let mut out = Vec::new();
        if let Some(links) = self.nodes.links(id.0, level) {
            links.read_into(&mut out);
        }
        out.into_iter().map(NodeId).collect()
    }

    /// The entry point, if the graph is not empty.
    pub fn entry_point(&self) -> Option<NodeId> {
        unpack_entry(self.entry.load(Ordering::Acquire)).map(|(id, _)| NodeId(id))
    }
}

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
mod params;
mod persist;
mod scratch;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use super::quant::{self, Query};
use super::store::{prefetch_bytes, prefetch_first, NodeStore, MAX_LEVEL};
use super::{Filter, Metric, Neighbor, NodeId, VectorSource};
use crate::error::{Error, Result};
use crate::sync::lock;
pub use params::{HnswParams, MAX_DIM, MAX_EF};
use scratch::{Cand, Scratch};

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
        let mut code = vec![0u8; self.code_len];
        quant::encode(&v, &mut code);
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

    /// [`Hnsw::dist_to`] for an id read from a neighbour list (see
    /// [`NodeStore::linked_code`]).
    #[inline]
    fn dist_to_linked(&self, q: &Query, id: u32) -> Option<f32> {
        Some(-q.score(self.nodes.linked_code(id)?))
    }

    /// Insert node `id` with vector `v` (scaled to unit length on the way in under the
    /// cosine metric), stored as its code.
    ///
    /// Safe to call from many threads at once, and while searches run.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if `v` has the wrong dimension, a NaN or an infinity, or
    /// (cosine) no direction, or if `id` is already in the graph (tombstoned or not).
    pub fn insert(&self, id: NodeId, v: &[f32]) -> Result<()> {
        let code = self.encode(v)?;
        self.insert_code(id, &code)
    }

    /// Insert node `id` with a code made by [`Hnsw::encode`] (of this graph or of one with
    /// the same dimension and metric): what a rebuild does, without the full vector.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if `code` has the wrong length or `id` is already in the
    /// graph.
    pub fn insert_code(&self, id: NodeId, code: &[u8]) -> Result<()> {
        if code.len() != self.code_len {
            return Err(Error::invalid(format!(
                "a code of {} bytes for an index whose codes have {}",
                code.len(),
                self.code_len
            )));
        }
        let q = self.code_query(code);
        let _shared = self
            .mutation
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let id = id.0;
        let level = self.level_for(id);

        // Like hnswlib: hold the global lock for the whole insert only if this node will be
        // the new entry point, so that a concurrent insert cannot install a lower one.
        let global = lock(&self.entry_lock);
        let entry = unpack_entry(self.entry.load(Ordering::Acquire));
        let global = match entry {
            Some((_, top)) if level <= top => {
                drop(global);
                None
            }
            _ => Some(global),
        };

        if !self.nodes.claim(id, code, level) {
            return Err(Error::invalid(format!("node {id} is already in the index")));
        }
        self.id_bound.fetch_max(u64::from(id) + 1, Ordering::AcqRel);

        if let Some((entry_id, top)) = entry {
            let mut scratch = self.take_scratch();
            self.connect(id, &q, level, entry_id, top, &mut scratch);
            self.give_scratch(scratch);
        }
        self.len.fetch_add(1, Ordering::AcqRel);
        if global.is_some() {
            self.entry.store(pack_entry(id, level), Ordering::Release);
        }
        Ok(())
    }

    /// Link the READY node `id` into the graph below the entry point `(entry, top)`.
    fn connect(&self, id: u32, q: &Query, level: u8, entry: u32, top: u8, s: &mut Scratch) {
        let Some(d) = self.dist_to(q, entry) else {
            return;
        };
        let mut ep = Cand { dist: d, id: entry };
        for l in (level.saturating_add(1)..=top).rev() {
            ep = self.greedy(q, ep, l, s);
        }
        let mut eps = vec![ep];
        for l in (0..=level.min(top)).rev() {
            s.visited.start(0);
            // Tombstones stay eligible as neighbours while building: they keep the graph
            // connected until a rebuild removes them.
            let found = self.search_layer(q, &eps, self.params.ef_construction, l, None, s);
            let chosen = self.select_neighbours(&found, self.params.m);
            self.link(id, l, &chosen);
            // The paper's `ep <- W`: the next level starts from every node found here.
            eps = found;
        }
    }

    /// Greedy walk on `level` from `start` to a local minimum of the distance to `q`.
    fn greedy(&self, q: &Query, start: Cand, level: u8, s: &mut Scratch) -> Cand {
        let mut best = start;
        loop {
            let mut moved = false;
            if let Some(links) = self.nodes.links(best.id, level) {
                links.read_into(&mut s.neighbours);
            } else {
                s.neighbours.clear();
            }
            for &n in &s.neighbours {
                if let Some(d) = self.dist_to_linked(q, n) {
                    let c = Cand { dist: d, id: n };
                    if c < best {
                        best = c;
                        moved = true;
                    }
                }
            }
            if !moved {
                return best;
            }
        }
    }

    /// Algorithm 2 (SEARCH-LAYER) with hnswlib's handling of filters: nodes that fail
    /// `accept` are expanded like any other but never enter the result list, and while the
    /// result list holds fewer than `ef` nodes the search does not stop, so a filter costs
    /// time, not recall. Returns at most `ef` nodes, nearest first.
    ///
    /// The caller has called `s.visited.start`.
    fn search_layer(
        &self,
        q: &Query,
        entry: &[Cand],
        ef: usize,
        level: u8,
        accept: Option<&dyn Fn(u32) -> bool>,
        s: &mut Scratch,
    ) -> Vec<Cand> {
        let Some(accept) = accept else {
            return self.search_pool(q, entry, ef, level, s);
        };
        let accepts = |id: u32| accept(id);
        // Reserved up to what the graph can hold: a caller's `ef` may be far larger.
        let nodes = self.len();
        let mut candidates: BinaryHeap<Reverse<Cand>> =
            BinaryHeap::with_capacity(ef.saturating_mul(2).min(nodes));
        let mut results: BinaryHeap<Cand> =
            BinaryHeap::with_capacity(ef.saturating_add(1).min(nodes + 1));
        let mut codes = Vec::with_capacity(self.params.m_max0.max(self.params.m_max));
        for &e in entry {
            if s.visited.insert(e.id) == 0 {
                continue;
            }
            candidates.push(Reverse(e));
            if accepts(e.id) {
                results.push(e);
                if results.len() > ef {
                    results.pop();
                }
            }
        }
        let mut bound = results.peek().map_or(f32::INFINITY, |c| c.dist);
        while let Some(Reverse(c)) = candidates.pop() {
            if c.dist > bound && results.len() >= ef {
                break;
            }
            let next = candidates.peek().map(|Reverse(next)| next.id);
            self.score_new_neighbours(q, c.id, next, level, s, &mut codes);
            for (&n, &score) in s.neighbours.iter().zip(s.scores.iter()) {
                let d = -score;
                if results.len() < ef || d < bound {
                    let cand = Cand { dist: d, id: n };
                    candidates.push(Reverse(cand));
                    if accepts(n) {
                        results.push(cand);
                        if results.len() > ef {
                            results.pop();
                        }
                    }
                    bound = results.peek().map_or(f32::INFINITY, |c| c.dist);
                }
            }
        }
        results.into_sorted_vec()
    }

    /// [`Hnsw::search_layer`] without a filter, with one sorted array, the **pool**, for
    /// both of Algorithm 2's sets: the `ef` nearest nodes found so far, nearest first, each
    /// marked once expanded. The next node expanded is the nearest unexpanded one, and the
    /// search ends when the pool holds none. It visits what the two heaps visit (a node
    /// farther than the `ef`-th nearest is expanded by neither) and moves less memory per
    /// step: a candidate is one insertion into a short array, not a push into two heaps and
    /// a pop from each.
    fn search_pool(
        &self,
        q: &Query,
        entry: &[Cand],
        ef: usize,
        level: u8,
        s: &mut Scratch,
    ) -> Vec<Cand> {
        s.pool.clear();
        for &e in entry {
            if s.visited.insert(e.id) == 1 {
                s.pool.offer(e, ef);
            }
        }
        let mut codes = Vec::with_capacity(self.params.m_max0.max(self.params.m_max));
        let mut next = 0;
        while let Some((at, c)) = s.pool.expand(next) {
            let after = s.pool.unexpanded_from(at + 1).map(|c| c.id);
            self.score_new_neighbours(q, c.id, after, level, s, &mut codes);
            let mut lowest = at + 1;
            for (&n, &score) in s.neighbours.iter().zip(s.scores.iter()) {
                if let Some(at) = s.pool.offer(
                    Cand {
                        dist: -score,
                        id: n,
                    },
                    ef,
                ) {
                    lowest = lowest.min(at);
                }
            }
            next = lowest;
        }
        s.pool.cands()
    }

    /// The neighbours of `id` on `level` that this search has not visited, into
    /// `s.neighbours`, marked visited, and their scores into `s.scores`; `next`, the node
    /// the search will likely expand after this one, has its level-0 list prefetched.
    /// `codes` is the caller's buffer, reused from one node to the next.
    ///
    /// Every new neighbour's code is requested from memory before the first is scored: a
    /// dozen or more independent cache misses in flight instead of one.
    #[inline]
    fn score_new_neighbours<'g>(
        &'g self,
        q: &Query,
        id: u32,
        next: Option<u32>,
        level: u8,
        s: &mut Scratch,
        codes: &mut Vec<&'g [u8]>,
    ) {
        let Scratch {
            visited,
            neighbours,
            scores,
            ..
        } = s;
        match self.nodes.links(id, level) {
            Some(links) => links.read_into(neighbours),
            None => neighbours.clear(),
        }
        if level == 0 {
            if let Some(next) = next {
                self.nodes.prefetch_links0(next);
            }
        }
        // Without a branch on the answer (see `Visited`): every id is written, and the
        // count moves past it only if it is new.
        let mut kept = 0;
        for i in 0..neighbours.len() {
            let Some(&n) = neighbours.get(i) else { break };
            if let Some(slot) = neighbours.get_mut(kept) {
                *slot = n;
            }
            kept += visited.insert(n);
        }
        neighbours.truncate(kept);
        codes.clear();
        neighbours.retain(|&n| match self.nodes.linked_code(n) {
            Some(code) => {
                prefetch_bytes(code);
                codes.push(code);
                true
            }
            None => false,
        });
        q.score_all(codes, scores);
    }

    /// Algorithm 4 (SELECT-NEIGHBORS-HEURISTIC) without extension or kept pruned
    /// connections: walk `sorted` (nearest first) and keep a candidate only if it is closer to
    /// the base node than to every candidate kept so far, until `m` are kept.
    fn select_neighbours(&self, sorted: &[Cand], m: usize) -> Vec<Cand> {
        if sorted.len() <= m {
            return sorted.to_vec();
        }
        let mut kept: Vec<(Cand, &[u8])> = Vec::with_capacity(m);
        for &c in sorted {
            if kept.len() >= m {
                break;
            }
            let Some(code) = self.nodes.code(c.id) else {
                continue;
            };
            let q = self.code_query(code);
            if kept.iter().all(|(_, kept)| -q.score(kept) >= c.dist) {
                kept.push((c, code));
            }
        }
        kept.into_iter().map(|(c, _)| c).collect()
    }

    /// Give `id` the neighbours `chosen` on `level` and add `id` to each of theirs, pruning
    /// a full list with the heuristic (hnswlib's `mutuallyConnectNewElement`).
    fn link(&self, id: u32, level: u8, chosen: &[Cand]) {
        let ids: Vec<u32> = chosen.iter().map(|c| c.id).filter(|&n| n != id).collect();
        let cap = self.cap(level);
        let mut current = Vec::with_capacity(cap + 1);
        {
            let _guard = self.nodes.lock(id);
            if let Some(links) = self.nodes.links(id, level) {
                links.read_into(&mut current);
                if current.is_empty() {
                    links.write(&ids);
                } else {
                    // Another insert already linked to this node on this level (it found the
                    // node through the level above, which this insert linked first): keep
                    // those links too rather than overwrite them, pruning as for any list.
                    let merged = self.merge_links(id, chosen, &current, cap);
                    links.write(&merged);
                }
            }
        }
        for &n in &ids {
            let _guard = self.nodes.lock(n);
            let Some(links) = self.nodes.links(n, level) else {
                continue;
            };
            links.read_into(&mut current);
            if current.contains(&id) {
                continue;
            }
            if current.len() < cap.min(links.capacity()) {
                current.push(id);
                links.write(&current);
                continue;
            }
            let Some(base) = self.nodes.code(n) else {
                continue;
            };
            current.push(id);
            let kept: Vec<u32> = self
                .select_neighbours(&self.ranked(base, &current), cap)
                .iter()
                .map(|c| c.id)
                .collect();
            links.write(&kept);
        }
    }

    /// `ids` as candidates of the node whose code is `base`, nearest first.
    fn ranked(&self, base: &[u8], ids: &[u32]) -> Vec<Cand> {
        let q = self.code_query(base);
        let mut cands: Vec<Cand> = ids
            .iter()
            .filter_map(|&c| {
                Some(Cand {
                    dist: -q.score(self.nodes.code(c)?),
                    id: c,
                })
            })
            .collect();
        cands.sort_unstable();
        cands
    }

    /// The union of `chosen` and `existing` as a list of `id` of at most `cap` entries.
    fn merge_links(&self, id: u32, chosen: &[Cand], existing: &[u32], cap: usize) -> Vec<u32> {
        let Some(base) = self.nodes.code(id) else {
            return existing.to_vec();
        };
        let mut ids: Vec<u32> = chosen.iter().map(|c| c.id).filter(|&c| c != id).collect();
        for &e in existing {
            if e != id && !ids.contains(&e) {
                ids.push(e);
            }
        }
        let cands = self.ranked(base, &ids);
        let kept = if cands.len() > cap {
            self.select_neighbours(&cands, cap)
        } else {
            cands
        };
        kept.iter().map(|c| c.id).collect()
    }

    /// The `k` nodes most similar to `query` that are not tombstoned and pass `filter`,
    /// best first (score as [`Metric`] defines it, computed from the codes, so approximate;
    /// ties by id).
    ///
    /// `ef` is the candidate list size (default `ef_search`, raised to `k` if smaller): larger
    /// is slower and finds more of the true nearest neighbours. A filter never lowers recall:
    /// nodes it rejects are walked through but not returned, and the search goes on until it
    /// has `ef` accepted nodes. The price is time: with a filter that accepts a small fraction
    /// of the nodes, the search visits most of the graph, and [`Hnsw::exact_search`] (or
    /// [`Hnsw::scan`]) is faster; compare the candidate count with [`Hnsw::live_count`] to
    /// choose.
    ///
    /// # Errors
    /// `Error::InvalidArgument` if `query` has the wrong dimension, a NaN or an infinity,
    /// or (cosine) no direction.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        ef: Option<usize>,
        filter: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Result<Vec<Neighbor>> {
        let q = self.query(query, "query")?;
        let found = self.candidates(&q, k, ef, filter.map(Filter::new));
        let mut out: Vec<Neighbor> = found
            .into_iter()
            .map(|c| Neighbor {
                id: NodeId(c.id),
                score: -c.dist,
            })
            .collect();
        out.sort_by(|a, b| b.cmp(a));
        out.truncate(k);
        Ok(out)
    }

    /// [`Hnsw::search`], then its best `rerank` candidates (at least `k`) scored again
    /// with their full vectors from `full`: the scores are exact, and the recall that the
    /// codes' rounding cost comes back (twice `k` recovers nearly all of it; see
    /// BENCHMARKS.md). A candidate `full` has no vector for is dropped.
    ///
    /// # Errors
    /// As [`Hnsw::search`].
    pub fn search_rescored(
        &self,
        query: &[f32],
        k: usize,
        ef: Option<usize>,
        filter: Option<Filter<'_>>,
        full: &dyn VectorSource,
        rerank: usize,
    ) -> Result<Vec<Neighbor>> {
        let prepared = self.params.metric.prepare(query, self.dim, "query")?;
        let q = Query::new(&prepared, self.params.metric);
        let depth = rerank.max(k);
        let found = self.candidates(&q, depth, ef.map(|ef| ef.max(depth)), filter);
        let rescored = found.iter().take(depth).filter_map(|c| {
            Some(Neighbor {
                id: NodeId(c.id),
                score: self
                    .params
                    .metric
                    .score(&prepared, full.vector(NodeId(c.id))?),
            })
        });
        Ok(super::exact::top_k(rescored, k))
    }

    /// Every live node that passes `filter`, scored with its full vector from `full`: the
    /// `k` best, exactly. What [`Hnsw::search`] approximates, and what a search whose
    /// filter admits few nodes runs instead of walking the graph.
    ///
    /// # Errors
    /// As [`Hnsw::search`].
    pub fn exact_search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&dyn Fn(NodeId) -> bool>,
        full: &dyn VectorSource,
    ) -> Result<Vec<Neighbor>> {
        let q = self.params.metric.prepare(query, self.dim, "query")?;
        let live = self
            .ids()
            .filter(|&id| !self.nodes.is_deleted(id.0))
            .filter_map(|id| Some((id, full.vector(id)?)));
        Ok(super::exact::search_by(
            self.params.metric,
            live,
            &q,
            k,
            filter,
        ))
    }

    /// The `ef` (at least `k`) nodes nearest to `q` by their codes that are not
    /// tombstoned and pass `filter`, nearest first.
    fn candidates(
        &self,
        q: &Query,
        k: usize,
        ef: Option<usize>,
        filter: Option<Filter<'_>>,
    ) -> Vec<Cand> {
        if k == 0 {
            return Vec::new();
        }
        let Some((entry, top)) = unpack_entry(self.entry.load(Ordering::Acquire)) else {
            return Vec::new();
        };
        let Some(d) = self.dist_to(q, entry) else {
            return Vec::new();
        };
        let ef = ef.unwrap_or(self.params.ef_search).max(k);
        let mut s = self.take_scratch();
        let mut ep = Cand { dist: d, id: entry };
        for l in (1..=top).rev() {
            ep = self.greedy(q, ep, l, &mut s);
        }
        let accept =
            |id: u32| !self.nodes.is_deleted(id) && filter.is_none_or(|f| (f.accept)(NodeId(id)));
        // With no tombstones and no filter every node is accepted: skip the check (and its
        // read of each result's state word). A tombstone made during this search may then be
        // returned, as it may by a search that started a moment earlier.
        let found = if filter.is_none() && self.deleted_count() == 0 {
            self.search_layer(q, &[ep], ef, 0, None, &mut s)
        } else {
            // Most nodes accepted (tombstones, a wide filter): walk unfiltered with a pool
            // as much larger as the share turned away, and keep the accepted. Few
            // accepted: hnswlib's walk, which expands rejected nodes but counts only
            // accepted ones, so it keeps going until it has `ef` of them.
            let live = self.live_count() as f64 / self.len().max(1) as f64;
            let share = match filter.and_then(|f| f.share) {
                Some(share) => share * live,
                None => self.accepted_share(&accept),
            };
            if share >= POOL_SHARE {
                let wide = ((ef as f64 / share).ceil() as usize).max(ef);
                let mut found = self.search_layer(q, &[ep], wide, 0, None, &mut s);
                found.retain(|c| accept(c.id));
                found.truncate(ef);
                found
            } else {
                self.search_layer(q, &[ep], ef, 0, Some(&accept), &mut s)
            }
        };
        self.give_scratch(s);
        found
    }

    /// The share of the graph's nodes `accept` takes, estimated from up to 512 ids spread
    /// evenly over the id space (all of them in a small graph).
    fn accepted_share(&self, accept: &dyn Fn(u32) -> bool) -> f64 {
        const SAMPLE: u64 = 512;
        let bound = self.id_bound();
        let step = bound.div_ceil(SAMPLE).max(1);
        let (mut nodes, mut taken) = (0u32, 0u32);
        for id in (0..bound).step_by(usize::try_from(step).unwrap_or(usize::MAX)) {
            let Ok(id) = u32::try_from(id) else { break };
            if self.nodes.level(id).is_some() {
                nodes += 1;
                taken += u32::from(accept(id));
            }
        }
        if nodes == 0 {
            1.0
        } else {
            f64::from(taken) / f64::from(nodes)
        }
    }

    /// The `k` nodes of `ids` most similar to `query`, without walking the graph: every one
    /// (that is in the graph and not tombstoned) scored from its code, then the best
    /// `rerank` (at least `k`) scored again with their full vectors from `full`. What a
    /// search among a few of the nodes (a narrow key range) runs: it reads each candidate's
    /// code once, a quarter of its full vector, and misses only what the codes' rounding
    /// pushes out of the best `rerank`.
    ///
    /// # Errors
    /// As [`Hnsw::search`].
    pub fn scan(
        &self,
        query: &[f32],
        ids: impl IntoIterator<Item = NodeId>,
        k: usize,
        full: &dyn VectorSource,
        rerank: usize,
    ) -> Result<Vec<Neighbor>> {
        let prepared = self.params.metric.prepare(query, self.dim, "query")?;
        let q = Query::new(&prepared, self.params.metric);
        let depth = rerank.max(k);
        let mut best = super::exact::TopK::new(depth);
        let mut ids = ids.into_iter();
        let mut scores = Vec::with_capacity(64);
        loop {
            // In batches of 64: load every code of a batch, then score them together.
            let mut batch = [0u32; 64];
            let mut codes: [&[u8]; 64] = [&[]; 64];
            let mut n = 0;
            for id in ids.by_ref() {
                let Some(code) = self.nodes.live_code(id.0) else {
                    continue;
                };
                prefetch_first(code);
                if let (Some(b), Some(c)) = (batch.get_mut(n), codes.get_mut(n)) {
                    (*b, *c) = (id.0, code);
                }
                n += 1;
                if n == batch.len() {
                    break;
                }
            }
            q.score_all(codes.get(..n).unwrap_or_default(), &mut scores);
            let mut floor = best.floor();
            for (&id, &score) in batch.iter().zip(&scores) {
                if score >= floor {
                    best.offer(Neighbor {
                        id: NodeId(id),
                        score,
                    });
                    floor = best.floor();
                }
            }
            if n < batch.len() {
                break;
            }
        }
        let rescored = best.into_sorted().into_iter().filter_map(|n| {
            Some(Neighbor {
                id: n.id,
                score: self.params.metric.score(&prepared, full.vector(n.id)?),
            })
        });
        Ok(super::exact::top_k(rescored, k))
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

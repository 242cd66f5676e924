//! Search: the greedy descent of the upper levels, the best-first walk of a level
//! (`search_layer`, also what an insert runs), and the public searches over it, filtered or
//! not, approximate or exact.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::Ordering;

use super::scratch::{Cand, Scratch};
use super::{unpack_entry, Hnsw, POOL_SHARE};
use crate::vector::quant::Query;
use crate::vector::store::{prefetch_bytes, prefetch_first};
use crate::vector::{Filter, Neighbor, NodeId, VectorSource};
use shale::error::Result;

impl Hnsw {
    /// Greedy walk on `level` from `start` to a local minimum of the distance to `q`. Each
    /// step requests every neighbour's code before scoring the first, as
    /// [`Hnsw::search_layer`] does, and scores them in one batch.
    pub(super) fn greedy(&self, q: &Query, start: Cand, level: u8, s: &mut Scratch) -> Cand {
        let mut best = start;
        let mut codes = Vec::with_capacity(self.params.m_max);
        loop {
            let Some(links) = self.nodes.links(best.id, level) else {
                return best;
            };
            links.read_into(&mut s.neighbours);
            codes.clear();
            s.neighbours.retain(|&n| match self.nodes.linked_code(n) {
                Some(code) => {
                    prefetch_bytes(code);
                    codes.push(code);
                    true
                }
                None => false,
            });
            q.score_all(&codes, &mut s.scores);
            let mut moved = false;
            for (&id, &score) in s.neighbours.iter().zip(s.scores.iter()) {
                let c = Cand { dist: -score, id };
                if c < best {
                    best = c;
                    moved = true;
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
    pub(super) fn search_layer(
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
    /// step: an expanded node's new neighbours are merged into one short array at once,
    /// not each pushed into two heaps and popped from each.
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
            let found = s
                .neighbours
                .iter()
                .zip(s.scores.iter())
                .map(|(&id, &score)| Cand { dist: -score, id });
            next = s
                .pool
                .offer_all(found, ef)
                .map_or(at + 1, |low| low.min(at + 1));
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

    /// The `k` nodes most similar to `query` that are not tombstoned and pass `filter`,
    /// best first (score as [`Metric`](crate::vector::Metric) defines it, computed from the
    /// codes, so approximate; ties by id).
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
        Ok(crate::vector::exact::top_k(rescored, k))
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
        Ok(crate::vector::exact::search_by(
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
        let mut best = crate::vector::exact::TopK::new(depth);
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
        Ok(crate::vector::exact::top_k(rescored, k))
    }
}

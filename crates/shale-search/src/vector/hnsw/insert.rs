//! Insertion: the new node's levels are searched from the entry point down with
//! `ef_construction`, its neighbours chosen by the paper's heuristic and linked both ways,
//! and a neighbour's list that overflows is pruned by the same heuristic (module
//! documentation of `hnsw`).

use std::sync::atomic::Ordering;

use super::scratch::{Cand, Scratch};
use super::{pack_entry, unpack_entry, Hnsw};
use crate::sync::lock;
use crate::vector::quant::Query;
use crate::vector::NodeId;
use shale::error::{Error, Result};

impl Hnsw {
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
}

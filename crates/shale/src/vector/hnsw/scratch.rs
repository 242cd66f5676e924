//! A search's working state: candidates ordered by distance, visited marks, and the pooled
//! scratch space that lets a search run without allocating.

use std::cmp::Ordering as CmpOrdering;

/// A node reached by a search: its distance to the query and its id. Orders by distance,
/// then id, so heaps break ties the same way every run.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cand {
    pub(super) dist: f32,
    pub(super) id: u32,
}

impl PartialEq for Cand {
    fn eq(&self, other: &Cand) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}
impl Eq for Cand {}
impl PartialOrd for Cand {
    fn partial_cmp(&self, other: &Cand) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Cand {
    fn cmp(&self, other: &Cand) -> CmpOrdering {
        self.dist
            .total_cmp(&other.dist)
            .then(self.id.cmp(&other.id))
    }
}

/// Marks of the nodes one search has visited. A generation counter makes clearing free:
/// a node is visited when its mark equals the current generation.
#[derive(Default)]
pub(super) struct Visited {
    marks: Vec<u16>,
    generation: u16,
}

impl Visited {
    pub(super) fn start(&mut self, bound: usize) {
        if self.marks.len() < bound {
            self.marks.resize(bound, 0);
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.marks.fill(0);
            self.generation = 1;
        }
    }

    /// Mark `id`; true if it was not marked yet in this search.
    #[inline]
    pub(super) fn insert(&mut self, id: u32) -> bool {
        let i = id as usize;
        if i >= self.marks.len() {
            // A node inserted after this search started; grow geometrically.
            self.marks.resize((i + 1).max(self.marks.len() * 2), 0);
        }
        match self.marks.get_mut(i) {
            Some(m) if *m != self.generation => {
                *m = self.generation;
                true
            }
            _ => false,
        }
    }
}

/// Reusable per-search scratch space, pooled so that a search allocates nothing.
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) visited: Visited,
    pub(super) neighbours: Vec<u32>,
}

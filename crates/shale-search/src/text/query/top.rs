//! The best k hits seen so far, and the pruning floor they set.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::scoring::Scored;
use crate::text::inverted::{DocId, Inverted};

/// The best k scored documents seen so far: a heap with the worst on top.
pub(super) struct TopK<'a> {
    k: usize,
    heap: BinaryHeap<Ranked<'a>>,
    /// The larger of `start` and, once full, the k-th score less the pruning margin.
    floor: f64,
    /// A k-th score known to be reached ([`TopK::start_at`]) less the margin; until then
    /// minus infinity.
    start: f64,
}

/// A scored document, ordered worst first: a lower score, then a later key (by its
/// [`key_prefix`](crate::text::inverted::key_prefix), then, on a tie, the whole key).
struct Ranked<'a> {
    score: f64,
    prefix: u64,
    id: DocId,
    ix: &'a Inverted,
}

impl Ord for Ranked<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        // "Greater" is worse, so the max-heap keeps the worst on top.
        other
            .score
            .total_cmp(&self.score)
            .then_with(|| self.prefix.cmp(&other.prefix))
            .then_with(|| self.ix.key_of(self.id).cmp(&other.ix.key_of(other.id)))
    }
}

impl PartialOrd for Ranked<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ranked<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked<'_> {}

/// The margin under which a bound counts as below the k-th score.
const PRUNE_MARGIN: f64 = 1e-9;

/// `score` less the pruning margin.
fn below_margin(score: f64) -> f64 {
    score - score.abs() * PRUNE_MARGIN
}

impl<'a> TopK<'a> {
    pub(super) fn new(k: usize) -> TopK<'a> {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.min(1 << 16).saturating_add(1)),
            floor: f64::NEG_INFINITY,
            start: f64::NEG_INFINITY,
        }
    }

    /// Prune from the start as if the k-th score were `kth` already: the caller knows of
    /// k documents scoring at least that.
    pub(super) fn start_at(&mut self, kth: f64) {
        self.start = below_margin(kth);
        self.floor = self.floor.max(self.start);
    }

    pub(super) fn is_full(&self) -> bool {
        self.heap.len() >= self.k
    }

    /// Whether a document scoring at most `bound` surely cannot enter.
    pub(super) fn below(&self, bound: f64) -> bool {
        bound < self.floor
    }

    /// Whether documents scoring at most `bound` exactly, whose keys have a prefix at
    /// least `min_key` ([`key_prefix`](crate::text::inverted::key_prefix)), surely cannot enter:
    /// at most the k-th score, with keys after the k-th hit's.
    pub(super) fn loses_tie(&self, bound: f64, min_key: u64) -> bool {
        self.is_full()
            && self
                .heap
                .peek()
                .is_some_and(|worst| bound <= worst.score && worst.prefix < min_key)
    }

    pub(super) fn offer(&mut self, ix: &'a Inverted, id: DocId, score: f64) {
        if self.k == 0 {
            return;
        }
        let prefix = match self.heap.peek().filter(|_| self.is_full()) {
            // Most candidates lose on the score, the rest mostly win or lose on the key's
            // prefix: no key is read for them.
            Some(worst) => match score.total_cmp(&worst.score) {
                Ordering::Less => return,
                Ordering::Equal => match ix.prefix_of(id) {
                    p if p > worst.prefix => return,
                    p => p,
                },
                Ordering::Greater => ix.prefix_of(id),
            },
            None => ix.prefix_of(id),
        };
        let r = Ranked {
            score,
            prefix,
            id,
            ix,
        };
        if self.heap.len() < self.k {
            self.heap.push(r);
        } else if self.heap.peek().is_some_and(|worst| r < *worst) {
            self.heap.pop();
            self.heap.push(r);
        } else {
            return;
        }
        if let Some(worst) = self.heap.peek().filter(|_| self.is_full()) {
            self.floor = below_margin(worst.score).max(self.start);
        }
    }

    /// Best first.
    pub(super) fn into_sorted(self) -> Vec<Scored> {
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|r| Scored {
                id: r.id,
                score: r.score,
            })
            .collect()
    }
}

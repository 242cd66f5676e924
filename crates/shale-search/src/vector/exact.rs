//! Exact k-nearest-neighbour search: every candidate is scored.
//!
//! This is the reference the HNSW graph is measured against, and the right tool whenever the
//! candidate set is small: a filter that admits a few hundred keys out of millions is answered
//! faster by scoring those few than by walking a graph whose nodes mostly fail the filter.
//!
//! Results are ordered by score descending, ties by id ascending, so two runs (and the graph
//! and exact search on the same vectors) list equal scores in the same order.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Metric, Neighbor, NodeId};

/// The `k` candidates most similar to `query` among `items` that pass `filter`, under the
/// cosine metric.
///
/// `items` yields `(id, vector)` pairs of unit vectors of the query's dimension; the score is
/// their cosine similarity with `query` (which must be unit length too). Runs in
/// O(n · dim + n · log k) time and O(k) memory, so `items` may be a lazy scan.
pub fn search<'a, I>(
    items: I,
    query: &[f32],
    k: usize,
    filter: Option<&dyn Fn(NodeId) -> bool>,
) -> Vec<Neighbor>
where
    I: IntoIterator<Item = (NodeId, &'a [f32])>,
{
    search_by(Metric::Cosine, items, query, k, filter)
}

/// [`search`] under any metric: the score is [`Metric::score`] of `query` and each vector,
/// both already as the metric compares them ([`Metric::prepare`]).
pub fn search_by<'a, I>(
    metric: Metric,
    items: I,
    query: &[f32],
    k: usize,
    filter: Option<&dyn Fn(NodeId) -> bool>,
) -> Vec<Neighbor>
where
    I: IntoIterator<Item = (NodeId, &'a [f32])>,
{
    let scored = items
        .into_iter()
        .filter(|(id, _)| filter.is_none_or(|f| f(*id)))
        .map(|(id, v)| Neighbor {
            id,
            score: metric.score(query, v),
        });
    top_k(scored, k)
}

/// The best `k` of `scored`, best first (ties by id ascending), in O(k) memory.
pub fn top_k(scored: impl IntoIterator<Item = Neighbor>, k: usize) -> Vec<Neighbor> {
    let mut top = TopK::new(k);
    for n in scored {
        top.offer(n);
    }
    top.into_sorted()
}

/// The best `k` of the neighbours offered to it.
pub(crate) struct TopK {
    k: usize,
    /// A min-heap on rank: the worst kept neighbour is on top, ready to be evicted.
    heap: BinaryHeap<Reverse<Neighbor>>,
}

impl TopK {
    pub(crate) fn new(k: usize) -> TopK {
        TopK {
            k,
            heap: BinaryHeap::with_capacity(k.saturating_add(1).min(1 << 16)),
        }
    }

    pub(crate) fn offer(&mut self, n: Neighbor) {
        if self.heap.len() < self.k {
            self.heap.push(Reverse(n));
        } else if let Some(mut worst) = self.heap.peek_mut() {
            if n > worst.0 {
                *worst = Reverse(n);
            }
        }
    }

    /// The lowest score [`TopK::offer`] may still keep: minus infinity until `k` are kept,
    /// then the worst kept one's (a tie is kept if its id ranks better). A caller comparing
    /// each score with it first skips the offer of most candidates.
    #[inline]
    pub(crate) fn floor(&self) -> f32 {
        match self.heap.peek() {
            Some(worst) if self.heap.len() >= self.k => worst.0.score,
            _ => f32::NEG_INFINITY,
        }
    }

    /// Best first.
    pub(crate) fn into_sorted(self) -> Vec<Neighbor> {
        // Ascending order of `Reverse(n)` is descending order of `n`: best first.
        self.heap
            .into_sorted_vec()
            .into_iter()
            .map(|r| r.0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(angle: f32) -> [f32; 2] {
        [angle.cos(), angle.sin()]
    }

    #[test]
    fn orders_by_score_then_id_and_honours_k_and_filter() {
        let vs: Vec<(NodeId, [f32; 2])> = vec![
            (NodeId(5), unit(0.3)),
            (NodeId(1), unit(0.1)),
            (NodeId(3), unit(-0.1)), // ties with 1: same score, lower id wins
            (NodeId(2), unit(0.0)),
            (NodeId(4), unit(3.0)),
        ];
        let items = || vs.iter().map(|(id, v)| (*id, &v[..]));
        let q = unit(0.0);
        let ids = |r: Vec<Neighbor>| r.iter().map(|n| n.id.0).collect::<Vec<_>>();

        assert_eq!(ids(search(items(), &q, 10, None)), [2, 1, 3, 5, 4]);
        assert_eq!(ids(search(items(), &q, 3, None)), [2, 1, 3]);
        assert_eq!(ids(search(items(), &q, 0, None)), Vec::<u32>::new());
        let odd = |id: NodeId| id.0 % 2 == 1;
        assert_eq!(ids(search(items(), &q, 2, Some(&odd))), [1, 3]);
        let r = search(items(), &q, 1, None);
        assert!((r[0].score - 1.0).abs() < 1e-6);
    }

    #[test]
    fn matches_a_full_sort_on_random_data() {
        let mut x = 0x1234_5678_u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        let dim = 7;
        let vs: Vec<Vec<f32>> = (0..500)
            .map(|_| {
                let mut v: Vec<f32> = (0..dim).map(|_| next()).collect();
                assert!(super::super::distance::normalize(&mut v));
                v
            })
            .collect();
        let q = vs[17].clone();
        let items = vs
            .iter()
            .enumerate()
            .map(|(i, v)| (NodeId(i as u32), &v[..]));
        let got = search(items, &q, 25, None);
        let mut all: Vec<Neighbor> = vs
            .iter()
            .enumerate()
            .map(|(i, v)| Neighbor {
                id: NodeId(i as u32),
                score: crate::vector::distance::cosine_unit(&q, v),
            })
            .collect();
        all.sort_by(|a, b| b.cmp(a));
        assert_eq!(got, all[..25]);
        assert_eq!(got[0].id, NodeId(17));
    }
}

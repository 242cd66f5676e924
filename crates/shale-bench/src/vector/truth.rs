//! Exact answers and how close an engine came to them: the ground truths every engine's
//! recall is scored against, computed with Shale's exact search.

use std::ops::Range;

use shale_search::vector::{exact, Neighbor, NodeId};

/// Fraction of the true neighbours found, over all queries (a query whose truth has fewer
/// than k, as a filter admitting fewer than k ids gives, counts only those).
pub fn recall(got: &[Vec<u32>], truth: &[Vec<Neighbor>]) -> f64 {
    let hits: usize = got
        .iter()
        .zip(truth)
        .map(|(g, t)| t.iter().filter(|n| g.contains(&n.id.0)).count())
        .sum();
    let total: usize = truth.iter().map(Vec::len).sum();
    hits as f64 / total.max(1) as f64
}

/// The exact `k` nearest of each query among the vectors `rows` of `base` (ids are row
/// numbers), computed on `threads` threads.
pub fn ground_truth(
    base: &[f32],
    queries: &[f32],
    dim: usize,
    k: usize,
    threads: usize,
    rows: Range<usize>,
) -> Vec<Vec<Neighbor>> {
    let qs: Vec<&[f32]> = queries.chunks_exact(dim).collect();
    let per = qs.len().div_ceil(threads).max(1);
    let first = rows.start;
    let admitted = base.get(rows.start * dim..rows.end * dim).unwrap_or(&[]);
    std::thread::scope(|s| {
        let handles: Vec<_> = qs
            .chunks(per)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|q| {
                            let items = admitted
                                .chunks_exact(dim)
                                .enumerate()
                                .map(|(i, v)| (NodeId((first + i) as u32), v));
                            exact::search(items, q, k, None)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("ground-truth thread panicked"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_counts_true_neighbours_found() {
        let truth = vec![vec![
            Neighbor {
                id: NodeId(1),
                score: 1.0,
            },
            Neighbor {
                id: NodeId(2),
                score: 0.5,
            },
        ]];
        assert_eq!(recall(&[vec![2, 7]], &truth), 0.5);
        assert_eq!(recall(&[vec![2, 1]], &truth), 1.0);
        // A truth shorter than k (a filter admitting fewer ids): only its entries count.
        let short = vec![truth[0][..1].to_vec()];
        assert_eq!(recall(&[vec![1, u32::MAX]], &short), 1.0);
    }

    #[test]
    fn ground_truth_over_a_range_keeps_row_ids() {
        // Four 2-d unit vectors; the query is closest to row 0, then 1, then 2.
        let base = [1.0, 0.0, 0.8, 0.6, 0.6, 0.8, 0.0, 1.0];
        let ids = |t: &[Vec<Neighbor>]| t[0].iter().map(|n| n.id.0).collect::<Vec<_>>();
        assert_eq!(
            ids(&ground_truth(&base, &[1.0, 0.0], 2, 2, 1, 0..4)),
            [0, 1]
        );
        assert_eq!(
            ids(&ground_truth(&base, &[1.0, 0.0], 2, 2, 1, 2..4)),
            [2, 3]
        );
    }
}

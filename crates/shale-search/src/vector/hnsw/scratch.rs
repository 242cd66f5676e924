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

/// The nodes one search has visited: one bit per node id, so that the marks of a graph of
/// 100,000 nodes (12.5 KiB) stay in the core's first-level cache while the search runs.
/// Clearing is proportional to the search, not the graph: the words a search set are
/// remembered and only they are zeroed by the next `start`.
///
/// Whether a neighbour was visited is a coin toss to the branch predictor, so
/// [`Visited::insert`] has no branch on it: the caller gets the answer as a number to add.
#[derive(Default)]
pub(super) struct Visited {
    words: Vec<u64>,
    /// Indexes of the words set since the last `start`: the first `touched_len` entries. As
    /// long as `words`, so that a write into it never fails.
    touched: Vec<u32>,
    touched_len: usize,
}

impl Visited {
    /// Forget every mark, and make room for ids below `bound`.
    pub(super) fn start(&mut self, bound: usize) {
        for &w in self.touched.iter().take(self.touched_len) {
            if let Some(word) = self.words.get_mut(w as usize) {
                *word = 0;
            }
        }
        self.touched_len = 0;
        let need = bound.div_ceil(64);
        if self.words.len() < need {
            self.grow(need - 1);
        }
    }

    /// Room for word `w`: a node inserted after this search started. Grows geometrically.
    #[cold]
    fn grow(&mut self, w: usize) {
        let len = (w + 1).max(self.words.len() * 2);
        self.words.resize(len, 0);
        self.touched.resize(len, 0);
    }

    /// Mark `id`; 1 if it was not marked yet in this search, else 0.
    #[inline]
    pub(super) fn insert(&mut self, id: u32) -> usize {
        let w = (id / 64) as usize;
        if w >= self.words.len() {
            self.grow(w);
        }
        let bit = 1u64 << (id % 64);
        let Some(word) = self.words.get_mut(w) else {
            return 0;
        };
        let old = *word;
        *word = old | bit;
        if let Some(slot) = self.touched.get_mut(self.touched_len) {
            *slot = id / 64;
        }
        self.touched_len += usize::from(old == 0);
        usize::from(old & bit == 0)
    }
}

/// The `ef` nearest nodes a search has found, nearest first, each marked once expanded
/// (see `Hnsw::search_pool`).
///
/// A node is one `u64`, nearest first in one array, so that an insertion moves one array:
///
/// ```text
///   63            33  32         31          0
///   [ distance bits ][ expanded ][    id     ]
/// ```
///
/// The distance's bits are made to order as unsigned integers (`f32::total_cmp`'s order)
/// and lose their last bit to the flag; entries order by the key with the flag bit set on
/// both sides, so marking a node expanded never moves it. The place of a new node is a
/// count of the keys below it, a few independent wide compares where a binary search would
/// be a chain of dependent loads.
pub(super) struct Pool {
    keys: Vec<u64>,
    /// The keys [`Pool::offer_all`] is merging in, reused from one call to the next.
    incoming: Vec<u64>,
    /// Whether the CPU has AVX-512F, asked once (see [`Pool::count_below`]).
    avx512: bool,
}

impl Default for Pool {
    fn default() -> Pool {
        #[cfg(target_arch = "x86_64")]
        let avx512 = std::arch::is_x86_feature_detected!("avx512f");
        #[cfg(not(target_arch = "x86_64"))]
        let avx512 = false;
        Pool {
            keys: Vec::new(),
            incoming: Vec::new(),
            avx512,
        }
    }
}

const EXPANDED: u64 = 1 << 32;

/// `f32::total_cmp`'s order as unsigned integer order.
#[inline]
fn ordered_bits(x: f32) -> u32 {
    let b = x.to_bits();
    if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    }
}

#[inline]
fn from_ordered_bits(b: u32) -> f32 {
    if b & 0x8000_0000 != 0 {
        f32::from_bits(b & 0x7fff_ffff)
    } else {
        f32::from_bits(!b)
    }
}

/// The key of an unexpanded `c`.
#[inline]
fn key(c: Cand) -> u64 {
    u64::from(ordered_bits(c.dist) & !1) << 32 | u64::from(c.id)
}

/// The candidate a key holds (its distance without the last bit).
#[inline]
fn cand(key: u64) -> Cand {
    Cand {
        dist: from_ordered_bits((key >> 32) as u32 & !1),
        id: key as u32,
    }
}

impl Pool {
    pub(super) fn clear(&mut self) {
        self.keys.clear();
    }

    /// How many keys order below `k` (flags ignored).
    #[inline]
    fn count_below(&self, k: u64) -> usize {
        #[cfg(target_arch = "x86_64")]
        if self.avx512 {
            // SAFETY: `avx512` says the CPU has AVX-512F.
            return unsafe { count_below_avx512(&self.keys, k) };
        }
        self.keys.partition_point(|&e| e | EXPANDED < k | EXPANDED)
    }

    /// Insert `c` if it is among the `ef` nearest so far; returns where it went.
    #[inline]
    pub(super) fn offer(&mut self, c: Cand, ef: usize) -> Option<usize> {
        let k = key(c);
        if self.keys.len() >= ef
            && self
                .keys
                .last()
                .is_none_or(|&last| k | EXPANDED >= last | EXPANDED)
        {
            return None;
        }
        let at = self.count_below(k);
        self.keys.truncate(ef.saturating_sub(1));
        self.keys.insert(at.min(self.keys.len()), k);
        Some(at)
    }

    /// Insert those of `cands` that are among the `ef` nearest, as a call of
    /// [`Pool::offer`] for each would, in one merge: the array's tail moves once, not once
    /// per candidate. Returns the lowest position one of them went to.
    pub(super) fn offer_all(
        &mut self,
        cands: impl Iterator<Item = Cand>,
        ef: usize,
    ) -> Option<usize> {
        let bound = match self.keys.last() {
            Some(&last) if self.keys.len() >= ef => last | EXPANDED,
            _ => u64::MAX,
        };
        self.incoming.clear();
        self.incoming
            .extend(cands.map(key).filter(|&k| k | EXPANDED < bound));
        if self.incoming.is_empty() || ef == 0 {
            return None;
        }
        self.incoming.sort_unstable();
        // From the back: the larger of the two arrays' last unplaced keys goes to the last
        // free place, until every incoming key is placed; the keys below the smallest
        // incoming one stay where they are.
        let mut old = self.keys.len();
        self.keys.resize(old + self.incoming.len(), 0);
        let mut place = self.keys.len();
        for &new in self.incoming.iter().rev() {
            loop {
                place -= 1;
                let below = old.checked_sub(1).and_then(|i| self.keys.get(i).copied());
                match below {
                    Some(k) if k | EXPANDED > new | EXPANDED => {
                        if let Some(slot) = self.keys.get_mut(place) {
                            *slot = k;
                        }
                        old -= 1;
                    }
                    _ => {
                        if let Some(slot) = self.keys.get_mut(place) {
                            *slot = new;
                        }
                        break;
                    }
                }
            }
        }
        self.keys.truncate(ef);
        (place < ef).then_some(place)
    }

    /// The first unexpanded node at or after position `from`, marked expanded, and its
    /// position.
    #[inline]
    pub(super) fn expand(&mut self, from: usize) -> Option<(usize, Cand)> {
        let (i, k) = self
            .keys
            .get_mut(from..)?
            .iter_mut()
            .enumerate()
            .find(|(_, k)| **k & EXPANDED == 0)?;
        *k |= EXPANDED;
        Some((from + i, cand(*k)))
    }

    /// The first unexpanded node at or after position `from`.
    #[inline]
    pub(super) fn unexpanded_from(&self, from: usize) -> Option<Cand> {
        self.keys
            .get(from..)?
            .iter()
            .find(|&&k| k & EXPANDED == 0)
            .map(|&k| cand(k))
    }

    /// The nodes, nearest first.
    pub(super) fn cands(&self) -> Vec<Cand> {
        self.keys.iter().map(|&k| cand(k)).collect()
    }
}

/// [`Pool::count_below`] eight keys per compare, every compare independent of the others.
///
/// # Safety
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn count_below_avx512(keys: &[u64], k: u64) -> usize {
    use std::arch::x86_64::{
        _mm512_cmplt_epu64_mask, _mm512_loadu_si512, _mm512_or_si512, _mm512_set1_epi64,
    };
    let flag = _mm512_set1_epi64(EXPANDED as i64);
    let needle = _mm512_set1_epi64((k | EXPANDED) as i64);
    let (chunks, rest) = keys.as_chunks::<8>();
    let mut n = 0;
    for chunk in chunks {
        // SAFETY: `chunk` is eight `u64`s, the width of the load.
        let v = unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) };
        n += _mm512_cmplt_epu64_mask(_mm512_or_si512(v, flag), needle).count_ones() as usize;
    }
    n + rest
        .iter()
        .filter(|&&e| e | EXPANDED < k | EXPANDED)
        .count()
}

/// Reusable per-search scratch space, pooled so that a search allocates nothing.
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) visited: Visited,
    pub(super) neighbours: Vec<u32>,
    pub(super) pool: Pool,
    /// The scores of the neighbours being scored.
    pub(super) scores: Vec<f32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_keys_order_as_candidates_do() {
        let xs = [
            f32::NEG_INFINITY,
            -3.5,
            -1.0,
            -0.0,
            0.0,
            1e-30,
            0.5,
            2.0,
            f32::INFINITY,
        ];
        for (i, &a) in xs.iter().enumerate() {
            assert_eq!(from_ordered_bits(ordered_bits(a)).to_bits(), a.to_bits());
            for &b in &xs[i..] {
                for (ia, ib) in [(1u32, 2u32), (2, 1), (7, 7)] {
                    let (ca, cb) = (Cand { dist: a, id: ia }, Cand { dist: b, id: ib });
                    assert_eq!(key(ca).cmp(&key(cb)), ca.cmp(&cb), "{a} {ia} vs {b} {ib}");
                    let expanded = key(ca) | EXPANDED;
                    assert_eq!(
                        (expanded | EXPANDED).cmp(&(key(cb) | EXPANDED)),
                        ca.cmp(&cb),
                        "the flag does not move a key"
                    );
                }
            }
            assert_eq!(cand(key(Cand { dist: a, id: 3 }) | EXPANDED).id, 3);
        }
    }

    #[test]
    fn the_pool_keeps_the_nearest_ef_and_expands_nearest_first() {
        let mut p = Pool::default();
        for (i, d) in [5.0f32, 1.0, 3.0, 4.0, 2.0].into_iter().enumerate() {
            p.offer(
                Cand {
                    dist: d,
                    id: i as u32,
                },
                3,
            );
        }
        let ids: Vec<u32> = p.cands().iter().map(|c| c.id).collect();
        assert_eq!(ids, [1, 4, 2]);
        assert_eq!(p.offer(Cand { dist: 9.0, id: 9 }, 3), None);
        assert_eq!(p.expand(0).map(|(at, c)| (at, c.id)), Some((0, 1)));
        assert_eq!(p.unexpanded_from(0).map(|c| c.id), Some(4));
        assert_eq!(p.offer(Cand { dist: 0.5, id: 8 }, 3), Some(0));
        assert_eq!(p.expand(0).map(|(at, c)| (at, c.id)), Some((0, 8)));
        assert_eq!(p.expand(0).map(|(at, c)| (at, c.id)), Some((2, 4)));
        assert_eq!(p.expand(0), None);
    }

    /// `offer_all` leaves the pool as one `offer` per candidate does, and reports the
    /// lowest position any of them took, over pools of every fill and many batches.
    #[test]
    fn offer_all_is_offer_per_candidate() {
        let mut rng = shale_rng::SplitMix64::new(7);
        for round in 0..2_000 {
            let ef = 1 + rng.below(12) as usize;
            let (mut one, mut all) = (Pool::default(), Pool::default());
            let mut id = 0u32;
            for _ in 0..1 + rng.below(6) {
                let batch: Vec<Cand> = (0..rng.below(9))
                    .map(|_| {
                        id += 1;
                        // Few distinct distances, so that ties are ordered by id.
                        Cand {
                            dist: rng.below(20) as f32,
                            id,
                        }
                    })
                    .collect();
                let lowest = batch.iter().filter_map(|&c| one.offer(c, ef)).min();
                let got = all.offer_all(batch.iter().copied(), ef);
                assert_eq!(one.keys, all.keys, "round {round}, ef {ef}");
                assert_eq!(lowest, got, "round {round}, ef {ef}");
                if rng.below(2) == 0 {
                    one.expand(0);
                    all.expand(0);
                }
            }
        }
    }
}

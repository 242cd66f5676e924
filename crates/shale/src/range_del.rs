//! Range tombstones: `delete_range(start, end)` written as one entry that hides every
//! older version of every key in `[start, end)`, whatever their number.
//!
//! A tombstone is a half-open user-key range and the sequence number of its write. An
//! entry `(key, seq)` is deleted at snapshot `s` when some tombstone covering `key` has a
//! sequence number `t` with `seq < t <= s`. The test compares sequence numbers only, never
//! where the tombstone and the entry live, so every source (memtables, SSTables of any
//! level) can be asked on its own and the answers combined by taking the newest.
//!
//! [`RangeDels`] holds a set of tombstones *fragmented* (Pebble's scheme): cut at every
//! start and end into ranges that do not overlap, each with the sequence numbers of the
//! tombstones over it, newest first. Looking up a key is then one binary search.
//!
//! ```text
//!  tombstones  [b, f)@7   [d, h)@9
//!  fragments   [b, d){7}  [d, f){9, 7}  [f, h){9}
//! ```
//!
//! Thread safety: plain values, shared behind `Arc` once built.

use std::collections::BTreeMap;

use crate::key::{compare_bytes, SeqNo};

/// `delete_range(start, end)` at `seq`: every key `k` with `start <= k < end`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub seq: SeqNo,
}

/// One fragment: `[start, end)` under tombstones with sequence numbers `seqs`, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    seqs: Vec<SeqNo>,
}

/// A set of range tombstones, fragmented for lookups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeDels {
    /// Sorted by `start`; no two overlap; none is empty.
    fragments: Vec<Fragment>,
}

impl RangeDels {
    /// Fragment `tombstones` (in any order; empty ranges are ignored).
    pub fn new<'a>(tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> RangeDels {
        Self::fragment_all(tombstones, None)
    }

    /// [`RangeDels::new`], keeping over each fragment only the newest tombstone of each
    /// stripe that the live `snapshots` (ascending) cut the sequence numbers into: no
    /// reader can tell the others apart (the reasoning of `compaction/job.rs`). So `n`
    /// nested ranges cost O(n) fragments of one sequence number each, not O(n²).
    pub fn collapsed<'a>(
        tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
        snapshots: &[SeqNo],
    ) -> RangeDels {
        Self::fragment_all(tombstones, Some(snapshots))
    }

    fn fragment_all<'a>(
        tombstones: impl IntoIterator<Item = &'a RangeTombstone>,
        stripes: Option<&[SeqNo]>,
    ) -> RangeDels {
        let stripe = |seq: SeqNo| stripes.map(|s| s.partition_point(|&snap| snap < seq));
        // A sweep over the starts and ends, in key order: between two consecutive
        // boundaries the set of tombstones over the keys does not change.
        let mut events: Vec<(&[u8], bool, SeqNo)> = Vec::new();
        for t in tombstones {
            if compare_bytes(&t.start, &t.end).is_lt() {
                events.push((&t.start, true, t.seq));
                events.push((&t.end, false, t.seq));
            }
        }
        events.sort_by(|a, b| compare_bytes(a.0, b.0));
        let mut active: BTreeMap<SeqNo, usize> = BTreeMap::new();
        let mut fragments: Vec<Fragment> = Vec::new();
        let mut i = 0;
        while let Some(&(at, _, _)) = events.get(i) {
            while let Some(&(key, is_start, seq)) = events.get(i).filter(|e| e.0 == at) {
                debug_assert_eq!(key, at);
                if is_start {
                    *active.entry(seq).or_default() += 1;
                } else if let Some(n) = active.get_mut(&seq) {
                    *n -= 1;
                    if *n == 0 {
                        active.remove(&seq);
                    }
                }
                i += 1;
            }
            let (Some(&(next, _, _)), false) = (events.get(i), active.is_empty()) else {
                continue;
            };
            let mut seqs: Vec<SeqNo> = active.keys().rev().copied().collect();
            if stripes.is_some() {
                // Newest first: keep the first of each stripe.
                let mut last = None;
                seqs.retain(|&t| {
                    let s = stripe(t);
                    let keep = last != Some(s);
                    last = Some(s);
                    keep
                });
            }
            match fragments.last_mut() {
                // Neighbours under the same tombstones become one fragment.
                Some(last) if last.end == at && last.seqs == seqs => last.end = next.to_vec(),
                _ => fragments.push(Fragment {
                    start: at.to_vec(),
                    end: next.to_vec(),
                    seqs,
                }),
            }
        }
        RangeDels { fragments }
    }

    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// The fragment whose range holds `key`.
    fn fragment(&self, key: &[u8]) -> Option<&Fragment> {
        self.fragments.get(self.fragment_index(key)?)
    }

    /// The index of the fragment whose range holds `key`.
    fn fragment_index(&self, key: &[u8]) -> Option<usize> {
        let i = self
            .fragments
            .partition_point(|f| compare_bytes(&f.start, key).is_le());
        let i = i.checked_sub(1)?;
        let f = self.fragments.get(i)?;
        compare_bytes(key, &f.end).is_lt().then_some(i)
    }

    /// [`RangeDels::deletes`] for a caller that reads keys in order: `hint` is the
    /// fragment the previous key fell in, tried before a search, and updated.
    pub fn deletes_near(&self, hint: &mut usize, key: &[u8], seq: SeqNo, snapshot: SeqNo) -> bool {
        let holds = |f: &Fragment| {
            compare_bytes(&f.start, key).is_le() && compare_bytes(key, &f.end).is_lt()
        };
        let i = match self.fragments.get(*hint) {
            Some(f) if holds(f) => *hint,
            _ => match self.fragment_index(key) {
                Some(i) => i,
                None => return false,
            },
        };
        *hint = i;
        let newest = self
            .fragments
            .get(i)
            .and_then(|f| f.seqs.iter().find(|&&t| t <= snapshot));
        newest.is_some_and(|&t| t > seq)
    }

    /// The newest tombstone over `key` visible at `snapshot`, if any.
    pub fn covering(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        let f = self.fragment(key)?;
        f.seqs.iter().copied().find(|&t| t <= snapshot)
    }

    /// Whether the entry `(key, seq)` is deleted by a tombstone visible at `snapshot`.
    pub fn deletes(&self, key: &[u8], seq: SeqNo, snapshot: SeqNo) -> bool {
        self.covering(key, snapshot).is_some_and(|t| t > seq)
    }

    /// The oldest tombstone over `key` newer than `seq`: the one a compaction weighs
    /// against the snapshots to decide whether the entry can go.
    pub fn oldest_newer_than(&self, key: &[u8], seq: SeqNo) -> Option<SeqNo> {
        let f = self.fragment(key)?;
        f.seqs.iter().rev().copied().find(|&t| t > seq)
    }

    /// Every fragment clipped to `[lower, upper)` (either unbounded when `None`), as one
    /// tombstone per fragment and sequence number, in key order then newest first: the
    /// form an SSTable stores.
    pub fn clipped(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Vec<RangeTombstone> {
        let mut out = Vec::new();
        for f in &self.fragments {
            let start = match lower {
                Some(l) if compare_bytes(&f.start, l).is_lt() => l,
                _ => f.start.as_slice(),
            };
            let end = match upper {
                Some(u) if compare_bytes(u, &f.end).is_lt() => u,
                _ => f.end.as_slice(),
            };
            if compare_bytes(start, end).is_ge() {
                continue;
            }
            out.extend(f.seqs.iter().map(|&seq| RangeTombstone {
                start: start.to_vec(),
                end: end.to_vec(),
                seq,
            }));
        }
        out
    }

    /// Every fragment as tombstones (see [`RangeDels::clipped`]).
    pub fn tombstones(&self) -> Vec<RangeTombstone> {
        self.clipped(None, None)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            seq: SeqNo(seq),
        }
    }

    #[test]
    fn fragments_the_example_of_the_module_doc() {
        let set = RangeDels::new(&[t("b", "f", 7), t("d", "h", 9)]);
        assert_eq!(
            set.tombstones(),
            vec![
                t("b", "d", 7),
                t("d", "f", 9),
                t("d", "f", 7),
                t("f", "h", 9)
            ]
        );
        assert_eq!(set.covering(b"a", SeqNo(100)), None);
        assert_eq!(set.covering(b"b", SeqNo(100)), Some(SeqNo(7)));
        assert_eq!(set.covering(b"e", SeqNo(100)), Some(SeqNo(9)));
        assert_eq!(set.covering(b"e", SeqNo(8)), Some(SeqNo(7)));
        assert_eq!(set.covering(b"e", SeqNo(6)), None);
        assert_eq!(set.covering(b"h", SeqNo(100)), None);
        assert!(set.deletes(b"c", SeqNo(6), SeqNo(100)));
        assert!(!set.deletes(b"c", SeqNo(7), SeqNo(100)));
        assert_eq!(set.oldest_newer_than(b"e", SeqNo(3)), Some(SeqNo(7)));
        assert_eq!(set.oldest_newer_than(b"e", SeqNo(7)), Some(SeqNo(9)));
    }

    #[test]
    fn clipping_and_empty_ranges() {
        let set = RangeDels::new(&[t("b", "f", 7), t("x", "x", 3), t("z", "c", 4)]);
        assert_eq!(set.tombstones(), vec![t("b", "f", 7)]);
        assert_eq!(set.clipped(Some(b"c"), Some(b"e")), vec![t("c", "e", 7)]);
        assert_eq!(set.clipped(Some(b"f"), None), vec![]);
        assert!(RangeDels::new(&[]).is_empty());
    }

    #[test]
    fn collapsing_keeps_the_newest_tombstone_of_each_stripe() {
        // A sliding window: [a, b), [a, c), [a, d) ... each newer than the last.
        let keys: Vec<String> = (0..50).map(|i| format!("k{i:02}")).collect();
        let window: Vec<RangeTombstone> = (1..50)
            .map(|i| t("k00", &keys[i], 100 + i as u64))
            .collect();
        let full = RangeDels::new(&window);
        let seqs = |set: &RangeDels| set.fragments.iter().map(|f| f.seqs.len()).sum::<usize>();
        assert_eq!(seqs(&full), 49 * 50 / 2, "uncollapsed: quadratic");
        let one_stripe = RangeDels::collapsed(&window, &[]);
        assert_eq!(
            one_stripe.fragments.len(),
            1,
            "every fragment keeps only the newest"
        );
        assert_eq!(seqs(&one_stripe), 1);
        // A snapshot at 120 splits the stripes: what it reads is kept.
        let split = RangeDels::collapsed(&window, &[SeqNo(120)]);
        for (i, k) in keys.iter().enumerate().take(49) {
            let k = k.as_bytes();
            assert_eq!(
                split.covering(k, SeqNo(120)),
                full.covering(k, SeqNo(120)),
                "key {i}"
            );
            assert_eq!(split.covering(k, SeqNo::MAX), full.covering(k, SeqNo::MAX));
        }
        assert!(seqs(&split) < 2 * 50);
    }

    /// The brute-force answer: the newest tombstone over `key` at `snapshot`.
    fn brute(ts: &[RangeTombstone], key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        ts.iter()
            .filter(|t| t.start.as_slice() <= key && key < t.end.as_slice() && t.seq <= snapshot)
            .map(|t| t.seq)
            .max()
    }

    proptest! {
        #[test]
        fn lookups_match_brute_force(
            raw in prop::collection::vec((0u8..12, 0u8..12, 1u64..40), 0..12),
            snapshot in 0u64..45,
        ) {
            let ts: Vec<RangeTombstone> = raw
                .iter()
                .map(|&(a, b, s)| RangeTombstone { start: vec![a], end: vec![b], seq: SeqNo(s) })
                .collect();
            let set = RangeDels::new(&ts);
            let again = RangeDels::new(&set.tombstones());
            // Collapsed at a snapshot, the reads at that snapshot and at the newest agree.
            let cut = SeqNo(snapshot.min(39));
            let collapsed = RangeDels::collapsed(&ts, &[cut]);
            for k in 0u8..13 {
                for at in [cut, SeqNo::MAX] {
                    prop_assert_eq!(collapsed.covering(&[k], at), brute(&ts, &[k], at));
                }
            }
            for k in 0u8..13 {
                let want = brute(&ts, &[k], SeqNo(snapshot));
                prop_assert_eq!(set.covering(&[k], SeqNo(snapshot)), want);
                prop_assert_eq!(again.covering(&[k], SeqNo(snapshot)), want);
            }
            // In order, and out of order, with a hint.
            let mut hint = 0;
            for k in (0u8..13).chain((0u8..13).rev()) {
                for seq in [0u64, 5, 20] {
                    let want = brute(&ts, &[k], SeqNo(snapshot)).is_some_and(|t| t.0 > seq);
                    let got = set.deletes_near(&mut hint, &[k], SeqNo(seq), SeqNo(snapshot));
                    prop_assert_eq!(got, want);
                }
            }
        }
    }
}

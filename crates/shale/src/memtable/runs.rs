//! Sorted runs: the memtable's sorted order, built lazily when an iterator asks for it.
//!
//! Inserts only append to the entry log; nothing sorted is maintained on the write path.
//! [`SortedRuns`] covers the first `covered` entries (ids `0..covered`) with a few immutable
//! runs, each sorted in internal-key order. To cover newer entries, [`SortedRuns::extended`]
//! sorts the uncovered tail into a new run and then, like timsort, merges the two newest runs
//! while the older is at most twice the newer:
//!
//! ```text
//!   runs (oldest first)   [ 4000 ][ 1500 ][ 600 ] + tail of 500 sorted
//!                         [ 4000 ][ 1500 ][ 600 ][ 500 ]    600 <= 2*500: merge
//!                         [ 4000 ][ 1500 ][ 1100 ]          1500 <= 2*1100: merge
//!                         [ 4000 ][ 2600 ]                  4000 <= 2*2600: merge
//!                         [ 6600 ]
//! ```
//!
//! So each run is more than twice the next newer one: there are at most log2(n) runs for an
//! iterator to merge, and an entry is copied O(log n) times over the memtable's life.
//!
//! A run element carries the first 8 bytes of the user key as a big-endian integer next to the
//! entry's address, so sorting, merging and binary search decide most comparisons without
//! reading the arena (random keys almost never share 8 bytes).
//!
//! # Thread safety
//!
//! A `SortedRuns` is immutable and shared through `Arc`: iterators keep the one they started
//! with. The memtable swaps in an extended one under a mutex that only `iter()` takes.
//!
//! # Invariants
//!
//! 1. The runs partition the entries with ids `0..covered`; each run is strictly increasing
//!    in internal-key order.
//! 2. Each run is more than twice as long as the next newer one.
//! 3. Every `RunEntry::entry` points into the arena of the memtable that built it, which
//!    outlives the runs' use (the iterators hold the memtable's `Arc`).

use std::cmp::Ordering;
use std::sync::Arc;

use super::entry::{compare_split, key_prefix, EntryPtr, EntryTable};

/// One element of a run: the key's prefix and the entry's address.
#[derive(Clone, Copy, Debug)]
pub(super) struct RunEntry {
    pub(super) prefix: u64,
    pub(super) entry: EntryPtr,
}

impl RunEntry {
    /// Internal-key order of two entries, on the prefix first.
    ///
    /// # Safety
    ///
    /// Both entries' arena is alive (invariant 3).
    unsafe fn cmp(&self, other: &RunEntry) -> Ordering {
        self.prefix.cmp(&other.prefix).then_with(|| {
            // SAFETY: forwarded to the caller.
            unsafe { compare_split(self.entry.split_key(), other.entry.split_key()) }
        })
    }
}

/// Immutable sorted runs covering entry ids `0..covered`.
#[derive(Default)]
pub(super) struct SortedRuns {
    runs: Vec<Arc<[RunEntry]>>,
    covered: u32,
}

impl SortedRuns {
    pub(super) fn covered(&self) -> u32 {
        self.covered
    }

    pub(super) fn runs(&self) -> &[Arc<[RunEntry]>] {
        &self.runs
    }

    /// Bytes of the run elements.
    pub(super) fn memory_usage(&self) -> usize {
        let elements: usize = self.runs.iter().map(|run| run.len()).sum();
        elements * std::mem::size_of::<RunEntry>()
    }

    /// These runs plus entries `covered..count`, merged to keep invariant 2.
    ///
    /// # Safety
    ///
    /// Entries `0..count` of `entries` are published (the caller loaded `count` with
    /// `Acquire`) and their arena outlives the returned runs (invariant 3).
    pub(super) unsafe fn extended(&self, entries: &EntryTable, count: u32) -> SortedRuns {
        let mut run: Vec<RunEntry> = (self.covered..count)
            .filter_map(|id| entries.get(id))
            .map(|entry| RunEntry {
                // SAFETY: a published entry of a live arena (the caller's promise).
                prefix: key_prefix(unsafe { entry.split_key() }.0),
                entry,
            })
            .collect();
        // SAFETY: as above, for every entry compared.
        run.sort_unstable_by(|a, b| unsafe { a.cmp(b) });
        let mut runs = self.runs.clone();
        if run.is_empty() {
            // Nothing new (or, against the caller's promise, nothing set): an empty run would
            // only cost every iterator a child.
            return SortedRuns {
                runs,
                covered: count.max(self.covered),
            };
        }
        let mut newest: Arc<[RunEntry]> = run.into();
        while let Some(older) = runs.last() {
            if older.len() > 2 * newest.len() {
                break;
            }
            // SAFETY: as above.
            newest = unsafe { merge(older, &newest) }.into();
            runs.pop();
        }
        runs.push(newest);
        SortedRuns {
            runs,
            covered: count,
        }
    }
}

/// The sorted union of two sorted runs.
///
/// # Safety
///
/// As for [`RunEntry::cmp`], for every entry of both runs.
unsafe fn merge(a: &[RunEntry], b: &[RunEntry]) -> Vec<RunEntry> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        // SAFETY: forwarded to the caller. Ties cannot happen ((key, seqno) is unique).
        if unsafe { x.cmp(y) } == Ordering::Greater {
            out.push(**y);
            b.next();
        } else {
            out.push(**x);
            a.next();
        }
    }
    out.extend(a);
    out.extend(b);
    out
}

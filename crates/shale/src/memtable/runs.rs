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
//! A run element carries 8 bytes of the user key as a big-endian integer next to the entry's
//! address, so sorting, merging and binary search decide most comparisons without reading the
//! arena. The 8 bytes are taken after the prefix that every covered key shares (`skip`):
//! db_bench's keys, decimal numbers zero-padded to 16 bytes, share their first 9 or 10
//! bytes in a table of a few million, and 8 bytes from the start would never tell two apart
//! (the sort of a flush then reads two arena entries per comparison: 6x slower).
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
//! 4. Every covered key starts with the same `skip` bytes, and every run element's `prefix`
//!    is taken after them (`RunEntry::new`), so prefixes of any two runs compare.

use std::cmp::Ordering;
use std::sync::Arc;

use super::entry::{compare_split, key_prefix, EntryPtr, EntryTable};

/// One element of a run: 8 bytes of the key after the shared prefix, and the entry's address.
#[derive(Clone, Copy, Debug)]
pub(super) struct RunEntry {
    pub(super) prefix: u64,
    pub(super) entry: EntryPtr,
}

impl RunEntry {
    /// The element for `entry`, whose key starts with the `skip` bytes all keys share.
    ///
    /// # Safety
    ///
    /// `entry` is published and its arena alive.
    unsafe fn new(entry: EntryPtr, skip: usize) -> RunEntry {
        // SAFETY: forwarded to the caller.
        let key = unsafe { entry.split_key() }.0;
        RunEntry {
            prefix: key_prefix(key.get(skip..).unwrap_or_default()),
            entry,
        }
    }

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
    /// Bytes every covered key starts with (invariant 4).
    skip: usize,
}

impl SortedRuns {
    pub(super) fn covered(&self) -> u32 {
        self.covered
    }

    pub(super) fn runs(&self) -> &[Arc<[RunEntry]>] {
        &self.runs
    }

    /// Bytes every covered key starts with: run prefixes are taken after them.
    pub(super) fn skip(&self) -> usize {
        self.skip
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
        let fresh: Vec<EntryPtr> = (self.covered..count)
            .filter_map(|id| entries.get(id))
            .collect();
        let oldest = self
            .runs
            .first()
            .and_then(|run| run.first())
            .map(|e| e.entry);
        let Some(reference) = oldest.or_else(|| fresh.first().copied()) else {
            // Nothing new (or, against the caller's promise, nothing set): an empty run would
            // only cost every iterator a child.
            return SortedRuns {
                runs: Vec::new(),
                covered: count.max(self.covered),
                skip: 0,
            };
        };
        // The prefix every key shares, old and new: it only shrinks as keys arrive.
        // SAFETY: published entries of a live arena (the caller's promise), here and below.
        let shared = unsafe { reference.split_key() }.0;
        let known = if oldest.is_some() {
            self.skip
        } else {
            shared.len()
        };
        let skip = unsafe { common_prefix(shared, known, &fresh) };
        let mut runs: Vec<Arc<[RunEntry]>> = if skip == self.skip {
            self.runs.clone()
        } else {
            // A new key left the shared prefix: the older runs' prefixes are re-taken.
            self.runs
                .iter()
                .map(|run| {
                    run.iter()
                        .map(|e| unsafe { RunEntry::new(e.entry, skip) })
                        .collect()
                })
                .collect()
        };
        let mut run: Vec<RunEntry> = fresh
            .into_iter()
            .map(|entry| unsafe { RunEntry::new(entry, skip) })
            .collect();
        run.sort_unstable_by(|a, b| unsafe { a.cmp(b) });
        if run.is_empty() {
            return SortedRuns {
                runs,
                covered: count.max(self.covered),
                skip,
            };
        }
        let mut newest: Arc<[RunEntry]> = run.into();
        while let Some(older) = runs.last() {
            if older.len() > 2 * newest.len() {
                break;
            }
            newest = unsafe { merge(older, &newest) }.into();
            runs.pop();
        }
        runs.push(newest);
        SortedRuns {
            runs,
            covered: count,
            skip,
        }
    }
}

/// How many of the first `known` bytes of `shared` every key of `fresh` starts with.
///
/// # Safety
///
/// The entries of `fresh` are published and their arena is alive.
unsafe fn common_prefix(shared: &[u8], known: usize, fresh: &[EntryPtr]) -> usize {
    let mut skip = known;
    for entry in fresh {
        if skip == 0 {
            break; // random keys get here within a few entries
        }
        // SAFETY: the caller's promise.
        let key = unsafe { entry.split_key() }.0;
        skip = shared
            .iter()
            .take(skip)
            .zip(key)
            .take_while(|(a, b)| a == b)
            .count();
    }
    skip
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

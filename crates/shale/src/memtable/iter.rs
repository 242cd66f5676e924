//! [`MemTableIter`]: an [`InternalIterator`] over a memtable, as a [`MergingIter`] of one
//! [`RunIter`] per sorted run (see `runs.rs`), and [`MemTable::iter`], which makes one.
//!
//! The iterator sees exactly the entries published before `MemTable::iter` returned (the runs
//! it was built from); later inserts are invisible to it. The DB reads at a seqno snapshot
//! anyway, and a frozen memtable (the flush's source) gets no inserts.
//!
//! It owns an `Arc<MemTable>` (each run iterator holds one), so the arena, and every key and
//! value slice it hands out, outlives it. It is `Send + Sync` and may move between threads;
//! like every [`InternalIterator`] it is driven by one thread at a time (`&mut self`). It
//! takes no lock and runs concurrently with the writer.
//!
//! # Invariants
//!
//! 1. A [`RunIter`] is valid iff `pos < run.len()`; every movement leaves `pos <= run.len()`.
//! 2. Every entry of `run` lives in `table`'s arena (`runs.rs` invariant 3).
//! 3. Movement never fails: every method returns `Ok(())`.

use std::cmp::Ordering;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::{Arc, PoisonError};

use super::entry::{compare_split, key_prefix, split_internal_key};
use super::runs::RunEntry;
use super::MemTable;
use crate::error::Result;
use crate::iter::{InternalIterator, MergingIter};

impl MemTable {
    /// An iterator over all entries published before this call, in internal-key order. It
    /// holds the table alive. The first call after inserts sorts them (see `runs.rs`).
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        let runs = {
            let mut cache = self.sorted.lock().unwrap_or_else(PoisonError::into_inner);
            // Acquire: entries `0..count` are complete.
            let count = self.count.load(Acquire);
            if count > cache.covered() {
                // SAFETY: entries `0..count` are published (Acquire above) and live in our
                // arena; the runs live in `self.sorted` or in iterators holding `Arc<Self>`.
                *cache = Arc::new(unsafe { cache.extended(&self.entries, count) });
                self.sorted_bytes.store(cache.memory_usage(), Relaxed);
            }
            Arc::clone(&cache)
        };
        let children = runs
            .runs()
            .iter()
            .map(|run| RunIter::new(Arc::clone(self), Arc::clone(run), runs.skip()))
            .collect();
        MemTableIter::new(children)
    }
}

/// A cursor over one sorted run; binary search for `seek`, an index step for `next`/`prev`.
pub(super) struct RunIter {
    /// Held only to keep the arena behind `run` alive (invariant 2).
    _table: Arc<MemTable>,
    run: Arc<[RunEntry]>,
    /// Bytes every key of the run starts with; prefixes are taken after them.
    skip: usize,
    pos: usize,
}

impl RunIter {
    pub(super) fn new(table: Arc<MemTable>, run: Arc<[RunEntry]>, skip: usize) -> RunIter {
        let pos = run.len();
        RunIter {
            _table: table,
            run,
            skip,
            pos,
        }
    }

    fn entry(&self) -> (&[u8], &[u8]) {
        match self.run.get(self.pos) {
            // SAFETY: invariant 2; `self._table` keeps the arena alive for the borrow of self.
            Some(e) => unsafe { e.entry.parts() },
            None => (&[], &[]),
        }
    }
}

impl InternalIterator for RunIter {
    fn valid(&self) -> bool {
        self.pos < self.run.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        // An empty run stays invalid (pos == len == 0).
        self.pos = self.run.len().saturating_sub(1);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let target = split_internal_key(target);
        let Some(first) = self.run.first() else {
            self.pos = 0;
            return Ok(());
        };
        // Against the prefix every key shares first: a target outside it lies before or
        // after the whole run, and one inside it compares on the bytes after it.
        // SAFETY: invariant 2; `self._table` is alive (here and below).
        let shared = unsafe { first.entry.split_key() }.0;
        let head = target.0.get(..self.skip).unwrap_or(target.0);
        let order = head.cmp(shared.get(..head.len()).unwrap_or_default());
        self.pos = match order {
            Ordering::Less => 0,
            Ordering::Greater => self.run.len(),
            // A proper prefix of every key sorts before them all.
            Ordering::Equal if head.len() < self.skip => 0,
            Ordering::Equal => {
                let target_prefix = key_prefix(target.0.get(self.skip..).unwrap_or_default());
                self.run.partition_point(|e| {
                    let order = e
                        .prefix
                        .cmp(&target_prefix)
                        .then_with(|| compare_split(unsafe { e.entry.split_key() }, target));
                    order == Ordering::Less
                })
            }
        };
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if self.valid() {
            self.pos += 1;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.pos = match self.pos.checked_sub(1) {
            Some(p) if self.valid() => p,
            _ => self.run.len(),
        };
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.entry().0
    }

    fn value(&self) -> &[u8] {
        self.entry().1
    }
}

/// An iterator over a memtable's entries in internal-key order.
pub struct MemTableIter {
    merge: MergingIter<RunIter>,
}

impl MemTableIter {
    pub(super) fn new(children: Vec<RunIter>) -> Self {
        MemTableIter {
            merge: MergingIter::new(children),
        }
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.merge.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.merge.seek_to_first()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.merge.seek_to_last()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.merge.seek(target)
    }

    /// Not valid afterwards if it was not valid before.
    fn next(&mut self) -> Result<()> {
        self.merge.next()
    }

    /// Not valid afterwards if it was not valid before.
    fn prev(&mut self) -> Result<()> {
        self.merge.prev()
    }

    /// Empty if not valid.
    fn key(&self) -> &[u8] {
        self.merge.key()
    }

    /// Empty if not valid.
    fn value(&self) -> &[u8] {
        self.merge.value()
    }
}

impl std::fmt::Debug for MemTableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTableIter")
            .field("valid", &self.valid())
            .finish_non_exhaustive()
    }
}

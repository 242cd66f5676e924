//! [`MemTableIter`]: an [`InternalIterator`] over a memtable.
//!
//! The iterator owns an `Arc<MemTable>`, so the arena (and every key and value slice it hands
//! out) outlives it. It is `Send + Sync` and may move between threads; like every
//! [`InternalIterator`] it is driven by one thread at a time (`&mut self`). It takes no lock
//! and runs concurrently with the writer.
//!
//! # Invariants
//!
//! 1. `node` is `None` (not valid) or a node of `table.list`.
//! 2. Movement never fails: every method returns `Ok(())`.
//!
//! `next` follows a link; `prev` and `seek_to_last` search from the head (O(log n)), as in
//! LevelDB, because nodes have no back links.

use std::sync::Arc;

use super::skiplist::{NodePtr, Target};
use super::MemTable;
use crate::error::Result;
use crate::iter::InternalIterator;

/// An iterator over a memtable's entries in internal-key order.
pub struct MemTableIter {
    table: Arc<MemTable>,
    node: Option<NodePtr>,
}

impl MemTableIter {
    pub(super) fn new(table: Arc<MemTable>) -> Self {
        MemTableIter { table, node: None }
    }

    fn entry(&self) -> (&[u8], &[u8]) {
        match self.node {
            // SAFETY: invariant 1; `self.table` keeps the list alive for the borrow of self.
            Some(node) => unsafe { self.table.list.entry(node) },
            None => (&[], &[]),
        }
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.node.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.node = self.table.list.first();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.node = self.table.list.last();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.node = self.table.list.seek(&Target::from_internal_key(target));
        Ok(())
    }

    /// Not valid afterwards if it was not valid before.
    fn next(&mut self) -> Result<()> {
        if let Some(node) = self.node {
            // SAFETY: invariant 1.
            self.node = unsafe { self.table.list.next(node) };
        }
        Ok(())
    }

    /// Not valid afterwards if it was not valid before.
    fn prev(&mut self) -> Result<()> {
        if let Some(node) = self.node {
            // SAFETY: invariant 1.
            self.node = unsafe { self.table.list.prev(node) };
        }
        Ok(())
    }

    /// Empty if not valid.
    fn key(&self) -> &[u8] {
        self.entry().0
    }

    /// Empty if not valid.
    fn value(&self) -> &[u8] {
        self.entry().1
    }
}

impl std::fmt::Debug for MemTableIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTableIter")
            .field("valid", &self.valid())
            .finish_non_exhaustive()
    }
}

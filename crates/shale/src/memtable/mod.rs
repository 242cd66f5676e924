//! The memtable: the in-memory, sorted home of the newest writes until they are flushed to an
//! SSTable.
//!
//! Entries are internal keys (`user_key ++ u64_le((seq << 8) | kind)`, see `key.rs`) with
//! their values, kept in a concurrent skiplist (`skiplist.rs`) whose nodes live in an arena
//! (`arena.rs`). The DB freezes a memtable once [`MemTable::approximate_memory_usage`] passes
//! `write_buffer_size`, then flushes it and drops it when the last reader lets go.
//!
//! # Thread safety
//!
//! `MemTable` is `Send + Sync`. [`MemTable::insert`] may be called from any thread; calls
//! are serialised by an internal mutex (the DB's write path already has a single writer, so
//! the lock is uncontended). Reads ([`MemTable::get`], [`MemTableIter`]) take no lock and may
//! run on any number of threads concurrently with the writer. A reader sees every entry
//! whose insert finished before the read began, and possibly some that finish during it;
//! snapshots (seqnos) are what give the DB a consistent view.
//!
//! # Invariants
//!
//! 1. Entries are only added, never changed or removed; memory is freed only when the
//!    `MemTable` drops, so a slice returned by `get` or an iterator lives as long as the
//!    borrow of the table (or the iterator's `Arc`).
//! 2. (user key, seqno) pairs are unique: the DB assigns each write its own seqno. Inserting
//!    a duplicate is a caller bug (caught by a debug assertion).
//! 3. `len`, `approximate_memory_usage`, `min_seq` and `max_seq` are exact as seen by the
//!    inserting thread, and by any thread synchronised with it (e.g. through the DB's write
//!    lock); racing readers may see slightly stale values.

mod arena;
mod iter;
mod skiplist;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::key::{pack_trailer, parse_internal_key, SeqNo, ValueKind};
use skiplist::{SkipList, Target};

pub use iter::MemTableIter;

/// What the memtable knows about a user key at a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemGet<'a> {
    /// The newest visible entry is a put of this value.
    Found(&'a [u8]),
    /// The newest visible entry is a deletion: older tables must not be consulted.
    Deleted,
    /// No visible entry here: look in older memtables and SSTables.
    NotFound,
}

/// A concurrent, sorted, in-memory table of internal keys and values.
pub struct MemTable {
    list: SkipList,
}

impl MemTable {
    /// An empty memtable. Allocates nothing until the first small arena chunk (4 KiB).
    pub fn new() -> MemTable {
        MemTable {
            list: SkipList::new(),
        }
    }

    /// Add the entry `(user_key, seq, kind) -> value`. For [`ValueKind::Delete`] the value
    /// is normally empty.
    ///
    /// Preconditions: no entry with the same `user_key` and `seq` exists (invariant 2), and
    /// `seq <= SeqNo::MAX`.
    ///
    /// # Panics
    ///
    /// If `user_key.len() + 8` or `value.len()` does not fit in a `u32` (the DB rejects such
    /// keys and values with `Error::InvalidArgument` long before they get here).
    pub fn insert(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.list.insert(user_key, pack_trailer(seq, kind), value);
    }

    /// The newest entry for `user_key` with a seqno `<= snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> MemGet<'_> {
        // (user_key, snapshot, SEEK) sorts before every entry of user_key at seqnos
        // <= snapshot and after every newer one, so the first entry at or after it is the
        // answer if it has the same user key.
        let target = Target {
            user_key,
            trailer: pack_trailer(snapshot, ValueKind::SEEK),
        };
        let Some(node) = self.list.seek(&target) else {
            return MemGet::NotFound;
        };
        // SAFETY: `node` came from `self.list`, which `&self` keeps alive.
        let (ikey, value) = unsafe { self.list.entry(node) };
        match parse_internal_key(ikey) {
            Some(p) if p.user_key == user_key => match p.kind {
                ValueKind::Put => MemGet::Found(value),
                ValueKind::Delete => MemGet::Deleted,
            },
            // Another user key, or (impossible: we wrote every trailer) an unknown kind.
            _ => MemGet::NotFound,
        }
    }

    /// Bytes of memory the table holds (its arena chunks); compare with `write_buffer_size`.
    pub fn approximate_memory_usage(&self) -> usize {
        self.list.memory_usage()
    }

    /// True if the table cannot take another entry whatever its memory use. A skiplist
    /// grows without a fixed capacity, so never.
    pub fn is_full(&self) -> bool {
        false
    }

    /// Number of entries (puts and deletes).
    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The largest seqno inserted, or `SeqNo::ZERO` if the table is empty.
    pub fn max_seq(&self) -> SeqNo {
        SeqNo(self.list.seq_range().1)
    }

    /// The smallest seqno inserted, or `None` if the table is empty.
    pub fn min_seq(&self) -> Option<SeqNo> {
        let (min, max) = self.list.seq_range();
        (min <= max).then_some(SeqNo(min))
    }

    /// An iterator over all entries in internal-key order. It holds the table alive and
    /// sees entries inserted after its creation as it passes their position.
    pub fn iter(self: &std::sync::Arc<Self>) -> MemTableIter {
        MemTableIter::new(std::sync::Arc::clone(self))
    }
}

impl Default for MemTable {
    fn default() -> Self {
        MemTable::new()
    }
}

impl fmt::Debug for MemTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTable")
            .field("len", &self.len())
            .field("memory_usage_bytes", &self.approximate_memory_usage())
            .field("min_seq", &self.min_seq())
            .field("max_seq", &self.max_seq())
            .finish()
    }
}

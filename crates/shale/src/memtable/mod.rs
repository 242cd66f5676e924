//! The memtable: the in-memory home of the newest writes until they are flushed to an
//! SSTable.
//!
//! Entries are internal keys (`user_key ++ u64_le((seq << 8) | kind)`, see `key.rs`) with
//! their values. The write path is built so that an insert costs O(1) and about one cache
//! miss, and a point read O(1):
//!
//! ```text
//!                      hash index (index.rs)          entry log (entry.rs, in the arena)
//!   user key --xxh3--> [ tag | id+1 ] --id--> id table --> [prev|lens|key|trailer|value]
//!                                                              | prev: next-older version
//!                                                              v
//!                                                          [prev|lens|key|trailer|value]
//!
//!   iter() --> sorted runs (runs.rs), built lazily from the log --> MemTableIter (iter.rs)
//! ```
//!
//! - An insert appends the entry to the arena (`arena.rs`) with a dense `u32` id, and points
//!   the key's hash-index slot at it; the entry links to the key's previous newest version.
//! - A get finds the key's slot and walks its versions, newest first, to the first one at or
//!   below the snapshot.
//! - Sorted order costs nothing on the write path: `iter()` sorts the entries added since the
//!   last `iter()` into a new run and merges runs timsort-style (`runs.rs`). A range scan on
//!   the active memtable, or the flush of a frozen one, pays O(new entries * log) once.
//!
//! The DB freezes a memtable once [`MemTable::approximate_memory_usage`] passes
//! `write_buffer_size` or [`MemTable::is_full`] says the hash index is at its load limit, then
//! flushes it and drops it when the last reader lets go. A table made with
//! [`MemTable::with_capacity`] for the write buffer rarely reaches that limit first; one that
//! is not frozen in time still works: the index doubles (keeping the old tables alive for
//! readers that may still probe them, so that no reader ever needs a lock or an epoch).
//!
//! # Thread safety
//!
//! `MemTable` is `Send + Sync`. [`MemTable::insert`] may be called from any thread; calls
//! are serialised by an internal mutex (the DB's write path already has a single writer, so
//! the lock is uncontended). [`MemTable::get`] takes no lock. [`MemTable::iter`] takes a
//! second mutex, which the writer never touches, only to sort and swap the runs; the iterator
//! then takes no lock. All reads run on any number of threads concurrently with the writer.
//!
//! Publication: the writer completes an entry and its id-table slot, then makes it reachable
//! with `Release` stores (the hash-index slot, or an older version's `prev` link, then the
//! entry count); readers load those with `Acquire`. So a reader sees every entry whose
//! insert returned before the read began: a get, every entry; an iterator, every entry
//! published before `iter()` returned (and none after). Snapshots (seqnos) are what give the
//! DB a consistent view.
//!
//! # Invariants
//!
//! 1. Entries are only added, never changed (except the `prev` link, see `entry.rs`) or
//!    removed; memory (arena, id table, every hash table ever used) is freed only when the
//!    `MemTable` drops, so a slice returned by `get` or an iterator lives as long as the
//!    borrow of the table (or the iterator's `Arc`).
//! 2. (user key, seqno) pairs are unique: the DB assigns each write its own seqno. Inserting
//!    a duplicate is a caller bug (caught by a debug assertion).
//! 3. Each key's version chain is newest first. The DB inserts a key's versions in seqno
//!    order, so the new entry simply becomes the head; an older seqno (never from the DB) is
//!    spliced into the chain at its place instead.
//! 4. The hash index holds one slot per distinct user key, at most half full except while
//!    `insert` grows it.
//! 5. `len`, `approximate_memory_usage`, `is_full`, `min_seq` and `max_seq` are exact as seen
//!    by the inserting thread, and by any thread synchronised with it (e.g. through the DB's
//!    write lock); racing readers may see slightly stale values.

mod arena;
mod entry;
mod hash_index;
mod iter;
mod runs;
#[cfg(test)]
mod tests;

use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize};
use std::sync::atomic::{Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Arc, Mutex, PoisonError};

use crate::key::{pack_trailer, SeqNo, ValueKind};
use crate::range_del::{RangeDels, RangeTombstone};
use arena::Arena;
use entry::{EntryPtr, EntryTable, MAX_ENTRIES, NONE};
use hash_index::{HashIndex, Probe};
use runs::SortedRuns;

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

/// The smallest average entry (arena bytes) [`MemTable::with_capacity`] plans the hash index
/// for. Smaller entries fill the index before the write buffer: the memtable then reports
/// [`MemTable::is_full`] early. At 128 bytes the index costs about 1/8 of the write buffer
/// (8 bytes per slot, two slots per entry, rounded to a power of two).
const PLANNED_ENTRY_BYTES: usize = 128;

/// State only the writer touches, under `MemTable::writer`.
struct Writer {
    arena: Arena,
    /// Every hash table this memtable has used, oldest first; the last is the current one
    /// (`MemTable::index`). Raw pointers from `Box::into_raw`, freed only in `Drop`
    /// (invariant 1): a reader may still be probing an old one.
    indexes: Vec<NonNull<HashIndex>>,
    len: u32,
    keys: usize,
    min_seq: u64,
    max_seq: u64,
    /// Bytes held besides the arena: id-table segments and hash tables.
    side_bytes: usize,
}

// SAFETY: `Writer` owns its arena (itself `Send`) and the hash tables behind `indexes`, which
// are `Sync` (atomics only); moving the owner to another thread is sound.
unsafe impl Send for Writer {}

/// A concurrent in-memory table of internal keys and values: O(1) insert and point get,
/// sorted iteration on demand.
pub struct MemTable {
    entries: EntryTable,
    /// The current hash table, one of `writer.indexes`.
    index: AtomicPtr<HashIndex>,
    /// Published entries: ids `0..count`.
    count: AtomicU32,
    writer: Mutex<Writer>,
    sorted: Mutex<Arc<SortedRuns>>,
    /// Bytes of the runs in `sorted`, set under its lock.
    sorted_bytes: AtomicUsize,
    // Mirrors of writer-owned counters, published for lock-free readers.
    memory_usage: AtomicUsize,
    full: AtomicBool,
    min_seq: AtomicU64,
    max_seq: AtomicU64,
    /// Range tombstones, kept apart from the point entries (see `range_del.rs`).
    range_dels: Mutex<RangeDelState>,
    /// How many `range_dels` holds: a read of a table without any takes no lock.
    range_del_count: AtomicUsize,
}

/// The range tombstones of a memtable, and their fragments once a reader asked for them.
#[derive(Default)]
struct RangeDelState {
    list: Vec<RangeTombstone>,
    built: Option<Arc<RangeDels>>,
}

impl MemTable {
    /// An empty memtable with the smallest hash index (512 bytes); it grows as needed.
    /// For tests and tools; the DB sizes its memtables with [`MemTable::with_capacity`].
    pub fn new() -> MemTable {
        MemTable::with_index(HashIndex::new(hash_index::MIN_BITS))
    }

    /// An empty memtable whose hash index is sized for `write_buffer_size` bytes of entries
    /// of `PLANNED_ENTRY_BYTES` (128) or more, so that it rarely fills (or has to grow) before
    /// the arena reaches `write_buffer_size`. The index is allocated now and counted in
    /// [`MemTable::approximate_memory_usage`].
    pub fn with_capacity(write_buffer_size: usize) -> MemTable {
        let keys = (write_buffer_size / PLANNED_ENTRY_BYTES).max(1);
        // Two slots per key (load factor 1/2).
        let slots = keys.saturating_mul(2).checked_next_power_of_two();
        let bits = slots.map_or(hash_index::MAX_BITS, |s| s.trailing_zeros());
        MemTable::with_index(HashIndex::new(bits))
    }

    fn with_index(index: HashIndex) -> MemTable {
        let side_bytes = index.memory_usage();
        let index = NonNull::from(Box::leak(Box::new(index)));
        MemTable {
            entries: EntryTable::new(),
            index: AtomicPtr::new(index.as_ptr()),
            count: AtomicU32::new(0),
            writer: Mutex::new(Writer {
                arena: Arena::new(),
                indexes: vec![index],
                len: 0,
                keys: 0,
                min_seq: u64::MAX,
                max_seq: 0,
                side_bytes,
            }),
            sorted: Mutex::new(Arc::default()),
            sorted_bytes: AtomicUsize::new(0),
            memory_usage: AtomicUsize::new(side_bytes),
            full: AtomicBool::new(false),
            min_seq: AtomicU64::new(u64::MAX),
            max_seq: AtomicU64::new(0),
            range_dels: Mutex::default(),
            range_del_count: AtomicUsize::new(0),
        }
    }

    /// The current hash table.
    fn index(&self) -> &HashIndex {
        // SAFETY: `index` always points at one of `writer.indexes`, which are freed only when
        // `self` drops (invariant 1). Acquire: the table's initial contents (a grown copy)
        // were written before the writer published its address.
        unsafe { &*self.index.load(Acquire) }
    }

    /// Add the entry `(user_key, seq, kind) -> value`. For [`ValueKind::Delete`] the value
    /// is normally empty; a [`ValueKind::RangeDelete`] (`value` the range's end) goes to
    /// [`MemTable::delete_range`].
    ///
    /// Preconditions: no entry with the same `user_key` and `seq` exists (invariant 2), and
    /// `seq <= SeqNo::MAX`.
    ///
    /// # Panics
    ///
    /// If `user_key.len() + 8` or `value.len()` does not fit in a `u32` (the DB rejects such
    /// keys and values with `Error::InvalidArgument` long before they get here), or after
    /// `u32::MAX - 1` entries (the arena would hold hundreds of GiB by then).
    pub fn insert(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        if kind == ValueKind::RangeDelete {
            return self.delete_range(seq, user_key, value);
        }
        let trailer = pack_trailer(seq, kind);
        let tag = hash_index::tag(user_key);

        // A panic can only happen before the table is touched (the id and length checks,
        // the arena's size check, an allocation failure), so a poisoned lock still guards a
        // consistent table.
        let mut guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let w = &mut *guard;
        let id = w.len;
        assert!(id < MAX_ENTRIES, "memtable holds at most 2^32 - 2 entries");

        let is_key = |id: u32| {
            self.entries.get(id).is_some_and(|e| {
                // SAFETY: ids in the index are published entries of our arena.
                unsafe { e.split_key() }.0 == user_key
            })
        };
        match self.index().find(tag, is_key) {
            Probe::Found { slot, id: head } => {
                // SAFETY: `head` came from our index, so it is set and lives in our arena.
                let head_ptr = self
                    .entries
                    .get(head)
                    .map(|e| (e, unsafe { e.split_key() }.1));
                match head_ptr {
                    Some((_, head_trailer)) if head_trailer < trailer => {
                        // The usual case: a newer version becomes the head.
                        let entry = EntryPtr::write(&mut w.arena, head, user_key, trailer, value);
                        w.side_bytes += self.entries.set(id, entry);
                        self.index().set(slot, tag, id);
                    }
                    Some((head_ptr, _)) => {
                        // SAFETY: `head_ptr` is a published entry of our arena.
                        unsafe { self.splice_older(w, head_ptr, id, user_key, trailer, value) };
                    }
                    None => unreachable!("memtable index names an unset entry"),
                }
            }
            Probe::Vacant { mut slot } => {
                if w.keys >= self.index().max_keys() {
                    slot = self.grow_index(w, tag);
                }
                let entry = EntryPtr::write(&mut w.arena, NONE, user_key, trailer, value);
                w.side_bytes += self.entries.set(id, entry);
                self.index().set(slot, tag, id);
                w.keys += 1;
            }
        }

        w.len = id + 1;
        let seq = trailer >> 8;
        w.min_seq = w.min_seq.min(seq);
        w.max_seq = w.max_seq.max(seq);
        // Release: an iterator built after loading this count sees entries `0..len` whole.
        self.count.store(w.len, Release);
        self.min_seq.store(w.min_seq, Relaxed);
        self.max_seq.store(w.max_seq, Relaxed);
        self.memory_usage
            .store(w.arena.memory_usage() + w.side_bytes, Relaxed);
        self.full.store(w.keys >= self.index().max_keys(), Relaxed);
    }

    /// Insert entry `id`, older than the head `head`, into the key's chain after the last
    /// version newer than it (invariant 3). Never happens on the DB's write path.
    ///
    /// # Safety
    ///
    /// `head` is a published entry of this table; `w` is its writer state.
    unsafe fn splice_older(
        &self,
        w: &mut Writer,
        head: EntryPtr,
        id: u32,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) {
        let mut newer = head;
        loop {
            // SAFETY: `newer` is a published entry of our arena, and so is its `prev`.
            let next = unsafe { newer.prev() };
            match self.entries.get(next) {
                // SAFETY: as above.
                Some(e) if unsafe { e.split_key() }.1 > trailer => newer = e,
                older => {
                    debug_assert!(
                        // SAFETY: as above.
                        older.is_none_or(|e| unsafe { e.split_key() }.1 >> 8 != trailer >> 8),
                        "memtable (user key, seqno) pairs must be unique"
                    );
                    let entry = EntryPtr::write(&mut w.arena, next, user_key, trailer, value);
                    w.side_bytes += self.entries.set(id, entry);
                    // SAFETY: `newer` is ours; entry `id` is complete and its id set.
                    unsafe { newer.set_prev(id) };
                    return;
                }
            }
        }
    }

    /// Replace the hash table with one twice the size and return the empty slot for `tag`
    /// in it. Only for a table nobody froze in time (see the module comment).
    fn grow_index(&self, w: &mut Writer, tag: u32) -> usize {
        let Some(bigger) = self.index().grown() else {
            // At the largest table (2^32 slots); ids run out first (MAX_ENTRIES < 2^32), so
            // the table always keeps an empty slot.
            return match self.index().find(tag, |_| false) {
                Probe::Vacant { slot } | Probe::Found { slot, .. } => slot,
            };
        };
        w.side_bytes += bigger.memory_usage();
        let bigger = NonNull::from(Box::leak(Box::new(bigger)));
        w.indexes.push(bigger);
        // Release: readers that load the new address see the copied slots.
        self.index.store(bigger.as_ptr(), Release);
        match self.index().find(tag, |_| false) {
            Probe::Vacant { slot } | Probe::Found { slot, .. } => slot,
        }
    }

    /// The newest entry for `user_key` with a seqno `<= snapshot`. Range tombstones are
    /// not consulted: see [`MemTable::range_dels`].
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> MemGet<'_> {
        match self.get_entry(user_key, snapshot) {
            Some((ValueKind::Put, _, value)) => MemGet::Found(value),
            Some(_) => MemGet::Deleted,
            None => MemGet::NotFound,
        }
    }

    /// [`MemTable::get`] with the entry's kind and sequence number.
    pub fn get_entry(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, SeqNo, &[u8])> {
        // An empty memtable (the usual state just after a flush) has nothing to find, and its
        // index, sized for a full write buffer, would cost a cache miss to probe. An entry
        // visible at `snapshot` was counted before its sequence number was published.
        if self.count.load(Acquire) == 0 {
            return None;
        }
        let tag = hash_index::tag(user_key);
        let is_key = |id: u32| {
            self.entries.get(id).is_some_and(|e| {
                // SAFETY: the Acquire load of the slot that named `id` makes the entry
                // visible; it lives in our arena.
                unsafe { e.split_key() }.0 == user_key
            })
        };
        let Probe::Found { id, .. } = self.index().find(tag, is_key) else {
            return None;
        };
        // Walk the versions, newest first (invariant 3).
        let mut next = Some(id);
        while let Some(entry) = next.and_then(|id| self.entries.get(id)) {
            // SAFETY: every id on the chain was published before the link that named it.
            let ((_, trailer), value) = unsafe { (entry.split_key(), entry.parts().1) };
            if trailer >> 8 <= snapshot.0 {
                // Every trailer was written by `insert`, with a known kind.
                let kind = ValueKind::from_u8(trailer as u8)?;
                return Some((kind, SeqNo(trailer >> 8), value));
            }
            // SAFETY: as above.
            next = Some(unsafe { entry.prev() }).filter(|&p| p != NONE);
        }
        None
    }

    /// The sequence number of `user_key`'s newest entry (a value or a tombstone), if the
    /// table has one: what a transaction's commit compares with its snapshot.
    pub fn newest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        if self.count.load(Acquire) == 0 {
            return None;
        }
        let tag = hash_index::tag(user_key);
        let is_key = |id: u32| {
            self.entries.get(id).is_some_and(|e| {
                // SAFETY: as in `get`.
                unsafe { e.split_key() }.0 == user_key
            })
        };
        let Probe::Found { id, .. } = self.index().find(tag, is_key) else {
            return None;
        };
        // The chain's head is the newest version (invariant 3).
        let entry = self.entries.get(id)?;
        // SAFETY: as in `get`.
        let (_, trailer) = unsafe { entry.split_key() };
        Some(SeqNo(trailer >> 8))
    }

    /// Add the range tombstone `[start, end)` at `seq`. Precondition: as for `insert`, `seq`
    /// is not used by another entry.
    pub fn delete_range(&self, seq: SeqNo, start: &[u8], end: &[u8]) {
        let mut guard = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let w = &mut *guard;
        w.min_seq = w.min_seq.min(seq.0);
        w.max_seq = w.max_seq.max(seq.0);
        w.side_bytes += start.len() + end.len() + std::mem::size_of::<RangeTombstone>();
        let mut state = self
            .range_dels
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.list.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
        state.built = None;
        // Release: a reader that sees the count finds the tombstone under the lock.
        self.range_del_count.store(state.list.len(), Release);
        drop(state);
        self.min_seq.store(w.min_seq, Relaxed);
        self.max_seq.store(w.max_seq, Relaxed);
        self.memory_usage
            .store(w.arena.memory_usage() + w.side_bytes, Relaxed);
    }

    /// The range tombstones added so far, fragmented; `None` if there are none (then no
    /// lock is taken).
    pub fn range_dels(&self) -> Option<Arc<RangeDels>> {
        if self.range_del_count.load(Acquire) == 0 {
            return None;
        }
        let mut state = self
            .range_dels
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let state = &mut *state;
        let built = state
            .built
            .get_or_insert_with(|| Arc::new(RangeDels::new(&state.list)));
        Some(Arc::clone(built))
    }

    /// Start loading the hash-index slot where an insert or get of `user_key` begins. The
    /// index is sized for a full write buffer (megabytes), so that first probe is usually
    /// a cache miss; a writer that calls this before its WAL append has the miss overlap
    /// the append instead of stalling the insert.
    pub fn prefetch(&self, user_key: &[u8]) {
        self.index().prefetch(hash_index::tag(user_key));
    }

    /// Bytes of memory the table holds (arena chunks, the id table, every hash table it
    /// has used, and the cached sorted runs once an iterator has asked for them); compare
    /// with `write_buffer_size`. Runs that only older iterators still hold are not counted.
    pub fn approximate_memory_usage(&self) -> usize {
        self.memory_usage.load(Relaxed) + self.sorted_bytes.load(Relaxed)
    }

    /// True when the hash index has no room for another key without growing: the DB then
    /// freezes the memtable, as it does at `write_buffer_size`.
    pub fn is_full(&self) -> bool {
        self.full.load(Relaxed)
    }

    /// Number of point entries (puts and deletes; range tombstones are not counted).
    pub fn len(&self) -> usize {
        self.count.load(Relaxed) as usize
    }

    /// True if it holds point entries (puts or deletes), whatever its range tombstones.
    pub fn has_points(&self) -> bool {
        self.count.load(Relaxed) != 0
    }

    /// True when the table holds no entry and no range tombstone.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.range_del_count.load(Relaxed) == 0
    }

    /// The largest seqno inserted, or `SeqNo::ZERO` if the table is empty.
    pub fn max_seq(&self) -> SeqNo {
        SeqNo(self.max_seq.load(Relaxed))
    }

    /// The smallest seqno inserted, or `None` if the table is empty.
    pub fn min_seq(&self) -> Option<SeqNo> {
        let (min, max) = (self.min_seq.load(Relaxed), self.max_seq.load(Relaxed));
        (min <= max).then_some(SeqNo(min))
    }
}

impl Drop for MemTable {
    fn drop(&mut self) {
        let w = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for index in w.indexes.drain(..) {
            // SAFETY: from `Box::into_raw` (via `Box::leak`) in this table, freed only here;
            // no reader can be probing it, since `&mut self` excludes them.
            drop(unsafe { Box::from_raw(index.as_ptr()) });
        }
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

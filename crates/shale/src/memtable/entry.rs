//! The entry log: every memtable entry, appended to the arena, and the table that maps a dense
//! `u32` entry id to its address.
//!
//! An entry is written once, in one arena allocation, and never moves:
//!
//! ```text
//!   EntryPtr points here (struct Header, 12 bytes, 4-byte aligned)
//!   v
//!   +-----------+---------+-----------+----------+---------+-------+
//!   | prev      | key_len | value_len | user_key | trailer | value |
//!   | AtomicU32 | u32     | u32       | bytes    | u64 LE  | bytes |
//!   +-----------+---------+-----------+----------+---------+-------+
//! ```
//!
//! `key_len` counts the user key and the 8-byte trailer, which together are exactly the encoded
//! internal key of `key.rs`, so iterators hand it out without copying. `prev` is the id of the
//! next-older version of the same user key ([`NONE`] for the oldest): the versions of a key form
//! a chain, newest first, that starts at the hash index's slot for the key.
//!
//! Ids are handed out densely from 0, so the id table is an array; it is split into segments of
//! doubling size (256, 512, 1024, ... pointers) that are allocated once and never move, so a
//! reader can index it while the writer appends.
//!
//! # Thread safety
//!
//! Only the memtable's writer (under its mutex) writes entries, sets ids and links `prev`.
//! Readers learn of an entry only through a `Release` store the writer makes after the entry
//! and its id-table slot are complete (the hash-index slot, an older entry's `prev`, or the
//! memtable's entry count), which they load with `Acquire`.
//!
//! # Invariants
//!
//! 1. An entry's lengths, key and value never change after it is written; only `prev` may be
//!    re-linked, and only to splice in an entry that sorts between it and its old `prev`
//!    (an out-of-order insert, see `MemTable::insert`).
//! 2. Every chain is strictly decreasing in trailer (seqno), newest first.
//! 3. Segment `k` of [`EntryTable`] holds `256 << k` slots for ids `256 * (2^k - 1)` up to, not
//!    including, `256 * (2^(k+1) - 1)`; it is allocated at most once and freed only in `Drop`.
//! 4. An [`EntryPtr`] is only dereferenced while the arena that holds it is alive.

use std::cmp::Ordering;
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering::Acquire, Ordering::Relaxed};
use std::sync::atomic::{Ordering::AcqRel, Ordering::Release};

use super::arena::Arena;
use crate::key::TRAILER_LEN;

/// The `prev` of the oldest version of a key.
pub(super) const NONE: u32 = u32::MAX;

/// Ids run from 0 to `MAX_ENTRIES - 1`: below [`NONE`], and `id + 1` (the hash index stores
/// that, to keep 0 for "empty") still fits in a `u32`.
pub(super) const MAX_ENTRIES: u32 = u32::MAX - 1;

/// The entry header; see the module diagram for what follows it.
#[repr(C)]
struct Header {
    prev: AtomicU32,
    key_len: u32,
    value_len: u32,
}

const HEADER_BYTES: usize = size_of::<Header>();

/// The address of an entry in some memtable's arena. Copyable and thread-safe because it is
/// only an address: every dereference is an `unsafe` call whose contract requires the arena to
/// be alive (invariant 4).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct EntryPtr(NonNull<Header>);

// SAFETY: an `EntryPtr` is an address. The entry behind it is immutable once published except
// for `prev`, which is atomic (invariant 1), so it may be read from any thread.
unsafe impl Send for EntryPtr {}
// SAFETY: as for `Send`; `&EntryPtr` grants nothing beyond a copy of the address.
unsafe impl Sync for EntryPtr {}

impl EntryPtr {
    /// Write a new entry into `arena`.
    ///
    /// # Panics
    ///
    /// If the internal key or the value is 4 GiB or longer (the header stores `u32` lengths),
    /// before anything is allocated.
    pub(super) fn write(
        arena: &mut Arena,
        prev: u32,
        user_key: &[u8],
        trailer: u64,
        value: &[u8],
    ) -> EntryPtr {
        let key_len = user_key
            .len()
            .checked_add(TRAILER_LEN)
            .and_then(|n| u32::try_from(n).ok())
            .expect("memtable key must be shorter than 4 GiB");
        let value_len =
            u32::try_from(value.len()).expect("memtable value must be shorter than 4 GiB");
        let base = arena.allocate(HEADER_BYTES + key_len as usize + value_len as usize);
        // SAFETY: the allocation is 8-byte aligned (enough for the 4-byte-aligned header) and
        // holds the header, key and value; nobody else can see it until it is published.
        unsafe {
            let header = base.as_ptr().cast::<Header>();
            ptr::write(
                header,
                Header {
                    prev: AtomicU32::new(prev),
                    key_len,
                    value_len,
                },
            );
            let data = base.as_ptr().add(HEADER_BYTES);
            ptr::copy_nonoverlapping(user_key.as_ptr(), data, user_key.len());
            let trailer_bytes = trailer.to_le_bytes();
            ptr::copy_nonoverlapping(
                trailer_bytes.as_ptr(),
                data.add(user_key.len()),
                TRAILER_LEN,
            );
            ptr::copy_nonoverlapping(value.as_ptr(), data.add(key_len as usize), value.len());
            EntryPtr(NonNull::new_unchecked(header))
        }
    }

    /// The encoded internal key and the value.
    ///
    /// # Safety
    ///
    /// The entry's arena is alive for `'a` (invariant 4).
    pub(super) unsafe fn parts<'a>(self) -> (&'a [u8], &'a [u8]) {
        let h = self.0.as_ptr();
        // SAFETY: the header and the `key_len + value_len` bytes after it were written before
        // the entry was published and never change (invariant 1); the caller keeps them alive.
        unsafe {
            let key_len = (*h).key_len as usize;
            let value_len = (*h).value_len as usize;
            let data = h.cast::<u8>().add(HEADER_BYTES);
            (
                std::slice::from_raw_parts(data, key_len),
                std::slice::from_raw_parts(data.add(key_len), value_len),
            )
        }
    }

    /// The user key and the trailer.
    ///
    /// # Safety
    ///
    /// As for [`EntryPtr::parts`].
    pub(super) unsafe fn split_key<'a>(self) -> (&'a [u8], u64) {
        // SAFETY: forwarded to the caller.
        let (ikey, _) = unsafe { self.parts() };
        split_internal_key(ikey)
    }

    /// The id of the next-older version of this user key, or [`NONE`].
    ///
    /// # Safety
    ///
    /// As for [`EntryPtr::parts`].
    pub(super) unsafe fn prev(self) -> u32 {
        // SAFETY: `prev` is the header's first field, initialised before publication.
        // Acquire: the entry it names was complete before the writer stored its id here.
        unsafe { (*self.0.as_ptr()).prev.load(Acquire) }
    }

    /// Re-link `prev` (invariant 1: only to splice in an entry).
    ///
    /// # Safety
    ///
    /// As for [`EntryPtr::parts`]; the caller is the memtable's writer and `id` is complete.
    pub(super) unsafe fn set_prev(self, id: u32) {
        // SAFETY: as in `prev`. Release publishes entry `id` to readers that walk the chain.
        unsafe { (*self.0.as_ptr()).prev.store(id, Release) }
    }
}

/// Split an internal key exactly as `key::compare_internal` does: a slice shorter than a
/// trailer is an empty user key with trailer 0 (so seek targets order as in the rest of the
/// engine).
pub(super) fn split_internal_key(ikey: &[u8]) -> (&[u8], u64) {
    let split = ikey.len().saturating_sub(TRAILER_LEN);
    let (user_key, trailer) = ikey.split_at_checked(split).unwrap_or((ikey, &[]));
    let trailer = trailer
        .try_into()
        .map(u64::from_le_bytes)
        .unwrap_or_default();
    (user_key, trailer)
}

/// The first 8 bytes of `user_key` as a big-endian integer, zero-padded. Comparing prefixes
/// orders keys as comparing the keys does whenever the prefixes differ, so a sort decides most
/// comparisons on integers without touching the arena.
pub(super) fn key_prefix(user_key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    for (dst, src) in bytes.iter_mut().zip(user_key) {
        *dst = *src;
    }
    u64::from_be_bytes(bytes)
}

/// Internal-key order of two (user key, trailer) pairs: user keys ascending, trailers
/// descending.
pub(super) fn compare_split(a: (&[u8], u64), b: (&[u8], u64)) -> Ordering {
    a.0.cmp(b.0).then_with(|| b.1.cmp(&a.1))
}

const SEG0_BITS: u32 = 8;
/// Enough segments for every `u32` id: the last covers ids up to `256 * (2^25 - 1) > 2^32`.
const SEGMENTS: usize = (33 - SEG0_BITS) as usize;

/// Segment number and offset of `id` (invariant 3).
fn locate(id: u32) -> (usize, usize) {
    let x = (u64::from(id) >> SEG0_BITS) + 1;
    let k = 63 - x.leading_zeros();
    let first = ((1u64 << k) - 1) << SEG0_BITS;
    (k as usize, (u64::from(id) - first) as usize)
}

/// `id -> EntryPtr`, readable by many threads while one writer appends.
pub(super) struct EntryTable {
    segments: [AtomicPtr<AtomicPtr<Header>>; SEGMENTS],
}

impl EntryTable {
    pub(super) fn new() -> EntryTable {
        EntryTable {
            segments: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
        }
    }

    fn segment_len(k: usize) -> usize {
        1 << (SEG0_BITS as usize + k)
    }

    /// Record the address of entry `id`. Returns the bytes newly allocated for the table.
    ///
    /// Called by the writer before it publishes `id`; ids are set in increasing order.
    pub(super) fn set(&self, id: u32, entry: EntryPtr) -> usize {
        let (k, offset) = locate(id);
        let Some(segment) = self.segments.get(k) else {
            unreachable!("SEGMENTS covers every u32 id");
        };
        let mut base = segment.load(Acquire);
        let mut allocated = 0;
        if base.is_null() {
            let len = Self::segment_len(k);
            let fresh: Box<[AtomicPtr<Header>]> =
                (0..len).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
            let fresh = Box::into_raw(fresh).cast::<AtomicPtr<Header>>();
            // A compare-exchange rather than a store, so that even a second writer racing
            // here (a bug the memtable's mutex rules out) would leak nothing and corrupt
            // nothing.
            base = match segment.compare_exchange(ptr::null_mut(), fresh, AcqRel, Acquire) {
                Ok(_) => {
                    allocated = len * size_of::<AtomicPtr<Header>>();
                    fresh
                }
                Err(current) => {
                    // SAFETY: `fresh` came from `Box::into_raw` of a slice of `len` and was
                    // never shared.
                    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, len)) });
                    current
                }
            };
        }
        // SAFETY: segment `k` has `segment_len(k)` slots and `offset` is below that
        // (invariant 3); the segment lives until `self` drops.
        let slot = unsafe { &*base.add(offset) };
        // Relaxed: readers find `id` only through a later Release store by the writer.
        slot.store(entry.0.as_ptr(), Relaxed);
        allocated
    }

    /// The address of entry `id`, or `None` if it was never set.
    ///
    /// Precondition for a meaningful answer: the caller learnt `id` through an `Acquire` load
    /// that synchronised with the writer's publication of it (see the module comment).
    pub(super) fn get(&self, id: u32) -> Option<EntryPtr> {
        let (k, offset) = locate(id);
        let base = self.segments.get(k)?.load(Acquire);
        if base.is_null() {
            return None;
        }
        // SAFETY: as in `set`.
        let slot = unsafe { &*base.add(offset) };
        NonNull::new(slot.load(Relaxed)).map(EntryPtr)
    }
}

impl Drop for EntryTable {
    fn drop(&mut self) {
        for (k, segment) in self.segments.iter_mut().enumerate() {
            let base = *segment.get_mut();
            if !base.is_null() {
                let len = Self::segment_len(k);
                // SAFETY: invariant 3: allocated as a boxed slice of `len`, freed only here.
                drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(base, len)) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_tile_the_id_space() {
        assert_eq!(locate(0), (0, 0));
        assert_eq!(locate(255), (0, 255));
        assert_eq!(locate(256), (1, 0));
        assert_eq!(locate(767), (1, 511));
        assert_eq!(locate(768), (2, 0));
        let (k, offset) = locate(u32::MAX);
        assert!(k < SEGMENTS);
        assert!(offset < EntryTable::segment_len(k));
        // Consecutive ids are consecutive slots, segment after segment.
        let mut expect = (0, 0);
        for id in 0..100_000u32 {
            assert_eq!(locate(id), expect, "id {id}");
            expect.1 += 1;
            if expect.1 == EntryTable::segment_len(expect.0) {
                expect = (expect.0 + 1, 0);
            }
        }
    }

    #[test]
    fn prefixes_order_like_keys() {
        let keys: [&[u8]; 7] = [b"", b"\0", b"a", b"a\0", b"ab", b"abcdefgh", b"abcdefgi"];
        for a in keys {
            for b in keys {
                let (pa, pb) = (key_prefix(a), key_prefix(b));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
    }
}

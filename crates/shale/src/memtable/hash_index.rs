//! The hash index: user key -> id of its newest entry, by open addressing with linear probing.
//!
//! Each slot is one `AtomicU64`:
//!
//! ```text
//!   63            32 31             0
//!   +---------------+---------------+
//!   | tag           | id + 1        |      0 = empty
//!   +---------------+---------------+
//! ```
//!
//! The tag is the high half of the key's xxh3 hash. The home slot is computed from the tag
//! alone (Fibonacci hashing: multiply by an odd constant, keep the top bits), so a probe rejects
//! a slot of another key without touching the arena (a false match costs 2^-32), and growing
//! the table rehashes from the slots alone, with no key reads.
//!
//! Keys are never removed (a deletion is an entry), so a slot, once set, names the same key
//! forever; only its id moves on to newer versions.
//!
//! # Thread safety
//!
//! Only the memtable's writer calls [`HashIndex::set`]; any thread may call [`HashIndex::find`]
//! concurrently. `set` stores with `Release` after the entry it names is complete; `find`
//! loads with `Acquire`.
//!
//! # Invariants
//!
//! 1. The table holds at most [`HashIndex::max_keys`] keys, half its slots, so every probe
//!    sequence reaches an empty slot (and `find` terminates) within a few steps on average.
//! 2. No two slots hold the same key; every key's slot is reachable from its home slot
//!    without crossing an empty slot (nothing is ever emptied).

use std::sync::atomic::{AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

/// The smallest table: 64 slots, 512 bytes.
pub(super) const MIN_BITS: u32 = 6;
/// The largest: 2^32 slots (the home slot is computed from a 32-bit tag).
pub(super) const MAX_BITS: u32 = 32;

/// The result of probing for a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Probe {
    /// The key's slot and the id of its newest entry.
    Found { slot: usize, id: u32 },
    /// The key is absent; this empty slot is where it would go.
    Vacant { slot: usize },
}

pub(super) struct HashIndex {
    slots: Box<[AtomicU64]>,
    /// `32 - log2(slots.len())`.
    shift: u32,
}

/// The tag of a key: the high half of its hash.
pub(super) fn tag(user_key: &[u8]) -> u32 {
    (xxhash_rust::xxh3::xxh3_64(user_key) >> 32) as u32
}

impl HashIndex {
    /// An empty table of `2^bits` slots, `bits` clamped to `MIN_BITS..=MAX_BITS`.
    pub(super) fn new(bits: u32) -> HashIndex {
        let bits = bits.clamp(MIN_BITS, MAX_BITS);
        HashIndex {
            slots: (0..1usize << bits).map(|_| AtomicU64::new(0)).collect(),
            shift: 32 - bits,
        }
    }

    /// log2 of the number of slots.
    pub(super) fn bits(&self) -> u32 {
        32 - self.shift
    }

    pub(super) fn memory_usage(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
    }

    /// How many keys the table takes before it is full (invariant 1).
    pub(super) fn max_keys(&self) -> usize {
        self.slots.len() / 2
    }

    fn home(&self, tag: u32) -> usize {
        // 2^32 / golden ratio: consecutive tags land far apart. `shift <= 26`, and the
        // result is below `2^bits`, the table's length.
        (tag.wrapping_mul(0x9e37_79b9) >> self.shift) as usize
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Probe for the key with `tag`; `is_key(id)` tells whether entry `id` holds the key
    /// (called only when the tag matches).
    pub(super) fn find(&self, tag: u32, mut is_key: impl FnMut(u32) -> bool) -> Probe {
        let mask = self.mask();
        let mut slot = self.home(tag);
        // Invariant 1 guarantees an empty slot; the bound only keeps a broken invariant
        // from turning into an endless loop.
        for _ in 0..self.slots.len() {
            let Some(cell) = self.slots.get(slot) else {
                break;
            };
            let word = cell.load(Acquire);
            if word == 0 {
                return Probe::Vacant { slot };
            }
            if (word >> 32) as u32 == tag {
                // The low half is `id + 1 >= 1`.
                let id = (word as u32).wrapping_sub(1);
                if is_key(id) {
                    return Probe::Found { slot, id };
                }
            }
            slot = (slot + 1) & mask;
        }
        unreachable!("memtable hash index has no empty slot (invariant 1 broken)");
    }

    /// Start loading the home slot of `tag` into the CPU cache (see `MemTable::prefetch`).
    pub(super) fn prefetch(&self, tag: u32) {
        if let Some(cell) = self.slots.get(self.home(tag)) {
            crate::prefetch::prefetch(cell);
        }
    }

    /// Point `slot` at entry `id` of the key with `tag`. Writer only; `slot` came from
    /// [`HashIndex::find`] on this table and entry `id` is complete.
    pub(super) fn set(&self, slot: usize, tag: u32, id: u32) {
        if let Some(cell) = self.slots.get(slot) {
            // Release: a reader that sees this id sees the entry (and its id-table slot).
            cell.store(u64::from(tag) << 32 | u64::from(id + 1), Release);
        }
    }

    /// A table with twice the slots holding the same keys. Writer only. Returns `None` at
    /// `MAX_BITS`.
    pub(super) fn grown(&self) -> Option<HashIndex> {
        if self.bits() >= MAX_BITS {
            return None;
        }
        let bigger = HashIndex::new(self.bits() + 1);
        let mask = bigger.mask();
        for cell in self.slots.iter() {
            // Relaxed: only the writer, which made every store, reads here.
            let word = cell.load(Relaxed);
            if word == 0 {
                continue;
            }
            let mut slot = bigger.home((word >> 32) as u32);
            // Keys are distinct (invariant 2): the first empty slot is the place.
            while let Some(cell) = bigger.slots.get(slot) {
                if cell.load(Relaxed) == 0 {
                    cell.store(word, Relaxed);
                    break;
                }
                slot = (slot + 1) & mask;
            }
        }
        // The new table is published by the caller with a Release store of its address.
        Some(bigger)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn find_set_and_grow() {
        let mut index = HashIndex::new(0);
        assert_eq!(index.bits(), MIN_BITS);
        // Keys are their ids; tags collide on purpose (many keys per tag).
        let tag_of = |k: u32| k % 7;
        for k in 0..1000u32 {
            if index.max_keys() <= k as usize {
                index = index.grown().unwrap();
            }
            match index.find(tag_of(k), |id| id == k) {
                Probe::Vacant { slot } => index.set(slot, tag_of(k), k),
                found => panic!("{k} already present: {found:?}"),
            }
        }
        assert_eq!(index.bits(), 11);
        for k in 0..1000u32 {
            assert!(
                matches!(index.find(tag_of(k), |id| id == k), Probe::Found { id, .. } if id == k)
            );
        }
        assert!(matches!(
            index.find(tag_of(5000), |id| id == 5000),
            Probe::Vacant { .. }
        ));
    }
}

//! Where the HNSW graph keeps its nodes: vectors, levels, tombstones and neighbour lists, in
//! flat arrays indexed by node id.
//!
//! Ids are dense `u32`s chosen by the caller, so a node's slot is found by arithmetic, not by
//! a map. Slots live in **chunks** of 1024 nodes, reached through a two-level directory
//! (2048 pages of 2048 chunks cover the whole `u32` range), so the store grows while other
//! threads read it: a chunk, once created, never moves, and memory follows the ids in use
//! (one stray large id costs one chunk, not a table up to it). Inside a chunk each kind of
//! data is one contiguous array (all vectors back to back, all level-0 neighbour lists back
//! to back), as hnswlib lays out its level-0 memory, so the inner loop of a search streams
//! through few cache lines. Arrays are allocated zeroed, which the allocator serves from
//! untouched pages.
//!
//! # Thread safety
//!
//! Every method takes `&self`. A slot goes through three states, kept in its `meta` word:
//!
//! ```text
//!   EMPTY --claim (CAS, one winner)--> CLAIMED --vector, level and lists written--> READY
//! ```
//!
//! Only the thread that won the claim writes the slot's vector, and only before it publishes
//! READY with a release store; readers load `meta` with acquire and touch a vector only when
//! they see READY. After READY a vector is never written again, which is what makes handing
//! out a plain `&[f32]` into shared memory sound.
//!
//! Neighbour lists are arrays of atomics: `count` then `capacity` slots. Writers of a node's
//! lists hold that node's mutex ([`NodeStore::lock`]); readers take no lock. A reader racing a
//! writer may see a list half old and half new, which is harmless: every id ever stored in a
//! list at level `l` is a READY node whose level is at least `l`, and the count is clamped
//! to the capacity. This is hnswlib's design (per-node link-list locks, lock-free search).
//!
//! # Invariants
//!
//! 1. A vector is written once, by the claiming thread, before its slot becomes READY.
//! 2. A node's level and the size of its upper-level list array are fixed before READY.
//! 3. Every id in a list at level `l` names a READY node of level `>= l` (the graph code
//!    upholds this; the loader checks it on every file).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::sync::lock;

/// Nodes in a chunk: `1 << CHUNK_SHIFT`.
const CHUNK_SHIFT: u32 = 10;
/// Chunks in a page: `1 << PAGE_SHIFT`.
const PAGE_SHIFT: u32 = 11;
/// Pages in the directory, enough for every `u32` id.
const PAGES: usize = 1 << (32 - CHUNK_SHIFT - PAGE_SHIFT);

type Page = Box<[OnceLock<Chunk>]>;

const STATE_MASK: u32 = 0b11;
const EMPTY: u32 = 0;
const CLAIMED: u32 = 1;
const READY: u32 = 2;
const DELETED: u32 = 1 << 2;
const LEVEL_SHIFT: u32 = 8;

/// Highest level a node may have. With the default `ml = 1/ln(16)` a level above 12 has
/// probability below 1e-14; the cap only bounds memory for a hostile `ml` or file.
pub(super) const MAX_LEVEL: u8 = 32;

/// A neighbour list: `[count, slot_0, .., slot_{capacity-1}]`.
pub(super) struct Links<'a>(&'a [AtomicU32]);

impl Links<'_> {
    /// Copy the current neighbours into `out` (cleared first).
    pub(super) fn read_into(&self, out: &mut Vec<u32>) {
        out.clear();
        let Some((count, slots)) = self.0.split_first() else {
            return;
        };
        // Acquire pairs with the writer's release of `count`, so the slots written before
        // it are visible. Each slot is read with acquire too (a plain load on x86): a torn
        // read may see an id stored by a later writer, and acquire on the slot itself is
        // what orders that id's vector before this reader's use of it (invariant 3).
        let n = (count.load(Ordering::Acquire) as usize).min(slots.len());
        out.extend(
            slots
                .iter()
                .take(n)
                .map(|slot| slot.load(Ordering::Acquire)),
        );
    }

    pub(super) fn capacity(&self) -> usize {
        self.0.len().saturating_sub(1)
    }

    /// Replace the list with `ids` (at most `capacity` of them are kept).
    ///
    /// The caller holds the owning node's lock ([`NodeStore::lock`]).
    pub(super) fn write(&self, ids: &[u32]) {
        let Some((count, slots)) = self.0.split_first() else {
            return;
        };
        let mut n = 0u32;
        for (slot, &id) in slots.iter().zip(ids) {
            slot.store(id, Ordering::Release);
            n += 1;
        }
        count.store(n, Ordering::Release);
    }
}

/// The arrays of one chunk of `1 << CHUNK_SHIFT` consecutive ids.
struct Chunk {
    /// `1024 * dim` floats; node `i`'s vector is `[i * dim, (i + 1) * dim)`.
    vectors: Box<[UnsafeCell<f32>]>,
    /// State, tombstone and level of each node (see the constants above).
    meta: Box<[AtomicU32]>,
    /// `1024 * (1 + m_max0)`: each node's level-0 list.
    links0: Box<[AtomicU32]>,
    /// Lists of levels `1..=level`, each `1 + m_max` words, allocated at claim time for the
    /// few nodes that have upper levels.
    upper: Box<[OnceLock<Box<[AtomicU32]>>]>,
    /// Held while a node's lists are written (never while another node's lock is held).
    locks: Box<[Mutex<()>]>,
}

// SAFETY: the only field that is not `Sync` on its own is `vectors` (`UnsafeCell`). Each of
// its ranges is written by exactly one thread (the one whose CAS claimed the slot), before
// the release store that makes the slot READY, and read only after an acquire load sees READY
// (invariant 1); so no read ever races a write.
unsafe impl Sync for Chunk {}

/// Zeroed memory from the allocator's zeroed path, which leaves fresh pages untouched.
fn zeroed_u32s(n: usize) -> Box<[AtomicU32]> {
    let plain: Box<[u32]> = vec![0u32; n].into_boxed_slice();
    // SAFETY: `AtomicU32` has the same size, alignment and bit validity as `u32` (documented
    // in std), so the allocation is a valid `[AtomicU32]` of the same length and layout.
    unsafe { Box::from_raw(Box::into_raw(plain) as *mut [AtomicU32]) }
}

fn zeroed_f32_cells(n: usize) -> Box<[UnsafeCell<f32>]> {
    let plain: Box<[f32]> = vec![0.0f32; n].into_boxed_slice();
    // SAFETY: `UnsafeCell<T>` is `repr(transparent)` over `T`.
    unsafe { Box::from_raw(Box::into_raw(plain) as *mut [UnsafeCell<f32>]) }
}

/// `f32`s in a 64-byte cache line.
const CELLS_PER_LINE: usize = 16;

/// Most cache lines of one vector [`NodeStore::prefetch_vector`] asks for.
const PREFETCH_LINES: usize = 4;

/// A hint to load the cache line at `p`; no effect on other architectures.
#[inline]
fn prefetch(p: Option<*const i8>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = p {
        // SAFETY: a prefetch never faults and has no visible effect, whatever the address;
        // `p` is in any case inside a live allocation. SSE is in the x86-64 baseline.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The node arrays of one graph. See the module documentation.
pub(super) struct NodeStore {
    dim: usize,
    m_max: usize,
    m_max0: usize,
    pages: Box<[OnceLock<Page>]>,
}

impl NodeStore {
    pub(super) fn new(dim: usize, m_max: usize, m_max0: usize) -> NodeStore {
        NodeStore {
            dim,
            m_max,
            m_max0,
            pages: std::iter::repeat_with(OnceLock::new).take(PAGES).collect(),
        }
    }

    /// `(page, chunk inside the page, node inside the chunk)` of `id`.
    fn locate(id: u32) -> (usize, usize, usize) {
        let id = id as usize;
        let node = id & ((1 << CHUNK_SHIFT) - 1);
        let chunk = (id >> CHUNK_SHIFT) & ((1 << PAGE_SHIFT) - 1);
        let page = id >> (CHUNK_SHIFT + PAGE_SHIFT);
        (page, chunk, node)
    }

    fn new_chunk(&self) -> Chunk {
        let cap = 1usize << CHUNK_SHIFT;
        Chunk {
            vectors: zeroed_f32_cells(cap * self.dim),
            meta: zeroed_u32s(cap),
            links0: zeroed_u32s(cap * (1 + self.m_max0)),
            upper: std::iter::repeat_with(OnceLock::new).take(cap).collect(),
            locks: std::iter::repeat_with(|| Mutex::new(()))
                .take(cap)
                .collect(),
        }
    }

    /// The chunk holding `id` (created if `create`) and the node's index in it.
    fn slot_in(&self, id: u32, create: bool) -> Option<(&Chunk, usize)> {
        let (p, c, i) = Self::locate(id);
        let page = self.pages.get(p)?;
        let page = if create {
            page.get_or_init(|| {
                std::iter::repeat_with(OnceLock::new)
                    .take(1 << PAGE_SHIFT)
                    .collect()
            })
        } else {
            page.get()?
        };
        let chunk = page.get(c)?;
        let chunk = if create {
            chunk.get_or_init(|| self.new_chunk())
        } else {
            chunk.get()?
        };
        Some((chunk, i))
    }

    fn slot(&self, id: u32) -> Option<(&Chunk, usize)> {
        self.slot_in(id, false)
    }

    /// The meta word of `id` if it is READY.
    fn ready_meta(&self, id: u32) -> Option<(&Chunk, usize, u32)> {
        let (seg, i) = self.slot(id)?;
        let meta = seg.meta.get(i)?.load(Ordering::Acquire);
        (meta & STATE_MASK == READY).then_some((seg, i, meta))
    }

    /// Take slot `id` for a new node with `vector` (of length `dim`) and `level`.
    ///
    /// Returns `false`, changing nothing, if the slot is already taken. On `true` the node is
    /// READY with empty neighbour lists.
    pub(super) fn claim(&self, id: u32, vector: &[f32], level: u8) -> bool {
        let Some((seg, i)) = self.slot_in(id, true) else {
            return false;
        };
        let Some(meta) = seg.meta.get(i) else {
            return false;
        };
        if meta
            .compare_exchange(EMPTY, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let start = i * self.dim;
        let Some(cells) = seg.vectors.get(start..start + self.dim) else {
            return false;
        };
        for (cell, &x) in cells.iter().zip(vector) {
            // SAFETY: this thread won the claim of slot `i`, so it is the only one touching
            // these cells until the release store below publishes them (invariant 1).
            unsafe { *cell.get() = x };
        }
        if level > 0 {
            let words = usize::from(level) * (1 + self.m_max);
            if let Some(upper) = seg.upper.get(i) {
                let _ = upper.set(zeroed_u32s(words));
            }
        }
        meta.store(READY | (u32::from(level) << LEVEL_SHIFT), Ordering::Release);
        true
    }

    /// The vector of `id`, if it is READY.
    #[inline]
    pub(super) fn vector(&self, id: u32) -> Option<&[f32]> {
        let (seg, i, _) = self.ready_meta(id)?;
        let start = i * self.dim;
        let cells = seg.vectors.get(start..start + self.dim)?;
        // SAFETY: the slot is READY (acquire), so its cells were fully written before and are
        // never written again (invariant 1); `UnsafeCell<f32>` has `f32`'s layout.
        Some(unsafe { std::slice::from_raw_parts(cells.as_ptr().cast::<f32>(), cells.len()) })
    }

    /// The vector of `id`, read from a neighbour list: no state check, one cache miss
    /// fewer than [`NodeStore::vector`] on the search's hottest path.
    ///
    /// Sound because of invariant 3: an id in a list names a READY node. The thread that
    /// stored the id saw the node READY (acquire), then stored the id with release; the
    /// caller read the id from the list with acquire ([`Links::read_into`]). So the
    /// vector's writes happen before this read, and a READY vector is never written again.
    /// `None` only if the id's chunk does not exist, which invariant 3 rules out.
    #[inline]
    pub(super) fn linked_vector(&self, id: u32) -> Option<&[f32]> {
        let (seg, i) = self.slot(id)?;
        let start = i * self.dim;
        let cells = seg.vectors.get(start..start + self.dim)?;
        // SAFETY: see above; `UnsafeCell<f32>` has `f32`'s layout.
        Some(unsafe { std::slice::from_raw_parts(cells.as_ptr().cast::<f32>(), cells.len()) })
    }

    /// Ask the CPU to start loading the head of `id`'s vector: the graph's
    /// searches are bound by cache misses on nodes reached through links, and starting the
    /// loads of every neighbour before scoring the first is what hides them.
    ///
    /// At most [`PREFETCH_LINES`] lines of the vector are asked for: enough for a short
    /// vector (50 dimensions are 200 bytes); a long one is streamed by the hardware
    /// prefetcher once its first lines are read.
    #[inline]
    pub(super) fn prefetch_vector(&self, id: u32) {
        if let Some((seg, i)) = self.slot(id) {
            let start = i * self.dim;
            let end = (start + self.dim).min(seg.vectors.len());
            let cells = seg.vectors.get(start..end).unwrap_or(&[]);
            for line in cells.chunks(CELLS_PER_LINE).take(PREFETCH_LINES) {
                prefetch(line.first().map(|c| c.get().cast_const().cast()));
            }
        }
    }

    /// Ask the CPU to start loading `id`'s level-0 list (see [`NodeStore::prefetch_vector`]).
    #[inline]
    pub(super) fn prefetch_links0(&self, id: u32) {
        if let Some((seg, i)) = self.slot(id) {
            let list = seg.links0.get(i * (1 + self.m_max0));
            prefetch(list.map(|w| w.as_ptr().cast_const().cast()));
        }
    }

    /// Level of `id`, if it is READY.
    pub(super) fn level(&self, id: u32) -> Option<u8> {
        let (_, _, meta) = self.ready_meta(id)?;
        Some((meta >> LEVEL_SHIFT) as u8)
    }

    /// Whether `id` is READY and tombstoned.
    #[inline]
    pub(super) fn is_deleted(&self, id: u32) -> bool {
        self.ready_meta(id)
            .is_some_and(|(_, _, meta)| meta & DELETED != 0)
    }

    /// Tombstone `id`: `None` if there is no such node, else whether this call deleted it.
    pub(super) fn mark_deleted(&self, id: u32) -> Option<bool> {
        let (seg, i, _) = self.ready_meta(id)?;
        let before = seg.meta.get(i)?.fetch_or(DELETED, Ordering::AcqRel);
        Some(before & DELETED == 0)
    }

    /// The neighbour list of `id` at `level`, if the node is READY and has that level.
    #[inline]
    pub(super) fn links(&self, id: u32, level: u8) -> Option<Links<'_>> {
        let (seg, i, meta) = self.ready_meta(id)?;
        if level == 0 {
            let w = 1 + self.m_max0;
            return Some(Links(seg.links0.get(i * w..(i + 1) * w)?));
        }
        if level > (meta >> LEVEL_SHIFT) as u8 {
            return None;
        }
        let w = 1 + self.m_max;
        let at = (usize::from(level) - 1) * w;
        Some(Links(seg.upper.get(i)?.get()?.get(at..at + w)?))
    }

    /// The lock that serialises writers of `id`'s neighbour lists.
    ///
    /// # Panics
    /// If `id`'s chunk does not exist: callers lock only nodes they read from a list or
    /// claimed themselves.
    pub(super) fn lock(&self, id: u32) -> MutexGuard<'_, ()> {
        let (seg, i) = self
            .slot(id)
            .expect("locking a node that was never claimed");
        lock(seg.locks.get(i).expect("slot index is inside its chunk"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_covers_the_whole_id_space_without_overlap() {
        assert_eq!(NodeStore::locate(0), (0, 0, 0));
        assert_eq!(NodeStore::locate(1023), (0, 0, 1023));
        assert_eq!(NodeStore::locate(1024), (0, 1, 0));
        assert_eq!(NodeStore::locate((1 << 21) + 5), (1, 0, 5));
        assert_eq!(NodeStore::locate(u32::MAX), (PAGES - 1, 2047, 1023));
    }

    #[test]
    fn claim_publishes_once_and_lists_round_trip() {
        let store = NodeStore::new(2, 3, 6);
        assert!(store.vector(5).is_none());
        assert!(store.claim(5, &[0.6, 0.8], 2));
        assert!(!store.claim(5, &[1.0, 0.0], 0), "a slot is claimed once");
        assert_eq!(store.vector(5), Some(&[0.6, 0.8][..]));
        assert_eq!(store.level(5), Some(2));
        assert!(store.links(5, 3).is_none());

        let mut out = Vec::new();
        let l2 = store.links(5, 2).unwrap();
        assert_eq!(l2.capacity(), 3);
        l2.write(&[1, 2, 3, 4]);
        l2.read_into(&mut out);
        assert_eq!(out, [1, 2, 3], "capacity bounds the list");
        store.links(5, 0).unwrap().write(&[9]);
        store.links(5, 0).unwrap().read_into(&mut out);
        assert_eq!(out, [9]);

        assert!(!store.is_deleted(5));
        assert_eq!(store.mark_deleted(5), Some(true));
        assert_eq!(store.mark_deleted(5), Some(false));
        assert!(store.is_deleted(5));
        assert_eq!(store.mark_deleted(6), None);
        assert!(store.claim(u32::MAX, &[1.0, 0.0], 0));
        assert_eq!(store.vector(u32::MAX), Some(&[1.0, 0.0][..]));
    }
}

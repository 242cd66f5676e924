//! Where the HNSW graph keeps its nodes: codes (`quant.rs`), levels, tombstones and neighbour
//! lists, in flat arrays indexed by node id.
//!
//! Ids are dense `u32`s chosen by the caller, so a node's slot is found by arithmetic, not by
//! a map. Slots live in **chunks** of 1024 nodes, in a flat directory (`chunks.rs`) that
//! covers the whole `u32` range, so the store grows while other threads read it: a chunk,
//! once created, never moves, and memory follows the ids in use (one stray large id costs
//! one chunk and the huge page its arrays start, not a table up to it). Inside a chunk each kind of
//! data is one contiguous array (all codes back to back, all level-0 neighbour lists back
//! to back), as hnswlib lays out its level-0 memory, so the inner loop of a search streams
//! through few cache lines. Arrays start zeroed, from untouched pages: chunk 0's from the
//! heap, every later chunk's codes and level-0 lists from the store's huge-page slabs
//! (`slab.rs`), which spare a search most of its TLB misses.
//!
//! # Thread safety
//!
//! Every method takes `&self`. A slot goes through three states, kept in its `meta` word:
//!
//! ```text
//!   EMPTY --claim (CAS, one winner)--> CLAIMED --code, level and lists written--> READY
//! ```
//!
//! Only the thread that won the claim writes the slot's code, and only before it publishes
//! READY with a release store; readers load `meta` with acquire and touch a code only when
//! they see READY. After READY a code is never written again, which is what makes handing
//! out a plain `&[u8]` into shared memory sound.
//!
//! Neighbour lists are arrays of atomics: `count` then `capacity` slots. Writers of a node's
//! lists hold that node's mutex ([`NodeStore::lock`]); readers take no lock. A reader racing a
//! writer may see a list half old and half new, which is harmless: every id ever stored in a
//! list at level `l` is a READY node whose level is at least `l`, and the count is clamped
//! to the capacity. This is hnswlib's design (per-node link-list locks, lock-free search).
//!
//! # Invariants
//!
//! 1. A code is written once, by the claiming thread, before its slot becomes READY.
//! 2. A node's level and the size of its upper-level list array are fixed before READY.
//! 3. Every id in a list at level `l` names a READY node of level `>= l` (the graph code
//!    upholds this; the loader checks it on every file).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::chunks::Chunks;
use super::slab::{Slabs, ZeroValid, Zeroed};
use crate::sync::lock;

/// Nodes in a chunk: `1 << CHUNK_SHIFT`.
const CHUNK_SHIFT: u32 = 10;
/// Chunks in the directory, enough for every `u32` id.
const CHUNKS: usize = 1 << (32 - CHUNK_SHIFT);

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
        // what orders that id's code before this reader's use of it (invariant 3).
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

/// The arrays of one chunk of `1 << CHUNK_SHIFT` consecutive ids. The two a search
/// walks, codes and level-0 lists, are in the store's huge-page slabs except in chunk 0,
/// so that a small graph does not hold a 2 MiB page (see `slab.rs`).
struct Chunk {
    /// `1024 * stride` bytes from a cache-line boundary; node `i`'s code starts at
    /// `i * stride`.
    codes: Lines,
    /// State, tombstone and level of each node (see the constants above).
    meta: Zeroed<AtomicU32>,
    /// `1024 * (1 + m_max0)`: each node's level-0 list.
    links0: Zeroed<AtomicU32>,
    /// Lists of levels `1..=level`, each `1 + m_max` words, allocated at claim time for the
    /// few nodes that have upper levels.
    upper: Box<[OnceLock<Box<[AtomicU32]>>]>,
    /// Held while a node's lists are written (never while another node's lock is held).
    locks: Box<[Mutex<()>]>,
}

// SAFETY: the only field that is not `Sync` on its own is `codes` (`UnsafeCell`). Each of
// its ranges is written by exactly one thread (the one whose CAS claimed the slot), before
// the release store that makes the slot READY, and read only after an acquire load sees READY
// (invariant 1); so no read ever races a write.
unsafe impl Sync for Chunk {}

/// Bytes in a cache line.
const LINE: usize = 64;

/// One cache line of bytes, aligned to its size.
#[repr(C, align(64))]
struct Line(UnsafeCell<[u8; LINE]>);

/// Zeroed memory from the allocator's zeroed path, which leaves fresh pages untouched.
fn zeroed_u32s(n: usize) -> Box<[AtomicU32]> {
    let plain: Box<[u32]> = vec![0u32; n].into_boxed_slice();
    // SAFETY: `AtomicU32` has the same size, alignment and bit validity as `u32` (documented
    // in std), so the allocation is a valid `[AtomicU32]` of the same length and layout.
    unsafe { Box::from_raw(Box::into_raw(plain) as *mut [AtomicU32]) }
}

// SAFETY: a `Line` is bytes; zero bytes are valid ones.
unsafe impl ZeroValid for Line {}

/// Bytes that start on a cache-line boundary, so that a code whose stride divides the line
/// never straddles two lines.
struct Lines(Zeroed<Line>);

impl Lines {
    /// At least `n` zeroed bytes.
    ///
    /// # Safety
    /// As [`Zeroed::new`].
    unsafe fn zeroed(n: usize, slabs: Option<&Slabs>) -> Lines {
        // SAFETY: the caller's promise.
        Lines(unsafe { Zeroed::new(n.div_ceil(LINE), slabs) })
    }

    /// The bytes as cells.
    fn cells(&self) -> &[UnsafeCell<u8>] {
        // SAFETY: `Line` is `repr(C)` around `UnsafeCell<[u8; LINE]>`, which has the layout
        // of `[UnsafeCell<u8>; LINE]` (`UnsafeCell` is `repr(transparent)`), so the lines are
        // `len * LINE` contiguous byte cells.
        unsafe {
            std::slice::from_raw_parts(
                self.0.as_ptr().cast::<UnsafeCell<u8>>(),
                self.0.len() * LINE,
            )
        }
    }
}

/// Most cache lines of one code [`NodeStore::prefetch_code`] asks for (a 384-dimensional
/// code is seven); the hardware prefetcher streams the rest of a longer one.
const PREFETCH_LINES: usize = 8;

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

/// Ask the CPU to start loading the line `bytes` start in: for a scan, whose ids often
/// follow each other in memory (the hardware prefetcher streams the rest), a fraction of
/// [`prefetch_bytes`]'s instructions, and scattered ids still get their first miss started.
#[inline]
pub(super) fn prefetch_first(bytes: &[u8]) {
    prefetch(Some(bytes.as_ptr().cast()));
}

/// Ask the CPU to start loading `bytes` (at most [`PREFETCH_LINES`] lines of them): the
/// graph's searches are bound by cache misses on nodes reached through links, and starting
/// the loads of every neighbour before scoring the first is what hides them.
#[inline]
pub(super) fn prefetch_bytes(bytes: &[u8]) {
    prefetch_lines(bytes.as_ptr(), bytes.len());
}

/// Prefetch every line from the one `len` bytes at `p` start in to the one they end in, at
/// most [`PREFETCH_LINES`].
#[inline]
fn prefetch_lines(p: *const u8, len: usize) {
    let head = p as usize % LINE;
    let lines = (head + len).div_ceil(LINE).min(PREFETCH_LINES);
    let first = p.wrapping_sub(head).cast::<i8>();
    for k in 0..lines {
        prefetch(Some(first.wrapping_add(k * LINE)));
    }
}

/// The node arrays of one graph. See the module documentation.
pub(super) struct NodeStore {
    code_len: usize,
    /// Bytes from one code to the next: the code length, rounded up to a power of two when
    /// it fits a cache line (so that a short code is one line, never two).
    stride: usize,
    m_max: usize,
    m_max0: usize,
    chunks: Chunks<Chunk>,
    /// Where chunks past the first keep their codes and level-0 lists. Declared after
    /// `chunks`, so dropped after every array carved from it.
    slabs: Slabs,
    /// Held while a chunk is made: two threads that reach a new chunk at once would
    /// otherwise both carve its arrays from the slabs, and a slab never takes a piece back.
    growing: Mutex<()>,
}

impl NodeStore {
    pub(super) fn new(code_len: usize, m_max: usize, m_max0: usize) -> NodeStore {
        let stride = if code_len <= LINE {
            code_len.next_power_of_two()
        } else {
            code_len
        };
        NodeStore {
            code_len,
            stride,
            m_max,
            m_max0,
            chunks: Chunks::new(CHUNKS),
            slabs: Slabs::default(),
            growing: Mutex::new(()),
        }
    }

    /// `(chunk, node inside the chunk)` of `id`.
    fn locate(id: u32) -> (usize, usize) {
        let id = id as usize;
        (id >> CHUNK_SHIFT, id & ((1 << CHUNK_SHIFT) - 1))
    }

    fn new_chunk(&self, c: usize) -> Chunk {
        let cap = 1usize << CHUNK_SHIFT;
        let slabs = (c > 0).then_some(&self.slabs);
        // SAFETY (both): the chunk lives in `self.chunks`, dropped before `self.slabs`.
        Chunk {
            codes: unsafe { Lines::zeroed(cap * self.stride, slabs) },
            meta: Zeroed::heap(cap),
            links0: unsafe { Zeroed::new(cap * (1 + self.m_max0), slabs) },
            upper: std::iter::repeat_with(OnceLock::new).take(cap).collect(),
            locks: std::iter::repeat_with(|| Mutex::new(()))
                .take(cap)
                .collect(),
        }
    }

    /// The chunk holding `id` (created if `create`) and the node's index in it.
    fn slot_in(&self, id: u32, create: bool) -> Option<(&Chunk, usize)> {
        let (c, i) = Self::locate(id);
        let chunk = match self.chunks.get(c) {
            Some(chunk) => chunk,
            None if create => {
                let _growing = lock(&self.growing);
                self.chunks
                    .get_or_try_init(c, || Ok::<_, std::convert::Infallible>(self.new_chunk(c)))
                    .unwrap_or_else(|never| match never {})?
            }
            None => return None,
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

    /// Take slot `id` for a new node with `code` (of `code_len` bytes) and `level`.
    ///
    /// Returns `false`, changing nothing, if the slot is already taken. On `true` the node is
    /// READY with empty neighbour lists.
    pub(super) fn claim(&self, id: u32, code: &[u8], level: u8) -> bool {
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
        let start = i * self.stride;
        let Some(cells) = seg.codes.cells().get(start..start + self.code_len) else {
            return false;
        };
        for (cell, &x) in cells.iter().zip(code) {
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

    /// The code of `id`, if it is READY.
    #[inline]
    pub(super) fn code(&self, id: u32) -> Option<&[u8]> {
        let (seg, i, _) = self.ready_meta(id)?;
        self.code_in(seg, i)
    }

    /// The code of `id` if it is READY and not tombstoned: one read of its state.
    #[inline]
    pub(super) fn live_code(&self, id: u32) -> Option<&[u8]> {
        let (seg, i, meta) = self.ready_meta(id)?;
        if meta & DELETED != 0 {
            return None;
        }
        self.code_in(seg, i)
    }

    /// The code of `id`, read from a neighbour list: no state check, one cache miss fewer
    /// than [`NodeStore::code`] on the search's hottest path.
    ///
    /// Sound because of invariant 3: an id in a list names a READY node. The thread that
    /// stored the id saw the node READY (acquire), then stored the id with release; the
    /// caller read the id from the list with acquire ([`Links::read_into`]). So the
    /// code's writes happen before this read, and a READY code is never written again.
    /// `None` only if the id's chunk does not exist, which invariant 3 rules out.
    #[inline]
    pub(super) fn linked_code(&self, id: u32) -> Option<&[u8]> {
        let (seg, i) = self.slot(id)?;
        self.code_in(seg, i)
    }

    #[inline]
    fn code_in<'a>(&self, seg: &'a Chunk, i: usize) -> Option<&'a [u8]> {
        let start = i * self.stride;
        let cells = seg.codes.cells().get(start..start + self.code_len)?;
        // SAFETY: the callers establish that the slot is READY (see them), so its cells were
        // fully written before and are never written again (invariant 1); `UnsafeCell<u8>`
        // has `u8`'s layout.
        Some(unsafe { std::slice::from_raw_parts(cells.as_ptr().cast::<u8>(), cells.len()) })
    }

    /// Ask the CPU to start loading `id`'s level-0 list (see [`prefetch_bytes`]).
    #[inline]
    pub(super) fn prefetch_links0(&self, id: u32) {
        if let Some((seg, i)) = self.slot(id) {
            let w = 1 + self.m_max0;
            if let Some(list) = seg.links0.get(i * w..(i + 1) * w) {
                prefetch_lines(list.as_ptr().cast(), std::mem::size_of_val(list));
            }
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

    /// Bytes held by the chunks that exist: codes, states, locks, level-0 lists and the
    /// upper-level lists allocated so far, the slabs counted in whole huge pages.
    pub(super) fn memory_bytes(&self) -> usize {
        let per_node =
            std::mem::size_of::<OnceLock<Box<[AtomicU32]>>>() + std::mem::size_of::<Mutex<()>>();
        let upper_list = std::mem::size_of::<AtomicU32>() * (1 + self.m_max);
        let mut bytes = self.chunks.directory_bytes() + self.slabs.bytes();
        for (_, chunk) in self.chunks.iter() {
            bytes += chunk.meta.len() * per_node
                + chunk.codes.0.heap_bytes()
                + chunk.meta.heap_bytes()
                + chunk.links0.heap_bytes();
            bytes += chunk
                .upper
                .iter()
                .filter_map(OnceLock::get)
                .map(|lists| lists.len() / (1 + self.m_max) * upper_list)
                .sum::<usize>();
        }
        bytes
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
        assert_eq!(NodeStore::locate(0), (0, 0));
        assert_eq!(NodeStore::locate(1023), (0, 1023));
        assert_eq!(NodeStore::locate(1024), (1, 0));
        assert_eq!(NodeStore::locate((1 << 21) + 5), (2048, 5));
        assert_eq!(NodeStore::locate(u32::MAX), (CHUNKS - 1, 1023));
    }

    #[test]
    fn threads_reaching_a_new_chunk_together_make_it_once() {
        // Two threads claim alternate ids, so both reach each new chunk at about the same
        // time; a chunk made twice would leave the loser's arrays in the slabs.
        let n = 64 << CHUNK_SHIFT;
        let code = [0u8; 64];
        let alone = NodeStore::new(64, 16, 32);
        for id in 0..n {
            assert!(alone.claim(id, &code, 0));
        }
        let shared = NodeStore::new(64, 16, 32);
        std::thread::scope(|scope| {
            for first in 0..2 {
                let shared = &shared;
                scope.spawn(move || {
                    for id in (first..n).step_by(2) {
                        assert!(shared.claim(id, &code, 0));
                    }
                });
            }
        });
        assert_eq!(shared.memory_bytes(), alone.memory_bytes());
    }

    #[test]
    fn claim_publishes_once_and_lists_round_trip() {
        let store = NodeStore::new(2, 3, 6);
        assert!(store.code(5).is_none());
        assert!(store.claim(5, &[6, 8], 2));
        assert!(!store.claim(5, &[1, 0], 0), "a slot is claimed once");
        assert_eq!(store.code(5), Some(&[6, 8][..]));
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
        assert!(store.claim(u32::MAX, &[1, 0], 0));
        assert_eq!(store.code(u32::MAX), Some(&[1, 0][..]));
    }
}

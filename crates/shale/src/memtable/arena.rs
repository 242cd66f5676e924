//! A bump allocator for memtable entries.
//!
//! The arena takes memory from the global allocator in chunks and hands out 8-byte-aligned
//! pieces of them. Nothing is freed until the arena is dropped, and memory never moves, so a
//! pointer into the arena stays valid for the arena's whole life. That is what lets the
//! memtable publish raw entry pointers to lock-free readers.
//!
//! Chunks start small (4 KiB) and double up to 1 MiB, so that a memtable with a tiny
//! `write_buffer_size` (tests use a few KiB to force flushes) is not charged a whole MiB
//! for its first entry. An allocation larger than a quarter of the next chunk gets a chunk of
//! its own, so a 1 MiB value neither wastes the tail of the current chunk nor inflates later
//! chunks.
//!
//! # Thread safety
//!
//! `allocate` takes `&mut self`: the arena has one owner at a time. In the memtable it lives
//! inside the writer's mutex, so only the thread holding that lock allocates. Readers never
//! touch the arena itself, only the bytes behind pointers it returned.
//!
//! # Invariants
//!
//! 1. Every chunk in `chunks` was allocated with exactly its stored `Layout` and is freed once,
//!    in `Drop`.
//! 2. `cursor .. cursor + remaining` lies inside the last small chunk (or is empty, with
//!    `remaining == 0`), and `cursor` is 8-byte aligned.
//! 3. `allocated_bytes` is the sum of the sizes of all chunks.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// Every allocation is aligned to this; enough for `AtomicPtr`, `AtomicUsize` and `u64`.
pub(super) const ALIGN: usize = 8;

const FIRST_CHUNK_BYTES: usize = 4 << 10;
const MAX_CHUNK_BYTES: usize = 1 << 20;

struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
}

pub(super) struct Arena {
    chunks: Vec<Chunk>,
    /// Next free byte of the current chunk.
    cursor: *mut u8,
    /// Free bytes left after `cursor`.
    remaining: usize,
    /// Size of the next small chunk; doubles up to `MAX_CHUNK_BYTES`.
    next_chunk_bytes: usize,
    allocated_bytes: usize,
}

// SAFETY: the arena exclusively owns its chunks (like a `Vec<Box<[u8]>>`); the raw pointers
// are never shared by the arena itself, so moving it to another thread is sound.
unsafe impl Send for Arena {}

impl Arena {
    pub(super) fn new() -> Arena {
        Arena {
            chunks: Vec::new(),
            cursor: std::ptr::null_mut(),
            remaining: 0,
            next_chunk_bytes: FIRST_CHUNK_BYTES,
            allocated_bytes: 0,
        }
    }

    /// Bytes taken from the global allocator so far (the chunks, not what was handed out).
    pub(super) fn memory_usage(&self) -> usize {
        self.allocated_bytes
    }

    /// `bytes` of uninitialised memory, aligned to [`ALIGN`], valid until the arena drops.
    ///
    /// # Panics
    ///
    /// If `bytes` rounded up to [`ALIGN`] overflows `isize`. Aborts (through
    /// `handle_alloc_error`) if the global allocator fails.
    pub(super) fn allocate(&mut self, bytes: usize) -> NonNull<u8> {
        // Never zero: a zero-size request would return `cursor`, which is null before the
        // first chunk.
        let size = bytes
            .max(1)
            .checked_next_multiple_of(ALIGN)
            .expect("arena allocation size overflows usize");
        if size <= self.remaining {
            // SAFETY: by invariant 2 `cursor .. cursor + remaining` is inside one live chunk
            // and `size <= remaining`, so both pointers stay in (or one past) that chunk.
            let (out, next) = unsafe { (self.cursor, self.cursor.add(size)) };
            self.cursor = next;
            self.remaining -= size;
            // SAFETY: `cursor` points into a chunk, and chunks are never null.
            return unsafe { NonNull::new_unchecked(out) };
        }
        if size > self.next_chunk_bytes / 4 {
            // Large: a chunk of its own; the current chunk keeps serving small requests.
            return self.new_chunk(size);
        }
        let chunk_bytes = self.next_chunk_bytes;
        self.next_chunk_bytes = (chunk_bytes * 2).min(MAX_CHUNK_BYTES);
        let base = self.new_chunk(chunk_bytes);
        // The unused tail of the previous chunk is abandoned (at most a quarter of it, since
        // only requests of at most a quarter of a chunk get here).
        // SAFETY: `size <= chunk_bytes / 4 < chunk_bytes`, so both offsets are in the chunk.
        self.cursor = unsafe { base.as_ptr().add(size) };
        self.remaining = chunk_bytes - size;
        base
    }

    fn new_chunk(&mut self, size: usize) -> NonNull<u8> {
        let layout =
            Layout::from_size_align(size.max(ALIGN), ALIGN).expect("arena chunk size too large");
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        self.chunks.push(Chunk { ptr, layout });
        self.allocated_bytes += layout.size();
        ptr
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for chunk in &self.chunks {
            // SAFETY: invariant 1: allocated with this layout, freed only here.
            unsafe { alloc::dealloc(chunk.ptr.as_ptr(), chunk.layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_and_disjoint() {
        let mut arena = Arena::new();
        let mut spans = Vec::new();
        for i in 1..2000usize {
            let n = i % 97 + 1;
            let p = arena.allocate(n);
            assert_eq!(p.as_ptr() as usize % ALIGN, 0);
            // Write the whole span: overlapping spans would corrupt each other.
            // SAFETY: `p` is valid for `n` bytes.
            unsafe { p.as_ptr().write_bytes(i as u8, n) };
            spans.push((p, n, i as u8));
        }
        for (p, n, fill) in spans {
            // SAFETY: still valid: the arena is alive.
            let s = unsafe { std::slice::from_raw_parts(p.as_ptr(), n) };
            assert!(s.iter().all(|&b| b == fill));
        }
    }

    #[test]
    fn chunks_grow_and_large_allocations_get_their_own() {
        let mut arena = Arena::new();
        assert_eq!(arena.memory_usage(), 0);
        arena.allocate(16);
        assert_eq!(arena.memory_usage(), FIRST_CHUNK_BYTES);
        let before = arena.memory_usage();
        arena.allocate(1 << 20);
        assert_eq!(arena.memory_usage(), before + (1 << 20));
        // The small chunk still serves small requests.
        arena.allocate(16);
        assert_eq!(arena.memory_usage(), before + (1 << 20));
        for _ in 0..10_000 {
            arena.allocate(100);
        }
        assert!(arena.memory_usage() >= 1_000_000 + (1 << 20));
        assert!(arena.memory_usage() <= 4 * 1_000_000 + (1 << 20));
    }
}

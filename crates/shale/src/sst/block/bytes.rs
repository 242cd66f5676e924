//! [`BlockBytes`]: the bytes a [`super::Block`] reads — owned (decompressed, or read with
//! `pread`), or a view into a read-only memory mapping of the table file.
//!
//! A view is what makes a get from a mapped, uncompressed table cheap: the block is
//! checksummed once when it enters the block cache, and afterwards a lookup touches only
//! the cache lines of the restart array and the entries it decodes, not all 4 KiB.
//!
//! Owned buffers are recycled. Once the block cache is full, a point read that misses it
//! decompresses a block into a buffer and then frees one: the evicted block's, or its own
//! after the read when the cache's admission filter turns it away. The C
//! allocator's fast per-thread cache does not take buffers of a block's size, and freeing
//! and allocating a few KiB through its bins cost as much as the decompression itself.
//! So a dropped block hands its buffer to a small per-thread stash ([`take_buffer`]
//! draws from it), a fixed number of buffers of at most [`STASH_MAX_CAPACITY`] bytes.

use std::cell::RefCell;
use std::ops::Deref;
use std::sync::Arc;

use crate::fs::RandomAccessFile;

/// Immutable block bytes and whatever keeps them alive.
pub struct BlockBytes {
    ptr: *const u8,
    len: usize,
    owner: Owner,
}

enum Owner {
    Heap(Vec<u8>),
    /// The file whose mapping holds the bytes; the clone keeps the mapping alive.
    Mapping {
        _file: Arc<dyn RandomAccessFile>,
    },
}

// SAFETY: the bytes are never written after construction, and both owners are `Send` and
// `Sync` (`Vec<u8>`, and `RandomAccessFile: Send + Sync`).
unsafe impl Send for BlockBytes {}
// SAFETY: as above; shared access is read-only.
unsafe impl Sync for BlockBytes {}

impl BlockBytes {
    /// Bytes owned on the heap.
    pub fn owned(bytes: Vec<u8>) -> BlockBytes {
        BlockBytes {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
            owner: Owner::Heap(bytes),
        }
    }

    /// `len` bytes at `start` of `file`'s mapping, or `None` if the file is not mapped or
    /// the range is outside it.
    pub fn mapped(file: &Arc<dyn RandomAccessFile>, start: usize, len: usize) -> Option<Self> {
        let slice = file.mapped()?.get(start..start.checked_add(len)?)?;
        Some(BlockBytes {
            ptr: slice.as_ptr(),
            len,
            owner: Owner::Mapping {
                _file: Arc::clone(file),
            },
        })
    }

    /// Heap bytes this value holds (zero for a view into a mapping).
    pub fn heap_bytes(&self) -> usize {
        match &self.owner {
            Owner::Heap(v) => v.capacity(),
            Owner::Mapping { .. } => 0,
        }
    }

    /// The bytes as a `Vec`: moved if owned, copied out of a mapping.
    pub fn into_vec(mut self) -> Vec<u8> {
        match &mut self.owner {
            // `drop` then finds an empty `Vec`, which it does not keep.
            Owner::Heap(v) => std::mem::take(v),
            Owner::Mapping { .. } => self.to_vec(),
        }
    }
}

/// Buffers kept per thread.
const STASH_LEN: usize = 8;
/// The largest buffer worth keeping (a stash holds at most `STASH_LEN` of these).
pub const STASH_MAX_CAPACITY: usize = 64 << 10;
/// Fresh buffers are rounded up to this, so that a recycled one fits the next block of
/// about the same size (blocks are cut just past `block_size`, so their sizes cluster)
/// while the memory the block cache is charged for stays within a few percent of the
/// bytes it holds.
const BUFFER_ROUNDING: usize = 128;

thread_local! {
    static STASH: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// An empty buffer with room for `len` bytes (and at most an eighth more): a recycled one
/// if this thread has one that fits, else a new one.
pub fn take_buffer(len: usize) -> Vec<u8> {
    let recycled = STASH.with(|stash| {
        let mut stash = stash.try_borrow_mut().ok()?;
        // Not much larger than needed either: the cache charges a block its capacity.
        let fits = |b: &Vec<u8>| b.capacity() >= len && b.capacity() - len <= len / 8;
        let i = stash.iter().position(fits)?;
        Some(stash.swap_remove(i))
    });
    recycled.unwrap_or_else(|| Vec::with_capacity(len.next_multiple_of(BUFFER_ROUNDING)))
}

/// Keep `buffer` for a later [`take_buffer`] on this thread, or free it.
fn give_buffer(mut buffer: Vec<u8>) {
    if buffer.capacity() == 0 || buffer.capacity() > STASH_MAX_CAPACITY {
        return;
    }
    buffer.clear();
    // During thread teardown the stash may be gone: then the buffer is simply freed.
    let _ = STASH.try_with(|stash| {
        if let Ok(mut stash) = stash.try_borrow_mut() {
            if stash.len() < STASH_LEN {
                stash.push(buffer);
            }
        }
    });
}

impl Drop for BlockBytes {
    fn drop(&mut self) {
        if let Owner::Heap(bytes) = &mut self.owner {
            give_buffer(std::mem::take(bytes));
        }
    }
}

impl Deref for BlockBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr..ptr + len` was a valid slice of the owner's bytes when this value
        // was made. A `Vec`'s buffer does not move when the `Vec` does, and it is never
        // modified. A mapping's slice came from `&file` and stays valid while the file
        // object lives and is not mutably borrowed: our `Arc` clone guarantees both.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl std::fmt::Debug for BlockBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.owner {
            Owner::Heap(_) => "heap",
            Owner::Mapping { .. } => "mapped",
        };
        f.debug_struct("BlockBytes")
            .field("len", &self.len)
            .field("kind", &kind)
            .finish()
    }
}

impl From<Vec<u8>> for BlockBytes {
    fn from(bytes: Vec<u8>) -> Self {
        BlockBytes::owned(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_block_buffer_is_reused_empty_and_large_ones_are_not_kept() {
        let mut buffer = take_buffer(3000);
        assert!(buffer.is_empty() && buffer.capacity() >= 3000);
        buffer.extend_from_slice(&[7u8; 3000]);
        let at = buffer.as_ptr();
        drop(BlockBytes::owned(buffer));
        let again = take_buffer(2900);
        assert_eq!(again.as_ptr(), at, "the stashed buffer comes back");
        assert!(again.is_empty(), "and holds nothing of its last block");
        // Neither too small nor much too large a buffer is handed out.
        drop(BlockBytes::owned(again));
        assert!(take_buffer(8000).capacity() >= 8000);
        let small = take_buffer(100);
        assert_ne!(small.as_ptr(), at, "too large a buffer is not handed out");
        let fits = take_buffer(3000);
        assert_eq!(fits.as_ptr(), at);
        drop((small, fits));

        let stashed = || STASH.with(|s| s.borrow().len());
        let before = stashed();
        drop(BlockBytes::owned(vec![0u8; STASH_MAX_CAPACITY + 1]));
        assert_eq!(stashed(), before, "a huge buffer is freed, not kept");
        for _ in 0..2 * STASH_LEN {
            drop(BlockBytes::owned(vec![0u8; 100]));
        }
        assert_eq!(stashed(), STASH_LEN, "the stash is bounded");
    }
}

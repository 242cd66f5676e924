//! [`BlockBytes`]: the bytes a [`super::Block`] reads — owned (decompressed, or read with
//! `pread`), or a view into a read-only memory mapping of the table file.
//!
//! A view is what makes a get from a mapped, uncompressed table cheap: the block is
//! checksummed once when it enters the block cache, and afterwards a lookup touches only
//! the cache lines of the restart array and the entries it decodes, not all 4 KiB.

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
    pub fn into_vec(self) -> Vec<u8> {
        match self.owner {
            Owner::Heap(v) => v,
            Owner::Mapping { .. } => self.to_vec(),
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

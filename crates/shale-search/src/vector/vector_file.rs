//! The full vectors of an index's graph nodes, by node id, in a file mapped into memory:
//! what the graph (which keeps only codes) re-scores its best candidates with, and what
//! exact search scans ([`VectorSource`]).
//!
//! ```text
//!   VECTORS := slot{...}        slot i at byte i · 4·dim:  f32{dim}, little-endian
//! ```
//!
//! The file is a cache, never a source of truth: its bytes are written in place through a
//! shared mapping and never synced, and the index's open writes every live node's vector
//! into it again from the data (it compares first, so a file that survived intact costs a
//! read, not a write). So a crash, a torn page or a stray write costs nothing but that
//! rewrite, and the file needs no checksum or header. It lives in the page cache like the
//! SSTables: resident while it is used, evictable when memory is short, and read a few
//! vectors per search.
//!
//! Slots are mapped in chunks of 1024 (`chunks.rs`), created as ids reach them.
//!
//! # Thread safety
//!
//! A node's slot is written only by the thread that is about to insert the node into the
//! graph (or by the open, before any search), and before that insert; searches read it
//! only for nodes the graph returned, whose insert published the slot (the graph's
//! release/acquire on a node's state orders the write before the read). Ids are reused only
//! for nodes no longer in the graph. So no slot is read while it is written.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::chunks::Chunks;
use super::{NodeId, VectorSource};
use shale::error::{Error, Result};
use shale::fs::{FileSystem, MappedRegion};

/// Slots in a chunk: `1 << CHUNK_SHIFT`.
const CHUNK_SHIFT: u32 = 10;

/// The full vectors of a graph's nodes. See the module documentation.
pub struct VectorFile {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    dim: usize,
    chunks: Chunks<Box<dyn MappedRegion>>,
}

impl std::fmt::Debug for VectorFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorFile")
            .field("path", &self.path)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl VectorFile {
    /// The file at `path` for vectors of `dim` components, mapped as slots are used.
    pub fn open(fs: Arc<dyn FileSystem>, path: &Path, dim: usize) -> VectorFile {
        VectorFile {
            fs,
            path: path.to_owned(),
            dim,
            chunks: Chunks::new(1 << (32 - CHUNK_SHIFT)),
        }
    }

    /// The dimension of every vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    fn chunk_bytes(&self) -> usize {
        (4 * self.dim) << CHUNK_SHIFT
    }

    /// The chunk holding slot `id` and the slot's byte offset in it.
    fn locate(id: NodeId, slot_bytes: usize) -> (usize, usize) {
        let id = id.0 as usize;
        (
            id >> CHUNK_SHIFT,
            (id & ((1 << CHUNK_SHIFT) - 1)) * slot_bytes,
        )
    }

    /// The slot of `id` as a pointer to its first component, the chunk mapped if `create`.
    fn slot(&self, id: NodeId, create: bool) -> Result<Option<*mut f32>> {
        let (c, at) = Self::locate(id, 4 * self.dim);
        let region = if create {
            let bytes = self.chunk_bytes();
            let offset = (c as u64)
                .checked_mul(bytes as u64)
                .ok_or_else(|| Error::invalid("vector file offset overflows"))?;
            self.chunks
                .get_or_try_init(c, || self.fs.map_region(&self.path, offset, bytes))?
        } else {
            self.chunks.get(c)
        };
        Ok(region.and_then(|r| {
            (at + 4 * self.dim <= r.len())
                // `at` is a multiple of 4 in a region aligned to 8, so the pointer is
                // aligned for `f32`.
                .then(|| r.ptr().wrapping_add(at).cast::<f32>())
        }))
    }

    /// Write `v` into the slot of `id` (see the module comment for who may, when). A
    /// slot that already holds `v` is not written, so that an intact file costs no writes
    /// when the open writes every vector again.
    ///
    /// # Errors
    /// `InvalidArgument` if `v` has another length than `dim`; `Io` from mapping the file.
    pub fn write(&self, id: NodeId, v: &[f32]) -> Result<()> {
        if v.len() != self.dim {
            return Err(Error::invalid(format!(
                "a vector of {} components for a vector file of {}",
                v.len(),
                self.dim
            )));
        }
        let Some(slot) = self.slot(id, true)? else {
            return Err(Error::invalid(format!("node id {} has no slot", id.0)));
        };
        // SAFETY: the slot is `dim` aligned `f32`s inside a live region (checked by `slot`);
        // by the module's discipline no other thread reads or writes it now.
        let dst = unsafe { std::slice::from_raw_parts_mut(slot, self.dim) };
        if dst != v {
            dst.copy_from_slice(v);
        }
        Ok(())
    }
}

impl VectorSource for VectorFile {
    fn vector(&self, id: NodeId) -> Option<&[f32]> {
        let slot = self.slot(id, false).ok()??;
        // SAFETY: `dim` aligned `f32`s inside a region that lives as long as `self`; by the
        // module's discipline the slot was written before this read and is not being
        // written now. Every bit pattern is a valid `f32`.
        Some(unsafe { std::slice::from_raw_parts(slot, self.dim) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip_on_disk_and_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("VECTORS");
        for fs in [
            Arc::new(shale::fs::PosixFs) as Arc<dyn FileSystem>,
            Arc::new(shale::fs::MemFs::new()),
        ] {
            let file = VectorFile::open(Arc::clone(&fs), &path, 3);
            assert!(file.vector(NodeId(0)).is_none());
            file.write(NodeId(0), &[1.0, 2.0, 3.0]).unwrap();
            file.write(NodeId(5000), &[4.0, 5.0, 6.0]).unwrap();
            assert_eq!(file.vector(NodeId(0)), Some(&[1.0, 2.0, 3.0][..]));
            assert_eq!(file.vector(NodeId(5000)), Some(&[4.0, 5.0, 6.0][..]));
            assert_eq!(file.vector(NodeId(1)), Some(&[0.0, 0.0, 0.0][..]));
            assert!(
                file.vector(NodeId(3000)).is_none(),
                "chunk 2 was never mapped"
            );
            assert!(file.write(NodeId(1), &[1.0]).is_err());
        }
        // The real file kept what was written.
        let file = VectorFile::open(Arc::new(shale::fs::PosixFs), &path, 3);
        file.write(NodeId(1), &[0.0, 0.0, 0.0]).unwrap();
        assert_eq!(file.vector(NodeId(0)), Some(&[1.0, 2.0, 3.0][..]));
        assert_eq!(file.vector(NodeId(5000)), None, "mapped lazily");
        file.write(NodeId(5001), &[0.0, 0.0, 0.0]).unwrap();
        assert_eq!(file.vector(NodeId(5000)), Some(&[4.0, 5.0, 6.0][..]));
    }
}

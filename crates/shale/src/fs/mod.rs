//! The file-system abstraction every byte of Shale goes through.
//!
//! The engine never calls `std::fs` directly: it asks a [`FileSystem`] for files, so that
//! an implementation that loses unsynced bytes on a simulated crash, or fails the k-th
//! operation, can be substituted. [`PosixFs`] is the real one; [`MemFs`] (`mem.rs`) keeps
//! files in memory and produces the image a `kill -9` or a power loss would leave;
//! [`FaultFs`] (`fault.rs`) wraps another and fails the k-th operation with `EIO` or
//! `ENOSPC`. Tests in `tests/engine/crash_power_loss.rs` and `tests/engine/io_error_sweep.rs`
//! use them.
//!
//! Two kinds of writable file exist because they have different durability shapes:
//! - [`FileSystem::create`] gives a buffered sequential writer (SSTables, the manifest):
//!   bytes reach the OS on `flush` and the disk on `sync`.
//! - [`FileSystem::create_log`] gives an *append region* for the WAL whose `append` alone
//!   puts the bytes where a crash of the process cannot lose them (on POSIX: a shared file
//!   mapping, so an append is a `memcpy` and no system call). `sync` makes them survive power
//!   loss. This is what lets the default durability mode survive `kill -9` without paying a
//!   `write(2)` per put. Bytes that a sync follows at once go in with `append_to_sync`,
//!   which may hold them until that sync (on POSIX: one `pwrite(2)` before the
//!   `fdatasync`, which then has no mapped page to write-protect).

mod fault;
mod mem;
mod posix;

use std::fmt::Debug;
use std::path::Path;

pub use fault::{Errno, Fault, FaultFs, OpKind};
pub use mem::{CrashKind, MemFs, PowerLoss};
pub use posix::PosixFs;

use crate::error::Result;

/// A file written front to back.
pub trait WritableFile: Send {
    /// Append `data` after everything written so far.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Append `data` that the caller makes durable with [`WritableFile::sync`] before it
    /// appends anything else. Until that sync the bytes may wait in this file's own buffer
    /// (a process crash before the sync may lose them), so an append region can write them
    /// the way that syncs fastest. Same as `append` unless a file says otherwise.
    fn append_to_sync(&mut self, data: &[u8]) -> Result<()> {
        self.append(data)
    }
    /// Hand buffered bytes to the operating system (they then survive a process crash).
    fn flush(&mut self) -> Result<()>;
    /// Make everything appended so far durable (survives power loss). Implies `flush`.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// True if nothing has been appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read at arbitrary offsets by many threads at once.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Fill `buf` with the bytes at `offset`; fails if the file is shorter.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Length of the file in bytes.
    fn len(&self) -> u64;
    /// True if the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// All of the file's bytes, if they are mapped into memory: readers then slice them
    /// instead of copying with `read_exact_at`.
    fn mapped(&self) -> Option<&[u8]> {
        None
    }
    /// A hint that the `len` bytes at `offset` will be read soon: start reading them into
    /// the page cache without waiting. Files read by `pread` leave read-ahead to the
    /// kernel, which detects sequential reads itself; a mapping advised for random access
    /// (see `open_mapped`) has none, and its readers ask for it here.
    fn read_ahead(&self, _offset: u64, _len: u64) {}
}

/// `read_exact_at` for a file whose bytes are all in memory (a mapping, or `MemFs`'s
/// buffer): a read past the end is `Corruption` naming `path`.
pub(crate) fn read_from_bytes(
    bytes: &[u8],
    path: &Path,
    offset: u64,
    buf: &mut [u8],
) -> Result<()> {
    let src = usize::try_from(offset)
        .ok()
        .and_then(|start| bytes.get(start..start.checked_add(buf.len())?))
        .ok_or_else(|| {
            crate::error::Error::corruption(
                path,
                offset,
                format!(
                    "read of {} bytes past end of file ({})",
                    buf.len(),
                    bytes.len()
                ),
            )
        })?;
    buf.copy_from_slice(src);
    Ok(())
}

/// Held while a database is open; dropping it releases the lock.
pub trait FileLock: Send + Sync + Debug {}

/// A region of a file mapped for reading and writing in place, for data the engine can
/// always derive again (the vector index's full vectors): its bytes are never synced, and
/// after a crash the file may hold any mix of old and new bytes, so its owner checks it
/// against the data it was derived from before trusting it.
///
/// The region is `len` bytes at `ptr`, aligned to at least 8 bytes, valid and fixed in
/// place until it is dropped. Who writes which bytes when is the owner's discipline: the
/// region itself synchronises nothing.
pub trait MappedRegion: Send + Sync + Debug {
    /// The first byte.
    fn ptr(&self) -> *mut u8;
    /// Bytes in the region.
    fn len(&self) -> usize;
    /// True if the region has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`FileSystem::map_region`]'s region when the file system has no mappings: zeroed
/// memory, never written to the file (a crash, or dropping the region, loses it, which
/// the owner's checks at open expect).
#[derive(Debug)]
pub struct MemoryRegion(Box<[std::cell::UnsafeCell<u64>]>);

impl MemoryRegion {
    /// `len` zeroed bytes (rounded up to a multiple of 8).
    pub fn zeroed(len: usize) -> MemoryRegion {
        MemoryRegion(
            std::iter::repeat_with(|| std::cell::UnsafeCell::new(0))
                .take(len.div_ceil(8))
                .collect(),
        )
    }
}

impl MappedRegion for MemoryRegion {
    fn ptr(&self) -> *mut u8 {
        self.0.as_ptr().cast::<u8>().cast_mut()
    }

    fn len(&self) -> usize {
        self.0.len() * 8
    }
}

// SAFETY: the region hands out a raw pointer and synchronises nothing: its owner decides
// which thread touches which bytes when (see `MappedRegion`), as for a shared mapping.
unsafe impl Sync for MemoryRegion {}

/// The operations the engine needs from a file system.
pub trait FileSystem: Send + Sync + Debug {
    /// Create (or truncate) `path` for buffered sequential writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Create (or truncate) `path` as a WAL append region; see the module comment.
    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Open `path` for positional reads.
    fn open(&self, path: &Path) -> Result<std::sync::Arc<dyn RandomAccessFile>>;
    /// Open an immutable file for reads through a memory mapping where the file system
    /// supports it ([`RandomAccessFile::mapped`]); by default the same as `open`.
    fn open_mapped(&self, path: &Path) -> Result<std::sync::Arc<dyn RandomAccessFile>> {
        self.open(path)
    }
    /// Read all of `path`.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>>;
    /// Atomically replace `to` with `from`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Delete a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Names (not paths) of the entries in `dir`.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// Create `dir` and its parents.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Make the entries of `dir` (creates, renames, deletes) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// True if `path` exists.
    fn exists(&self, path: &Path) -> bool;
    /// Take an exclusive lock on `path`, creating it; fails with `Error::Locked` if another
    /// handle holds it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;

    /// Give the immutable file `from` the second name `to` (a hard link, so both names
    /// share the bytes and neither can change them), or, where the file system cannot, make
    /// `to` a synced copy. By default a copy. The new directory entry is durable once `to`'s
    /// directory is synced.
    ///
    /// # Errors
    /// `Io` from reading `from` or writing `to`.
    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        copy_file(self, from, to)
    }

    /// Map `len` bytes of `path` from `offset` (a multiple of 4096) for reading and writing
    /// in place, creating the file or extending it with zeros as needed (see
    /// [`MappedRegion`]). By default the region is memory that never reaches the file,
    /// which is all a file system without mappings (`MemFs`, `FaultFs`) can offer.
    ///
    /// # Errors
    /// `Io` from creating, extending or mapping the file.
    fn map_region(&self, path: &Path, offset: u64, len: usize) -> Result<Box<dyn MappedRegion>> {
        let _ = (path, offset);
        Ok(Box::new(MemoryRegion::zeroed(len)))
    }
}

/// The WAL and manifest writer of a read-only database handle (`Options::read_only`):
/// every append fails, and the syncs of a close have nothing to do.
pub(crate) struct ReadOnlyFile;

impl WritableFile for ReadOnlyFile {
    fn append(&mut self, _data: &[u8]) -> Result<()> {
        Err(crate::Error::invalid("the database is open read-only"))
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        Ok(())
    }
    fn len(&self) -> u64 {
        0
    }
}

/// Make `to` a synced copy of `from`, read whole (for small files, and for file systems
/// without links).
///
/// # Errors
/// `Io` from reading `from` or writing `to`.
pub fn copy_file<F: FileSystem + ?Sized>(fs: &F, from: &Path, to: &Path) -> Result<()> {
    let bytes = fs.read_all(from)?;
    let mut file = fs.create(to)?;
    file.append(&bytes)?;
    file.sync()
}

/// Delete `dir/name` if it is there, and make that durable (`dir` synced).
///
/// # Errors
/// `Io` from the delete or the directory sync.
pub fn remove_durably(fs: &dyn FileSystem, dir: &Path, name: &str) -> Result<()> {
    let path = dir.join(name);
    if !fs.exists(&path) {
        return Ok(());
    }
    fs.remove(&path)?;
    fs.sync_dir(dir)
}

/// Replace `dir/name` with what `fill` appends, atomically: the bytes go to `dir/temp`,
/// which is synced and renamed over `name`, and then the directory is synced, so a crash
/// at any point leaves the whole old file or the whole new one.
///
/// # Errors
/// The first error of `fill` or of any step; the old file is then still in place.
pub fn replace_file(
    fs: &dyn FileSystem,
    dir: &Path,
    name: &str,
    temp: &str,
    fill: impl FnOnce(&mut dyn WritableFile) -> Result<()>,
) -> Result<()> {
    let temp = dir.join(temp);
    let mut file = fs.create(&temp)?;
    fill(&mut *file)?;
    file.sync()?;
    drop(file);
    fs.rename(&temp, &dir.join(name))?;
    fs.sync_dir(dir)
}

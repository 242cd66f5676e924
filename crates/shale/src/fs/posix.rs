//! The real file system: `std::fs` plus `libc` for `flock`, `fallocate` and `fdatasync`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use memmap2::{Mmap, MmapMut, MmapOptions};

use super::{FileLock, FileSystem, MappedRegion, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::sync::lock;

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

/// User-space buffer of a sequential writer before a `write(2)`.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// The WAL grows its file (and mapping) in steps of this many bytes.
const LOG_CHUNK_BYTES: u64 = 4 * 1024 * 1024;

fn fdatasync(file: &File, path: &Path) -> Result<()> {
    file.sync_data()
        .map_err(|e| Error::io("fdatasync", path, e))
}

struct BufferedFile {
    file: File,
    path: PathBuf,
    buf: Vec<u8>,
    len: u64,
}

impl WritableFile for BufferedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.buf.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            self.file
                .write_all(data)
                .map_err(|e| Error::io("write", &self.path, e))?;
        } else {
            self.buf.extend_from_slice(data);
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file
                .write_all(&self.buf)
                .map_err(|e| Error::io("write", &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        fdatasync(&self.file, &self.path)
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// The WAL's append region: the file is grown with `fallocate` a chunk at a time (so a full
/// disk is an `ENOSPC` error here, never a `SIGBUS` later) and each chunk is mapped shared.
/// An append copies into the mapping: the bytes are then in the page cache and survive the
/// death of the process. On drop the file is truncated to the bytes written.
///
/// Touching a fresh page of a mapping costs a fault and a zero-fill in the kernel. To keep
/// that off the write path, the chunk after the current one is allocated, mapped and
/// prefaulted (`MADV_POPULATE_WRITE`) by a helper thread while the current one fills.
/// Chunks are contiguous: `[map_offset, map_offset + map.len())` and the next one starts
/// where it ends; an append that crosses the boundary is split.
///
/// Bytes that a sync follows at once (`append_to_sync`: a group with a synced writer) do
/// not go through the mapping. They wait in `staged` and reach the file with one
/// `pwrite(2)` just before the `fdatasync`. A page dirtied through a shared mapping must be
/// write-protected when it is written back, which flushes its TLB entry on every core that
/// runs the process (an inter-processor interrupt that the fdatasync waits for), and the
/// next append to that page then takes a write fault; a page written by `pwrite` has no
/// dirty mapping to clean.
struct MappedLog {
    file: File,
    path: PathBuf,
    map: Option<MmapMut>,
    map_offset: u64,
    /// The next chunk being prepared: its start, its size, and the helper doing it.
    next: Option<(u64, u64, JoinHandle<io::Result<MmapMut>>)>,
    /// Bytes appended so far (the logical length).
    len: u64,
    /// Everything before this offset has been made durable.
    synced: u64,
    /// The last `staged.len()` bytes of the `len` appended, not yet in the file: appended
    /// for the sync that follows, which writes them.
    staged: Vec<u8>,
}

/// `MADV_POPULATE_WRITE` (Linux 5.14): fault a range in, writable, in one call.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Reserve `[start, start + size)` of `file` on disk and map it, prefaulted.
fn prepare_chunk(file: &File, start: u64, size: u64) -> io::Result<MmapMut> {
    let off = libc::off_t::try_from(start).map_err(|_| io::Error::other("WAL offset"))?;
    let len = libc::off_t::try_from(size).map_err(|_| io::Error::other("WAL chunk size"))?;
    // SAFETY: plain syscall on a valid fd; no memory is passed.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, off, len) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EOPNOTSUPP) {
            return Err(err);
        }
        // A file system without fallocate: `posix_fallocate` writes the range's blocks
        // (glibc's emulation), so that they are allocated now and a full disk is an error
        // here. (Extending the length alone would leave a sparse range, and a store into
        // the mapping on a full disk would be a SIGBUS. A file system that stores written
        // zeros as holes, such as a compressing one, still can: that is not preventable
        // through a mapping.)
        // SAFETY: plain syscall on a valid fd; no memory is passed.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), off, len) };
        if rc == libc::EOPNOTSUPP {
            // A C library without the emulation (musl): only the length can be set.
            if file.metadata()?.len() < start + size {
                file.set_len(start + size)?;
            }
        } else if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
    }
    let map_len = usize::try_from(size).map_err(|_| io::Error::other("WAL chunk size"))?;
    // SAFETY: the range is ours alone: the database lock admits one writer per WAL, chunks
    // never overlap, and the file is only truncated after every mapping is gone (drop).
    let mut map = unsafe {
        MmapOptions::new()
            .offset(start)
            .len(map_len)
            .map_mut(file)?
    };
    // SAFETY: advice on a mapping we own; a kernel without this advice returns EINVAL,
    // which only means the faults happen on first write instead.
    unsafe {
        libc::madvise(map.as_mut_ptr().cast(), map_len, MADV_POPULATE_WRITE);
    }
    Ok(map)
}

/// Start writing back `[start, start + len)` of `file` without waiting for it, so that a
/// later sync of the log (at the latest, the one when its memtable is frozen, which every
/// writer waits for) finds only the last chunk dirty: 64 MiB of WAL took tens of
/// milliseconds to fdatasync at a memtable switch. Linux ignores `msync(MS_ASYNC)`;
/// `sync_file_range` starts the I/O. It may block while the device queue is full, which is
/// why the chunk helper calls it, not the writer. Advice only: errors surface at the sync.
fn start_write_back(file: &File, start: u64, len: u64) {
    #[cfg(target_os = "linux")]
    if let (Ok(start), Ok(len)) = (libc::off64_t::try_from(start), libc::off64_t::try_from(len)) {
        // SAFETY: plain syscall on a valid fd; no memory is passed.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), start, len, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, start, len);
}

impl MappedLog {
    /// Switch to the chunk that starts where the current one ends, holding at least
    /// `at_least` bytes, and start preparing the one after it.
    fn grow(&mut self, at_least: u64) -> Result<()> {
        let start = self.map_offset + self.map_len();
        let page = 4096u64;
        let size = at_least.max(LOG_CHUNK_BYTES).div_ceil(page) * page;
        let map = match self.next.take() {
            Some((s, n, helper)) if s == start && n >= size => helper
                .join()
                .map_err(|_| {
                    Error::io(
                        "fallocate/mmap",
                        &self.path,
                        io::Error::other("helper panicked"),
                    )
                })?
                .map_err(|e| Error::io("fallocate/mmap", &self.path, e))?,
            other => {
                if let Some((_, _, helper)) = other {
                    let _ = helper.join();
                }
                prepare_chunk(&self.file, start, size)
                    .map_err(|e| Error::io("fallocate/mmap", &self.path, e))?
            }
        };
        let next_start = start + map.len() as u64;
        let old = self.map.replace(map);
        // Elsewhere POSIX wants mapped writes msynced before a sync covers them.
        #[cfg(not(target_os = "linux"))]
        if let Some(old) = &old {
            old.flush_async()
                .map_err(|e| Error::io("msync", &self.path, e))?;
        }
        let filled = old.map(|old| (self.map_offset, old.len() as u64));
        self.map_offset = start;
        // A failure to start the helper only means the next chunk is prepared inline (and
        // the filled one written back by the next sync).
        if let Ok(file) = self.file.try_clone() {
            let spawned = std::thread::Builder::new()
                .name("shale-wal-chunk".into())
                .spawn(move || {
                    if let Some((start, len)) = filled {
                        start_write_back(&file, start, len);
                    }
                    prepare_chunk(&file, next_start, LOG_CHUNK_BYTES)
                });
            if let Ok(helper) = spawned {
                self.next = Some((next_start, LOG_CHUNK_BYTES, helper));
            }
        }
        Ok(())
    }

    fn map_len(&self) -> u64 {
        self.map.as_ref().map_or(0, |m| m.len() as u64)
    }

    /// Append `data` at the end of the region, into the mapping or, if `staged`, into
    /// `self.staged`; either way through the same chunks, so the file stays allocated
    /// ahead of every byte.
    fn place(&mut self, data: &[u8], staged: bool) -> Result<()> {
        let mut rest = data;
        while !rest.is_empty() {
            let room = (self.map_offset + self.map_len()).saturating_sub(self.len);
            if room == 0 {
                self.grow(rest.len() as u64)?;
                continue;
            }
            let n = rest.len().min(usize::try_from(room).unwrap_or(usize::MAX));
            let from = usize::try_from(self.len - self.map_offset)
                .map_err(|_| Error::invalid("WAL offset out of range"))?;
            let (head, tail) = rest.split_at(n);
            let dst = self
                .map
                .as_mut()
                .and_then(|m| m.get_mut(from..from + n))
                .ok_or_else(|| Error::invalid("WAL mapping too small"))?;
            if staged {
                self.staged.extend_from_slice(head);
            } else {
                dst.copy_from_slice(head);
            }
            self.len += n as u64;
            rest = tail;
        }
        Ok(())
    }

    /// Write the staged bytes to the file, where they belong: just before `len`.
    fn write_staged(&mut self) -> Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let at = self.len - self.staged.len() as u64;
        self.file
            .write_all_at(&self.staged, at)
            .map_err(|e| Error::io("pwrite", &self.path, e))?;
        self.staged.clear();
        Ok(())
    }
}

impl WritableFile for MappedLog {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        // Staged bytes come first in the file: a crash must not find a hole before these.
        self.write_staged()?;
        self.place(data, false)
    }

    fn append_to_sync(&mut self, data: &[u8]) -> Result<()> {
        self.place(data, true)
    }

    fn flush(&mut self) -> Result<()> {
        // Mapped bytes are already in the page cache; staged ones get there now.
        self.write_staged()
    }

    fn sync(&mut self) -> Result<()> {
        if self.synced == self.len {
            return Ok(());
        }
        self.write_staged()?;
        // On Linux the page cache is the mapping: pages dirtied through it are written back
        // by fdatasync like any other dirty page of the file (the kernel tracks them with
        // write faults), so one fdatasync covers the current chunk, the earlier ones and
        // the file's metadata. Elsewhere POSIX wants msync for mapped writes first.
        #[cfg(not(target_os = "linux"))]
        if let Some(map) = &self.map {
            let from = usize::try_from(self.synced.saturating_sub(self.map_offset))
                .map_err(|_| Error::invalid("WAL offset out of range"))?;
            let to = usize::try_from(self.len - self.map_offset)
                .map_err(|_| Error::invalid("WAL offset out of range"))?;
            map.flush_range(from, to - from)
                .map_err(|e| Error::io("msync", &self.path, e))?;
        }
        fdatasync(&self.file, &self.path)?;
        self.synced = self.len;
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for MappedLog {
    fn drop(&mut self) {
        // Staged bytes are still here only if their sync never ran (it failed, or the
        // group's write did): nobody was told they are durable, and they are dropped.
        self.len -= self.staged.len() as u64;
        self.map = None;
        if let Some((_, _, helper)) = self.next.take() {
            drop(helper.join());
        }
        // Trim the preallocated zeros so the file ends at the last record; a reader would
        // stop at them anyway, so a failure here loses nothing.
        let _ = self.file.set_len(self.len);
    }
}

#[derive(Debug)]
struct PosixRandomFile {
    file: File,
    path: PathBuf,
    len: u64,
}

impl PosixRandomFile {
    fn open(path: &Path) -> Result<PosixRandomFile> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        Ok(PosixRandomFile {
            file,
            path: path.to_owned(),
            len,
        })
    }
}

impl RandomAccessFile for PosixRandomFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                Error::corruption(
                    &self.path,
                    offset,
                    format!(
                        "read of {} bytes past end of file ({})",
                        buf.len(),
                        self.len
                    ),
                )
            } else {
                Error::io("pread", &self.path, e)
            }
        })
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// A read-only shared mapping of an immutable file (SSTables): a block read is a slice of
/// the mapping, with no system call and no copy. The file must not shrink while mapped
/// (Shale never truncates an SSTable; deleting it keeps the mapping valid), and a disk
/// error under the mapping arrives as `SIGBUS`, not as an `Io` error: the trade-off
/// `Options::mmap_reads` documents.
struct PosixMappedFile {
    map: Mmap,
    path: PathBuf,
}

impl std::fmt::Debug for PosixMappedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PosixMappedFile")
            .field("path", &self.path)
            .field("len", &self.map.len())
            .finish()
    }
}

impl RandomAccessFile for PosixMappedFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        super::read_from_bytes(&self.map, &self.path, offset, buf)
    }

    fn len(&self) -> u64 {
        self.map.len() as u64
    }

    fn mapped(&self) -> Option<&[u8]> {
        Some(&self.map)
    }

    fn read_ahead(&self, offset: u64, len: u64) {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let len = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(self.map.len().saturating_sub(start));
        if len > 0 {
            // Advice: a failure costs only the read-ahead.
            let _ = self.map.advise_range(memmap2::Advice::WillNeed, start, len);
        }
    }
}

/// A shared, writable mapping of part of a file ([`FileSystem::map_region`]).
struct PosixRegion {
    map: MmapMut,
    path: PathBuf,
}

impl std::fmt::Debug for PosixRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PosixRegion")
            .field("path", &self.path)
            .field("len", &self.map.len())
            .finish()
    }
}

impl MappedRegion for PosixRegion {
    fn ptr(&self) -> *mut u8 {
        self.map.as_ptr().cast_mut()
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

#[derive(Debug)]
struct PosixLock {
    _file: File,
}

impl FileLock for PosixLock {}

impl FileSystem for PosixFs {
    fn map_region(&self, path: &Path, offset: u64, len: usize) -> Result<Box<dyn MappedRegion>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let end = offset.saturating_add(len as u64);
        {
            // The size check and the growth are one step: two threads mapping regions of
            // one file at once must not let the one with the lower end shrink the file
            // under the other's mapping (its pages past the new end would raise SIGBUS).
            static GROW: Mutex<()> = Mutex::new(());
            let _grow = lock(&GROW);
            let size = file
                .metadata()
                .map_err(|e| Error::io("stat", path, e))?
                .len();
            if size < end {
                file.set_len(end)
                    .map_err(|e| Error::io("ftruncate", path, e))?;
            }
        }
        // SAFETY: the mapping is of a file the engine alone writes, only through this
        // region; nothing shrinks it while mapped. Its contents are derived data checked by
        // the owner (see `MappedRegion`), so a change by another process could cost only a
        // wrong cache entry, never memory safety of this process.
        let map = unsafe { MmapOptions::new().offset(offset).len(len).map_mut(&file) }
            .map_err(|e| Error::io("mmap", path, e))?;
        Ok(Box::new(PosixRegion {
            map,
            path: path.to_owned(),
        }))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(BufferedFile {
            file,
            path: path.to_owned(),
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
            len: 0,
        }))
    }

    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(MappedLog {
            file,
            path: path.to_owned(),
            map: None,
            map_offset: 0,
            next: None,
            len: 0,
            synced: 0,
            staged: Vec::new(),
        }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(PosixRandomFile::open(path)?))
    }

    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let reader = PosixRandomFile::open(path)?;
        if reader.len == 0 {
            // An empty mapping is not allowed; an empty file has nothing to map anyway.
            return Ok(Arc::new(reader));
        }
        // SAFETY: the mapping is read-only and the engine never writes or truncates a
        // file it reads this way (SSTables are immutable once renamed into place).
        let map = unsafe { Mmap::map(&reader.file) }.map_err(|e| Error::io("mmap", path, e))?;
        // A fault in a mapping reads the pages around it, as much as the device's
        // read-ahead setting (8 MiB on some virtual disks): a point read that misses the
        // page cache would read megabytes for one block, and evict as much. Random access
        // reads the faulting page alone; sequential readers ask for read-ahead themselves
        // (`RandomAccessFile::read_ahead`). Advice: a failure leaves the default.
        let _ = map.advise(memmap2::Advice::Random);
        Ok(Arc::new(PosixMappedFile {
            map,
            path: reader.path,
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|e| Error::io("read", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("unlink", path, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| Error::io("readdir", dir, e))? {
            let entry = entry.map_err(|e| Error::io("readdir", dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let d = File::open(dir).map_err(|e| Error::io("open", dir, e))?;
        d.sync_all().map_err(|e| Error::io("fsync", dir, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn link_or_copy(&self, from: &Path, to: &Path) -> Result<()> {
        let linked = std::fs::hard_link(from, to);
        let Err(e) = linked else {
            return Ok(());
        };
        // Another device or a file system without links: copy instead.
        let cannot_link = e.raw_os_error() == Some(libc::EXDEV)
            || matches!(
                e.kind(),
                std::io::ErrorKind::Unsupported | std::io::ErrorKind::PermissionDenied
            );
        if !cannot_link {
            return Err(Error::io("link", to, e));
        }
        std::fs::copy(from, to).map_err(|e| Error::io("copy", to, e))?;
        File::open(to)
            .and_then(|f| f.sync_all())
            .map_err(|e| Error::io("fsync", to, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        // SAFETY: plain syscall on a valid fd.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            return if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                Err(Error::Locked(path.to_owned()))
            } else {
                Err(Error::io("flock", path, err))
            };
        }
        Ok(Box::new(PosixLock { _file: file }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_appends_across_chunks_and_trims_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let fs = PosixFs;
        let mut f = fs.create_log(&path).unwrap();
        // Odd sizes and distinct bytes, so pieces straddle chunk boundaries and any
        // misplaced byte shows.
        let mut expected = Vec::new();
        for i in 0..9u32 {
            let piece: Vec<u8> = (0..1_000_003u32 + i * 7919)
                .map(|j| (j.wrapping_mul(31) ^ i) as u8)
                .collect();
            f.append(&piece).unwrap();
            expected.extend_from_slice(&piece);
        }
        f.append(&vec![0x5au8; 9 << 20]).unwrap(); // larger than a chunk
        expected.extend_from_slice(&vec![0x5au8; 9 << 20]);
        f.sync().unwrap();
        assert_eq!(f.len(), expected.len() as u64);
        drop(f);
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes == expected, "file differs from what was appended");
    }

    #[test]
    fn log_staged_appends_land_in_place_and_unsynced_ones_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let mut f = PosixFs.create_log(&path).unwrap();
        let mut expected = Vec::new();
        // Mapped and staged appends alternate, in pieces that straddle chunk boundaries;
        // each staged run is synced, except the one before a mapped append (which must
        // write it first) and the last one (dropped with the file).
        for i in 0..13u32 {
            let piece: Vec<u8> = (0..700_001u32 + i * 104_729)
                .map(|j| (j.wrapping_mul(37) ^ i) as u8)
                .collect();
            let (a, b) = piece.split_at(piece.len() / 3);
            match i % 3 {
                0 => f.append(&piece).unwrap(),
                1 => {
                    f.append_to_sync(a).unwrap();
                    f.append_to_sync(b).unwrap();
                    f.sync().unwrap();
                    let on_disk = std::fs::read(&path).unwrap();
                    let end = expected.len() + piece.len();
                    assert!(on_disk
                        .get(..end)
                        .is_some_and(|d| d[expected.len()..] == piece));
                }
                _ => f.append_to_sync(&piece).unwrap(),
            }
            expected.extend_from_slice(&piece);
        }
        assert_eq!(f.len(), expected.len() as u64);
        f.append_to_sync(b"never synced").unwrap();
        drop(f);
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            bytes == expected,
            "file differs from what was appended and synced"
        );
    }

    #[test]
    fn lock_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let first = PosixFs.lock(&path).unwrap();
        assert!(matches!(PosixFs.lock(&path), Err(Error::Locked(_))));
        drop(first);
        PosixFs.lock(&path).unwrap();
    }

    #[test]
    fn regions_mapped_at_once_never_shrink_the_file() {
        // Threads map the regions of one file in an order that makes a lower end follow a
        // higher one; a shrink would cut the higher region, whose writes would then raise
        // SIGBUS and kill the test.
        const REGION: usize = 1 << 16;
        const THREADS: usize = 8;
        let dir = tempfile::tempdir().unwrap();
        for round in 0..200 {
            let path = dir.path().join(format!("regions-{round}"));
            std::thread::scope(|scope| {
                for t in (0..THREADS).rev() {
                    let path = &path;
                    scope.spawn(move || {
                        let offset = (t * REGION) as u64;
                        let region = PosixFs.map_region(path, offset, REGION).unwrap();
                        // SAFETY: this thread alone writes this region, which is `REGION`
                        // bytes long and stays mapped until it is dropped below.
                        let bytes = unsafe { std::slice::from_raw_parts_mut(region.ptr(), REGION) };
                        bytes.fill(t as u8 + 1);
                    });
                }
            });
            let written = std::fs::read(&path).unwrap();
            assert_eq!(written.len(), THREADS * REGION, "round {round}");
            for (t, chunk) in written.chunks(REGION).enumerate() {
                assert!(
                    chunk.iter().all(|&b| b == t as u8 + 1),
                    "round {round}, region {t}"
                );
            }
        }
    }
}

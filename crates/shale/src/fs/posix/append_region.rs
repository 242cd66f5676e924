//! The WAL's append region on POSIX: a file grown in preallocated chunks, each mapped
//! shared, so that an append is a `memcpy` and no system call.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use memmap2::{MmapMut, MmapOptions};

use super::sync_data::fdatasync;
use crate::error::{Error, Result};
use crate::fs::WritableFile;

/// The WAL grows its file (and mapping) in steps of this many bytes.
const LOG_CHUNK_BYTES: u64 = 4 * 1024 * 1024;

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
pub(super) struct MappedLog {
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
    /// The append region of `file` (at `path`), empty: nothing is allocated or mapped yet.
    pub(super) fn new(file: File, path: &Path) -> MappedLog {
        MappedLog {
            file,
            path: path.to_owned(),
            map: None,
            map_offset: 0,
            next: None,
            len: 0,
            synced: 0,
            staged: Vec::new(),
        }
    }

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

#[cfg(test)]
mod tests {
    use crate::fs::{FileSystem, PosixFs};

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
}

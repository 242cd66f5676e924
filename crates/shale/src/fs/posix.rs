//! The real file system: `std::fs` plus `libc` for `flock`, `fallocate` and `fdatasync`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{MmapMut, MmapOptions};

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

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
struct MappedLog {
    file: File,
    path: PathBuf,
    /// The mapping of `[map_offset, map_offset + map.len())`.
    map: Option<MmapMut>,
    map_offset: u64,
    /// Bytes appended so far (the logical length).
    len: u64,
    /// Everything before this offset has been made durable.
    synced: u64,
}

impl MappedLog {
    /// Map a fresh chunk that starts at the current logical end.
    fn grow(&mut self, at_least: u64) -> Result<()> {
        if let Some(map) = self.map.take() {
            map.flush_async()
                .map_err(|e| Error::io("msync", &self.path, e))?;
        }
        // Chunks start at a page boundary at or before `len`.
        let page = 4096u64;
        let start = self.len - self.len % page;
        let size = (self.len - start + at_least).max(LOG_CHUNK_BYTES);
        let size = size.div_ceil(page) * page;
        let end = start + size;
        let off =
            libc::off_t::try_from(start).map_err(|_| Error::invalid("WAL offset out of range"))?;
        let len =
            libc::off_t::try_from(size).map_err(|_| Error::invalid("WAL chunk out of range"))?;
        // SAFETY: plain syscall on a valid fd; no memory is passed.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), 0, off, len) };
        if rc != 0 {
            let err = io::Error::from_raw_os_error(rc_errno(rc));
            // File systems without fallocate: fall back to extending the length.
            if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
                self.file
                    .set_len(end)
                    .map_err(|e| Error::io("ftruncate", &self.path, e))?;
            } else {
                return Err(Error::io("fallocate", &self.path, err));
            }
        }
        let map_len = usize::try_from(size).map_err(|_| Error::invalid("WAL chunk too big"))?;
        // SAFETY: the file is ours alone (the database lock guarantees one writer) and the
        // range was just allocated, so no other mapping or truncation races with it.
        let map = unsafe {
            MmapOptions::new()
                .offset(start)
                .len(map_len)
                .map_mut(&self.file)
        }
        .map_err(|e| Error::io("mmap", &self.path, e))?;
        self.map = Some(map);
        self.map_offset = start;
        Ok(())
    }
}

fn rc_errno(rc: i32) -> i32 {
    if rc == -1 {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    } else {
        rc
    }
}

impl WritableFile for MappedLog {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let need = data.len() as u64;
        let fits = self
            .map
            .as_ref()
            .is_some_and(|m| self.len + need <= self.map_offset + m.len() as u64);
        if !fits {
            self.grow(need)?;
        }
        let map = self
            .map
            .as_mut()
            .ok_or_else(|| Error::invalid("WAL mapping missing"))?;
        let from = usize::try_from(self.len - self.map_offset)
            .map_err(|_| Error::invalid("WAL offset out of range"))?;
        let dst = map
            .get_mut(from..from + data.len())
            .ok_or_else(|| Error::invalid("WAL mapping too small"))?;
        dst.copy_from_slice(data);
        self.len += need;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // Nothing to do: the bytes are already in the page cache.
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if self.synced == self.len {
            return Ok(());
        }
        if let Some(map) = &self.map {
            let from = usize::try_from(self.synced.saturating_sub(self.map_offset))
                .map_err(|_| Error::invalid("WAL offset out of range"))?;
            let to = usize::try_from(self.len - self.map_offset)
                .map_err(|_| Error::invalid("WAL offset out of range"))?;
            map.flush_range(from, to - from)
                .map_err(|e| Error::io("msync", &self.path, e))?;
        }
        // Earlier chunks were flushed asynchronously when they were unmapped; fdatasync
        // waits for them and for the file's size change.
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
        self.map = None;
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

#[derive(Debug)]
struct PosixLock {
    _file: File,
}

impl FileLock for PosixLock {}

impl FileSystem for PosixFs {
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
            len: 0,
            synced: 0,
        }))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();
        Ok(Arc::new(PosixRandomFile {
            file,
            path: path.to_owned(),
            len,
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
        let piece = vec![0xabu8; 1_000_003];
        for _ in 0..9 {
            f.append(&piece).unwrap();
        }
        f.sync().unwrap();
        assert_eq!(f.len(), 9_000_027);
        drop(f);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 9_000_027);
        assert!(bytes.iter().all(|&b| b == 0xab));
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
}

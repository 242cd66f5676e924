//! The real file system: `std::fs` plus `libc` for `flock`, `fallocate` and `fdatasync`.
//! The WAL's append region is in `posix/append_region.rs`;
//! `posix/sync_data.rs` holds the `fdatasync` both end with.

mod append_region;
mod sync_data;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use memmap2::{Mmap, MmapMut, MmapOptions};

use super::{FileLock, FileSystem, MappedRegion, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::sync::lock;
use append_region::MappedLog;
use sync_data::fdatasync;

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

/// User-space buffer of a sequential writer before a `write(2)`.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

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
        Ok(Box::new(MappedLog::new(file, path)))
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

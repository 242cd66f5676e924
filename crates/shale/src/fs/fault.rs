//! A file system that fails on purpose: [`FaultFs`] wraps any [`FileSystem`], counts every
//! operation by [`OpKind`], and fails the k-th operation of the selected kinds with `EIO`
//! or `ENOSPC`, once or from then on. A sweep runs a workload once to learn how many
//! operations it does ([`FaultFs::count`]), then once per k.
//!
//! A failed operation does nothing to the wrapped file system: a failed write writes no
//! byte, a failed sync syncs nothing (on Linux a failed fsync may also have dropped the
//! dirty pages; the engine must not retry either way, it must stop writing).
//!
//! Thread safety: the counters and the plan are behind one mutex shared by the wrapper
//! and every file handle it returned, so concurrent threads see one numbering.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::sync::lock;

/// The kinds of operation [`FaultFs`] counts and can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// `create`, `create_log`, `create_dir_all`, `lock`.
    Create,
    /// `append` on a writable file.
    Write,
    /// `flush` on a writable file.
    Flush,
    /// `sync` on a writable file.
    Sync,
    /// `sync_dir`.
    SyncDir,
    /// `rename`.
    Rename,
    /// `remove`.
    Remove,
    /// `open`, `read_all`, `read_exact_at`, `list`.
    Read,
}

impl OpKind {
    /// Every kind.
    pub const ALL: [OpKind; 8] = [
        OpKind::Create,
        OpKind::Write,
        OpKind::Flush,
        OpKind::Sync,
        OpKind::SyncDir,
        OpKind::Rename,
        OpKind::Remove,
        OpKind::Read,
    ];
    /// Every kind that changes the file system.
    pub const MUTATING: [OpKind; 7] = [
        OpKind::Create,
        OpKind::Write,
        OpKind::Flush,
        OpKind::Sync,
        OpKind::SyncDir,
        OpKind::Rename,
        OpKind::Remove,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

/// The error an injected fault returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errno {
    /// `EIO`: the device failed.
    Eio,
    /// `ENOSPC`: the disk is full.
    Enospc,
}

impl Errno {
    fn to_io(self) -> io::Error {
        io::Error::from_raw_os_error(match self {
            Errno::Eio => libc::EIO,
            Errno::Enospc => libc::ENOSPC,
        })
    }
}

/// Which operation to fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Fail the `at`-th operation (1-based) whose kind is in `kinds`, counted from when the
    /// fault is armed.
    pub at: u64,
    /// The kinds of operation counted and failed.
    pub kinds: Vec<OpKind>,
    /// Fail every matching operation after the first failure too (a dead disk, a full
    /// disk), instead of only that one.
    pub persistent: bool,
    /// The error returned.
    pub errno: Errno,
}

#[derive(Debug, Default)]
struct Control {
    fault: Option<Fault>,
    /// Matching operations since the fault was armed.
    matched: u64,
    /// Operations per kind, since creation.
    counts: [u64; 8],
    /// Faults injected so far.
    injected: u64,
}

impl Control {
    /// Count an operation of `kind`; decide whether it fails.
    fn check(&mut self, kind: OpKind, op: &'static str, path: &Path) -> Result<()> {
        if let Some(c) = self.counts.get_mut(kind.index()) {
            *c += 1;
        }
        let Some(fault) = &self.fault else {
            return Ok(());
        };
        if !fault.kinds.contains(&kind) {
            return Ok(());
        }
        self.matched += 1;
        let fail = self.matched == fault.at || (fault.persistent && self.matched > fault.at);
        if !fail {
            return Ok(());
        }
        self.injected += 1;
        Err(Error::io(op, path, fault.errno.to_io()))
    }
}

/// A [`FileSystem`] that injects faults into another; see the module comment. Cloning
/// shares the counters and the plan.
#[derive(Clone)]
pub struct FaultFs {
    inner: Arc<dyn FileSystem>,
    control: Arc<Mutex<Control>>,
}

impl FaultFs {
    /// Wrap `inner`, failing nothing until [`FaultFs::arm`].
    pub fn new(inner: Arc<dyn FileSystem>) -> FaultFs {
        FaultFs {
            inner,
            control: Arc::default(),
        }
    }

    /// Fail as `fault` says, counting matching operations from now.
    pub fn arm(&self, fault: Fault) {
        let mut c = lock(&self.control);
        c.fault = Some(fault);
        c.matched = 0;
    }

    /// Stop failing.
    pub fn disarm(&self) {
        lock(&self.control).fault = None;
    }

    /// Operations of `kinds` seen so far (since creation).
    pub fn count(&self, kinds: &[OpKind]) -> u64 {
        let c = lock(&self.control);
        kinds.iter().filter_map(|k| c.counts.get(k.index())).sum()
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        lock(&self.control).injected
    }

    fn check(&self, kind: OpKind, op: &'static str, path: &Path) -> Result<()> {
        lock(&self.control).check(kind, op, path)
    }
}

impl fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultFs")
            .field("inner", &self.inner)
            .field("control", &*lock(&self.control))
            .finish()
    }
}

struct FaultWritable {
    inner: Box<dyn WritableFile>,
    control: Arc<Mutex<Control>>,
    path: PathBuf,
}

impl FaultWritable {
    fn check(&self, kind: OpKind, op: &'static str) -> Result<()> {
        lock(&self.control).check(kind, op, &self.path)
    }
}

impl WritableFile for FaultWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.check(OpKind::Write, "write")?;
        self.inner.append(data)
    }

    fn append_to_sync(&mut self, data: &[u8]) -> Result<()> {
        self.check(OpKind::Write, "write")?;
        self.inner.append_to_sync(data)
    }

    fn flush(&mut self) -> Result<()> {
        self.check(OpKind::Flush, "write")?;
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<()> {
        self.check(OpKind::Sync, "fdatasync")?;
        self.inner.sync()
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

struct FaultRandom {
    inner: Arc<dyn RandomAccessFile>,
    control: Arc<Mutex<Control>>,
    path: PathBuf,
}

impl fmt::Debug for FaultRandom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultRandom")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl RandomAccessFile for FaultRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        lock(&self.control).check(OpKind::Read, "pread", &self.path)?;
        self.inner.read_exact_at(offset, buf)
    }

    fn len(&self) -> u64 {
        self.inner.len()
    }
}

impl FaultFs {
    fn writable(&self, inner: Box<dyn WritableFile>, path: &Path) -> Box<dyn WritableFile> {
        Box::new(FaultWritable {
            inner,
            control: Arc::clone(&self.control),
            path: path.to_owned(),
        })
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OpKind::Create, "create", path)?;
        let file = self.inner.create(path)?;
        Ok(self.writable(file, path))
    }

    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.check(OpKind::Create, "create", path)?;
        let file = self.inner.create_log(path)?;
        Ok(self.writable(file, path))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.check(OpKind::Read, "open", path)?;
        Ok(Arc::new(FaultRandom {
            inner: self.inner.open(path)?,
            control: Arc::clone(&self.control),
            path: path.to_owned(),
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        self.check(OpKind::Read, "read", path)?;
        self.inner.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.check(OpKind::Rename, "rename", from)?;
        self.inner.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.check(OpKind::Remove, "unlink", path)?;
        self.inner.remove(path)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.check(OpKind::Read, "readdir", dir)?;
        self.inner.list(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.check(OpKind::Create, "mkdir", dir)?;
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.check(OpKind::SyncDir, "fsync", dir)?;
        self.inner.sync_dir(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.check(OpKind::Create, "flock", path)?;
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    fn errno(e: &Error) -> Option<i32> {
        match e {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    #[test]
    fn fails_the_kth_matching_operation_once_or_persistently() {
        let fs = FaultFs::new(Arc::new(MemFs::new()));
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        let mut f = fs.create(&dir.join("f")).unwrap();
        fs.arm(Fault {
            at: 2,
            kinds: vec![OpKind::Write],
            persistent: false,
            errno: Errno::Enospc,
        });
        f.append(b"a").unwrap();
        f.sync().unwrap(); // not a counted kind
        let e = f.append(b"b").unwrap_err();
        assert_eq!(errno(&e), Some(libc::ENOSPC));
        f.append(b"c").unwrap();
        assert_eq!(fs.injected(), 1);

        fs.arm(Fault {
            at: 1,
            kinds: vec![OpKind::Sync, OpKind::SyncDir],
            persistent: true,
            errno: Errno::Eio,
        });
        assert_eq!(errno(&f.sync().unwrap_err()), Some(libc::EIO));
        assert!(fs.sync_dir(dir).is_err());
        assert!(f.sync().is_err());
        fs.disarm();
        f.sync().unwrap();
        assert_eq!(fs.read_all(&dir.join("f")).unwrap(), b"ac");
        assert_eq!(fs.count(&[OpKind::Write]), 3);
        assert_eq!(fs.injected(), 4);
    }
}

//! An in-memory file system that can lose power.
//!
//! [`MemFs`] keeps, for every file, the bytes *handed to the operating system* and how many
//! of them are *durable*, and for every directory entry (create, rename, remove) whether it
//! is durable. It then produces the image a real machine would show after a crash:
//!
//! - [`MemFs::process_crash`] (`kill -9`): everything handed to the OS survives: every
//!   directory entry, every byte of a WAL append region ([`FileSystem::create_log`]: an
//!   append alone reaches the OS), and the bytes of a buffered writer up to its last
//!   `flush`. Only bytes still in a writer's user-space buffer are lost.
//! - [`MemFs::power_loss`]: only what was synced survives. A file keeps the bytes it held at
//!   its last `sync`; a directory entry change survives only once `sync_dir` of its
//!   directory ran after it. This is deliberately the conservative reading of POSIX (and of
//!   ext4 with `data=ordered`): a renamed file's new name survives only after `sync_dir`,
//!   a freshly created file whose directory was never synced is gone, and a removed file
//!   whose removal was not synced comes back. [`PowerLoss`] can soften that the way a
//!   journaling file system does (keep the first `n` unsynced entry changes, in order),
//!   tear the last unsynced write (keep a prefix of it), and let write-back have reached
//!   some files and not others (each keeps a prefix of its unsynced bytes).
//!
//! A crash can also be planned for the k-th mutating operation ([`MemFs::crash_at_op`]):
//! the image is taken at that moment, atomically with respect to every thread, and from
//! then on this instance fails every operation with `EIO`, so the database that was
//! running on it stops at once and no write is acknowledged after the crash.
//!
//! The mutating operations, each counted once: `create`, `create_log`, `lock` (creates the
//! lock file), a write of bytes to the OS (a log `append`, a buffered writer's flush of its
//! buffer), `sync`, `rename`, `remove`, `sync_dir`. Reads are not counted.
//!
//! Durability checker: `MemFs` records a [`MemFs::violations`] entry when a file is renamed
//! while some of its bytes are not synced (the new name could then point at a short file),
//! and when a thread syncs a file while a rename it made is still waiting for its
//! `sync_dir` (it has moved on as if the rename were durable). [`MemFs::unsynced`] lists
//! what a power loss would drop right now, for tests that assert that a clean close leaves
//! nothing behind.
//!
//! Thread safety: one mutex guards the whole file system, so every operation, and the
//! crash image, is atomic. Files are append-only inodes: `create` on an existing name makes
//! a new inode (truncation), and an inode outlives its last name while handles use it.
//! Directories exist as soon as `create_dir_all` returns (their own entries are not
//! modelled).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::sync::lock;

/// A buffered writer hands its bytes to the OS when this many are buffered (and on
/// `flush`/`sync`). Small, so that an SSTable write is several crash points.
const WRITE_BUFFER_BYTES: usize = 4096;

/// What survives a simulated power loss beyond the synced state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PowerLoss {
    /// Keep this many bytes of the last write that was not yet synced (and every unsynced
    /// byte before it in the same file): a torn write. `None` drops every unsynced byte.
    pub tear_last_write: Option<u64>,
    /// Keep the first this-many directory entry changes not yet made durable by
    /// `sync_dir`, in the order they happened (a journaling file system commits metadata
    /// in order). 0 drops them all.
    pub keep_dir_ops: usize,
    /// Let the kernel's background write-back have reached some files before the power
    /// went: each file also keeps a prefix of its unsynced bytes, none, all or some, drawn
    /// from this seed and the file, independently of the other files. `None` keeps none.
    /// This is what breaks an ordering between files that only a sync would enforce.
    pub write_back: Option<u64>,
}

/// Which crash a planned crash produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashKind {
    /// The process dies (`kill -9`); the machine keeps running.
    Process,
    /// The machine loses power.
    PowerLoss(PowerLoss),
}

/// An in-memory file system with crash images; see the module comment. Cloning shares
/// the same files.
#[derive(Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

#[derive(Default, Clone)]
struct Node {
    /// Bytes handed to the OS.
    data: Vec<u8>,
    /// The first `durable` bytes of `data` survive power loss.
    durable: usize,
}

#[derive(Debug, Clone)]
enum DirOp {
    Link(PathBuf, u64),
    Unlink(PathBuf),
    /// From, to, and the thread that renamed (see `sync_node`).
    Rename(PathBuf, PathBuf, std::thread::ThreadId),
}

impl DirOp {
    fn dir(&self) -> Option<&Path> {
        match self {
            DirOp::Link(p, _) | DirOp::Unlink(p) | DirOp::Rename(_, p, _) => p.parent(),
        }
    }

    fn apply(&self, entries: &mut BTreeMap<PathBuf, u64>) {
        match self {
            DirOp::Link(p, node) => {
                entries.insert(p.clone(), *node);
            }
            DirOp::Unlink(p) => {
                entries.remove(p);
            }
            DirOp::Rename(from, to, _) => {
                if let Some(node) = entries.remove(from) {
                    entries.insert(to.clone(), node);
                }
            }
        }
    }
}

#[derive(Default)]
struct State {
    nodes: HashMap<u64, Node>,
    next_node: u64,
    /// Entries as the OS shows them.
    live: BTreeMap<PathBuf, u64>,
    /// Entries that survive power loss.
    durable: BTreeMap<PathBuf, u64>,
    /// Entry changes not yet made durable, in the order they happened.
    pending: Vec<DirOp>,
    dirs: BTreeSet<PathBuf>,
    locks: HashSet<PathBuf>,
    /// Mutating operations so far.
    ops: u64,
    /// The last write of bytes: inode, and the range of its data it wrote.
    last_write: Option<(u64, usize, usize)>,
    planned: Option<(u64, CrashKind)>,
    /// Set once the planned crash happened: the image, and from then on every
    /// operation fails.
    crashed: Option<Box<State>>,
    violations: Vec<String>,
}

impl State {
    /// Count a mutating operation; take the planned crash image when its turn comes.
    /// `write` is the inode and bytes of a write, which a torn crash may keep in part.
    fn op(&mut self, what: &str, path: &Path, write: Option<(u64, &[u8])>) -> Result<()> {
        if self.crashed.is_some() {
            return Err(crashed(what, path));
        }
        self.ops += 1;
        if let Some((node, bytes)) = write {
            if let Some(n) = self.nodes.get_mut(&node) {
                let start = n.data.len();
                n.data.extend_from_slice(bytes);
                self.last_write = Some((node, start, n.data.len()));
            }
        }
        match self.planned {
            Some((at, kind)) if at == self.ops => {
                // A write is in the image's past (a torn crash may keep part of it); any
                // other operation is not. Either way the caller sees it fail.
                self.crashed = Some(Box::new(self.image(kind)));
                Err(crashed(what, path))
            }
            _ => Ok(()),
        }
    }

    fn image(&self, kind: CrashKind) -> State {
        let (entries, loss) = match kind {
            CrashKind::Process => (self.live.clone(), None),
            CrashKind::PowerLoss(loss) => {
                let mut entries = self.durable.clone();
                for op in self.pending.iter().take(loss.keep_dir_ops) {
                    op.apply(&mut entries);
                }
                (entries, Some(loss))
            }
        };
        let mut nodes = HashMap::new();
        for node in entries.values() {
            let Some(n) = self.nodes.get(node) else {
                continue;
            };
            let keep = match loss {
                None => n.data.len(),
                Some(loss) => {
                    let mut keep = n.durable;
                    if let (Some(tear), Some((last, start, end))) =
                        (loss.tear_last_write, self.last_write)
                    {
                        if last == *node {
                            let torn = start.saturating_add(usize::try_from(tear).unwrap_or(0));
                            keep = keep.max(torn.min(end));
                        }
                    }
                    if let Some(seed) = loss.write_back {
                        let unsynced = n.data.len().saturating_sub(n.durable);
                        keep = keep.max(n.durable + written_back(seed, *node, unsynced));
                    }
                    keep
                }
            };
            let data = n.data.get(..keep).unwrap_or(&n.data).to_vec();
            let durable = data.len();
            nodes.insert(*node, Node { data, durable });
        }
        State {
            next_node: self.next_node,
            nodes,
            live: entries.clone(),
            durable: entries,
            dirs: self.dirs.clone(),
            ..State::default()
        }
    }

    fn link(&mut self, path: &Path) -> u64 {
        let id = self.next_node;
        self.next_node += 1;
        self.nodes.insert(id, Node::default());
        self.live.insert(path.to_owned(), id);
        self.pending.push(DirOp::Link(path.to_owned(), id));
        id
    }

    fn parent_exists(&self, path: &Path, what: &'static str) -> Result<()> {
        match path.parent() {
            Some(dir) if self.dirs.contains(dir) => Ok(()),
            _ => Err(Error::io(
                what,
                path,
                io::Error::from(io::ErrorKind::NotFound),
            )),
        }
    }

    /// Only a sync on the thread that renamed counts against a pending rename: that
    /// thread has moved on as if its rename were durable. Other threads' syncs (a writer's
    /// WAL while a background thread switches CURRENT) do not depend on it.
    fn sync_node(&mut self, node: u64, path: &Path) {
        let me = std::thread::current().id();
        if let Some(DirOp::Rename(from, to, _)) = self
            .pending
            .iter()
            .find(|op| matches!(op, DirOp::Rename(_, _, by) if *by == me))
        {
            let v = format!(
                "{} synced while the rename {} -> {} still waits for sync_dir",
                path.display(),
                from.display(),
                to.display()
            );
            self.violations.push(v);
        }
        if let Some(n) = self.nodes.get_mut(&node) {
            n.durable = n.data.len();
        }
    }
}

/// How many of `unsynced` bytes of file `node` write-back kept: a third of the files none,
/// a third all, a third a random prefix.
fn written_back(seed: u64, node: u64, unsynced: usize) -> usize {
    // SplitMix64's finaliser over the pair: any fixed mixing would do.
    let mut z = seed ^ node.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    match z % 3 {
        0 => 0,
        1 => unsynced,
        _ => usize::try_from((z >> 8) % (unsynced as u64 + 1)).unwrap_or(unsynced),
    }
}

fn crashed(what: &str, path: &Path) -> Error {
    Error::Io {
        op: "simulated crash",
        path: path.to_owned(),
        source: io::Error::other(format!("{what} after the simulated crash")),
    }
}

fn not_found(what: &'static str, path: &Path) -> Error {
    Error::io(what, path, io::Error::from(io::ErrorKind::NotFound))
}

impl MemFs {
    /// An empty file system.
    pub fn new() -> MemFs {
        MemFs::default()
    }

    fn from_state(state: State) -> MemFs {
        MemFs {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// The image a `kill -9` of the process would leave, now. This instance goes on.
    pub fn process_crash(&self) -> MemFs {
        MemFs::from_state(lock(&self.state).image(CrashKind::Process))
    }

    /// The image a power loss would leave, now. This instance goes on.
    pub fn power_loss(&self, loss: PowerLoss) -> MemFs {
        MemFs::from_state(lock(&self.state).image(CrashKind::PowerLoss(loss)))
    }

    /// Crash during the `k`-th mutating operation counted from the start (1-based; see
    /// [`MemFs::ops`]). A data write at that point is in the image's past, so a torn
    /// crash can keep part of it; any other operation is not.
    pub fn crash_at_op(&self, k: u64, kind: CrashKind) {
        lock(&self.state).planned = Some((k, kind));
    }

    /// Forget a planned crash that has not happened yet.
    pub fn cancel_crash(&self) {
        lock(&self.state).planned = None;
    }

    /// The image of the planned crash, once it happened.
    pub fn crash_image(&self) -> Option<MemFs> {
        let state = lock(&self.state);
        let image = state.crashed.as_ref()?;
        Some(MemFs::from_state(State {
            nodes: image.nodes.clone(),
            live: image.live.clone(),
            durable: image.durable.clone(),
            dirs: image.dirs.clone(),
            next_node: image.next_node,
            ..State::default()
        }))
    }

    /// True once the planned crash happened.
    pub fn crashed(&self) -> bool {
        lock(&self.state).crashed.is_some()
    }

    /// Mutating operations so far.
    pub fn ops(&self) -> u64 {
        lock(&self.state).ops
    }

    /// Durability-order violations seen so far (see the module comment).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// What a power loss would drop now: files with unsynced bytes (name and byte count)
    /// and creates and renames waiting for `sync_dir`. Removals waiting for `sync_dir` are
    /// not listed: a removed file that comes back is obsolete, and the engine's to ignore.
    pub fn unsynced(&self) -> Vec<String> {
        let state = lock(&self.state);
        let mut out = Vec::new();
        for (path, node) in &state.live {
            if let Some(n) = state.nodes.get(node) {
                if n.data.len() > n.durable {
                    out.push(format!(
                        "{}: {} unsynced bytes",
                        path.display(),
                        n.data.len() - n.durable
                    ));
                }
            }
        }
        for op in &state.pending {
            if !matches!(op, DirOp::Unlink(_)) {
                out.push(format!("entry change waiting for sync_dir: {op:?}"));
            }
        }
        out
    }

    /// Names of files (full paths) visible now.
    pub fn files(&self) -> Vec<PathBuf> {
        lock(&self.state).live.keys().cloned().collect()
    }

    /// Replace the bytes of an existing file, durably (for corruption tests).
    ///
    /// # Errors
    /// `Io` (not found) if `path` does not exist.
    pub fn overwrite(&self, path: &Path, data: Vec<u8>) -> Result<()> {
        let mut state = lock(&self.state);
        let node = *state
            .live
            .get(path)
            .ok_or_else(|| not_found("overwrite", path))?;
        let durable = data.len();
        state.nodes.insert(node, Node { data, durable });
        Ok(())
    }
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("MemFs")
            .field("files", &state.live.len())
            .field("ops", &state.ops)
            .finish_non_exhaustive()
    }
}

struct MemWritable {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    node: u64,
    /// User-space buffer of a buffered writer; always empty for a log.
    buf: Vec<u8>,
    log: bool,
    len: u64,
}

impl MemWritable {
    fn hand_to_os(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        lock(&self.state).op("write", &self.path, Some((self.node, &buf)))
    }
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.log {
            lock(&self.state).op("append", &self.path, Some((self.node, data)))?;
        } else {
            self.buf.extend_from_slice(data);
            if self.buf.len() >= WRITE_BUFFER_BYTES {
                self.hand_to_os()?;
            }
        }
        self.len += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.hand_to_os()
    }

    fn sync(&mut self) -> Result<()> {
        self.hand_to_os()?;
        let mut state = lock(&self.state);
        state.op("sync", &self.path, None)?;
        state.sync_node(self.node, &self.path);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug)]
struct MemRandomFile {
    data: Arc<Vec<u8>>,
    path: PathBuf,
}

impl RandomAccessFile for MemRandomFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        super::read_from_bytes(&self.data, &self.path, offset, buf)
    }

    fn len(&self) -> u64 {
        self.data.len() as u64
    }
}

struct MemLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl fmt::Debug for MemLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemLock").field("path", &self.path).finish()
    }
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        lock(&self.state).locks.remove(&self.path);
    }
}

impl MemFs {
    fn create_file(&self, path: &Path, log: bool) -> Result<Box<dyn WritableFile>> {
        let mut state = lock(&self.state);
        state.parent_exists(path, "create")?;
        state.op("create", path, None)?;
        let node = state.link(path);
        Ok(Box::new(MemWritable {
            state: Arc::clone(&self.state),
            path: path.to_owned(),
            node,
            buf: Vec::new(),
            log,
            len: 0,
        }))
    }
}

impl FileSystem for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create_file(path, false)
    }

    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create_file(path, true)
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let data = self.read_all(path)?;
        Ok(Arc::new(MemRandomFile {
            data: Arc::new(data),
            path: path.to_owned(),
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let state = lock(&self.state);
        if state.crashed.is_some() {
            return Err(crashed("read", path));
        }
        let node = state
            .live
            .get(path)
            .ok_or_else(|| not_found("open", path))?;
        Ok(state
            .nodes
            .get(node)
            .map(|n| n.data.clone())
            .unwrap_or_default())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = lock(&self.state);
        state.parent_exists(to, "rename")?;
        let node = *state
            .live
            .get(from)
            .ok_or_else(|| not_found("rename", from))?;
        state.op("rename", from, None)?;
        if let Some(n) = state.nodes.get(&node) {
            if n.data.len() > n.durable {
                let v = format!(
                    "{} renamed to {} with {} unsynced bytes",
                    from.display(),
                    to.display(),
                    n.data.len() - n.durable
                );
                state.violations.push(v);
            }
        }
        state.live.remove(from);
        state.live.insert(to.to_owned(), node);
        state.pending.push(DirOp::Rename(
            from.to_owned(),
            to.to_owned(),
            std::thread::current().id(),
        ));
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut state = lock(&self.state);
        if !state.live.contains_key(path) {
            return Err(not_found("unlink", path));
        }
        state.op("unlink", path, None)?;
        state.live.remove(path);
        state.pending.push(DirOp::Unlink(path.to_owned()));
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let state = lock(&self.state);
        if state.crashed.is_some() {
            return Err(crashed("readdir", dir));
        }
        if !state.dirs.contains(dir) {
            return Err(not_found("readdir", dir));
        }
        Ok(state
            .live
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut state = lock(&self.state);
        if state.crashed.is_some() {
            return Err(crashed("mkdir", dir));
        }
        for d in dir.ancestors() {
            state.dirs.insert(d.to_owned());
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut state = lock(&self.state);
        if !state.dirs.contains(dir) {
            return Err(not_found("open", dir));
        }
        state.op("fsync dir", dir, None)?;
        let pending = std::mem::take(&mut state.pending);
        let (now, later): (Vec<DirOp>, Vec<DirOp>) =
            pending.into_iter().partition(|op| op.dir() == Some(dir));
        for op in &now {
            op.apply(&mut state.durable);
        }
        state.pending = later;
        Ok(())
    }

    fn exists(&self, path: &Path) -> bool {
        let state = lock(&self.state);
        state.live.contains_key(path) || state.dirs.contains(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = lock(&self.state);
        state.parent_exists(path, "open")?;
        if state.locks.contains(path) {
            return Err(Error::Locked(path.to_owned()));
        }
        if !state.live.contains_key(path) {
            state.op("create", path, None)?;
            state.link(path);
        }
        state.locks.insert(path.to_owned());
        Ok(Box::new(MemLock {
            state: Arc::clone(&self.state),
            path: path.to_owned(),
        }))
    }
}

#[cfg(test)]
mod tests;

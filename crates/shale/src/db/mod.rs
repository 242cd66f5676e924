//! The database: orchestration of the WAL, memtables, SSTables and the version set.
//!
//! - `open.rs`: lock the directory, replay the manifest, open the tables, start a new WAL
//!   and manifest; `replay.rs`: replay the WALs into memtables.
//! - `write.rs`: the write path: group commit, WAL append, memtable insert, back-pressure.
//! - `flush.rs`: the background thread that turns frozen memtables into L0 SSTables.
//! - `read.rs`: the read path over a [`SuperVersion`].
//! - `compact.rs`: the compaction threads, `compact_range`, `wait_idle`.
//! - `repair/`: rebuild a damaged database from what can still be read.
//! - `keyspace.rs`: keyspaces made, listed and dropped, and the `Keyspace` handle;
//!   `tree.rs`: a keyspace's tree and the memtable set one WAL protects.
//!
//! - `state.rs`: what the database's threads share ([`DbInner`]) and the states under
//!   its locks, with the order the locks are taken in; `attach.rs`: write hooks attached
//!   and detached (`hook.rs` is their contract).
//!
//! This file is the public handle, [`Db`]: each of its calls checks its arguments and
//! hands over to the file that does the work.

mod attach;
mod checkpoint;
mod compact;
mod flush;
mod hook;
mod keyspace;
mod open;
mod read;
mod repair;
mod replay;
mod state;
mod stats;
mod super_version;
mod transaction;
mod tree;
mod write;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub use crate::snapshot::Snapshot;
pub use hook::WriteHook;
pub use keyspace::Keyspace;
pub use read::prefix_successor;
pub use read::{DbIterator, RangeIter};
pub use repair::{RepairReport, LOST_DIR};
pub use stats::StatsSnapshot;
pub use transaction::Transaction;
pub use tree::LiveFile;

use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::sync::lock;
use crate::version::Version;
use state::DbInner;
use tree::Tree;

/// An open database. Cheap to share between threads (`&Db` is enough for every operation).
pub struct Db {
    inner: Arc<DbInner>,
    /// The flush thread and the compaction threads.
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Db {
    /// Rebuild the database in `path`, which no process may have open, from whatever of
    /// its files can still be read: the opt-in answer to a `Corruption` error from `open`
    /// (RocksDB's and LevelDB's `RepairDB`). Damaged inputs move to `path/lost/`; the
    /// report says what was kept and what was dropped. See `db/repair/` and
    /// docs/durability.md.
    ///
    /// # Errors
    /// `InvalidArgument` if `path` holds no database, `Locked` if it is open, `Io`.
    pub fn repair(path: impl AsRef<Path>, opts: &Options) -> Result<RepairReport> {
        repair::repair(path.as_ref(), opts)
    }

    /// Open (or create) the database in `path`.
    ///
    /// # Errors
    /// `InvalidOptions` listing every bad option, `Locked` if another handle has it open,
    /// `Corruption` naming the file and offset of damage found during recovery, `Io`.
    pub fn open(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        // The handle exists before its threads, so that a failure to start one (or to
        // open the index) drops it: its close stops the threads already started and
        // releases the directory's lock.
        let db = Db {
            inner: open::open(path.as_ref(), opts)?,
            workers: Mutex::new(Vec::new()),
        };
        let inner = &db.inner;
        // The purge thread first: `close` stops it after the others.
        let purge = crate::version::purge::spawn(&inner.purger)?;
        lock(&db.workers).push(purge);
        if inner.opts.read_only {
            return Ok(db);
        }
        let flusher = flush::spawn(Arc::clone(inner))?;
        lock(&db.workers).push(flusher);
        for i in 0..inner.opts.background_threads.saturating_sub(1).max(1) {
            let compactor = compact::spawn(inner, i)?;
            lock(&db.workers).push(compactor);
        }
        Ok(db)
    }

    /// The directory the database lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Set `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(batch, WriteOptions::default())
    }

    /// Remove `key`.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch, WriteOptions::default())
    }

    /// Remove every key `k` with `start <= k < end`, in one write whose cost does not
    /// depend on how many keys the range holds (a range tombstone: see `range_del.rs`).
    ///
    /// # Errors
    /// As [`Db::write`]; `InvalidArgument` if `start > end`, or if the range reaches keys
    /// of a semantic index (delete those one by one).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(start, end);
        self.write(batch, WriteOptions::default())
    }

    /// Apply `batch` atomically: after any crash, all of it or none of it is visible.
    ///
    /// # Errors
    /// `InvalidArgument` for a key or value over the limits, `Poisoned` after an earlier
    /// background failure, `Closed`, `Io`; whatever an attached [`WriteHook`] refuses the
    /// batch with (a semantic index: a value it cannot index).
    pub fn write(&self, batch: WriteBatch, opts: WriteOptions) -> Result<()> {
        self.inner.admit(&batch)?;
        self.inner.write(batch, opts).map(drop)
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner
            .get(&self.inner.default, key.as_ref(), &ReadOptions::default())
    }

    /// The value of `key` as `opts` see it (e.g. at a snapshot).
    pub fn get_opt(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>> {
        self.inner.get(&self.inner.default, key.as_ref(), opts)
    }

    /// The values of `keys`, in the order given, all as of one moment (or of `opts`'
    /// snapshot): what a loop of [`Db::get_opt`] would return had no write come in
    /// between. Faster than that loop: one version pin, and the keys read in sorted
    /// order (see `shale-bench`'s `multiget` workload).
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        opts: &ReadOptions<'_>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(&self.inner.default, keys, opts)
    }

    /// Pin the current state: reads with `ReadOptions::at(&snapshot)` see exactly the
    /// writes acknowledged before this call.
    pub fn snapshot(&self) -> Snapshot {
        let visible = &self.inner.visible_seq;
        self.inner
            .snapshots
            .pin_current(|| SeqNo(visible.load(Ordering::Acquire)))
    }

    /// A cursor over the whole database (within `opts`' bounds), unpositioned: call one
    /// of its `seek*` methods first.
    pub fn iter(&self, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        self.inner.iter(&self.inner.default, opts)
    }

    /// The `(key, value)` pairs in `range`, in key order (`.rev()` for descending).
    ///
    /// ```no_run
    /// # let db = shale::Db::open("/tmp/x", shale::Options::default())?;
    /// for pair in db.range(b"a".as_slice()..b"m".as_slice())? {
    ///     let (key, value) = pair?;
    /// }
    /// # Ok::<(), shale::Error>(())
    /// ```
    pub fn range<K: AsRef<[u8]>>(&self, range: impl std::ops::RangeBounds<K>) -> Result<RangeIter> {
        let (lower, upper) = read::to_bounds(&range);
        self.inner
            .range_iter(&self.inner.default, &ReadOptions::default(), lower, upper)
    }

    /// [`Db::range`] with read options (a snapshot, `fill_cache`); the range replaces any
    /// bounds in `opts`.
    pub fn range_opt<K: AsRef<[u8]>>(
        &self,
        range: impl std::ops::RangeBounds<K>,
        opts: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        let (lower, upper) = read::to_bounds(&range);
        self.inner
            .range_iter(&self.inner.default, opts, lower, upper)
    }

    /// The `(key, value)` pairs whose key starts with `prefix`, in key order.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<RangeIter> {
        self.prefix_opt(prefix, &ReadOptions::default())
    }

    /// [`Db::prefix`] with read options (a snapshot, `fill_cache`); the prefix replaces
    /// any bounds in `opts`.
    pub fn prefix_opt(
        &self,
        prefix: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        self.inner
            .prefix_iter(&self.inner.default, prefix.as_ref(), opts)
    }

    /// Make every write acknowledged so far durable against power loss, as a write with
    /// `WriteOptions::sync` does, without writing anything: for callers that write without
    /// `sync` and decide later when durability is due (a Raft log acknowledges an append
    /// before its fsync). Writes that skipped the WAL (`disable_wal`) are not covered:
    /// [`Db::flush`] saves them.
    ///
    /// # Errors
    /// `Io` from the fsync, which poisons the database as a failed sync write does;
    /// `InvalidArgument` on a read-only handle; `Closed`.
    pub fn sync_wal(&self) -> Result<()> {
        self.inner.sync_wal()
    }

    /// Freeze the active memtable and wait until every memtable is in an SSTable.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Compact every file overlapping `[begin, end]` (`None`: unbounded) down the levels,
    /// in the calling thread: afterwards the range holds no shadowed versions or tombstones
    /// that no snapshot needs.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.compact_range(&self.inner.default, begin, end)
    }

    /// Block until background work has caught up: no memtable waiting for flush, no
    /// compaction running or due.
    pub fn wait_idle(&self) -> Result<()> {
        self.inner.check_open()?;
        self.inner.wait_idle()
    }

    /// Total bytes of live SSTables, in every keyspace.
    pub fn sst_bytes(&self) -> u64 {
        let versions: Vec<Arc<Version>> = lock(&self.inner.state)
            .versions
            .versions()
            .values()
            .cloned()
            .collect();
        versions
            .iter()
            .flat_map(|v| (0..crate::version::NUM_LEVELS).map(move |l| v.files(l)))
            .flatten()
            .map(|f| f.meta.size)
            .sum()
    }

    /// Counters about the engine's work so far.
    pub fn stats(&self) -> StatsSnapshot {
        let cache = &self.inner.cache;
        let pinned = self.inner.tables.pinned_bytes();
        let r = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            block_cache_hits: cache.stats.hits.load(),
            block_cache_misses: cache.stats.misses.load(),
            block_cache_rejections: cache.stats.rejections.load(),
            block_cache_usage_bytes: cache.usage() as u64,
            block_cache_capacity_bytes: cache.capacity() as u64,
            pinned_table_metadata_bytes: pinned as u64,
            open_tables: self.inner.tables.open_count() as u64,
            rate_limit_bytes_per_sec: self.inner.rate_limiter.rate(),
            rate_limit_wait_micros: r(&self.inner.rate_limiter.waited_micros),
            ..self.inner.stats.snapshot()
        }
    }

    /// Number of live SSTables per level of the default keyspace.
    pub fn level_file_counts(&self) -> Vec<usize> {
        self.inner.default.level_file_counts()
    }

    /// Every live SSTable, keyspace by keyspace (the default first), level by level (L0
    /// newest first, deeper levels in key order), like RocksDB's `GetLiveFilesMetaData`.
    pub fn live_files(&self) -> Vec<LiveFile> {
        let trees: Vec<Arc<Tree>> = lock(&self.inner.state).trees.values().cloned().collect();
        trees
            .iter()
            .flat_map(|tree| tree.live_files(&self.inner.tables))
            .collect()
    }
}

impl Db {
    /// Close the database: sync the WAL, flush writes that skipped it, stop background
    /// work, release the directory's lock (another handle may then open it). Further calls
    /// fail with `Closed`. Dropping a `Db` closes it too, ignoring errors. `Ok` means
    /// every acknowledged write is durable; a database poisoned by a background failure
    /// (before the close or during its last flush) returns `Poisoned`.
    pub fn close(&self) -> Result<()> {
        // Held to the end: a second `close` in another thread waits here until the first
        // has joined the threads and released the directory, instead of returning while
        // they still write.
        let mut workers = lock(&self.workers);
        // The hooks first: a semantic index's workers stop after their current batch (what
        // was still queued is re-derived from the data by the next open).
        let hooked = self.close_hooks();
        let result = self.inner.close().and(hooked);
        let workers_left = std::mem::take(&mut *workers);
        // The flush and compaction threads may still retire files: the purge thread, the
        // first worker, is stopped after they are gone.
        let mut threads = workers_left.into_iter();
        let purge = threads.next();
        let mut panicked = false;
        for handle in threads {
            panicked |= handle.join().is_err();
        }
        self.inner.purger.stop();
        if let Some(handle) = purge {
            panicked |= handle.join().is_err();
        }
        // No thread of this handle touches the directory any more. (An iterator still
        // alive reads only immutable SSTables it holds open.)
        lock(&self.inner.lock_file).take();
        if panicked && result.is_ok() {
            return Err(Error::Poisoned("a background thread panicked".into()));
        }
        // A failure in the background, before or during the close (the flush of writes
        // that skipped the WAL runs after `inner.close` returned), means not everything
        // acknowledged may be on disk: `Ok` would promise that it is.
        if let (Ok(()), Some(why)) = (&result, &lock(&self.inner.state).bg_error) {
            return Err(Error::Poisoned(why.clone()));
        }
        result
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

/// Atomic copies of the back-pressure inputs held in `DbState`.
impl DbInner {
    fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Wait for any write in progress, then make the WAL durable. Writes that skipped
        // the WAL exist only in memory: freeze their memtable so the flush thread saves it.
        let mut result = Ok(());
        {
            let mut log = lock(&self.log);
            if log.unlogged_writes {
                result = self.freeze_memtable(&mut log);
            }
            if let Err(e) = self.sync_older_wals(&mut log).and_then(|()| log.wal.sync()) {
                result = result.and(Err(e));
            }
        }
        let mut state = lock(&self.state);
        state.shutting_down = true;
        self.bg_cv.notify_all();
        // A manual compaction stops at its next step once it sees `shutting_down`.
        while state.manual_compactions > 0 {
            state = self.bg_cv.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        drop(state);
        result
    }
}

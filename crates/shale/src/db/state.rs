//! What the database's threads share: [`DbInner`], behind the `Arc` every handle, iterator
//! and background thread holds, and the states under its locks: [`LogState`] (the WAL and
//! the active memtables), [`WriteQueue`] (writers waiting to commit), [`DbState`] (the
//! version set, the frozen memtables, the trees, background status), and [`Pressure`],
//! what the write path reads without a lock. The checks every entry point makes
//! (`check_open`, `check_writable`, `check_tree`) and the publication of a new super
//! version are here too; each path (`write.rs`, `flush.rs`, ...) adds its own `impl
//! DbInner`.
//!
//! Locks, always taken in this order:
//! 1. `log`: the WAL and the active memtables (one per keyspace; a keyspace is made or
//!    dropped under it too). Held by the write-group leader while it
//!    appends, syncs and inserts, and while it switches to a new memtable (creating the
//!    next WAL file, syncing nothing); by `flush()` and `close()` likewise.
//! 2. `writers`: the queue of writers waiting to commit (group-commit leader election):
//!    taken alone to join the queue, and after `log` by a leader collecting its group.
//!    Never held across I/O.
//! 3. `state`: the version set, the frozen memtables, the trees, background status. Flush and
//!    compaction build their files without it and take it to install results: the one
//!    I/O under it is the manifest append and its fdatasync.
//! 4. each tree's `super_version`: a leaf lock around the pointer readers start from.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use super::hook::WriteHook;
use super::stats::Stats;
use super::super_version::SuperVersion;
use super::tree::{MemSet, Tree};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::options::{Options, WriteOptions};
use crate::version::{FileId, Level, TableFile, VersionEdit, VersionSet};
use crate::wal::LogWriter;

/// A frozen memtable set waiting to be flushed, and the WAL that holds its writes.
pub(crate) struct ImmMemTable {
    /// The frozen memtables that hold writes (a keyspace without writes has none here).
    pub(super) mems: MemSet,
    /// The first sequence number the set could hold: every write from here to the next
    /// set's start is in it.
    pub(super) start_seq: SeqNo,
    pub(super) wal_id: FileId,
    /// The WAL of the memtable that replaced this one: once this memtable is in an SSTable,
    /// every WAL below `next_wal_id` is obsolete.
    pub(super) next_wal_id: FileId,
    /// The open WAL, handed over at the switch without a sync: a sync write in a later WAL
    /// syncs it first ([`DbInner::sync_older_wals`]); the flush thread closes it once the
    /// memtable is in an SSTable, so neither the writer nor a reader pays for the unmap.
    pub(super) wal: Mutex<Option<LogWriter>>,
}

/// The WAL and the memtable it protects.
pub(crate) struct LogState {
    pub(super) wal: LogWriter,
    pub(super) wal_id: FileId,
    pub(super) mems: MemSet,
    /// The last sequence number handed out.
    pub(super) last_seq: SeqNo,
    /// True if the active memtable holds writes that skipped the WAL.
    pub(super) unlogged_writes: bool,
    /// True from a memtable switch until the frozen memtables' WALs, and the directory
    /// entry of the active one, are synced: what a sync write must do first.
    pub(super) older_wals_unsynced: bool,
    /// Slowdown delay owed by writers but not yet waited, in seconds; paid in
    /// installments of at least a millisecond.
    pub(super) delay_debt: f64,
    /// The write hooks ([`WriteHook`]), in the order they were attached: consulted under
    /// this lock for every write group.
    pub(super) hooks: Vec<Arc<dyn WriteHook>>,
}

impl LogState {
    /// The state of a database just opened: `wal` (file `wal_id`) protects `mems`, and
    /// `last_seq` is the last sequence number recovered.
    pub(super) fn new(wal: LogWriter, wal_id: FileId, mems: MemSet, last_seq: SeqNo) -> LogState {
        LogState {
            wal,
            wal_id,
            mems,
            last_seq,
            unlogged_writes: false,
            older_wals_unsynced: false,
            delay_debt: 0.0,
            hooks: Vec::new(),
        }
    }
}

/// Background state.
pub(crate) struct DbState {
    pub(super) versions: VersionSet,
    /// The active memtables, as `LogState::mems` holds them (changed under both locks),
    /// for the super versions the background threads install.
    pub(super) active: MemSet,
    /// Every keyspace's tree, the default's among them.
    pub(super) trees: BTreeMap<KeyspaceId, Arc<Tree>>,
    /// Frozen memtables, oldest first.
    pub(super) imm: VecDeque<Arc<ImmMemTable>>,
    /// The first sequence number the active memtable set may hold (see `ImmMemTable`).
    pub(super) active_start: SeqNo,
    /// Set when a background write failed; writes are refused from then on.
    pub(super) bg_error: Option<String>,
    pub(super) shutting_down: bool,
    /// `compact_range` calls running in callers' threads: `close` waits for them, as it
    /// joins its own threads, before it releases the directory.
    pub(super) manual_compactions: usize,
    /// Bytes per second the last flushes achieved (moving average), for write slowdown.
    pub(super) flush_bytes_per_sec: f64,
    /// Bytes per second compactions write (moving average), for write slowdown.
    pub(super) compaction_bytes_per_sec: f64,
    /// Files in L0 of the keyspace that has most.
    pub(super) l0_files: usize,
    /// Files in running compactions.
    pub(super) compacting: std::collections::HashSet<FileId>,
    /// Per keyspace, the key range each running compaction writes into its output level.
    pub(super) compaction_outputs:
        std::collections::BTreeMap<KeyspaceId, crate::compaction::RunningOutputs>,
    /// Per keyspace and level, the largest key of the last file compacted from it (round
    /// robin).
    pub(super) compact_pointers: std::collections::BTreeMap<KeyspaceId, Vec<Vec<u8>>>,
    /// When the rate limit was last tuned, and the user and background bytes written
    /// then.
    pub(super) tune_mark: (std::time::Instant, u64, u64),
}

impl DbState {
    /// The state of a database just opened over `versions`, with the active memtables
    /// `active` (holding writes from `active_start` on) and the keyspaces' `trees`.
    pub(super) fn new(
        versions: VersionSet,
        active: MemSet,
        trees: BTreeMap<KeyspaceId, Arc<Tree>>,
        active_start: SeqNo,
    ) -> DbState {
        let l0_files = versions
            .versions()
            .values()
            .map(|v| v.files(0).len())
            .max()
            .unwrap_or(0);
        DbState {
            versions,
            active,
            trees,
            imm: VecDeque::new(),
            active_start,
            bg_error: None,
            shutting_down: false,
            flush_bytes_per_sec: 64.0 * 1024.0 * 1024.0,
            compaction_bytes_per_sec: 64.0 * 1024.0 * 1024.0,
            l0_files,
            compacting: Default::default(),
            compaction_outputs: Default::default(),
            manual_compactions: 0,
            compact_pointers: BTreeMap::new(),
            tune_mark: (std::time::Instant::now(), 0, 0),
        }
    }

    /// Log `edit` and make its version current ([`VersionSet::log_and_apply`]). If the
    /// manifest roll that the edit set off failed to switch CURRENT, the edit still stands
    /// but the database refuses writes from now on, as after a failed manifest write.
    pub(crate) fn log_and_apply(
        &mut self,
        edit: VersionEdit,
        added: &[(Level, Arc<TableFile>)],
    ) -> Result<()> {
        self.versions.log_and_apply(edit, added)?;
        if let (Some(why), None) = (self.versions.failure(), &self.bg_error) {
            self.bg_error = Some(why.to_owned());
        }
        self.l0_files = self
            .versions
            .versions()
            .values()
            .map(|v| v.files(0).len())
            .max()
            .unwrap_or(0);
        Ok(())
    }
}

pub(crate) struct DbInner {
    pub(super) dir: PathBuf,
    pub(super) opts: Options,
    pub(super) fs: Arc<dyn FileSystem>,
    /// The directory's `LOCK`, held from open until `close` has stopped every thread.
    pub(super) lock_file: Mutex<Option<Box<dyn FileLock>>>,
    pub(super) writers: Mutex<WriteQueue>,
    /// Writers in the queue, mirrored outside its lock for the uncontended fast path.
    pub(super) writers_queued: AtomicUsize,
    pub(super) log: Mutex<LogState>,
    pub(super) state: Mutex<DbState>,
    /// Signalled (with `state`) when a flush finishes, fails, or work arrives.
    pub(super) bg_cv: Condvar,
    /// The default keyspace's tree (also in `DbState::trees`): what `Db::get` reads.
    pub(super) default: Arc<Tree>,
    /// Data blocks shared by every table of this database.
    pub(super) cache: Arc<crate::sst::BlockCache>,
    /// Open SSTable readers, at most `max_open_files`.
    pub(super) tables: Arc<crate::version::table_cache::TableCache>,
    /// Deletes obsolete files and frees old memtables off the readers' threads.
    pub(super) purger: Arc<crate::version::purge::Purger>,
    /// Paces the SSTable writes of flushes and compactions.
    pub(super) rate_limiter: Arc<crate::rate_limit::RateLimiter>,
    /// Writes with sequence numbers up to this one are visible to readers.
    pub(super) visible_seq: AtomicU64,
    /// What the write path needs to decide on back-pressure, mirrored from `state` so a
    /// write under no pressure takes no state lock. Published by `publish_pressure`.
    pub(super) pressure: Pressure,
    pub(super) snapshots: Arc<crate::snapshot::SnapshotList>,
    pub(super) closed: AtomicBool,
    pub(super) stats: Stats,
    /// True once a hook is attached: a write without hooks skips `hook_list`.
    pub(super) has_hooks: AtomicBool,
    /// A copy of `LogState::hooks` for `WriteHook::admit`, which runs without the log lock.
    pub(super) hook_list: RwLock<Arc<[Arc<dyn WriteHook>]>>,
}

#[derive(Default)]
pub(crate) struct Pressure {
    pub(super) imm: std::sync::atomic::AtomicUsize,
    pub(super) l0_files: std::sync::atomic::AtomicUsize,
    pub(super) poisoned: AtomicBool,
}

impl DbInner {
    /// Copy the back-pressure inputs out of `state`; called under the state lock after
    /// every change to them.
    pub(crate) fn publish_pressure(&self, state: &DbState) {
        self.pressure.imm.store(state.imm.len(), Ordering::Release);
        self.pressure
            .l0_files
            .store(state.l0_files, Ordering::Release);
        self.pressure
            .poisoned
            .store(state.bg_error.is_some(), Ordering::Release);
    }

    /// Re-derive the background write rate from what happened since the last tuning
    /// (at most once a second), when auto-tuning is on.
    pub(crate) fn tune_rate_limit(&self, state: &mut DbState) {
        if !self.opts.rate_limit_auto_tune {
            return;
        }
        let (at, user0, bg0) = state.tune_mark;
        let secs = at.elapsed().as_secs_f64();
        if secs < 1.0 {
            return;
        }
        let s = &self.stats;
        let user = s.user_bytes_written.load(Ordering::Relaxed);
        let bg = s.flush_bytes.load(Ordering::Relaxed)
            + s.compaction_bytes_written.load(Ordering::Relaxed);
        let user_delta = user.saturating_sub(user0).max(1) as f64;
        let write_amp = bg.saturating_sub(bg0) as f64 / user_delta;
        self.rate_limiter.auto_tune(
            user_delta / secs,
            write_amp,
            self.opts.rate_limit_bytes_per_sec,
        );
        state.tune_mark = (std::time::Instant::now(), user, bg);
    }

    pub(super) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// `check_open`, and refuse a keyspace that was dropped.
    pub(super) fn check_tree(&self, tree: &Tree) -> Result<()> {
        self.check_open()?;
        if tree.dropped.load(Ordering::Acquire) {
            return Err(Error::invalid(format!(
                "keyspace {} was dropped",
                tree.name
            )));
        }
        Ok(())
    }

    /// `check_open`, and refuse a handle opened with `Options::read_only`.
    pub(super) fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        if self.opts.read_only {
            return Err(Error::invalid("the database is open read-only"));
        }
        Ok(())
    }

    /// Publish a new super version of keyspace `ks` from `state`'s parts.
    pub(super) fn install_super_version(&self, state: &DbState, ks: KeyspaceId) {
        let (Some(tree), Some(mem), Some(version)) = (
            state.trees.get(&ks),
            state.active.get(ks),
            state.versions.version(ks),
        ) else {
            return;
        };
        let imm = state
            .imm
            .iter()
            .rev()
            .filter_map(|m| m.mems.get(ks).cloned())
            .collect();
        tree.super_version.store(Arc::new(SuperVersion {
            mem: Arc::clone(mem),
            imm,
            version,
            start_seq: state
                .imm
                .front()
                .map_or(state.active_start, |m| m.start_seq),
            purger: Arc::clone(&self.purger),
        }));
    }
}

/// What a conditional write checks under the `log` lock before it commits: see
/// [`DbInner::write_if`].
pub(crate) type Condition = Box<dyn Fn(&DbInner, &LogState) -> Result<()> + Send + Sync>;

/// A writer waiting in the queue.
pub(crate) struct Writer {
    pub(super) batch: WriteBatch,
    pub(super) opts: WriteOptions,
    pub(super) condition: Option<Condition>,
    pub(super) done: AtomicBool,
    /// The sequence number of the batch's first entry, set by the leader.
    pub(super) first_seq: AtomicU64,
    /// The error of a failed group, for followers: `Closed` if the database closed
    /// before the group committed, else the leader's failure, which poisoned it.
    pub(super) error: Mutex<Option<Error>>,
    pub(super) cv: Condvar,
}

impl Writer {
    pub(super) fn new(
        batch: WriteBatch,
        opts: WriteOptions,
        condition: Option<Condition>,
    ) -> Writer {
        Writer {
            batch,
            opts,
            condition,
            done: AtomicBool::new(false),
            first_seq: AtomicU64::new(0),
            error: Mutex::new(None),
            cv: Condvar::new(),
        }
    }
}

#[derive(Default)]
pub(crate) struct WriteQueue {
    pub(super) queue: VecDeque<Arc<Writer>>,
}

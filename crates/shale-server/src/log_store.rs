//! The Raft log on Shale: each Raft group's vote, entries and last purged log id, in one
//! Shale database per node (`<data>/raft-log/`; docs/replication.md, "Log store"), so that
//! the appends of every group on the node share its group commit and fsyncs.
//!
//! Keys (docs/format.md, "Raft log store"): the node's identity `0x03`, then per group
//! `0x20 ‖ group:u64 big-endian` followed by `0x01` the vote, `0x02` the last purged id,
//! `0x10 ‖ index:u64 big-endian` one entry, so a group's entries sort by index
//! ([`format::LogKeys`]). A [`LogStore`] is one group's view of the database.
//!
//! Invariants (each of one group's log):
//! 1. The entries form one contiguous run of indexes, starting right after the last
//!    purged id when there is one. Append refuses an entry that does not continue the
//!    run; truncate removes a suffix and purge a prefix (with the new last purged id in
//!    the same batch), so neither can make a hole. Reads check the run and answer
//!    [`Error::LogHole`] if one is found anyway.
//! 2. The vote, appends, truncates and purges are written with synced batches: when the
//!    call returns (and an append's callback fires) they survive power loss. Shale's
//!    group commit shares one fsync among concurrent writers. (The vote's write options
//!    are the store's, [`LogStore::saving_votes_with`]; only the vote's negative control
//!    in `tests/vote_power_loss/` opens a store that does not sync them.)
//! 3. The entry cache holds a contiguous run of entries equal to those on disk, the last
//!    appended ones: an append adds its entries once its batch is synced, in the same
//!    blocking task (so a cancelled append cannot leave the disk ahead of a cache that
//!    thinks it is whole), and truncate and purge drop entries from the cache before
//!    they touch the disk. A read is served from the cache only when the cache holds all
//!    of the range; anything else reads the disk.
//!
//! The cache is there because openraft 0.9 reads every entry back soon after appending
//! it: the leader once per follower to replicate it, and every replica to apply it.
//!
//! Thread safety: openraft owns the one [`LogStore`] of a group that writes; readers are
//! clones that only read, and the views of different groups touch disjoint keys. The
//! engine makes each batch atomic and every read sees whole batches; the cache is behind
//! a mutex, held only to copy entry handles in or out.

use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogId, LogState, RaftLogReader, StorageError, StorageIOError, Vote};
use shale::{Db, Options, WriteBatch, WriteOptions};

use crate::error::{Error, Result};
use crate::format::{self, Identity, LogKeys, DATA_LAYOUT, LAYOUT_1_LOG_RANGES, LOG_KEY_IDENTITY};
use crate::time_spent::TimeSpent;
use crate::{Entry, GroupId, NodeId, TypeConfig, DEFAULT_GROUP};

mod cache;
use cache::EntryCache;

/// One group's log in the node's log store. Cloning shares the database and the entry
/// cache; [`LogStore::group`] gives another group's view of the same database.
#[derive(Clone, Debug)]
pub struct LogStore {
    db: Arc<Db>,
    keys: LogKeys,
    cache: Arc<Mutex<EntryCache>>,
    /// The last log index the state machine's durable snapshot covers, if the store
    /// purges behind one ([`LogStore::purging_behind`]).
    snapshots: Option<tokio::sync::watch::Receiver<u64>>,
    /// Purges that waited for a durable snapshot, and how long (inside Raft's loop).
    purge_waits: Arc<TimeSpent>,
    /// The cluster's id, once this node has one ([`LogStore::claim`]); joins one at a time.
    cluster: Arc<OnceLock<u128>>,
    joining: Arc<Mutex<()>>,
    /// How the vote is written: synced, unless a test asks otherwise.
    vote_writes: WriteOptions,
    /// Encoded bytes of the entries appended to this group's log since it was opened.
    appended: Arc<AtomicU64>,
}

/// How long a purge waits for the snapshot that covers it to be durable.
const PURGE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

fn io_read(e: &Error) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::read_logs(AnyError::new(e)),
    }
}

fn io_write(e: &Error) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write_logs(AnyError::new(e)),
    }
}

impl LogStore {
    /// Open (or create) the log store in `dir`: the view of [`DEFAULT_GROUP`].
    ///
    /// # Errors
    /// Whatever opening the Shale database fails with.
    pub fn open(dir: &Path, opts: Options) -> Result<LogStore> {
        Ok(LogStore {
            db: Arc::new(Db::open(dir, opts)?),
            keys: LogKeys::of(DEFAULT_GROUP),
            cache: Arc::new(Mutex::new(EntryCache::default())),
            snapshots: None,
            purge_waits: Arc::default(),
            cluster: Arc::default(),
            joining: Arc::default(),
            vote_writes: WriteOptions::sync(),
            appended: Arc::default(),
        })
    }

    /// The view of `group`'s log in the same database: its own entry cache, purging
    /// without waiting for a snapshot until [`LogStore::purging_behind`] says otherwise, the
    /// node's identity and vote write options shared.
    #[must_use]
    pub fn group(&self, group: GroupId) -> LogStore {
        LogStore {
            db: Arc::clone(&self.db),
            keys: LogKeys::of(group),
            cache: Arc::default(),
            snapshots: None,
            purge_waits: Arc::default(),
            cluster: Arc::clone(&self.cluster),
            joining: Arc::clone(&self.joining),
            vote_writes: self.vote_writes,
            appended: Arc::default(),
        }
    }

    /// Encoded bytes of the entries appended to this group's log since it was opened (a
    /// tally for [`crate::retention`]: entries truncated or purged are not taken off).
    pub fn appended_bytes(&self) -> u64 {
        self.appended.load(Ordering::Relaxed)
    }

    /// The group whose log this is.
    pub fn group_id(&self) -> GroupId {
        self.keys.group()
    }

    /// Check that this data belongs to node `node_id` and a layout this build reads, and
    /// record it if the store is new (or older than identities). Run once, at start.
    ///
    /// # Errors
    /// `Config` for another node's data or a newer layout; `Engine`, `Corruption`.
    pub fn claim(&self, node_id: NodeId) -> Result<Identity> {
        let found = self
            .db
            .get(LOG_KEY_IDENTITY)?
            .map(|b| format::decode_identity(&b))
            .transpose()?;
        let identity = match found {
            Some(id) if id.node_id != node_id => {
                return Err(Error::Config(vec![format!(
                    "this data directory belongs to node {}, not node {node_id}",
                    id.node_id
                )]))
            }
            Some(id) if id.layout > DATA_LAYOUT => {
                return Err(Error::Config(vec![format!(
                    "this data directory has layout {}; this build reads up to {DATA_LAYOUT}",
                    id.layout
                )]))
            }
            Some(id) if id.layout == DATA_LAYOUT => id,
            older => {
                self.upgrade_layout_1()?;
                let id = Identity {
                    layout: DATA_LAYOUT,
                    node_id,
                    cluster: older.and_then(|id| id.cluster),
                };
                self.write_identity(&id)?;
                id
            }
        };
        if let Some(cluster) = identity.cluster {
            let _ = self.cluster.set(cluster);
        }
        Ok(identity)
    }

    /// Move a layout-1 log (one group's, at the top of the key space; a store without an
    /// identity is as old) under [`DEFAULT_GROUP`]'s prefix, in synced batches that each
    /// put some keys in their new place and delete them from the old one: a crash between
    /// two leaves the rest to move at the next start, and the identity says layout 2 only
    /// once nothing is left. Returns how many keys moved.
    fn upgrade_layout_1(&self) -> Result<u64> {
        const BATCH_BYTES: usize = 4 << 20;
        let group = LogKeys::of(DEFAULT_GROUP);
        let mut moved = 0u64;
        for (start, end) in LAYOUT_1_LOG_RANGES {
            let (mut batch, mut bytes) = (WriteBatch::new(), 0usize);
            for pair in self.db.range(start.to_vec()..end.to_vec())? {
                let (key, value) = pair?;
                bytes += key.len() + value.len();
                batch.put(group.nest(&key), value);
                batch.delete(key);
                moved += 1;
                if bytes >= BATCH_BYTES {
                    let full = std::mem::take(&mut batch);
                    self.db.write(full, WriteOptions::sync())?;
                    bytes = 0;
                }
            }
            if !batch.is_empty() {
                self.db.write(batch, WriteOptions::sync())?;
            }
        }
        if moved > 0 {
            tracing::info!("log store: moved {moved} keys of layout 1 under group {DEFAULT_GROUP}");
        }
        Ok(moved)
    }

    /// The cluster's id, if this node has one.
    pub fn cluster_id(&self) -> Option<u128> {
        self.cluster.get().copied()
    }

    /// The cell holding the cluster's id, for the network to send with each RPC.
    pub fn cluster_cell(&self) -> Arc<OnceLock<u128>> {
        Arc::clone(&self.cluster)
    }

    /// Record that this node belongs to cluster `id` (synced), unless it does already.
    /// Only after [`LogStore::claim`].
    ///
    /// # Errors
    /// `Config` if the node belongs to another cluster; `Engine`, `Corruption`.
    pub fn join_cluster(&self, id: u128) -> Result<()> {
        let _one_at_a_time = self.joining.lock().unwrap_or_else(|e| e.into_inner());
        match self.cluster_id() {
            Some(have) if have == id => return Ok(()),
            Some(have) => {
                return Err(Error::Config(vec![format!(
                    "this node belongs to cluster {have:032x}, not {id:032x}"
                )]))
            }
            None => {}
        }
        let mut identity = self
            .db
            .get(LOG_KEY_IDENTITY)?
            .map(|b| format::decode_identity(&b))
            .transpose()?
            .ok_or_else(|| Error::Config(vec!["join_cluster before claim".into()]))?;
        identity.cluster = Some(id);
        self.write_identity(&identity)?;
        let _ = self.cluster.set(id);
        Ok(())
    }

    fn write_identity(&self, id: &Identity) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(LOG_KEY_IDENTITY, format::encode_identity(id));
        self.db.write(batch, WriteOptions::sync())?;
        Ok(())
    }

    /// Purge only entries that `snapshots` (the state machine's
    /// `durable_snapshots`) says a durable snapshot covers, waiting for it if need be:
    /// openraft purges a follower's log while the snapshot it received is still being
    /// installed, and a crash then would leave the log purged past the snapshot on disk.
    #[must_use]
    pub fn purging_behind(mut self, snapshots: tokio::sync::watch::Receiver<u64>) -> LogStore {
        self.snapshots = Some(snapshots);
        self
    }

    /// Write the vote with `opts` rather than synced. Raft needs the vote durable before
    /// it is granted (a replica that forgets it can vote twice in one term), so only a
    /// test that must see that go wrong has a reason to call this.
    #[must_use]
    pub fn saving_votes_with(mut self, opts: WriteOptions) -> LogStore {
        self.vote_writes = opts;
        self
    }

    /// Close the database (the node is stopping; openraft may still hold clones).
    ///
    /// # Errors
    /// Whatever closing the engine fails with.
    pub fn close(&self) -> Result<()> {
        self.db.close().map_err(Error::from)
    }

    /// Purges that had to wait for a durable snapshot to cover them, and how long they
    /// waited: openraft awaits a purge in its loop, so this is time the node's Raft did
    /// nothing else.
    pub fn purge_waits(&self) -> &TimeSpent {
        &self.purge_waits
    }

    /// The log database's counters, for metrics.
    pub fn stats(&self) -> shale::StatsSnapshot {
        self.db.stats()
    }

    /// The last purged log id.
    ///
    /// # Errors
    /// `Engine`, or `Corruption` for a record that does not decode.
    pub fn last_purged(&self) -> Result<Option<LogId<NodeId>>> {
        self.db
            .get(self.keys.last_purged())?
            .map(|b| format::decode_log_id(&b))
            .transpose()
    }

    /// The id of the last entry held, if any.
    ///
    /// # Errors
    /// `Engine`, `Corruption`.
    pub fn last_entry_id(&self) -> Result<Option<LogId<NodeId>>> {
        let lo = self.keys.entry(0).to_vec();
        match self.db.range(lo..self.entries_end())?.rev().next() {
            None => Ok(None),
            Some(pair) => {
                let (key, value) = pair?;
                let index = self.keys.entry_index(&key)?;
                let id = format::decode_entry_log_id(&value)?;
                if id.index != index {
                    return Err(mismatch(index, id.index));
                }
                Ok(Some(id))
            }
        }
    }

    /// The entries with index in `[start, end)` (`end: None`: to the last), checked to be
    /// contiguous.
    ///
    /// # Errors
    /// `LogHole` if an index is missing inside what is held, `Corruption`, `Engine`.
    pub fn entries(&self, start: u64, end: Option<u64>) -> Result<Vec<Entry>> {
        if let Some(cached) = self.cache().get(start, end) {
            return Ok(cached);
        }
        let lo = self.keys.entry(start).to_vec();
        let hi = end.map_or_else(|| self.entries_end(), |e| self.keys.entry(e).to_vec());
        if lo >= hi {
            return Ok(Vec::new());
        }
        let mut out: Vec<Entry> = Vec::new();
        for pair in self.db.range(lo..hi)? {
            let (key, value) = pair?;
            let entry = decode_at(self.keys.entry_index(&key)?, &value)?;
            let index = entry.log_id.index;
            match out.last() {
                Some(prev) if prev.log_id.index.checked_add(1) != Some(index) => {
                    return Err(Error::LogHole {
                        expected: prev.log_id.index.saturating_add(1),
                        found: index,
                    })
                }
                None if index != start && start > 0 => {
                    // The run may begin after `start` only if nothing is held before it.
                    let below = self.keys.entry(0).to_vec();
                    let before = self.keys.entry(start).to_vec();
                    if let Some(pair) = self.db.range(below..before)?.rev().next() {
                        let (key, _) = pair?;
                        let prev = self.keys.entry_index(&key)?;
                        return Err(Error::LogHole {
                            expected: prev.saturating_add(1),
                            found: index,
                        });
                    }
                }
                _ => {}
            }
            out.push(entry);
        }
        Ok(out)
    }

    /// The index an append must start at, if the log constrains it: right after the last
    /// entry, else right after the last purged id.
    fn next_index(&self) -> Result<Option<u64>> {
        let last = match self.last_entry_id()? {
            Some(id) => Some(id),
            None => self.last_purged()?,
        };
        Ok(last.map(|id| id.index.saturating_add(1)))
    }

    fn entries_end(&self) -> Vec<u8> {
        self.keys.entries_end().to_vec()
    }

    fn cache(&self) -> MutexGuard<'_, EntryCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The batch that appends `entries`, and the entries with their encoded sizes.
    fn append_batch(
        &self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<(WriteBatch, Vec<(Entry, usize)>)> {
        let mut expected = self.next_index()?;
        let mut batch = WriteBatch::new();
        let mut appended = Vec::new();
        for entry in entries {
            let index = entry.log_id.index;
            if let Some(want) = expected {
                if index != want {
                    return Err(Error::LogHole {
                        expected: want,
                        found: index,
                    });
                }
            }
            let bytes = format::encode_entry(&entry);
            let len = bytes.len();
            batch.put(self.keys.entry(index), bytes);
            appended.push((entry, len));
            expected = Some(index.saturating_add(1));
        }
        Ok((batch, appended))
    }

    /// Remove the entries from `index` on (a suffix: no hole can follow).
    fn truncate_batch(&self, index: u64) -> Result<WriteBatch> {
        if let Some(purged) = self.last_purged()? {
            if index <= purged.index {
                return Err(Error::InvalidArgument(format!(
                    "truncate at {index} would reach into the purged log (purged up to {})",
                    purged.index
                )));
            }
        }
        let mut batch = WriteBatch::new();
        let lo = self.keys.entry(index).to_vec();
        for pair in self.db.range(lo..self.entries_end())? {
            let (key, _) = pair?;
            batch.delete(key);
        }
        Ok(batch)
    }

    /// Remove the entries up to `upto` (a prefix) and record it as the last purged id.
    fn purge_batch(&self, upto: &LogId<NodeId>) -> Result<WriteBatch> {
        let mut batch = WriteBatch::new();
        let lo = self.keys.entry(0).to_vec();
        let hi = match upto.index.checked_add(1) {
            Some(end) => self.keys.entry(end).to_vec(),
            None => self.entries_end(),
        };
        for pair in self.db.range(lo..hi)? {
            let (key, _) = pair?;
            batch.delete(key);
        }
        batch.put(self.keys.last_purged(), format::encode_log_id(upto));
        Ok(batch)
    }

    /// After a purge: the first entry left, if any, follows the purged id.
    fn check_head(&self, upto: &LogId<NodeId>) -> Result<()> {
        let lo = self.keys.entry(0).to_vec();
        if let Some(pair) = self.db.range(lo..self.entries_end())?.next() {
            let (key, _) = pair?;
            let first = self.keys.entry_index(&key)?;
            let want = upto.index.saturating_add(1);
            if first != want {
                return Err(Error::LogHole {
                    expected: want,
                    found: first,
                });
            }
        }
        Ok(())
    }

    /// Write `batch` synced, off the async threads (an fsync can take milliseconds).
    async fn write_synced(&self, batch: WriteBatch) -> Result<()> {
        self.write_with(batch, WriteOptions::sync()).await
    }

    async fn write_with(&self, batch: WriteBatch, opts: WriteOptions) -> Result<()> {
        self.write_then(batch, opts, Vec::new()).await
    }

    /// Write `batch`, then put `appended` in the cache, in one blocking task: a dropped
    /// future cannot separate the two (invariant 3).
    async fn write_then(
        &self,
        batch: WriteBatch,
        opts: WriteOptions,
        appended: Vec<(Entry, usize)>,
    ) -> Result<()> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            this.db.write(batch, opts)?;
            if !appended.is_empty() {
                let bytes = appended.iter().map(|(_, len)| *len as u64).sum::<u64>();
                this.appended.fetch_add(bytes, Ordering::Relaxed);
                this.cache().push(appended);
            }
            Ok(())
        })
        .await
        .map_err(|e| Error::Raft(format!("log write task: {e}")))?
    }
}

/// The entry in `value`, held under the key of `index`.
fn decode_at(index: u64, value: &[u8]) -> Result<Entry> {
    let entry = format::decode_entry(value)?;
    if entry.log_id.index != index {
        return Err(mismatch(index, entry.log_id.index));
    }
    Ok(entry)
}

fn mismatch(key_index: u64, held: u64) -> Error {
    Error::corruption(
        format!("log entry {key_index}"),
        format!("holds the entry of index {held}"),
    )
}

/// `[start, end)` of a range of log indexes; `end: None` is unbounded.
fn index_bounds(range: &impl RangeBounds<u64>) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => None,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + std::fmt::Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        let (start, end) = index_bounds(&range);
        self.entries(start, end).map_err(|e| io_read(&e))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let purged = self.last_purged().map_err(|e| io_read(&e))?;
        let last = self.last_entry_id().map_err(|e| io_read(&e))?;
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut batch = WriteBatch::new();
        batch.put(self.keys.vote(), format::encode_vote(vote));
        self.write_with(batch, self.vote_writes)
            .await
            .map_err(|e| StorageError::IO {
                source: StorageIOError::write_vote(AnyError::new(&e)),
            })
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        let read = || -> Result<Option<Vote<NodeId>>> {
            self.db
                .get(self.keys.vote())?
                .map(|b| format::decode_vote(&b))
                .transpose()
        };
        read().map_err(|e| StorageError::IO {
            source: StorageIOError::read_vote(AnyError::new(&e)),
        })
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let (batch, appended) = self.append_batch(entries).map_err(|e| io_write(&e))?;
        // Readable and durable at once: the batch is synced before the callback fires.
        match self.write_then(batch, WriteOptions::sync(), appended).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(io_write(&e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let batch = self
            .truncate_batch(log_id.index)
            .map_err(|e| io_write(&e))?;
        self.cache().truncate(log_id.index);
        self.write_synced(batch).await.map_err(|e| io_write(&e))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        if let Some(purged) = self.last_purged().map_err(|e| io_read(&e))? {
            if purged.index >= log_id.index {
                return Ok(());
            }
        }
        if let Some(snapshots) = &self.snapshots {
            let mut snapshots = snapshots.clone();
            let started = std::time::Instant::now();
            let waited = *snapshots.borrow() < log_id.index;
            let covered = tokio::time::timeout(
                PURGE_WAIT,
                snapshots.wait_for(|&covered| covered >= log_id.index),
            )
            .await;
            if waited {
                self.purge_waits.record(started.elapsed());
            }
            if !matches!(covered, Ok(Ok(_))) {
                let e = Error::Raft(format!(
                    "no durable snapshot covers log index {} after {PURGE_WAIT:?}: not purging",
                    log_id.index
                ));
                return Err(io_write(&e));
            }
        }
        let batch = self.purge_batch(&log_id).map_err(|e| io_write(&e))?;
        self.cache().purge(log_id.index);
        self.write_synced(batch).await.map_err(|e| io_write(&e))?;
        self.check_head(&log_id).map_err(|e| io_read(&e))
    }
}

#[cfg(test)]
mod tests;

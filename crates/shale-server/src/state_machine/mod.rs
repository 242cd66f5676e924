//! The state machine on Shale: the users' keys and values, the last applied log id and the
//! membership, in one Shale database (`<data>/sm-<generation>/`; docs/replication.md,
//! "State machine").
//!
//! Invariants:
//! 1. One apply call is one `WriteBatch`: the users' writes of every entry in it, the
//!    applied log id (`0xFF 'a'`), the client sessions' records and answers those writes
//!    leave (`0xFF 's'`, `sessions.rs`) and, when the call holds a membership entry, the
//!    membership (`0xFF 'm'`). After any crash the database holds all of it or none, so the
//!    applied id never runs ahead of or behind the data.
//! 2. Applies are not synced: the log is, and a replica that loses the tail of its applies
//!    in a crash applies those entries again from the log. The log is purged only up to a
//!    snapshot, and a snapshot pins the database, then flushes it, before its file is
//!    written: everything the snapshot covers (and the purge drops) is durable here first.
//! 3. Keys that start with `0xFF` are the server's; client requests that touch them are
//!    refused before they are proposed ([`crate::command::check_key`]) and a snapshot that
//!    carries one is refused as corrupt.
//! 4. The database in use is the one `SM_CURRENT` names. An install builds a new
//!    generation's directory beside it, syncs it, then renames a new `SM_CURRENT` into
//!    place; at open every other `sm-*` directory is removed, so a half-installed snapshot
//!    never survives a crash.
//! 5. The log is purged only behind a durable snapshot. openraft purges a follower's log
//!    as soon as it hands the state machine a snapshot to install, before the install is
//!    done; the log store waits for [`StateMachineStore::durable_snapshots`] to cover the
//!    purge, so a crash in between cannot leave a log purged past the snapshot on disk
//!    (openraft refuses to start from that).
//!
//! Thread safety: openraft calls `apply` and `install_snapshot` from its state machine
//! task, one at a time; snapshot builds run in a blocking task of their own and are
//! serialized with installs by `snapshot_lock`. Readers (the client service) take an
//! `Arc<Db>` of the current generation under a read lock and keep it for one request.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, BasicNode, EntryPayload, LogId, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use shale::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

use crate::command::{Command, Response, SessionSeq};
use crate::error::{Error, Result};
use crate::format::AnswerRecord;
use crate::format::{self, SM_KEY_APPLIED, SM_KEY_MEMBERSHIP, SM_KEY_SHARD};
use crate::shard::Shard;
use crate::snapshot::SnapshotData;
use crate::time_spent::TimeSpent;
use crate::{Entry, GroupId, NodeId, TypeConfig};

mod carried;
mod indexes;
mod sessions;
mod snapshots;
mod split;
mod store;
mod supply;

use carried::offer_carried;
pub use indexes::embedder;
use indexes::{check_indexes, open_indexes};
use sessions::{Sessions, Unflushed, Verdict};
pub use sessions::{MAX_ANSWERS_PER_SESSION, MAX_SESSIONS};
pub use split::read_ready;
use split::Split;
pub use store::Seeded;
use store::{
    current_snapshot_header, lock, read_generation, read_meta, read_shard, sm_dir,
    write_generation, Indexes, Membership, Shared, CURRENT_SNAPSHOT, SNAPSHOT_DIR,
};
pub use store::{state_dir, ReplicatedIndex, StateMachineStore};
use supply::Supply;
pub use supply::{EmbeddingCounts, MAX_SUPPLY_BYTES};

fn sm_read_err(e: &Error) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::read_state_machine(AnyError::new(e)),
    }
}

fn sm_write_err(e: &Error) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write_state_machine(AnyError::new(e)),
    }
}

fn snapshot_err(e: &Error) -> StorageError<NodeId> {
    StorageError::IO {
        source: StorageIOError::write_snapshot(None, AnyError::new(e)),
    }
}

impl StateMachineStore {
    /// Open the state machine in the node's `data_dir`, finishing or discarding whatever a
    /// crash interrupted (see invariant 4).
    ///
    /// # Errors
    /// `Io`, `Engine`, `Corruption` for a bad `SM_CURRENT` or meta record.
    pub fn open(data_dir: &Path, opts: Options) -> Result<StateMachineStore> {
        let snapshots = data_dir.join(SNAPSHOT_DIR);
        std::fs::create_dir_all(&snapshots).map_err(|e| Error::io("mkdir", &snapshots, e))?;
        // `SM_CURRENT` lives on the databases' file system, beside them.
        opts.fs.create_dir_all(data_dir)?;
        let generation = match read_generation(&*opts.fs, data_dir)? {
            Some(g) => g,
            None => {
                write_generation(&*opts.fs, data_dir, 0)?;
                0
            }
        };
        let keep = format!("sm-{generation}");
        let entries = std::fs::read_dir(data_dir).map_err(|e| Error::io("readdir", data_dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("readdir", data_dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("sm-") && name != keep {
                std::fs::remove_dir_all(entry.path())
                    .map_err(|e| Error::io("remove", entry.path(), e))?;
            }
        }
        let entries =
            std::fs::read_dir(&snapshots).map_err(|e| Error::io("readdir", &snapshots, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("readdir", &snapshots, e))?;
            if entry.file_name().to_string_lossy().ends_with(".tmp") {
                let path = entry.path();
                let removed = match entry.file_type().map(|t| t.is_dir()) {
                    Ok(true) => std::fs::remove_dir_all(&path),
                    _ => std::fs::remove_file(&path),
                };
                removed.map_err(|e| Error::io("remove", &path, e))?;
            }
        }
        let db = Arc::new(Db::open(sm_dir(data_dir, generation), opts.clone())?);
        let applied = read_meta(&db, &ReadOptions::default())?;
        let supply = Arc::new(Supply::default());
        let indexes = open_indexes(&db, &supply)?;
        let sessions = Sessions::load(&db, &ReadOptions::default())?;
        let shard = read_shard(&db)?;
        let covered = match current_snapshot_header(&snapshots.join(CURRENT_SNAPSHOT))? {
            Some(h) => h.last_log_id.map_or(0, |id| id.index),
            None => 0,
        };
        Ok(StateMachineStore {
            shared: Arc::new(Shared {
                data_dir: data_dir.to_path_buf(),
                node_dir: std::sync::OnceLock::new(),
                seeded: Mutex::new(None),
                opts,
                db: RwLock::new(db),
                indexes: RwLock::new(indexes),
                sessions: Mutex::new(sessions),
                shard: RwLock::new(shard),
                supply,
                generation: Mutex::new(generation),
                applied: Mutex::new(applied),
                durable_snapshot: tokio::sync::watch::Sender::new(covered),
                snapshot_lock: Mutex::new(()),
                prepared: Mutex::new(None),
                snapshot_writes: TimeSpent::default(),
            }),
        })
    }

    /// The database of the current generation, for reads. Keep it for one request only:
    /// an install replaces it.
    pub fn db(&self) -> Arc<Db> {
        let guard = self.shared.db.read().unwrap_or_else(|e| e.into_inner());
        Arc::clone(&guard)
    }

    /// The replicated index `name` of the current generation.
    pub fn index(&self, name: &str) -> Option<ReplicatedIndex> {
        let indexes = self
            .shared
            .indexes
            .read()
            .unwrap_or_else(|e| e.into_inner());
        indexes.get(name).cloned()
    }

    /// Changes applied that the vector indexes have not indexed yet, over all indexes.
    pub fn indexing_backlog(&self) -> u64 {
        let indexes = self
            .shared
            .indexes
            .read()
            .unwrap_or_else(|e| e.into_inner());
        indexes
            .values()
            .map(|i| {
                let (applied, queued) = i.vectors.progress();
                queued.saturating_sub(applied)
            })
            .sum()
    }

    /// Refuse `cmd` if an index could not hold one of the values it puts: the check an
    /// apply makes, made before proposing.
    ///
    /// # Errors
    /// `InvalidArgument` naming the index and the problem.
    pub fn check_indexes(&self, cmd: &Command) -> Result<()> {
        let indexes = self
            .shared
            .indexes
            .read()
            .unwrap_or_else(|e| e.into_inner());
        check_indexes(&indexes, cmd).map_err(Error::InvalidArgument)
    }

    /// The last log index covered by the durable snapshot, as it changes: what the log
    /// store waits for before it purges ([`crate::log_store::LogStore::purging_behind`]).
    pub fn durable_snapshots(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.durable_snapshot.subscribe()
    }

    /// Seed the groups the splits of group `group` (this state machine's) make in
    /// `node_dir`, the node's data directory ([`state_dir`]); set once,
    /// before the group applies anything. A split applied without it fails (and stops
    /// the node).
    pub fn seed_groups_in(&self, node_dir: &Path, group: GroupId) {
        let _ = self.shared.node_dir.set((node_dir.to_path_buf(), group));
    }

    /// Tell `seeded` of each group a split applied here seeds, once the split is applied.
    pub fn on_split(&self, seeded: tokio::sync::mpsc::UnboundedSender<Seeded>) {
        *lock(&self.shared.seeded) = Some(seeded);
    }

    /// The keys the group serves now.
    pub fn shard(&self) -> Shard {
        let shard = self.shared.shard.read().unwrap_or_else(|e| e.into_inner());
        shard.clone()
    }

    /// Record that this group serves `shard`, synced: the first step of a group created
    /// for part of the key space, before its Raft runs. Only a state machine that has
    /// applied nothing takes it (a group's range changes later only through its log).
    ///
    /// # Errors
    /// `InvalidArgument` once anything was applied, or for a range that ends at or before
    /// its start; `Engine`.
    pub fn claim_shard(&self, shard: Shard) -> Result<()> {
        if self.applied().0.is_some() {
            return Err(Error::InvalidArgument(
                "a shard is claimed before the group applies anything".into(),
            ));
        }
        if shard.end.as_ref().is_some_and(|end| *end <= shard.start) {
            return Err(Error::InvalidArgument(format!(
                "the shard {shard} ends at or before its start"
            )));
        }
        let mut batch = WriteBatch::new();
        batch.put(SM_KEY_SHARD, format::encode_shard(&shard));
        self.db().write(batch, WriteOptions::sync())?;
        *self.shared.shard.write().unwrap_or_else(|e| e.into_inner()) = shard;
        Ok(())
    }

    /// Client sessions open ([`MAX_SESSIONS`] at most).
    pub fn sessions_open(&self) -> usize {
        lock(&self.shared.sessions).len()
    }

    /// The last applied log id and membership.
    pub fn applied(&self) -> (Option<LogId<NodeId>>, Membership) {
        lock(&self.shared.applied).clone()
    }

    /// Close the current database (the node is stopping), after a snapshot build or
    /// install in progress: openraft runs builds in tasks of their own, which its shutdown
    /// does not wait for, and the data directory is the caller's once this returns. A
    /// build that starts later fails on the closed database before writing a file.
    ///
    /// # Errors
    /// Whatever closing the engine fails with.
    pub fn close(&self) -> Result<()> {
        let _serial = lock(&self.shared.snapshot_lock);
        if let Some(p) = lock(&self.shared.prepared).take() {
            snapshots::discard(p);
        }
        self.db().close().map_err(Error::from)
    }

    /// Received snapshots written into new generations, and the time that took (ahead of
    /// their install, [`StateMachineStore::prepare_install`], or during it).
    pub fn snapshot_writes(&self) -> &TimeSpent {
        &self.shared.snapshot_writes
    }

    fn snapshot_dir(&self) -> PathBuf {
        self.shared.data_dir.join(SNAPSHOT_DIR)
    }

    fn apply_blocking(&self, entries: Vec<Entry>) -> Result<Vec<Response>> {
        let db = self.db();
        // A failed apply ends the node (openraft's storage errors are fatal), so the
        // sessions may change as the call goes: they are never seen half applied.
        let mut sessions = lock(&self.shared.sessions);
        let mut call = Call {
            batch: WriteBatch::new(),
            shard: self.shard(),
            // Writes of earlier entries in this call, which the database does not see
            // yet: a compare-and-set after a put of the same key must read the put.
            pending: Pending::for_entries(&entries),
            sessions: &mut sessions,
            unflushed: Unflushed::new(),
            supply: &self.shared.supply,
        };
        let mut replies = Vec::with_capacity(entries.len());
        let mut last = None;
        let mut membership = None;
        for entry in &entries {
            let before = last.replace(entry.log_id);
            let reply = match &entry.payload {
                EntryPayload::Blank => Response::Internal,
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(entry.log_id), m.clone()));
                    Response::Internal
                }
                EntryPayload::Normal(cmd) => match &**cmd {
                    Command::DefineIndex(spec) => {
                        // The writes before it are checked by the indexes before it:
                        // commit them first, each batch with its own applied id.
                        let earlier = std::mem::take(&mut call.batch);
                        self.commit(&db, earlier, before, membership.take())?;
                        call.pending.clear();
                        self.define_index(&db, &mut call.batch, spec.clone())?
                    }
                    Command::Split { at, child, version } => {
                        let earlier = std::mem::take(&mut call.batch);
                        self.commit(&db, earlier, before, membership.take())?;
                        call.pending.clear();
                        let split = Split {
                            at,
                            child: *child,
                            version: *version,
                            log_id: entry.log_id,
                        };
                        match cmd.validate() {
                            Err(e) => Response::Refused(e.to_string()),
                            // Committed at once: the entries after it see the new shard.
                            Ok(()) => self.split(&db, &mut call.batch, &mut call.shard, &split)?,
                        }
                    }
                    cmd => {
                        let indexes = self
                            .shared
                            .indexes
                            .read()
                            .unwrap_or_else(|e| e.into_inner());
                        apply_command(&db, &indexes, &mut call, entry.log_id.index, cmd)?
                    }
                },
            };
            replies.push(reply);
        }
        self.commit(&db, call.batch, last, membership)?;
        Ok(replies)
    }

    /// Write `batch` with the applied id `last` (and `membership`, if the entries held
    /// one) in the same batch; nothing to do without an entry.
    fn commit(
        &self,
        db: &Db,
        mut batch: WriteBatch,
        last: Option<LogId<NodeId>>,
        membership: Option<Membership>,
    ) -> Result<()> {
        let Some(last) = last else {
            return Ok(());
        };
        batch.put(SM_KEY_APPLIED, format::encode_log_id(&last));
        if let Some(m) = &membership {
            batch.put(SM_KEY_MEMBERSHIP, format::encode_stored_membership(m));
        }
        db.write(batch, WriteOptions::default())?;
        let mut applied = lock(&self.shared.applied);
        applied.0 = Some(last);
        if let Some(m) = membership {
            applied.1 = m;
        }
        Ok(())
    }

    /// The current snapshot file, opened (it stays readable when a newer one replaces
    /// it), and the last log index it covers; `None` before the first.
    ///
    /// # Errors
    /// `Io`; `Corruption` for a file whose header does not decode.
    pub fn current_snapshot(&self) -> Result<Option<(SnapshotData, u64)>> {
        let path = self.snapshot_dir().join(CURRENT_SNAPSHOT);
        if !path.exists() {
            return Ok(None);
        }
        let data = SnapshotData::open(&path)?;
        let covered = data.header()?.last_log_id.map_or(0, |id| id.index);
        Ok(Some((data, covered)))
    }

    fn current_snapshot_blocking(&self) -> Result<Option<Snapshot<TypeConfig>>> {
        let path = self.snapshot_dir().join(CURRENT_SNAPSHOT);
        if !path.exists() {
            return Ok(None);
        }
        let data = SnapshotData::open(&path)?;
        let h = data.header()?;
        Ok(Some(Snapshot {
            meta: SnapshotMeta {
                last_log_id: h.last_log_id,
                last_membership: h.membership,
                snapshot_id: h.snapshot_id,
            },
            snapshot: Box::new(data),
        }))
    }

    /// A fresh path for a snapshot arriving from the leader (removed at the next open if
    /// a crash leaves it behind).
    pub fn receive_path(&self) -> PathBuf {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        self.snapshot_dir().join(format!("recv-{stamp}.tmp"))
    }
}

/// Writes of one apply call that the database does not see yet, key to value (`None`: a
/// delete), borrowed from the entries being applied. Only a compare-and-set reads them,
/// so a call without one records nothing.
struct Pending<'a> {
    writes: HashMap<&'a [u8], Option<&'a [u8]>>,
    tracking: bool,
}

impl<'a> Pending<'a> {
    fn for_entries(entries: &[Entry]) -> Pending<'a> {
        let tracking = entries.iter().any(|e| match &e.payload {
            EntryPayload::Normal(cmd) => cmd.compares(),
            EntryPayload::Blank | EntryPayload::Membership(_) => false,
        });
        Pending {
            writes: HashMap::new(),
            tracking,
        }
    }

    fn record(&mut self, key: &'a [u8], value: Option<&'a [u8]>) {
        if self.tracking {
            self.writes.insert(key, value);
        }
    }

    /// `Some(value)` if this call wrote `key` (`Some(None)`: deleted it).
    fn get(&self, key: &[u8]) -> Option<Option<&'a [u8]>> {
        self.writes.get(key).copied()
    }

    fn clear(&mut self) {
        self.writes.clear();
    }
}

/// What one apply call builds up: its batch, and what its database does not see yet.
struct Call<'a, 's> {
    batch: WriteBatch,
    /// The keys the group serves: a write of any other is refused.
    shard: Shard,
    pending: Pending<'a>,
    sessions: &'s mut Sessions,
    unflushed: Unflushed,
    supply: &'s Supply,
}

/// Apply `cmd`, of the entry at log index `index`, into `call`.
fn apply_command<'a>(
    db: &Db,
    indexes: &Indexes,
    call: &mut Call<'a, '_>,
    index: u64,
    cmd: &'a Command,
) -> Result<Response> {
    // The same checks as before proposing: deterministic (the index definitions are
    // replicated state), so every replica refuses alike.
    if let Err(e) = cmd.validate() {
        return Ok(Response::Refused(e.to_string()));
    }
    if let Err(why) = check_indexes(indexes, cmd) {
        return Ok(Response::Refused(why));
    }
    // A batch answers each of its commands on its own: they check their keys themselves.
    if !matches!(cmd, Command::Batch(_))
        && call.shard.first_outside(cmd.keys().into_iter()).is_some()
    {
        return Ok(Response::WrongShard(call.shard.clone()));
    }
    match cmd {
        Command::Write(ops) => {
            for op in ops {
                match &op.value {
                    Some(v) => call.batch.put(&op.key, v),
                    None => call.batch.delete(&op.key),
                }
                call.pending.record(&op.key, op.value.as_deref());
            }
            Ok(Response::Written)
        }
        Command::CompareAndSet {
            key,
            expected,
            new_value,
        } => compare_and_set(db, call, key, expected.as_deref(), new_value.as_deref()),
        Command::Batch(cmds) => {
            let replies = cmds
                .iter()
                .map(|cmd| apply_command(db, indexes, call, index, cmd))
                .collect::<Result<_>>()?;
            Ok(Response::Batch(replies))
        }
        Command::InSession { at, cmd } => apply_in_session(db, indexes, call, index, *at, cmd),
        Command::OpenSession => {
            call.sessions.open(index, &mut call.batch);
            Ok(Response::SessionOpened(index))
        }
        Command::Embedded { cmd, vectors } => {
            // Offered before the batch is written: the index's workers take the vectors
            // once the write queues the texts.
            offer_carried(call.supply, indexes, cmd, vectors);
            apply_command(db, indexes, call, index, cmd)
        }
        // Proposed alone, and applied by `StateMachineStore::define_index` and
        // `StateMachineStore::split`.
        Command::DefineIndex(_) => Ok(Response::Refused(
            "an index definition inside a batch".into(),
        )),
        Command::Split { .. } => Ok(Response::Refused("a split inside a batch".into())),
    }
}

/// A compare-and-set of `key`: `new_value` goes into `call` if the value now (this call's
/// earlier writes included) is `expected`.
fn compare_and_set<'a>(
    db: &Db,
    call: &mut Call<'a, '_>,
    key: &'a [u8],
    expected: Option<&[u8]>,
    new_value: Option<&'a [u8]>,
) -> Result<Response> {
    let current = match call.pending.get(key) {
        Some(v) => v.map(<[u8]>::to_vec),
        None => db.get(key)?,
    };
    let swapped = current.as_deref() == expected;
    if swapped {
        match new_value {
            Some(v) => call.batch.put(key, v),
            None => call.batch.delete(key),
        }
        call.pending.record(key, new_value);
    }
    Ok(Response::CompareAndSet { swapped, current })
}

/// `cmd`, the write numbered `at` in its session: applied and its answer kept if it is
/// new, its first answer if it was applied before, or refused if its session is closed.
fn apply_in_session<'a>(
    db: &Db,
    indexes: &Indexes,
    call: &mut Call<'a, '_>,
    index: u64,
    at: SessionSeq,
    cmd: &'a Command,
) -> Result<Response> {
    match call.sessions.admit(at, index, &mut call.batch) {
        Verdict::New => {
            let response = apply_command(db, indexes, call, index, cmd)?;
            let answer = AnswerRecord {
                index,
                response: response.clone(),
            };
            call.sessions
                .answer(at, answer, &mut call.batch, &mut call.unflushed)?;
            Ok(response)
        }
        Verdict::Answered => {
            let earlier = Sessions::earlier(db, at, &call.unflushed)?;
            Ok(Response::Repeated {
                index: earlier.index,
                response: Box::new(earlier.response),
            })
        }
        Verdict::Expired => Ok(Response::SessionExpired(format!(
            "session {} is closed, or the answer to its write {} is forgotten",
            at.session, at.seq
        ))),
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Raft(format!("state machine task: {e}")))?
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let this = self.clone();
        blocking(move || this.build_snapshot_blocking())
            .await
            .map_err(|e| snapshot_err(&e))
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        Ok(self.applied())
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let this = self.clone();
        blocking(move || this.apply_blocking(entries))
            .await
            .map_err(|e| sm_write_err(&e))
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<SnapshotData>, StorageError<NodeId>> {
        let path = self.receive_path();
        let open = || -> Result<SnapshotData> {
            std::fs::File::create(&path).map_err(|e| Error::io("create", &path, e))?;
            SnapshotData::open(&path)
        };
        open().map(Box::new).map_err(|e| snapshot_err(&e))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<SnapshotData>,
    ) -> Result<(), StorageError<NodeId>> {
        let this = self.clone();
        let meta_owned = meta.clone();
        blocking(move || this.install_blocking(&meta_owned, &snapshot))
            .await
            .map_err(|e| snapshot_err(&e))
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let this = self.clone();
        blocking(move || this.current_snapshot_blocking())
            .await
            .map_err(|e| sm_read_err(&e))
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_sessions;
#[cfg(test)]
mod tests_shard;
#[cfg(test)]
mod tests_split;

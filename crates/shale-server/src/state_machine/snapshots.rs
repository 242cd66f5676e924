//! Building a snapshot from the state machine's database and installing one into a new
//! generation (docs/replication.md, "Snapshots"): the pairs of a pinned Shale snapshot,
//! then each index's files from a checkpoint; an install writes both into `sm-<n+1>/`
//! and switches `SM_CURRENT` to it.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::{BasicNode, Snapshot, SnapshotMeta};
use shale::{Db, ReadOptions, WriteBatch, WriteOptions};

use super::indexes::open_indexes;
use super::sessions::Sessions;
use super::store::{
    lock, read_meta, read_shard, sm_dir, write_generation, Prepared, StateMachineStore,
    CURRENT_SNAPSHOT,
};
use crate::error::{Error, Result};
use crate::format::{
    self, IndexFileChunk, SnapshotHeader, RESERVED_PREFIX, SM_INDEX_PREFIX, SM_KEY_APPLIED,
    SM_KEY_MEMBERSHIP, SM_KEY_SHARD, SM_SESSION_PREFIX,
};
use crate::snapshot::{
    sync_dir, Accepted, FrameSequence, RawFrameWriter, SnapshotData, SnapshotWriter,
};
use crate::{NodeId, TypeConfig};

impl StateMachineStore {
    pub(super) fn build_snapshot_blocking(&self) -> Result<Snapshot<TypeConfig>> {
        let _serial = lock(&self.shared.snapshot_lock);
        let db = self.db();
        // Invariant 2: what the snapshot covers is durable before the log can be purged,
        // or before this file can outlive the applies it covers: pin first, then flush.
        // (Flushed before the pin, applies made in between would be in the snapshot and
        // only in the unsynced WAL; a power loss then reopens the replica with a snapshot
        // ahead of its applied index, which openraft refuses at startup.)
        let pinned = db.snapshot();
        db.flush()?;
        let ro = ReadOptions::at(&pinned);
        let (last_log_id, membership) = read_meta(&db, &ro)?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let snapshot_id = match &last_log_id {
            Some(id) => format!(
                "{}-{}-{}-{stamp}",
                id.leader_id.term, id.leader_id.node_id, id.index
            ),
            None => format!("none-{stamp}"),
        };
        let header = SnapshotHeader {
            last_log_id,
            membership,
            snapshot_id,
        };
        let dir = self.snapshot_dir();
        let tmp = dir.join("building.tmp");
        let mut w = SnapshotWriter::create(&tmp, &header)?;
        // The users' pairs, the group's shard, the client sessions, then the index
        // definitions (ascending, as the file wants).
        let under =
            |prefix: &[u8]| prefix.to_vec()..shale::prefix_successor(prefix).unwrap_or_default();
        let pairs = db
            .range_opt(..vec![RESERVED_PREFIX], &ro)?
            .chain(db.range_opt(under(SM_KEY_SHARD), &ro)?)
            .chain(db.range_opt(under(SM_SESSION_PREFIX), &ro)?)
            .chain(db.range_opt(under(SM_INDEX_PREFIX), &ro)?);
        let mut index_names = Vec::new();
        for pair in pairs {
            let (key, value) = pair?;
            if let Some(name) = key.strip_prefix(SM_INDEX_PREFIX) {
                index_names.push(String::from_utf8_lossy(name).into_owned());
            }
            w.add(&key, &value)?;
        }
        drop(pinned);
        add_index_files(&db, &index_names, &dir, &mut w)?;
        w.finish()?;
        let path = dir.join(CURRENT_SNAPSHOT);
        std::fs::rename(&tmp, &path).map_err(|e| Error::io("rename", &path, e))?;
        sync_dir(&dir)?;
        let covered = header.last_log_id.map_or(0, |id| id.index);
        self.shared
            .durable_snapshot
            .send_if_modified(|c| std::mem::replace(c, (*c).max(covered)) < covered);
        Ok(Snapshot {
            meta: SnapshotMeta {
                last_log_id: header.last_log_id,
                last_membership: header.membership,
                snapshot_id: header.snapshot_id,
            },
            snapshot: Box::new(SnapshotData::open(&path)?),
        })
    }

    /// Install the snapshot `data` described by `meta` as openraft would (a restore's
    /// first step, `crate::restore`).
    ///
    /// # Errors
    /// As [`StateMachineStore::prepare_install`].
    pub fn install(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: &SnapshotData,
    ) -> Result<()> {
        self.install_blocking(meta, data)
    }

    /// Install a snapshot openraft hands over: switch to the generation
    /// [`StateMachineStore::prepare_install`] wrote for it, or write one now if none was.
    pub(super) fn install_blocking(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: &SnapshotData,
    ) -> Result<()> {
        let _serial = lock(&self.shared.snapshot_lock);
        let prepared = match lock(&self.shared.prepared).take() {
            Some(p) if p.meta == *meta => p,
            other => {
                if let Some(p) = other {
                    discard(p);
                }
                self.write_generation_of(meta, data)?
            }
        };
        self.switch_to(prepared)
    }

    /// Write a snapshot received from the leader into a new generation, durably, before
    /// openraft is asked to install it: the install then only switches generations.
    /// openraft purges the follower's log as it hands the snapshot over, and the purge
    /// waits, inside Raft's loop, until a durable snapshot covers it (invariant 5); with
    /// the generation written here, that wait is the switch's few fsyncs, not the whole
    /// copy. A generation prepared and never installed (openraft refused the snapshot) is
    /// dropped by the next prepare or install, or at the next open.
    ///
    /// # Errors
    /// `Corruption` for a snapshot that does not match `meta` or breaks a rule; `Io`,
    /// `Engine`.
    pub fn prepare_install(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: &SnapshotData,
    ) -> Result<()> {
        let _serial = lock(&self.shared.snapshot_lock);
        if let Some(p) = lock(&self.shared.prepared).take() {
            discard(p);
        }
        let prepared = self.write_generation_of(meta, data)?;
        *lock(&self.shared.prepared) = Some(prepared);
        Ok(())
    }

    /// Write the snapshot `data` into the next generation's directory and a copy of it
    /// beside the current snapshot, all synced; nothing is switched. Under the snapshot
    /// lock.
    fn write_generation_of(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: &SnapshotData,
    ) -> Result<Prepared> {
        let started = std::time::Instant::now();
        let data_dir = &self.shared.data_dir;
        let generation = lock(&self.shared.generation).saturating_add(1);
        let new_dir = sm_dir(data_dir, generation);
        if new_dir.exists() {
            std::fs::remove_dir_all(&new_dir).map_err(|e| Error::io("remove", &new_dir, e))?;
        }
        let new_db = Db::open(&new_dir, self.shared.opts.clone())?;
        let copy_path = self.snapshot_dir().join("installing.tmp");
        let mut copy = RawFrameWriter::create(&copy_path)?;
        let mut frames = data.frames()?;
        let mut seq = FrameSequence::default();
        let mut defined = BTreeSet::new();
        let mut index_files = IndexFileWriter::default();
        while let Some(frame) = frames.next_frame()? {
            match seq.accept(&frame)? {
                Accepted::Header(h) => check_header(&h, meta)?,
                Accepted::Pairs(pairs) => write_pairs(&new_db, &pairs, &mut defined)?,
                Accepted::IndexFile(chunk) => {
                    if !defined.contains(chunk.index) {
                        return Err(Error::corruption(
                            "snapshot index file",
                            format!(
                                "a file of index {:?}, which it does not define",
                                chunk.index
                            ),
                        ));
                    }
                    index_files.write(&new_dir, &chunk)?;
                }
                Accepted::End => {}
            }
            copy.write(&frame)?;
        }
        if !seq.is_complete() {
            return Err(Error::corruption("snapshot", "no end frame"));
        }
        write_meta(&new_db, meta)?;
        let new_db = Arc::new(new_db);
        index_files.finish()?;
        // Each index opens on its files from the snapshot: only values written after
        // their checkpoint are embedded (or, for vector records, inserted) again.
        let indexes = open_indexes(&new_db, &self.shared.supply)?;
        let sessions = Sessions::load(&new_db, &ReadOptions::default())?;
        let shard = read_shard(&new_db)?;
        copy.finish()?;
        self.shared.snapshot_writes.record(started.elapsed());
        Ok(Prepared {
            meta: meta.clone(),
            generation,
            db: new_db,
            indexes,
            sessions,
            shard,
            copy_path,
        })
    }

    /// Make `prepared` the current generation and its snapshot the current snapshot.
    /// Under the snapshot lock.
    fn switch_to(&self, prepared: Prepared) -> Result<()> {
        let Prepared {
            meta,
            generation,
            db: new_db,
            indexes: new_indexes,
            sessions: new_sessions,
            shard: new_shard,
            copy_path,
        } = prepared;
        let data_dir = &self.shared.data_dir;
        let snap_dir = self.snapshot_dir();
        let snap_path = snap_dir.join(CURRENT_SNAPSHOT);
        std::fs::rename(&copy_path, &snap_path).map_err(|e| Error::io("rename", &snap_path, e))?;
        sync_dir(&snap_dir)?;
        sync_dir(data_dir)?;
        // The switch: from here a crash reopens the new generation.
        write_generation(&*self.shared.opts.fs, data_dir, generation)?;
        let covered = meta.last_log_id.map_or(0, |id| id.index);
        self.shared.durable_snapshot.send_replace(covered);
        let old = {
            let mut guard = self.shared.db.write().unwrap_or_else(|e| e.into_inner());
            std::mem::replace(&mut *guard, new_db)
        };
        *self
            .shared
            .indexes
            .write()
            .unwrap_or_else(|e| e.into_inner()) = new_indexes;
        *lock(&self.shared.sessions) = new_sessions;
        *self.shared.shard.write().unwrap_or_else(|e| e.into_inner()) = new_shard;
        let old_generation = std::mem::replace(&mut *lock(&self.shared.generation), generation);
        *lock(&self.shared.applied) = (meta.last_log_id, meta.last_membership);
        // Readers still holding the old database get `Closed` and retry; a failure to
        // remove the old directory is repaired by the next open.
        if let Err(e) = old.close() {
            tracing::warn!("closing the replaced state machine: {e}");
        }
        drop(old);
        let old_dir = sm_dir(data_dir, old_generation);
        if let Err(e) = std::fs::remove_dir_all(&old_dir) {
            tracing::warn!("removing {}: {e}", old_dir.display());
        }
        Ok(())
    }
}

/// Refuse a snapshot whose header `h` does not describe what openraft installs (`meta`).
fn check_header(h: &SnapshotHeader, meta: &SnapshotMeta<NodeId, BasicNode>) -> Result<()> {
    if h.last_log_id != meta.last_log_id || h.membership != meta.last_membership {
        return Err(Error::corruption(
            "snapshot header",
            format!(
                "it describes {:?}, openraft installs {:?}",
                h.last_log_id, meta.last_log_id
            ),
        ));
    }
    Ok(())
}

/// Write a frame's `pairs` into `db`, each checked: an index definition under its own
/// name (added to `defined`), a session's record well formed, no other reserved key.
fn write_pairs(db: &Db, pairs: &[(&[u8], &[u8])], defined: &mut BTreeSet<String>) -> Result<()> {
    let mut batch = WriteBatch::new();
    for &(key, value) in pairs {
        if let Some(name) = key.strip_prefix(SM_INDEX_PREFIX) {
            let spec = format::decode_index_definition(value)?;
            if spec.name.as_bytes() != name {
                return Err(Error::corruption(
                    "snapshot pairs",
                    "an index definition under another name",
                ));
            }
            defined.insert(spec.name);
        } else if key.starts_with(SM_SESSION_PREFIX) {
            format::check_session_pair(key, value)?;
        } else if key == SM_KEY_SHARD {
            format::decode_shard(value)?;
        } else if key.first() == Some(&RESERVED_PREFIX) {
            return Err(Error::corruption("snapshot pairs", "a reserved key"));
        }
        batch.put(key, value);
    }
    db.write(batch, WriteOptions::default())
        .map_err(Error::from)
}

/// Write the applied log id and membership `meta` names into `db`, synced: every earlier
/// write of this database is in the same WAL or an older, already synced one, so all of
/// the new generation is durable from here.
fn write_meta(db: &Db, meta: &SnapshotMeta<NodeId, BasicNode>) -> Result<()> {
    let mut batch = WriteBatch::new();
    if let Some(id) = &meta.last_log_id {
        batch.put(SM_KEY_APPLIED, format::encode_log_id(id));
    }
    batch.put(
        SM_KEY_MEMBERSHIP,
        format::encode_stored_membership(&meta.last_membership),
    );
    db.write(batch, WriteOptions::sync()).map_err(Error::from)
}

/// Drop a prepared generation: its indexes, its database, its directory and its copy of
/// the snapshot (whatever is left is removed at the next open).
pub(super) fn discard(prepared: Prepared) {
    let Prepared {
        db,
        indexes,
        copy_path,
        ..
    } = prepared;
    drop(indexes);
    let dir = db.path().to_path_buf();
    if let Err(e) = db.close() {
        tracing::warn!("closing a prepared state machine: {e}");
    }
    drop(db);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&copy_path);
}

/// Add the files of the indexes `names` (those the snapshot's pairs define) to `w`, from a
/// checkpoint of the database taken now (`Db::checkpoint`: hard links, and each index's own
/// consistent copy of its vectors and graph) in `snapshots/indexes.tmp`, removed afterwards.
/// The checkpoint comes after the pairs' snapshot: an installing replica opens its indexes
/// on these files, takes over every vector whose value is unchanged, and embeds only the
/// values written in between.
fn add_index_files(db: &Db, names: &[String], dir: &Path, w: &mut SnapshotWriter) -> Result<()> {
    if names.is_empty() {
        return Ok(());
    }
    let copy = dir.join("indexes.tmp");
    if copy.exists() {
        std::fs::remove_dir_all(&copy).map_err(|e| Error::io("remove", &copy, e))?;
    }
    db.checkpoint(&copy)?;
    let streamed = names.iter().try_for_each(|name| {
        let index_dir = shale_search::semantic::index_dir(&copy, name);
        if !index_dir.exists() {
            return Ok(());
        }
        let mut files = Vec::new();
        let entries =
            std::fs::read_dir(&index_dir).map_err(|e| Error::io("readdir", &index_dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("readdir", &index_dir, e))?;
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                files.push((
                    entry.file_name().to_string_lossy().into_owned(),
                    entry.path(),
                ));
            }
        }
        files.sort();
        files
            .iter()
            .try_for_each(|(file, path)| w.add_index_file(name, file, path))
    });
    let removed = std::fs::remove_dir_all(&copy).map_err(|e| Error::io("remove", &copy, e));
    streamed.and(removed)
}

/// Writes the index files of a snapshot being installed into the new generation's
/// directory, piece by piece as they come (the frame sequence checked their order), each
/// file synced when the next starts and every directory at the end.
#[derive(Default)]
struct IndexFileWriter {
    /// The file being written.
    open: Option<(PathBuf, std::fs::File)>,
    /// The index directories made.
    dirs: BTreeSet<PathBuf>,
}

impl IndexFileWriter {
    fn write(&mut self, db_dir: &Path, chunk: &IndexFileChunk<'_>) -> Result<()> {
        let dir = shale_search::semantic::index_dir(db_dir, chunk.index);
        let path = dir.join(chunk.file);
        if chunk.offset == 0 {
            self.sync_open()?;
            std::fs::create_dir_all(&dir).map_err(|e| Error::io("mkdir", &dir, e))?;
            self.dirs.insert(dir);
            let file = std::fs::File::create(&path).map_err(|e| Error::io("create", &path, e))?;
            self.open = Some((path.clone(), file));
        }
        match &mut self.open {
            Some((open_path, file)) if *open_path == path => file
                .write_all(chunk.bytes)
                .map_err(|e| Error::io("write", &path, e)),
            _ => Err(Error::corruption(
                "snapshot index file",
                format!(
                    "a piece of {} at offset {} comes first",
                    path.display(),
                    chunk.offset
                ),
            )),
        }
    }

    fn sync_open(&mut self) -> Result<()> {
        match self.open.take() {
            Some((path, file)) => file.sync_all().map_err(|e| Error::io("fsync", &path, e)),
            None => Ok(()),
        }
    }

    /// Sync the last file, each index directory and their parent.
    fn finish(mut self) -> Result<()> {
        self.sync_open()?;
        let parents: BTreeSet<PathBuf> = self
            .dirs
            .iter()
            .filter_map(|d| d.parent().map(Path::to_path_buf))
            .collect();
        self.dirs
            .iter()
            .chain(&parents)
            .try_for_each(|d| sync_dir(d))
    }
}

//! `VersionSet`: the current [`Version`] of each keyspace, the keyspaces, the file-number
//! counter and the manifest writer.
//!
//! Owned by the database behind its state mutex; every method runs with that lock held,
//! so they must stay short: building a version is a copy of a few vectors of `Arc`s, and
//! the one slow step, the manifest fsync, is the price of durability of the edit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::edit::{FileId, FileMeta, Level, VersionEdit};
use super::keyspace::KeyspaceDef;
use super::manifest::{
    current_tmp_path, install_current, set_current, write_current_tmp, RecoveredManifest,
};
use super::{TableFile, Version};
use crate::error::{Error, Result};
use crate::filename::manifest_name;
use crate::fs::FileSystem;
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::wal::LogWriter;

/// The current version of each keyspace's tree.
pub type Versions = BTreeMap<KeyspaceId, Arc<Version>>;

/// New files with their levels, as an install adds them.
type Added = Vec<(Level, Arc<TableFile>)>;

/// The live files and the log of their changes.
pub struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    manifest: LogWriter,
    manifest_id: FileId,
    next_file: u64,
    log_number: FileId,
    last_seq: SeqNo,
    files: BTreeMap<FileId, (Level, FileMeta)>,
    /// The keyspaces other than the default.
    keyspaces: BTreeMap<KeyspaceId, KeyspaceDef>,
    next_keyspace_id: KeyspaceId,
    /// Every keyspace's current version, the default's always among them.
    versions: Versions,
    /// Set when a manifest write or sync failed: the manifest may end in a partial
    /// record, and a record appended after it would turn that torn tail into corruption
    /// in the middle of the log. No edit is logged after that.
    failed: Option<String>,
    /// The live manifest is replaced by a fresh one (a snapshot) once it is longer than
    /// this, `Options::max_manifest_file_size`, and than twice its own snapshot.
    max_manifest_bytes: u64,
    /// The length at which the next roll is due.
    roll_at: u64,
}

impl VersionSet {
    /// Write a fresh manifest that holds `state` and point CURRENT at it.
    ///
    /// Starting a new manifest at every open keeps manifests short and means a damaged
    /// tail of the old one is never appended to.
    ///
    /// `versions` holds each keyspace's version built from `state`'s files (a keyspace
    /// without files may be left out). `max_manifest_bytes` is the length past which
    /// [`VersionSet::log_and_apply`] starts a new manifest.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        state: RecoveredManifest,
        versions: BTreeMap<KeyspaceId, Version>,
        max_manifest_bytes: u64,
    ) -> Result<VersionSet> {
        let manifest_id = state.next_file_number;
        let next_file = manifest_id.0 + 1;
        let snapshot = VersionEdit::snapshot(
            state.log_number,
            next_file,
            state.last_seq,
            &state.files,
            &state.keyspaces,
            state.next_keyspace_id,
        );
        let manifest = write_snapshot(fs.as_ref(), dir, manifest_id, &snapshot)?;
        set_current(fs.as_ref(), dir, manifest_id)?;
        let versions = all_versions(&state, versions);
        let mut set = VersionSet {
            manifest,
            fs,
            dir: dir.to_owned(),
            manifest_id,
            next_file,
            log_number: state.log_number,
            last_seq: state.last_seq,
            files: state.files,
            keyspaces: state.keyspaces,
            next_keyspace_id: state.next_keyspace_id,
            versions,
            failed: None,
            max_manifest_bytes,
            roll_at: 0,
        };
        set.roll_at = set.next_roll(set.manifest.len());
        Ok(set)
    }

    /// The set of a read-only handle: `state` as loaded, nothing written. No edit can be
    /// logged (the set is failed from the start, with the reason).
    pub fn read_only(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        state: RecoveredManifest,
        versions: BTreeMap<KeyspaceId, Version>,
    ) -> VersionSet {
        let versions = all_versions(&state, versions);
        VersionSet {
            manifest: LogWriter::new(Box::new(crate::fs::ReadOnlyFile)),
            fs,
            dir: dir.to_owned(),
            manifest_id: state.manifest_id,
            next_file: state.next_file_number.0,
            log_number: state.log_number,
            last_seq: state.last_seq,
            files: state.files,
            keyspaces: state.keyspaces,
            next_keyspace_id: state.next_keyspace_id,
            versions,
            failed: Some("the database is open read-only".into()),
            max_manifest_bytes: u64::MAX,
            roll_at: u64::MAX,
        }
    }

    /// Where a manifest that starts with a snapshot of `snapshot_bytes` is next rolled:
    /// past the limit, and never before the edits since the snapshot are as long as it,
    /// so that a roll (which writes every live file's metadata) costs each edit at most
    /// its own length again, however small the limit and however large the tree.
    fn next_roll(&self, snapshot_bytes: u64) -> u64 {
        self.max_manifest_bytes
            .max(snapshot_bytes.saturating_mul(2))
    }

    /// Replace the live manifest by a new one that starts with a snapshot of the current
    /// state; point CURRENT at it; delete the old one.
    ///
    /// Crash safety: the edit that made the old manifest too long is already durable in
    /// it, and nothing more is appended to it, so until the rename of CURRENT the old
    /// manifest is complete and named; after it, the new one is, having been synced first
    /// with its directory entry. The old one is deleted only after the directory sync that
    /// makes the rename durable. A failure while writing the new manifest, or CURRENT's
    /// temporary file, leaves the old one live and named, and the roll is tried again
    /// once the manifest has doubled. A failure of the rename or of the directory sync
    /// after it may or may not have switched CURRENT, so it names one of the two, both
    /// complete; that poisons the set, as a failed manifest write does, since no edit may
    /// follow into a manifest that CURRENT might not name.
    fn roll(&mut self) {
        let id = self.new_file_id();
        let snapshot = self.snapshot_edit();
        let written =
            write_snapshot(self.fs.as_ref(), &self.dir, id, &snapshot).and_then(|manifest| {
                Ok((
                    manifest,
                    write_current_tmp(self.fs.as_ref(), &self.dir, id)?,
                ))
            });
        let (manifest, tmp) = match written {
            Ok(written) => written,
            Err(_) => {
                // Best effort: an open deletes manifests CURRENT does not name, and
                // temporary files, anyway.
                let _ = self.fs.remove(&self.dir.join(manifest_name(id)));
                let _ = self.fs.remove(&current_tmp_path(&self.dir, id));
                self.roll_at = self.next_roll(self.manifest.len());
                return;
            }
        };
        if let Err(e) = install_current(self.fs.as_ref(), &self.dir, &tmp) {
            self.failed = Some(format!("switching CURRENT to a new manifest failed: {e}"));
            return;
        }
        self.manifest = manifest;
        let old_path = self.dir.join(manifest_name(self.manifest_id));
        self.manifest_id = id;
        // Best effort, as above.
        let _ = self.fs.remove(&old_path);
        self.roll_at = self.next_roll(self.manifest.len());
    }

    /// What a copy of the current state starts from (`Db::checkpoint`): the version
    /// (holding it keeps its files from being deleted) and a first manifest that lists
    /// the same files and sequence number, with the next two file numbers taken for the
    /// copy's empty WAL and its manifest.
    pub fn checkpoint(&self) -> CopyPlan {
        let wal = FileId(self.next_file);
        let manifest = FileId(self.next_file + 1);
        CopyPlan {
            versions: self.versions.values().cloned().collect(),
            edit: VersionEdit::snapshot(
                wal,
                self.next_file + 2,
                self.last_seq,
                &self.files,
                &self.keyspaces,
                self.next_keyspace_id,
            ),
            wal,
            manifest,
        }
    }

    fn snapshot_edit(&self) -> VersionEdit {
        VersionEdit::snapshot(
            self.log_number,
            self.next_file,
            self.last_seq,
            &self.files,
            &self.keyspaces,
            self.next_keyspace_id,
        )
    }

    /// Whether a failed manifest write or CURRENT switch has poisoned the set, and why.
    /// A failed switch is found by the install whose edit triggered the roll, which
    /// itself succeeded: its caller must refuse writes from then on.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    fn write_edit(&mut self, edit: &VersionEdit) -> Result<()> {
        append_synced(&mut self.manifest, edit)
    }

    /// Reserve a new file number.
    pub fn new_file_id(&mut self) -> FileId {
        let id = FileId(self.next_file);
        self.next_file += 1;
        id
    }

    /// The live manifest's number.
    pub fn manifest_id(&self) -> FileId {
        self.manifest_id
    }

    /// WALs numbered below this hold nothing that is not in an SSTable.
    pub fn log_number(&self) -> FileId {
        self.log_number
    }

    /// The last sequence number recorded in the manifest.
    #[cfg(test)]
    pub fn last_seq(&self) -> SeqNo {
        self.last_seq
    }

    /// The current version of keyspace `ks`, if it exists.
    pub fn version(&self, ks: KeyspaceId) -> Option<Arc<Version>> {
        self.versions.get(&ks).cloned()
    }

    /// Every keyspace's current version.
    pub fn versions(&self) -> &Versions {
        &self.versions
    }

    /// The id a keyspace created now gets; the edit that creates it sets the next.
    pub fn next_keyspace_id(&self) -> KeyspaceId {
        self.next_keyspace_id
    }

    /// Ids of every live SSTable.
    pub fn live_files(&self) -> impl Iterator<Item = FileId> + '_ {
        self.files.keys().copied()
    }

    /// Log `edit` durably, then make the version it describes current. `added` are the
    /// opened tables of the edit's new files.
    ///
    /// # Errors
    /// A manifest write or sync failure. The in-memory state is unchanged then, but the
    /// manifest may hold a partial record: the caller must stop writing (poison the DB),
    /// and every later call fails with `Poisoned` (another thread may still be finishing
    /// a flush or compaction).
    pub fn log_and_apply(
        &mut self,
        mut edit: VersionEdit,
        added: &[(Level, Arc<TableFile>)],
    ) -> Result<()> {
        if let Some(why) = &self.failed {
            return Err(Error::Poisoned(why.clone()));
        }
        edit.next_file_number = Some(FileId(self.next_file));
        let last_seq = edit.last_seq.unwrap_or(self.last_seq).max(self.last_seq);
        edit.last_seq = Some(last_seq);
        if let Err(e) = self.write_edit(&edit) {
            self.failed = Some(format!("manifest write failed: {e}"));
            return Err(e);
        }
        if let Some(n) = edit.log_number {
            self.log_number = self.log_number.max(n);
        }
        self.last_seq = last_seq;
        if let Some(id) = edit.next_keyspace_id {
            self.next_keyspace_id = self.next_keyspace_id.max(id);
        }
        for def in &edit.keyspaces {
            self.keyspaces.insert(def.id, def.clone());
            self.versions.entry(def.id).or_default();
        }
        // Each keyspace's share of the edit: a deleted file's keyspace is the one it was
        // added to.
        let mut changes: BTreeMap<KeyspaceId, (VersionEdit, Added)> = BTreeMap::new();
        for &(level, id) in &edit.deleted_files {
            if let Some((_, meta)) = self.files.remove(&id) {
                let (e, _) = changes.entry(meta.keyspace).or_default();
                e.deleted_files.push((level, id));
            }
        }
        for (level, meta) in &edit.new_files {
            self.files.insert(meta.id, (*level, meta.clone()));
        }
        for (level, file) in added {
            let (_, a) = changes.entry(file.meta.keyspace).or_default();
            a.push((*level, Arc::clone(file)));
        }
        for (ks, (e, a)) in changes {
            if let Some(version) = self.versions.get_mut(&ks) {
                *version = Arc::new(version.apply(&e, &a));
            }
        }
        for id in &edit.dropped_keyspaces {
            self.keyspaces.remove(id);
            self.versions.remove(id);
        }
        if self.manifest.len() > self.roll_at {
            // The edit is durable either way: a roll that fails only poisons later edits.
            self.roll();
        }
        Ok(())
    }
}

/// `built` with an empty version for each keyspace of `state` it lacks.
fn all_versions(state: &RecoveredManifest, built: BTreeMap<KeyspaceId, Version>) -> Versions {
    let mut versions: Versions = built.into_iter().map(|(k, v)| (k, Arc::new(v))).collect();
    for id in std::iter::once(KeyspaceId::DEFAULT).chain(state.keyspaces.keys().copied()) {
        versions.entry(id).or_default();
    }
    versions
}

/// Create manifest `id` in `dir` holding `snapshot` as its first record, and make it and
/// its directory entry durable, so that CURRENT may name it.
fn write_snapshot(
    fs: &dyn FileSystem,
    dir: &Path,
    id: FileId,
    snapshot: &VersionEdit,
) -> Result<LogWriter> {
    let mut manifest = LogWriter::new(fs.create(&dir.join(manifest_name(id)))?);
    append_synced(&mut manifest, snapshot)?;
    fs.sync_dir(dir)?;
    Ok(manifest)
}

/// The state a copy of the database starts from: see [`VersionSet::checkpoint`].
pub struct CopyPlan {
    /// Every keyspace's version: holding them keeps their files from being deleted.
    pub versions: Vec<Arc<Version>>,
    /// The copy's first manifest record.
    pub edit: VersionEdit,
    /// The copy's (empty) WAL, the one `edit` names as its log.
    pub wal: FileId,
    pub manifest: FileId,
}

impl CopyPlan {
    /// Write the copy's manifest into `dir` and point its CURRENT at it: the last step
    /// of a copy, which makes `dir` a database.
    ///
    /// # Errors
    /// `Io` from any step.
    pub fn write_manifest(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        write_snapshot(fs, dir, self.manifest, &self.edit)?;
        set_current(fs, dir, self.manifest)
    }
}

/// Append `edit` to `manifest` as one record and make it durable.
fn append_synced(manifest: &mut LogWriter, edit: &VersionEdit) -> Result<()> {
    let mut buf = Vec::new();
    edit.encode(&mut buf);
    manifest.add_record(&[&buf])?;
    manifest.sync()
}

#[cfg(test)]
mod tests;

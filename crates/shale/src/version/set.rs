//! `VersionSet`: the current [`Version`], the file-number counter and the manifest writer.
//!
//! Owned by the database behind its state mutex; every method runs with that lock held,
//! so they must stay short: building a version is a copy of a few vectors of `Arc`s, and
//! the one slow step, the manifest fsync, is the price of durability of the edit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::edit::{FileId, FileMeta, Level, VersionEdit};
use super::manifest::{manifest_name, set_current, RecoveredManifest};
use super::{TableFile, Version};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key::SeqNo;
use crate::wal::LogWriter;

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
    current: Arc<Version>,
    /// Set when a manifest write or sync failed: the manifest may end in a partial
    /// record, and a record appended after it would turn that torn tail into corruption
    /// in the middle of the log. No edit is logged after that.
    failed: Option<String>,
}

impl VersionSet {
    /// Write a fresh manifest that holds `state` and point CURRENT at it.
    ///
    /// Starting a new manifest at every open keeps manifests short and means a damaged
    /// tail of the old one is never appended to.
    pub fn create(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        state: RecoveredManifest,
        version: Version,
    ) -> Result<VersionSet> {
        let manifest_id = state.next_file_number;
        let mut set = VersionSet {
            manifest: LogWriter::new(fs.create(&dir.join(manifest_name(manifest_id)))?),
            fs,
            dir: dir.to_owned(),
            manifest_id,
            next_file: manifest_id.0 + 1,
            log_number: state.log_number,
            last_seq: state.last_seq,
            files: state.files,
            current: Arc::new(version),
            failed: None,
        };
        let snapshot = set.snapshot_edit();
        set.write_edit(&snapshot)?;
        set_current(set.fs.as_ref(), &set.dir, manifest_id)?;
        Ok(set)
    }

    fn snapshot_edit(&self) -> VersionEdit {
        VersionEdit {
            log_number: Some(self.log_number),
            next_file_number: Some(FileId(self.next_file)),
            last_seq: Some(self.last_seq),
            new_files: self.files.values().cloned().collect(),
            deleted_files: Vec::new(),
        }
    }

    fn write_edit(&mut self, edit: &VersionEdit) -> Result<()> {
        let mut buf = Vec::new();
        edit.encode(&mut buf);
        self.manifest.add_record(&[&buf])?;
        self.manifest.sync()
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
    pub fn last_seq(&self) -> SeqNo {
        self.last_seq
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
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
    ) -> Result<Arc<Version>> {
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
        for (_, id) in &edit.deleted_files {
            self.files.remove(id);
        }
        for (level, meta) in &edit.new_files {
            self.files.insert(meta.id, (*level, meta.clone()));
        }
        self.current = Arc::new(self.current.apply(&edit, added));
        Ok(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Errno, Fault, FaultFs, MemFs, OpKind};

    /// Regression: after a manifest append failed half-way (the header written, the
    /// payload not), the next edit was appended behind the partial record, and the next
    /// open saw damage followed by a valid record: `Corruption`. Found by the I/O-error
    /// sweep (once ENOSPC), where a flush installed its edit right after a compaction's
    /// manifest write had failed.
    #[test]
    fn no_edit_is_logged_after_a_failed_manifest_write() {
        let mem = MemFs::new();
        let fs = FaultFs::new(Arc::new(mem.clone()));
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let state = RecoveredManifest {
            manifest_id: FileId(1),
            next_file_number: FileId(2),
            ..RecoveredManifest::default()
        };
        let mut set =
            VersionSet::create(Arc::new(fs.clone()), dir, state, Version::default()).unwrap();
        let edit = || VersionEdit {
            last_seq: Some(SeqNo(7)),
            ..VersionEdit::default()
        };
        set.log_and_apply(edit(), &[]).unwrap();
        // The second append of the next record (its payload) fails once.
        fs.arm(Fault {
            at: 2,
            kinds: vec![OpKind::Write],
            persistent: false,
            errno: Errno::Enospc,
        });
        assert!(set.log_and_apply(edit(), &[]).is_err());
        assert!(matches!(
            set.log_and_apply(edit(), &[]),
            Err(Error::Poisoned(_))
        ));
        let recovered = RecoveredManifest::load(&mem, dir).unwrap();
        assert_eq!(recovered.last_seq, SeqNo(7));
    }
}

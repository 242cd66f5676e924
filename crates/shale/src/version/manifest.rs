//! The MANIFEST file and CURRENT.
//!
//! A manifest is a log (see `wal/`) whose records are encoded [`VersionEdit`]s. The first
//! record of a manifest is a snapshot of the whole version set; each later record is one
//! change. CURRENT names the live manifest and is replaced atomically: write a temporary
//! file, fsync it, rename it over CURRENT, fsync the directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::edit::{FileId, FileMeta, Level, VersionEdit};
use super::keyspace::KeyspaceDef;
use crate::error::{Error, Result};
use crate::filename::{manifest_name, parse_manifest_name, CURRENT};
use crate::fs::FileSystem;
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::wal::LogReader;

/// Point CURRENT at manifest `id`, atomically and durably.
pub fn set_current(fs: &dyn FileSystem, dir: &Path, id: FileId) -> Result<()> {
    let tmp = write_current_tmp(fs, dir, id)?;
    install_current(fs, dir, &tmp)
}

/// The first half of [`set_current`]: a synced temporary file naming manifest `id`, whose
/// path it returns. A failure here leaves CURRENT as it was (and may leave the temporary
/// file, which an open removes).
pub fn write_current_tmp(fs: &dyn FileSystem, dir: &Path, id: FileId) -> Result<PathBuf> {
    let tmp = current_tmp_path(dir, id);
    let mut f = fs.create(&tmp)?;
    f.append(format!("{}\n", manifest_name(id)).as_bytes())?;
    f.sync()?;
    Ok(tmp)
}

/// The temporary file that becomes CURRENT naming manifest `id`.
pub fn current_tmp_path(dir: &Path, id: FileId) -> PathBuf {
    crate::filename::temp_path(dir, id)
}

/// The second half of [`set_current`]: rename `tmp` over CURRENT and sync the directory.
/// After a failure CURRENT may name either manifest.
pub fn install_current(fs: &dyn FileSystem, dir: &Path, tmp: &Path) -> Result<()> {
    fs.rename(tmp, &dir.join(CURRENT))?;
    fs.sync_dir(dir)
}

/// Read CURRENT and return the live manifest's number.
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<FileId> {
    let path = dir.join(CURRENT);
    let bytes = fs.read_all(&path)?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| Error::corruption(&path, 0, "CURRENT is not UTF-8"))?;
    let name = text
        .strip_suffix('\n')
        .ok_or_else(|| Error::corruption(&path, 0, "CURRENT does not end with a newline"))?;
    parse_manifest_name(name)
        .ok_or_else(|| Error::corruption(&path, 0, format!("CURRENT names {name:?}")))
}

/// The state a manifest describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredManifest {
    pub manifest_id: FileId,
    pub log_number: FileId,
    pub next_file_number: FileId,
    pub last_seq: SeqNo,
    /// Live files by id, with their level.
    pub files: BTreeMap<FileId, (Level, FileMeta)>,
    /// The keyspaces other than the default, by id.
    pub keyspaces: BTreeMap<KeyspaceId, KeyspaceDef>,
    /// The id the next keyspace gets (1 in a database that never made one).
    pub next_keyspace_id: KeyspaceId,
    /// Bytes of the manifest that held whole records: where a dropped (torn) tail starts,
    /// or the manifest's length.
    pub valid_bytes: u64,
}

impl Default for RecoveredManifest {
    /// A new database's state.
    fn default() -> Self {
        RecoveredManifest {
            manifest_id: FileId::default(),
            log_number: FileId::default(),
            next_file_number: FileId::default(),
            last_seq: SeqNo::default(),
            files: BTreeMap::new(),
            keyspaces: BTreeMap::new(),
            next_keyspace_id: KeyspaceId(1),
            valid_bytes: 0,
        }
    }
}

impl RecoveredManifest {
    /// Read the manifest CURRENT names and replay its edits.
    pub fn load(fs: &dyn FileSystem, dir: &Path) -> Result<RecoveredManifest> {
        let manifest_id = read_current(fs, dir)?;
        let path = dir.join(manifest_name(manifest_id));
        // CURRENT is switched only after the manifest it names is durable: a name that
        // leads nowhere is damage to CURRENT, not a failure to read the manifest.
        if !fs.exists(&path) {
            return Err(Error::corruption(
                dir.join(CURRENT),
                0,
                format!(
                    "CURRENT names {}, which does not exist",
                    manifest_name(manifest_id)
                ),
            ));
        }
        let data = fs.read_all(&path)?;
        let mut reader = LogReader::new(&data, &path);
        let mut state = RecoveredManifest {
            manifest_id,
            ..RecoveredManifest::default()
        };
        let (mut log, mut next, mut seq) = (None, None, None);
        while let Some((offset, record)) = reader.next_record()? {
            let edit = VersionEdit::decode(record).map_err(|e| e.in_file(&path, offset))?;
            log = edit.log_number.or(log);
            next = edit.next_file_number.or(next);
            seq = edit.last_seq.or(seq);
            state
                .apply(edit)
                .map_err(|why| Error::corruption(&path, offset, why))?;
        }
        state.valid_bytes = reader.tail().map_or(data.len() as u64, |t| t.offset);
        let missing = |what: &str| Error::corruption(&path, 0, format!("manifest lacks {what}"));
        state.log_number = log.ok_or_else(|| missing("a log number"))?;
        state.next_file_number = next.ok_or_else(|| missing("a next file number"))?;
        state.last_seq = seq.ok_or_else(|| missing("a last sequence number"))?;
        state
            .check_whole()
            .map_err(|why| Error::corruption(&path, 0, why))?;
        Ok(state)
    }

    /// Apply one edit's files and keyspaces; why it cannot apply, if it cannot.
    fn apply(&mut self, edit: VersionEdit) -> std::result::Result<(), String> {
        for (level, id) in &edit.deleted_files {
            match self.files.get(id) {
                Some((at, _)) if at != level => {
                    return Err(format!(
                        "edit deletes file {} at L{}, but it lives elsewhere",
                        id.0, level.0
                    ))
                }
                Some(_) => {
                    self.files.remove(id);
                }
                None => {
                    return Err(format!(
                        "edit deletes file {} at L{}, which is not live",
                        id.0, level.0
                    ))
                }
            }
        }
        if let Some(id) = edit.next_keyspace_id {
            self.next_keyspace_id = id;
        }
        for def in edit.keyspaces {
            // Checksummed, but the options are used to build tables: out of their ranges
            // they are damage, never something to build with.
            if let Err(problems) = def.options.validate(&crate::Options::default()) {
                return Err(format!("keyspace {}: {}", def.name, problems.join("; ")));
            }
            if self
                .keyspaces
                .values()
                .any(|k| k.name == def.name && k.id != def.id)
            {
                return Err(format!("two keyspaces named {}", def.name));
            }
            self.keyspaces.insert(def.id, def);
        }
        for id in &edit.dropped_keyspaces {
            if self.keyspaces.remove(id).is_none() {
                return Err(format!("edit drops unknown keyspace {}", id.0));
            }
        }
        for (level, meta) in edit.new_files {
            let id = meta.id;
            if !meta.keyspace.is_default() && !self.keyspaces.contains_key(&meta.keyspace) {
                return Err(format!(
                    "file {} is in unknown keyspace {}",
                    id.0, meta.keyspace.0
                ));
            }
            if self.files.insert(id, (level, meta)).is_some() {
                return Err(format!("edit adds file {} twice", id.0));
            }
        }
        Ok(())
    }

    /// What the state every edit left must hold: each file's keyspace, and counters
    /// above every id in use.
    fn check_whole(&self) -> std::result::Result<(), String> {
        if let Some((_, (_, meta))) = self.files.iter().find(|(_, (_, m))| {
            !m.keyspace.is_default() && !self.keyspaces.contains_key(&m.keyspace)
        }) {
            return Err(format!(
                "file {} outlives its keyspace {}",
                meta.id.0, meta.keyspace.0
            ));
        }
        if self.keyspaces.keys().any(|id| *id >= self.next_keyspace_id) {
            return Err("next keyspace id is not above every keyspace".into());
        }
        let highest = self.files.keys().next_back().copied().unwrap_or_default();
        if highest >= self.next_file_number || self.manifest_id >= self.next_file_number {
            return Err("next file number is not above every live file".into());
        }
        Ok(())
    }

    /// The edit that recreates this state from nothing: the first record of a new manifest.
    pub fn snapshot_edit(&self) -> VersionEdit {
        VersionEdit::snapshot(
            self.log_number,
            self.next_file_number.0,
            self.last_seq,
            &self.files,
            &self.keyspaces,
            self.next_keyspace_id,
        )
    }
}

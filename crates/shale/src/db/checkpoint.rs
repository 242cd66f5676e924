//! `Db::checkpoint`: an openable copy of the database as of one moment, made of hard links.
//!
//! ```text
//!   flush (every acknowledged write into an SSTable)
//!   state lock: pin the current version, plan the copy's manifest  (VersionSet::checkpoint)
//!   per live SSTable: link (or copy) it into DIR under its own number
//!   DIR/<wal>.wal: an empty WAL, the log the copy's manifest names
//!   each write hook: copy its own files into DIR (a semantic index: indexes/<name>/)
//!   DIR/MANIFEST-<n> and DIR/CURRENT, synced: DIR is now a database
//! ```
//!
//! SSTables never change once written, so a link is a copy that costs no bytes and no
//! time, whatever the database's size; only a file system that cannot link (another device)
//! copies them. The pinned version keeps compaction from deleting a file before it is
//! linked. CURRENT is written last: until then `DIR` holds no database, and an open of it
//! refuses the SSTables it finds rather than taking them for garbage (see `open.rs`).

use std::path::Path;

use super::Db;
use crate::error::{Error, Result};
use crate::filename::{table_path, wal_path};
use crate::sync::lock;
use crate::version::NUM_LEVELS;

impl Db {
    /// Write into `dir`, which must not exist, a copy of the database as of this call,
    /// which [`Db::open`] opens like any database: every write acknowledged before the
    /// call, none after it. The SSTables are hard links (a copy where `dir` is on another
    /// file system), so the cost does not grow with the database; the memtable is flushed
    /// first, so the copy needs no WAL. Attached write hooks copy their own files too: a
    /// semantic index's vectors and graph, so the copy's index opens without embedding
    /// again.
    ///
    /// Writes, reads and compaction go on meanwhile. A crash mid-way leaves `dir` without
    /// a `CURRENT` file: not a database, and refused by an open; delete it and try again.
    ///
    /// # Errors
    /// `InvalidArgument` if `dir` exists; `Closed`, `Poisoned`; `Io` from any step.
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<()> {
        let dir = dir.as_ref();
        let inner = &self.inner;
        inner.check_open()?;
        let fs = inner.fs.as_ref();
        if fs.exists(dir) {
            return Err(Error::invalid(format!(
                "checkpoint directory {} already exists",
                dir.display()
            )));
        }
        inner.flush()?;
        let plan = lock(&inner.state).versions.checkpoint();
        fs.create_dir_all(dir)?;
        for version in &plan.versions {
            for level in 0..NUM_LEVELS {
                for file in version.files(level) {
                    let id = file.meta.id;
                    fs.link_or_copy(&table_path(&inner.dir, id), &table_path(dir, id))?;
                }
            }
        }
        // Empty, so there is nothing of it to sync: the directory sync below makes its
        // entry durable, and open needs no more than that (`check_oldest_wal`).
        fs.create(&wal_path(dir, plan.wal))?;
        let hooks = lock(&inner.log).hooks.clone();
        for hook in hooks {
            hook.checkpoint(dir)?;
        }
        // Syncs the directory, and so the links and the WAL's entry, before CURRENT.
        plan.write_manifest(fs, dir)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
        Ok(())
    }
}

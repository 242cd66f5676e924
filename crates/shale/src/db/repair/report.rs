//! What a repair reports: [`RepairReport`], where the inputs it set aside go, and the
//! error it refuses a database with keyspaces with.

use std::path::PathBuf;

use crate::error::Error;
use crate::verify::Problem;

/// The directory, inside the database directory, that damaged and unused inputs move to.
pub const LOST_DIR: &str = "lost";

/// What [`Db::repair`](crate::Db::repair) read, kept, dropped and wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// True if the live manifest replayed and chose the inputs; false if every SSTable
    /// and WAL in the directory was read.
    pub manifest_used: bool,
    /// SSTables read (whole or in part).
    pub tables_read: u64,
    /// SSTables that could not be read at all (footer, index or properties damaged).
    pub tables_unreadable: u64,
    /// Data blocks dropped from tables that were otherwise read.
    pub blocks_dropped: u64,
    /// WAL batches replayed (not counting those the manifest's tables already held).
    pub wal_batches: u64,
    /// WAL bytes dropped: from the first damaged record on, in its WAL and every later one.
    pub wal_bytes_dropped: u64,
    /// Entries read from the inputs, and written to the new tables (after dropping
    /// shadowed versions and tombstones).
    pub entries_read: u64,
    pub entries_written: u64,
    /// The new SSTables, all in the last level.
    pub tables_written: u64,
    /// Inputs moved to `lost/` (damaged, or unused because of damage before them).
    pub moved_to_lost: Vec<PathBuf>,
    /// Each piece of damage found, with its file and offset.
    pub problems: Vec<Problem>,
    /// The repair of each semantic index's vector store (`indexes/<name>/`), by name.
    pub indexes: Vec<(String, RepairReport)>,
}

impl std::fmt::Display for RepairReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = if self.manifest_used {
            "the live manifest's files"
        } else {
            "every file in the directory (no usable manifest)"
        };
        writeln!(f, "inputs: {source}")?;
        writeln!(
            f,
            "tables: {} read, {} unreadable, {} data blocks dropped",
            self.tables_read, self.tables_unreadable, self.blocks_dropped
        )?;
        writeln!(
            f,
            "wal: {} batches replayed, {} bytes dropped",
            self.wal_batches, self.wal_bytes_dropped
        )?;
        writeln!(
            f,
            "entries: {} read, {} written to {} tables",
            self.entries_read, self.entries_written, self.tables_written
        )?;
        for path in &self.moved_to_lost {
            writeln!(f, "moved to lost/: {}", path.display())?;
        }
        for problem in &self.problems {
            writeln!(f, "damage: {problem}")?;
        }
        for (name, index) in &self.indexes {
            writeln!(f, "index {name}:")?;
            for line in index.to_string().lines() {
                writeln!(f, "  {line}")?;
            }
        }
        Ok(())
    }
}

/// The error repair refuses a database with keyspaces with (see `refuse_keyspaces`).
pub(super) fn keyspaces_refused() -> Error {
    Error::invalid(
        "repair of a database with keyspaces other than the default is not supported: \
         nothing was changed",
    )
}

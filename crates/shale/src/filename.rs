//! File numbers, and the name of every file in a database directory: the one module that
//! spells them (docs/format.md section 1).
//!
//! ```text
//! LOCK               held while the database is open
//! CURRENT            names the live manifest
//! MANIFEST-NNNNNN    version edits
//! NNNNNN.wal         write-ahead log of one memtable
//! NNNNNN.sst         an SSTable
//! NNNNNN.dbtmp       a temporary file (CURRENT being replaced)
//! indexes/NAME/      the vector store of semantic index NAME, a database of its own
//! ```
//! All numbers come from one counter in the version set, so names never collide.

use std::path::{Path, PathBuf};

/// A file number: WALs, SSTables, manifests and temporary files share one counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileId(pub u64);

/// The kinds of file Shale keeps in its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Wal(FileId),
    Table(FileId),
    Manifest(FileId),
    Temp(FileId),
    Current,
    Lock,
}

pub const LOCK: &str = "LOCK";

/// The subdirectory of a database directory that holds its indexes, one directory each.
pub const INDEXES_DIR: &str = "indexes";

/// The file that names the live manifest.
pub const CURRENT: &str = "CURRENT";

/// File name of manifest number `id`.
pub fn manifest_name(id: FileId) -> String {
    format!("MANIFEST-{:06}", id.0)
}

/// The number of a manifest's file name.
pub fn parse_manifest_name(name: &str) -> Option<FileId> {
    let digits = name.strip_prefix("MANIFEST-")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(FileId)
}

/// A temporary file: the next CURRENT, written and synced before it is renamed over it.
pub fn temp_path(dir: &Path, id: FileId) -> PathBuf {
    dir.join(format!("{:06}.dbtmp", id.0))
}

/// The WAL numbered `id`.
pub fn wal_path(dir: &Path, id: FileId) -> PathBuf {
    dir.join(format!("{:06}.wal", id.0))
}

/// The SSTable numbered `id`.
pub fn table_path(dir: &Path, id: FileId) -> PathBuf {
    dir.join(format!("{:06}.sst", id.0))
}

/// What `name` is, or `None` for files that are not Shale's.
pub fn parse(name: &str) -> Option<FileKind> {
    match name {
        CURRENT => return Some(FileKind::Current),
        LOCK => return Some(FileKind::Lock),
        _ => {}
    }
    if let Some(id) = parse_manifest_name(name) {
        return Some(FileKind::Manifest(id));
    }
    let (stem, ext) = name.split_once('.')?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id = FileId(stem.parse().ok()?);
    match ext {
        "wal" => Some(FileKind::Wal(id)),
        "sst" => Some(FileKind::Table(id)),
        "dbtmp" => Some(FileKind::Temp(id)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let dir = Path::new("/d");
        let wal = wal_path(dir, FileId(12));
        let name = wal.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse(name), Some(FileKind::Wal(FileId(12))));
        assert_eq!(parse("000003.sst"), Some(FileKind::Table(FileId(3))));
        assert_eq!(
            parse("MANIFEST-000004"),
            Some(FileKind::Manifest(FileId(4)))
        );
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse("x.sst"), None);
        assert_eq!(manifest_name(FileId(5)), "MANIFEST-000005");
        assert_eq!(parse_manifest_name("MANIFEST-"), None);
        assert_eq!(parse_manifest_name("MANIFEST-12a"), None);
        assert_eq!(parse("notes.txt"), None);
    }
}

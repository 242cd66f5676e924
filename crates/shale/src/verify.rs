//! Offline checks of a database directory, for tools such as the `shale` CLI's `verify`
//! (LevelDB's `leveldbutil` and RocksDB's `ldb verify` play the same part).
//!
//! Everything here only reads: it takes no lock, replays nothing into memory, and writes
//! no file, so it can run on a copy of a damaged database. Run it on a database that no
//! process has open: a live WAL or MANIFEST may end in a half-written record, which is
//! reported as a note (a torn tail), not a problem.
//!
//! Invariant: a damaged byte never stops the walk. Each file is checked on its own, and
//! each problem is reported with the file and the byte offset where it was detected.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::BatchReader;
use crate::error::{Error, Result};
use crate::filename::{manifest_name, CURRENT};
use crate::fs::{FileSystem, PosixFs};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, parse_internal_key};
use crate::sst::{BlockHandle, Table};
use crate::version::{read_current, FileId, RecoveredManifest, VersionEdit};
use crate::wal::LogReader;

/// Damage found in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    /// Byte offset inside `file` where the damage was detected.
    pub offset: u64,
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} at offset {}: {}",
            self.file.display(),
            self.offset,
            self.reason
        )
    }
}

impl Problem {
    pub(crate) fn from_error(e: Error, file: &Path) -> Problem {
        match e {
            Error::Corruption {
                file,
                offset,
                reason,
            } => Problem {
                file,
                offset,
                reason,
            },
            other => Problem {
                file: file.to_owned(),
                offset: 0,
                reason: other.to_string(),
            },
        }
    }
}

/// What [`verify_dir`] looked at and what it found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// SSTables opened (live or not).
    pub tables: u64,
    /// Blocks read and checksummed: every data block plus each table's index, filter and
    /// properties block.
    pub blocks: u64,
    /// Entries decoded from data blocks.
    pub entries: u64,
    /// WAL files read.
    pub wals: u64,
    /// WAL records (write batches) decoded.
    pub wal_records: u64,
    /// Version edits decoded from the live MANIFEST.
    pub manifest_edits: u64,
    /// Damage, each with file and offset. Empty for a healthy database.
    pub problems: Vec<Problem>,
    /// Findings that are not damage: torn tails, files the next open will delete.
    pub notes: Vec<String>,
}

impl VerifyReport {
    /// True if no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn absorb(&mut self, other: VerifyReport) {
        self.tables += other.tables;
        self.blocks += other.blocks;
        self.entries += other.entries;
        self.wals += other.wals;
        self.wal_records += other.wal_records;
        self.manifest_edits += other.manifest_edits;
        self.problems.extend(other.problems);
        self.notes.extend(other.notes);
    }
}

/// What [`verify_table`] read from one SSTable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCheck {
    pub blocks: u64,
    pub entries: u64,
}

/// One entry of an SSTable's index block: the last internal key of a data block and
/// where that block is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub last_key: Vec<u8>,
    pub handle: BlockHandle,
}

/// The path of SSTable `id` in `dir` (file names: docs/format.md section 1).
pub use crate::filename::table_path;

/// The path of the live MANIFEST of the database in `dir`, as CURRENT names it.
///
/// # Errors
/// `Io` if CURRENT cannot be read; `Corruption` if it does not name a manifest.
pub fn live_manifest_path(dir: &Path) -> Result<PathBuf> {
    let id = read_current(&PosixFs, dir)?;
    Ok(dir.join(manifest_name(id)))
}

/// Open the SSTable at `path` with the real reader (which verifies the footer, index,
/// filter and properties blocks).
///
/// # Errors
/// `Io` if the file cannot be read; `Corruption` with the offset of the damage.
pub fn open_table(path: &Path) -> Result<Arc<Table>> {
    let file = PosixFs.open(path)?;
    Table::open(file, path.to_owned()).map(Arc::new)
}

/// The index entries of `table`, in order.
///
/// # Errors
/// `Corruption` if an index entry's handle does not decode.
pub fn table_index(table: &Table) -> Result<Vec<IndexEntry>> {
    let mut it = table.index.iter();
    it.seek_to_first()?;
    let mut out = Vec::new();
    while it.valid() {
        out.push(IndexEntry {
            last_key: it.key().to_vec(),
            handle: table.decode_handle(it.value())?,
        });
        it.next()?;
    }
    Ok(out)
}

/// Read every block of the SSTable at `path`, checking each checksum, that every key is
/// an internal key, that keys ascend within and across blocks, that each block ends at
/// its index key, and that the counts match the table's properties.
///
/// # Errors
/// The first damage found, as `Corruption` with the offset of the block it is in; `Io`.
pub fn verify_table(path: &Path) -> Result<TableCheck> {
    let table = open_table(path)?;
    let index = table_index(&table)?;
    // Index, properties and (if present) filter were read and checked by `open_table`.
    let mut check = TableCheck {
        blocks: 2 + u64::from(table.properties().filter_bits_per_key > 0),
        entries: 0,
    };
    let mut previous: Option<Vec<u8>> = None;
    for entry in &index {
        let offset = entry.handle.offset;
        let corrupt = |reason: String| Error::corruption(path, offset, reason);
        let block = table.read_block(entry.handle, false)?;
        check.blocks += 1;
        let mut it = block.iter();
        it.seek_to_first()?;
        let mut last: Option<Vec<u8>> = None;
        while it.valid() {
            let key = it.key();
            if parse_internal_key(key).is_none() {
                return Err(corrupt("data block key is not an internal key".into()));
            }
            if let Some(prev) = last.as_deref().or(previous.as_deref()) {
                if compare_internal(prev, key) != std::cmp::Ordering::Less {
                    return Err(corrupt("keys out of order".into()));
                }
            }
            last = Some(key.to_vec());
            check.entries += 1;
            it.next()?;
        }
        match last {
            None => return Err(corrupt("empty data block".into())),
            Some(last) if last != entry.last_key => {
                return Err(corrupt(
                    "data block's last key differs from its index entry".into(),
                ))
            }
            Some(last) => previous = Some(last),
        }
    }
    let props = table.properties();
    let data_blocks = index.len() as u64;
    if props.entries != check.entries || props.data_blocks != data_blocks {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "properties say {} entries in {} blocks, found {} in {}",
                props.entries, props.data_blocks, check.entries, data_blocks
            ),
        ));
    }
    Ok(check)
}

/// Check every file of the database in `dir` (and of its `vectors/` store, if any):
/// CURRENT and the live MANIFEST (every edit, the live-file set it describes, each live
/// SSTable present with the recorded size), every SSTable in the directory block by block,
/// and every WAL record by record.
///
/// # Errors
/// Only if `dir` cannot be listed; damage goes into the report.
pub fn verify_dir(dir: &Path) -> Result<VerifyReport> {
    let fs = PosixFs;
    let mut names = fs.list(dir)?;
    names.sort();
    let mut report = VerifyReport::default();
    let live = verify_manifest(&fs, dir, &mut report);
    if let Some(state) = &live {
        check_live_tables(dir, state, &mut report);
    }
    for name in &names {
        let path = dir.join(name);
        if name.ends_with(".sst") {
            verify_table_file(&path, name, live.as_ref(), &mut report);
        } else if name.ends_with(".wal") {
            report.wals += 1;
            match fs.read_all(&path) {
                Err(e) => report.problems.push(Problem::from_error(e, &path)),
                Ok(data) => {
                    report.wal_records += verify_log(&path, &data, &mut report, |rec| {
                        BatchReader::new(rec).map(drop)
                    });
                }
            }
        }
    }
    let indexes = dir.join(crate::filename::INDEXES_DIR);
    if indexes.is_dir() {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(&indexes)
            .map_err(|e| Error::io("read directory", &indexes, e))?
            .filter_map(|entry| Some(entry.ok()?.path()))
            .filter(|path| path.is_dir())
            .collect();
        dirs.sort();
        for index in dirs {
            report.absorb(verify_dir(&index)?);
        }
    }
    Ok(report)
}

/// The live manifest: its framing and every edit, then the state it replays to (`None`
/// when it cannot be read; the problem is in `report`).
fn verify_manifest(
    fs: &PosixFs,
    dir: &Path,
    report: &mut VerifyReport,
) -> Option<RecoveredManifest> {
    let path = match live_manifest_path(dir) {
        Ok(path) => path,
        Err(e) => {
            report
                .problems
                .push(Problem::from_error(e, &dir.join(CURRENT)));
            return None;
        }
    };
    let data = match fs.read_all(&path) {
        Ok(data) => data,
        Err(e) => {
            report.problems.push(Problem::from_error(e, &path));
            return None;
        }
    };
    report.manifest_edits = verify_log(&path, &data, report, |rec| {
        VersionEdit::decode(rec).map(drop)
    });
    match RecoveredManifest::load(fs, dir) {
        Ok(state) => Some(state),
        Err(e) => {
            report.problems.push(Problem::from_error(e, &path));
            None
        }
    }
}

/// Each SSTable the manifest `state` lists is present, with the size it recorded.
fn check_live_tables(dir: &Path, state: &RecoveredManifest, report: &mut VerifyReport) {
    for (level, meta) in state.files.values() {
        let path = table_path(dir, meta.id);
        match std::fs::metadata(&path) {
            Err(_) => report.problems.push(Problem {
                file: path,
                offset: 0,
                reason: format!("live L{} SSTable is missing", level.0),
            }),
            Ok(m) if m.len() != meta.size => report.problems.push(Problem {
                file: path,
                offset: m.len().min(meta.size),
                reason: format!(
                    "size is {} bytes, the MANIFEST recorded {}",
                    m.len(),
                    meta.size
                ),
            }),
            Ok(_) => {}
        }
    }
}

/// Verify the SSTable `name` (at `path`) block by block, and note it when the live
/// manifest (if it could be read) does not list it.
fn verify_table_file(
    path: &Path,
    name: &str,
    live: Option<&RecoveredManifest>,
    report: &mut VerifyReport,
) {
    report.tables += 1;
    match verify_table(path) {
        Ok(check) => {
            report.blocks += check.blocks;
            report.entries += check.entries;
        }
        Err(e) => report.problems.push(Problem::from_error(e, path)),
    }
    let id = name
        .split_once('.')
        .and_then(|(stem, _)| stem.parse::<u64>().ok());
    let is_live = live.is_none_or(|s| id.is_some_and(|id| s.files.contains_key(&FileId(id))));
    if !is_live {
        report.notes.push(format!(
            "{}: not in the live MANIFEST (the next open deletes it)",
            path.display()
        ));
    }
}

/// Read every record of the log `data` (a WAL or a MANIFEST) and decode each payload with
/// `decode`; problems and a torn tail go into `report`. Returns the records read.
fn verify_log(
    path: &Path,
    data: &[u8],
    report: &mut VerifyReport,
    decode: impl Fn(&[u8]) -> std::result::Result<(), crate::codec::DecodeError>,
) -> u64 {
    let mut reader = LogReader::new(data, path);
    let mut records = 0;
    loop {
        match reader.next_record() {
            Ok(Some((offset, record))) => {
                records += 1;
                if let Err(e) = decode(record) {
                    report.problems.push(Problem {
                        file: path.to_owned(),
                        offset,
                        reason: format!(
                            "record at offset {offset}: byte {} of its payload: {}",
                            e.offset, e.reason
                        ),
                    });
                }
            }
            Ok(None) => break,
            Err(e) => {
                // The reader cannot resynchronise after corruption it reports.
                report.problems.push(Problem::from_error(e, path));
                break;
            }
        }
    }
    if let Some(tail) = reader.tail() {
        report.notes.push(format!(
            "{}: torn tail at offset {} ({} bytes dropped: {}); normal after a crash",
            path.display(),
            tail.offset,
            tail.dropped_bytes,
            tail.reason
        ));
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};

    /// A flushed database: one SSTable, a WAL, a MANIFEST.
    fn sample(dir: &Path) {
        let db = Db::open(dir, Options::default()).unwrap();
        for i in 0..500u32 {
            db.put(format!("key{i:04}"), format!("value {i}")).unwrap();
        }
        db.flush().unwrap();
        db.put("in-wal", "x").unwrap();
        db.close().unwrap();
    }

    #[test]
    fn a_healthy_database_verifies() {
        let tmp = tempfile::tempdir().unwrap();
        sample(tmp.path());
        let report = verify_dir(tmp.path()).unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!((report.tables, report.entries), (1, 500));
        assert!(report.blocks > 3);
        assert_eq!(report.wal_records, 1);
        assert!(report.manifest_edits >= 2);
    }

    #[test]
    fn flipped_bytes_are_reported_with_file_and_offset() {
        let tmp = tempfile::tempdir().unwrap();
        sample(tmp.path());
        let sst = tmp.path().join("000005.sst");
        let table = open_table(&sst).unwrap();
        let second = table_index(&table).unwrap()[1].handle;
        drop(table);
        let mut bytes = std::fs::read(&sst).unwrap();
        bytes[second.offset as usize + 3] ^= 0x01;
        std::fs::write(&sst, &bytes).unwrap();
        let manifest = live_manifest_path(tmp.path()).unwrap();
        let mut m = std::fs::read(&manifest).unwrap();
        m[10] ^= 0x01;
        std::fs::write(&manifest, &m).unwrap();

        let report = verify_dir(tmp.path()).unwrap();
        let sst_problem = report.problems.iter().find(|p| p.file == sst).unwrap();
        assert_eq!(sst_problem.offset, second.offset);
        assert!(sst_problem.reason.contains("checksum"), "{sst_problem}");
        assert!(
            report.problems.iter().any(|p| p.file == manifest),
            "{:?}",
            report.problems
        );
    }
}

//! Repair: rebuild a database whose CURRENT, MANIFEST, SSTables or WALs are damaged, keeping
//! every entry that can still be read (LevelDB's and RocksDB's `RepairDB`).
//!
//! Open refuses damage (docs/durability.md, promise 4); repair is what a user runs after
//! that refusal, once the loss is accepted, on a database no process has open. It is lossy
//! by nature and says what it lost. Four steps:
//!
//! 1. **Choose the inputs.** If the live manifest replays and its oldest live WAL exists,
//!    its live SSTables and the WALs at or above its log number: what open would read. If
//!    not (CURRENT or the manifest is damaged, or edits were lost from the manifest's
//!    tail), every SSTable and WAL in the directory. A table that a finished compaction
//!    replaced but a crash left behind is then read too, and can bring back keys deleted
//!    since: the price of a lost manifest, as in LevelDB.
//! 2. **Survey each SSTable** block by block. A table whose footer, index or properties
//!    are damaged cannot be read at all and is set aside whole; a data block that fails its
//!    checksum, does not decode or breaks key order is dropped alone.
//! 3. **Read the WALs** as `WalRecovery::PointInTime` does: whole batches up to the first
//!    damaged record, nothing logged after it (a prefix, no holes). With the manifest's
//!    inputs, batches no newer than the newest sequence number the tables hold were flushed
//!    before and are skipped; without it, every batch is replayed (a table may be the
//!    partial output of a crashed repair) and the merge keeps one copy of each entry.
//! 4. **Merge everything into one sorted run** in the last level, as a full compaction with
//!    no snapshot: the newest version of each key, tombstones dropped. A new manifest lists
//!    the new tables and CURRENT switches to it: the commit point. Then the damaged and
//!    unused inputs move to `lost/` and the other inputs are deleted.
//!
//! Until the switch of CURRENT repair only adds files, so a crash leaves the old state as
//! it was and repair can run again; after it, the database is repaired and the next open
//! deletes what repair did not get to. Cost: every table is read twice (survey, merge) and
//! the live data written once.
//!
//! The vector store of each semantic index (`indexes/<name>/`) is a database of its own
//! and is repaired the same way; the index's next open reconciles it with the repaired
//! values (semantic/open.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::open::remove_obsolete_files;
use super::replay::{check_oldest_wal, continues, decode_batch};
use crate::batch::{decode_entries, BatchReader};
use crate::compaction::{run_compaction, CompactionOutput, DropPolicy};
use crate::error::{Error, Result};
use crate::filename::{self, wal_path, FileKind};
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, MergingIter, VecIter};
use crate::key::{compare_internal, encode_internal_key, parse_internal_key, SeqNo, ValueKind};
use crate::keyspace::KeyspaceId;
use crate::options::Options;
use crate::range_del::{RangeDels, RangeTombstone};
use crate::sst::BlockCache;
use crate::sst::{BlockHandle, Table, TableOptions};
use crate::verify::{table_index, Problem};
use crate::version::table_cache::TableCache;
use crate::version::{
    manifest_name, FileId, Level, RecoveredManifest, TableFile, Version, VersionSet, CURRENT_FILE,
    NUM_LEVELS,
};
use crate::wal::LogReader;

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

/// Rebuild the database in `dir` from what can still be read; see the module comment.
/// `opts` gives the file system and the settings of the new tables (compression, block
/// size, filter bits, file size).
///
/// # Errors
/// `InvalidArgument` if `dir` holds no database; `Locked` if a process has it open; `Io`
/// if reading or writing fails (the database is then as it was, or repaired, never half).
/// Damage is not an error: it goes into the report.
pub(super) fn repair(dir: &Path, opts: &Options) -> Result<RepairReport> {
    opts.validate().map_err(Error::InvalidOptions)?;
    let fs = opts.fs.as_ref();
    if !fs.exists(dir) {
        return Err(Error::invalid(format!(
            "no database to repair: {} does not exist",
            dir.display()
        )));
    }
    let _lock = fs.lock(&dir.join(filename::LOCK))?;
    refuse_keyspaces(fs, dir)?;
    let mut report = RepairReport::default();
    let mut inputs = Inputs::choose(fs, dir, &mut report)?;
    let read = inputs.read(fs, dir, &mut report)?;
    let (wal_id, versions) = rewrite(dir, opts, inputs.highest, read, &mut report)?;
    inputs.set_aside_lost(fs, dir, &mut report)?;
    remove_obsolete_files(fs, dir, &versions, wal_id)?;
    fs.sync_dir(dir)?;
    drop(versions);
    repair_indexes(dir, opts, &mut report)?;
    Ok(report)
}

/// Repair merges every table into one run of the default keyspace: a database that made
/// keyspaces (as its manifest says, when it can be read) is refused rather than mixed, and
/// `read_wals` refuses a WAL entry of another keyspace for the same reason.
fn refuse_keyspaces(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    match RecoveredManifest::load(fs, dir) {
        Ok(state) if state.next_keyspace_id > KeyspaceId(1) => Err(keyspaces_refused()),
        _ => Ok(()),
    }
}

fn keyspaces_refused() -> Error {
    Error::invalid(
        "repair of a database with keyspaces other than the default is not supported:          nothing was changed",
    )
}

/// What repair reads, and what it will set aside in `lost/`.
struct Inputs {
    tables: Vec<FileId>,
    wals: Vec<FileId>,
    /// The highest file number in use, so that new files take none of them.
    highest: FileId,
    /// The last sequence number the manifest logged, if it was used.
    last_seq: SeqNo,
    /// Damaged or unused inputs, moved to `lost/` once the repaired state is committed.
    lost: Vec<PathBuf>,
}

/// The inputs, read: a source per table and the WALs' batches, their range tombstones, and
/// the newest sequence number they hold.
struct ReadInputs {
    sources: Vec<Box<dyn InternalIterator + Send>>,
    range_dels: RangeDels,
    last_seq: SeqNo,
}

impl Inputs {
    /// Step 1: the live manifest's tables and WALs if it replays and its oldest live WAL
    /// exists, every table and WAL in the directory if not.
    fn choose(fs: &dyn FileSystem, dir: &Path, report: &mut RepairReport) -> Result<Inputs> {
        let mut inputs = Inputs {
            tables: Vec::new(),
            wals: Vec::new(),
            highest: FileId(0),
            last_seq: SeqNo(0),
            lost: Vec::new(),
        };
        let mut manifests = Vec::new();
        for name in fs.list(dir)? {
            let id = match filename::parse(&name) {
                Some(FileKind::Table(id)) => {
                    inputs.tables.push(id);
                    id
                }
                Some(FileKind::Wal(id)) => {
                    inputs.wals.push(id);
                    id
                }
                Some(FileKind::Manifest(id)) => {
                    manifests.push(id);
                    id
                }
                Some(FileKind::Temp(id)) => id,
                Some(FileKind::Current | FileKind::Lock) | None => continue,
            };
            inputs.highest = inputs.highest.max(id);
        }
        if inputs.tables.is_empty() && inputs.wals.is_empty() && !fs.exists(&dir.join(CURRENT_FILE))
        {
            return Err(Error::invalid(format!(
                "no database to repair in {}",
                dir.display()
            )));
        }
        inputs.tables.sort();
        inputs.wals.sort();
        // A manifest that replays but whose oldest live WAL is gone lost edits from its
        // tail (open refuses it for that): its file set is stale, so it cannot choose the
        // inputs.
        let loaded = RecoveredManifest::load(fs, dir)
            .and_then(|m| check_oldest_wal(fs, dir, &m).map(|()| m));
        match loaded {
            Ok(manifest) => {
                report.manifest_used = true;
                for id in manifest.files.keys() {
                    if inputs.tables.binary_search(id).is_err() {
                        report.problems.push(Problem {
                            file: filename::table_path(dir, *id),
                            offset: 0,
                            reason: "a live SSTable is missing".into(),
                        });
                    }
                }
                inputs.tables.retain(|id| manifest.files.contains_key(id));
                inputs.wals.retain(|id| *id >= manifest.log_number);
                let named = FileId(manifest.next_file_number.0.saturating_sub(1));
                inputs.highest = inputs.highest.max(named);
                inputs.last_seq = manifest.last_seq;
            }
            Err(e) => {
                report
                    .problems
                    .push(Problem::from_error(e, &dir.join(CURRENT_FILE)));
                let manifests = manifests.iter().map(|&id| dir.join(manifest_name(id)));
                inputs.lost.extend(manifests);
            }
        }
        Ok(inputs)
    }

    /// Steps 2 and 3: survey each table block by block, and read the WALs point in time.
    fn read(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        report: &mut RepairReport,
    ) -> Result<ReadInputs> {
        let mut sources: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
        let mut range_dels: Vec<RangeTombstone> = Vec::new();
        let mut flushed = SeqNo(0);
        for &id in &self.tables {
            let path = filename::table_path(dir, id);
            match survey_table(fs, &path, report) {
                Some(survey) => {
                    report.tables_read += 1;
                    flushed = flushed.max(survey.table.properties().largest_seq);
                    if let Some(set) = survey.table.range_dels() {
                        range_dels.extend(set.tombstones());
                    }
                    if survey.dropped > 0 {
                        self.lost.push(path);
                    }
                    sources.push(Box::new(SalvageIter::new(survey)));
                }
                None => {
                    report.tables_unreadable += 1;
                    self.lost.push(path);
                }
            }
        }
        // With the manifest's inputs, a WAL batch no newer than the tables' newest entry
        // was flushed before (memtables flush in sequence order). Without it, a table may
        // be the partial output of a repair that crashed, holding the WALs' newest entries
        // for part of the key space only: every batch is replayed, and the merge keeps one
        // copy of an entry found twice.
        let replay_above = if report.manifest_used {
            flushed
        } else {
            SeqNo(0)
        };
        let logged = read_wals(fs, dir, &self.wals, replay_above, report, &mut self.lost)?;
        // The tables' newest entry counts either way: below it, the repaired database
        // would read at a sequence number that hides what it keeps, and give new writes
        // numbers that the kept entries shadow.
        let last_seq = self.last_seq.max(flushed).max(logged.last_seq);
        sources.push(Box::new(VecIter::new(logged.entries)));
        range_dels.extend(logged.range_dels);
        Ok(ReadInputs {
            sources,
            range_dels: RangeDels::new(&range_dels),
            last_seq,
        })
    }

    /// After the commit: move the damaged and unused inputs to `lost/`.
    fn set_aside_lost(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        report: &mut RepairReport,
    ) -> Result<()> {
        if self.lost.is_empty() {
            return Ok(());
        }
        let lost_dir = dir.join(LOST_DIR);
        fs.create_dir_all(&lost_dir)?;
        for path in std::mem::take(&mut self.lost) {
            let Some(name) = path.file_name() else {
                continue;
            };
            let to = lost_dir.join(name);
            fs.rename(&path, &to)?;
            report.moved_to_lost.push(to);
        }
        fs.sync_dir(&lost_dir)
    }
}

/// Step 4: merge everything into one sorted run in the last level (a full compaction with
/// nothing older left for a tombstone to hide and no snapshot to keep an old version
/// for), then commit it: an empty WAL, a new manifest naming the new tables, CURRENT
/// switched. New files are numbered above `highest`. Returns the new WAL's number and the
/// version set.
fn rewrite(
    dir: &Path,
    opts: &Options,
    highest: FileId,
    read: ReadInputs,
    report: &mut RepairReport,
) -> Result<(FileId, VersionSet)> {
    let mut next_id = highest.0;
    let mut next_file = || {
        next_id += 1;
        (FileId(next_id), filename::table_path(dir, FileId(next_id)))
    };
    let out = merge_to_last_level(dir, opts, read.sources, &read.range_dels, &mut next_file)?;
    report.entries_read = out.entries_in;
    report.entries_written = out.entries_in - out.entries_dropped;
    report.tables_written = out.files.len() as u64;
    let (wal_id, manifest_id) = (next_file().0, next_file().0);
    let versions = commit_rewrite(dir, opts, out.files, read.last_seq, wal_id, manifest_id)?;
    Ok((wal_id, versions))
}

/// Merge `sources` into new tables of the last level, dropping what `range_dels` and
/// tombstones hide; each new table is opened (and so verified).
fn merge_to_last_level(
    dir: &Path,
    opts: &Options,
    sources: Vec<Box<dyn InternalIterator + Send>>,
    range_dels: &RangeDels,
    next_file: &mut dyn FnMut() -> (FileId, PathBuf),
) -> Result<CompactionOutput> {
    let fs = &opts.fs;
    let cache = Arc::new(TableCache::new(
        Arc::clone(fs),
        dir.to_owned(),
        Arc::new(BlockCache::new(opts.cache_size, opts.block_size)),
        opts.max_open_files,
        false,
        Arc::default(),
    ));
    run_compaction(
        MergingIter::new(sources),
        &DropPolicy {
            snapshots: &[],
            is_bottommost: &|_, _| true,
            range_dels: Some(range_dels),
            filter: None,
        },
        &|path: &Path| fs.create(path),
        &|meta| {
            let file = TableFile::new(meta, Arc::clone(&cache));
            file.table()?; // open (and so verify) the new table
            Ok(file)
        },
        TableOptions::for_level(opts, NUM_LEVELS - 1),
        opts.max_file_size,
        next_file,
    )
}

/// Commit the rewritten `files`: an empty WAL `wal_id`, for the new manifest
/// `manifest_id` to name as the oldest live one, then the manifest, then CURRENT.
fn commit_rewrite(
    dir: &Path,
    opts: &Options,
    files: Vec<TableFile>,
    last_seq: SeqNo,
    wal_id: FileId,
    manifest_id: FileId,
) -> Result<VersionSet> {
    let fs = &opts.fs;
    let bottom = Level((NUM_LEVELS - 1) as u8);
    let mut wal = fs.create(&wal_path(dir, wal_id))?;
    wal.sync()?;
    drop(wal);
    let files: Vec<(Level, Arc<TableFile>)> =
        files.into_iter().map(|f| (bottom, Arc::new(f))).collect();
    let state = RecoveredManifest {
        manifest_id,
        log_number: wal_id,
        next_file_number: manifest_id,
        last_seq,
        files: files
            .iter()
            .map(|(level, f)| (f.meta.id, (*level, f.meta.clone())))
            .collect::<BTreeMap<_, _>>(),
        ..RecoveredManifest::default()
    };
    // Syncs the directory after the new tables and WAL, then switches CURRENT.
    fs.sync_dir(dir)?;
    VersionSet::create(
        Arc::clone(fs),
        dir,
        state,
        BTreeMap::from([(KeyspaceId::DEFAULT, Version::from_files(files))]),
        opts.max_manifest_file_size,
    )
}

/// The vector store of each semantic index is a database of its own: repair each the
/// same way.
fn repair_indexes(dir: &Path, opts: &Options, report: &mut RepairReport) -> Result<()> {
    let fs = opts.fs.as_ref();
    let indexes = dir.join(crate::filename::INDEXES_DIR);
    if !fs.exists(&indexes) {
        return Ok(());
    }
    let mut names = fs.list(&indexes)?;
    names.sort();
    for name in names {
        match repair(&indexes.join(&name), opts) {
            Ok(index) => report.indexes.push((name, index)),
            Err(Error::InvalidArgument(_)) => {} // an empty store: nothing to repair
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The readable data blocks of one SSTable.
struct Survey {
    table: Arc<Table>,
    blocks: Vec<BlockHandle>,
    dropped: u64,
}

/// Open the table at `path` and check each data block: its checksum, its entries, and
/// that its keys follow the previous readable block's. `None` if the table cannot be
/// opened or its index read.
fn survey_table(fs: &dyn FileSystem, path: &Path, report: &mut RepairReport) -> Option<Survey> {
    let opened = fs
        .open(path)
        .and_then(|file| Table::open(file, path.to_owned()))
        .map(Arc::new)
        .and_then(|table| table_index(&table).map(|index| (table, index)));
    let (table, index) = match opened {
        Ok(found) => found,
        Err(e) => {
            report.problems.push(Problem::from_error(e, path));
            return None;
        }
    };
    let mut survey = Survey {
        table,
        blocks: Vec::with_capacity(index.len()),
        dropped: 0,
    };
    let mut previous: Option<Vec<u8>> = None;
    for entry in index {
        match read_entries(&survey.table, entry.handle, previous.as_deref()) {
            Ok(entries) => {
                if let Some((last, _)) = entries.last() {
                    previous = Some(last.clone());
                    survey.blocks.push(entry.handle);
                }
            }
            Err(e) => {
                survey.dropped += 1;
                report.blocks_dropped += 1;
                report.problems.push(Problem::from_error(e, path));
            }
        }
    }
    Some(survey)
}

/// The entries of the data block at `handle`, checked: internal keys, strictly ascending,
/// all after `after`.
fn read_entries(
    table: &Table,
    handle: BlockHandle,
    after: Option<&[u8]>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let block = table.read_block(handle, false)?;
    let mut it = block.iter();
    it.seek_to_first()?;
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    while it.valid() {
        let key = it.key();
        let previous = entries.last().map(|(k, _)| k.as_slice()).or(after);
        let ordered = previous.is_none_or(|p| compare_internal(p, key).is_lt());
        if parse_internal_key(key).is_none() || !ordered {
            return Err(Error::corruption(
                table.path(),
                handle.offset,
                "data block holds a malformed or out-of-order key",
            ));
        }
        entries.push((key.to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(entries)
}

/// The entries of a surveyed table, block by block, front to back: a cursor for the
/// merge, which only moves forward.
struct SalvageIter {
    table: Arc<Table>,
    blocks: std::vec::IntoIter<BlockHandle>,
    entries: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    current: Option<(Vec<u8>, Vec<u8>)>,
}

impl SalvageIter {
    fn new(survey: Survey) -> SalvageIter {
        SalvageIter {
            table: survey.table,
            blocks: survey.blocks.into_iter(),
            entries: Vec::new().into_iter(),
            current: None,
        }
    }

    fn backwards() -> Error {
        Error::invalid("repair reads a table front to back only")
    }
}

impl InternalIterator for SalvageIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        // Called once, by the merge, before any `next`.
        self.next()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Err(Self::backwards())
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        Err(Self::backwards())
    }
    fn next(&mut self) -> Result<()> {
        loop {
            if let Some(entry) = self.entries.next() {
                self.current = Some(entry);
                return Ok(());
            }
            let Some(handle) = self.blocks.next() else {
                self.current = None;
                return Ok(());
            };
            // The survey read this block whole; a failure now is a new one, not damage
            // to skip, so it ends the repair.
            self.entries = read_entries(&self.table, handle, None)?.into_iter();
        }
    }
    fn prev(&mut self) -> Result<()> {
        Err(Self::backwards())
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }
}

/// What the WALs held that the tables do not.
struct Logged {
    /// Sorted by internal key.
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    range_dels: Vec<RangeTombstone>,
    last_seq: SeqNo,
}

impl Logged {
    /// Keep the batches of `reader`'s records newer than `flushed`, up to the first damaged
    /// record: returns the damage found, if any.
    ///
    /// # Errors
    /// What stops the repair (a keyspace other than the default one), not the damage.
    fn read_records(
        &mut self,
        reader: &mut LogReader<'_>,
        path: &Path,
        flushed: SeqNo,
        report: &mut RepairReport,
    ) -> Result<Option<Error>> {
        loop {
            let (offset, record) = match reader.next_record() {
                Ok(Some(found)) => found,
                Ok(None) => return Ok(None),
                Err(e) => return Ok(Some(e)),
            };
            let batch = match decode_batch(record, path, offset) {
                Ok(batch) => batch,
                Err(e) => return Ok(Some(e)),
            };
            let last = SeqNo((batch.first_seq.0 + u64::from(batch.count)).saturating_sub(1));
            self.last_seq = self.last_seq.max(last);
            if last > flushed {
                report.wal_batches += 1;
                self.add(&batch, path, offset)?;
            }
        }
    }

    /// Keep the entries of `batch`, the record at `offset` of WAL `path`.
    fn add(&mut self, batch: &BatchReader<'_>, path: &Path, offset: u64) -> Result<()> {
        for entry in decode_entries(batch.body(), batch.first_seq) {
            // `decode_batch` decoded every entry already.
            let entry = entry.map_err(|e| e.in_file(path, offset))?;
            if !entry.keyspace.is_default() {
                return Err(keyspaces_refused());
            }
            if entry.kind == ValueKind::RangeDelete {
                self.range_dels.push(RangeTombstone {
                    start: entry.key.to_vec(),
                    end: entry.value.to_vec(),
                    seq: entry.seq,
                });
                continue;
            }
            let mut key = Vec::with_capacity(entry.key.len() + 8);
            encode_internal_key(&mut key, entry.key, entry.seq, entry.kind);
            self.entries.push((key, entry.value.to_vec()));
        }
        Ok(())
    }
}

/// Replay `wals` (ascending) as `WalRecovery::PointInTime` would, keeping batches newer
/// than `flushed`. The WAL with the first damaged record and every later one go to `lost`.
fn read_wals(
    fs: &dyn FileSystem,
    dir: &Path,
    wals: &[FileId],
    flushed: SeqNo,
    report: &mut RepairReport,
    lost: &mut Vec<PathBuf>,
) -> Result<Logged> {
    let mut logged = Logged {
        entries: Vec::new(),
        range_dels: Vec::new(),
        last_seq: SeqNo(0),
    };
    let mut cut = false;
    // WALs older than the first one left were flushed and deleted.
    let oldest = wals.first().copied().unwrap_or(FileId(0));
    let mut previous = None;
    for &id in wals {
        let path = wal_path(dir, id);
        let data = fs.read_all(&path)?;
        if cut {
            report.wal_bytes_dropped += data.len() as u64;
            lost.push(path);
            continue;
        }
        let mut reader = LogReader::new(&data, &path);
        if !continues(reader.predecessor(), previous, oldest) {
            // The WAL before it ends short of where it ended when this one began.
            report.wal_bytes_dropped += data.len() as u64;
            report.problems.push(Problem::from_error(
                Error::corruption(&path, 0, "the WAL before this one lost its tail"),
                &path,
            ));
            lost.push(path);
            cut = true;
            continue;
        }
        let damage = logged.read_records(&mut reader, &path, flushed, report)?;
        if reader.records_end() > 0 {
            previous = Some((id, reader.records_end()));
        }
        if let Some(e) = damage {
            let at = match &e {
                Error::Corruption { offset, .. } => *offset,
                _ => return Err(e),
            };
            report.wal_bytes_dropped += (data.len() as u64).saturating_sub(at);
            report.problems.push(Problem::from_error(e, &path));
            lost.push(path);
            cut = true;
        }
    }
    logged
        .entries
        .sort_by(|(a, _), (b, _)| compare_internal(a, b));
    Ok(logged)
}

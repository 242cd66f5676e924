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
use super::replay::check_oldest_wal;
use crate::compaction::{run_compaction, CompactionOutput, DropPolicy};
use crate::error::{Error, Result};
use crate::filename::{self, wal_path, FileKind};
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, MergingIter, VecIter};
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::options::Options;
use crate::range_del::{RangeDels, RangeTombstone};
use crate::sst::BlockCache;
use crate::sst::TableOptions;
use crate::verify::Problem;
use crate::version::table_cache::TableCache;
use crate::version::{
    manifest_name, FileId, Level, RecoveredManifest, TableFile, Version, VersionSet, CURRENT_FILE,
    NUM_LEVELS,
};

mod report;
mod survey;
mod wals;

use report::keyspaces_refused;
pub use report::{RepairReport, LOST_DIR};
use survey::{survey_table, SalvageIter};
use wals::read_wals;

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

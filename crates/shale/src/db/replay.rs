//! WAL replay, steps 5 and 6 of an open (docs/architecture.md, "Recovery"): every WAL at or
//! above the manifest's log number, in order, into memtables, saved as L0 SSTables (kept in
//! memory by a read-only open), stopping at the first WAL that does not continue the one
//! before it. A read-only open reads the WALs before the manifest ([`WalSource`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::flush::write_table;
use super::stats::Stats;
use crate::batch::{decode_entries, BatchReader};
use crate::error::{Error, Result};
use crate::filename::{self, wal_path, FileKind};
use crate::fs::FileSystem;
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecovery};
use crate::version::table_cache::TableCache;
use crate::version::{FileId, Level, RecoveredManifest, TableFile};
use crate::wal::{LogReader, Predecessor, HEADER_LEN};

/// Where WAL replay reads the WALs from.
///
/// A read-write open holds the lock, so nothing deletes a WAL under it: it lists the
/// directory and reads each WAL in turn. A read-only open runs beside a writer that flushes a
/// WAL and deletes it once a manifest edit names a newer one, so it reads every WAL before
/// the manifest, and a WAL deleted after that is still in hand; [`top_up`] adds the WALs
/// made in between. Every write acknowledged before the open began is then in the WALs
/// read or in the tables the manifest names.
pub(super) enum WalSource {
    Directory,
    Read(BTreeMap<FileId, Vec<u8>>),
}

impl WalSource {
    pub(super) fn read_all(fs: &dyn FileSystem, dir: &Path) -> Result<WalSource> {
        let mut read = BTreeMap::new();
        for id in wal_ids(fs, dir)? {
            match fs.read_all(&wal_path(dir, id)) {
                Ok(data) => {
                    read.insert(id, data);
                }
                // Flushed and deleted since the listing: the manifest read next covers it.
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(WalSource::Read(read))
    }
}

/// After a read-only open read `state` from the manifest: read the WALs at or above its log
/// number that were made after the WALs in `read` were. Each was made after `read`'s listing,
/// so the WALs in hand are then every one the state needs. If one of them is gone already
/// (the writer flushed it after the manifest was read), the state is stale and
/// [`open`](super::open::open) tries again; if the manifest still names it, it was lost, and
/// that is corruption.
pub(super) fn top_up(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &RecoveredManifest,
    read: &mut BTreeMap<FileId, Vec<u8>>,
) -> Result<()> {
    for id in wal_ids(fs, dir)? {
        if id >= state.log_number && !read.contains_key(&id) {
            let data = fs.read_all(&wal_path(dir, id))?;
            read.insert(id, data);
        }
    }
    if read.contains_key(&state.log_number) {
        return Ok(());
    }
    // Missing: flushed since the manifest was read (a newer manifest names a newer WAL), or
    // lost (see `check_oldest_wal`).
    if RecoveredManifest::load(fs, dir)?.log_number == state.log_number {
        check_oldest_wal(fs, dir, state)?;
    }
    Err(stale_read(dir, state.log_number))
}

/// True if the bytes at `at` of the WAL `data`, read by a read-only open, were zeros not yet
/// written: a header's worth of zeros in `data` that a fresh read of the file finds written.
/// A writer appends to its WAL while a read-only open reads it, page by page, so the open
/// can read a page before the writer fills it and a later page after: zeros, then valid
/// records, which would look like damage. Damage stays damage: zeros that are still zeros.
/// A WAL gone since (flushed) is a stale read, which the open answers with another try.
fn overtaken(fs: &dyn FileSystem, path: &Path, data: &[u8], at: u64) -> Result<bool> {
    let Some(range) = usize::try_from(at)
        .ok()
        .map(|at| at..at.saturating_add(HEADER_LEN))
    else {
        return Ok(false);
    };
    if !data
        .get(range.clone())
        .is_some_and(|b| b.iter().all(|&x| x == 0))
    {
        return Ok(false);
    }
    let again = fs.read_all(path)?;
    Ok(again.get(range).is_some_and(|b| b.iter().any(|&x| x != 0)))
}

fn wal_ids(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<FileId>> {
    Ok(fs
        .list(dir)?
        .iter()
        .filter_map(|name| match filename::parse(name) {
            Some(FileKind::Wal(id)) => Some(id),
            _ => None,
        })
        .collect())
}

/// The error a read-only open meets when the WALs it read are older than the manifest it
/// read: a not-found I/O error, which [`open`](super::open::open) answers with another try.
fn stale_read(dir: &Path, id: FileId) -> Error {
    Error::io(
        "read WAL",
        wal_path(dir, id),
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the manifest names a WAL newer than those a read-only open read",
        ),
    )
}

/// What WAL replay needs to write the tables it recovers.
pub(super) struct Recovery<'a> {
    pub fs: &'a dyn FileSystem,
    pub dir: &'a Path,
    pub opts: &'a Options,
    pub tables: &'a Arc<TableCache>,
    /// The memtables a read-only open keeps instead of writing them, oldest first, with
    /// their keyspaces.
    pub kept: Vec<(KeyspaceId, Arc<MemTable>)>,
}

/// The memtables replay fills, one per keyspace, with the options each keyspace's tables
/// are built with.
struct ReplayMems {
    mems: BTreeMap<KeyspaceId, (Options, Arc<MemTable>)>,
}

impl ReplayMems {
    fn new(opts: &Options, state: &RecoveredManifest) -> ReplayMems {
        let keyspaces = state
            .keyspaces
            .values()
            .map(|def| (def.id, def.options.apply_to(opts)));
        let mems = std::iter::once((KeyspaceId::DEFAULT, opts.clone()))
            .chain(keyspaces)
            .map(|(id, opts)| {
                let mem = Arc::new(MemTable::with_capacity(opts.write_buffer_size));
                (id, (opts, mem))
            })
            .collect();
        ReplayMems { mems }
    }

    fn any_full(&self) -> bool {
        self.mems.values().any(|(opts, mem)| {
            mem.approximate_memory_usage() >= opts.write_buffer_size || mem.is_full()
        })
    }

    /// Insert `batch` (read at `offset` of WAL `path`, decoded whole by [`next_batch`], so
    /// it reaches the memtables whole or not at all).
    fn insert(&self, batch: &BatchReader<'_>, path: &Path, offset: u64) -> Result<()> {
        for entry in decode_entries(batch.body(), batch.first_seq) {
            let entry = entry.map_err(|e| e.in_file(path, offset))?;
            // An entry of a keyspace the manifest does not know was dropped (its drop is
            // logged before the drop returns; ids are not reused).
            if let Some((_, mem)) = self.mems.get(&entry.keyspace) {
                mem.insert(entry.seq, entry.kind, entry.key, entry.value);
            }
        }
        Ok(())
    }
}

/// The WALs to replay, oldest first: those at or above the manifest's log number.
fn wals_to_replay(
    fs: &dyn FileSystem,
    dir: &Path,
    source: &WalSource,
    state: &mut RecoveredManifest,
) -> Result<Vec<FileId>> {
    let mut wals: Vec<FileId> = match source {
        WalSource::Directory => wal_ids(fs, dir)?,
        WalSource::Read(read) => read.keys().copied().collect(),
    };
    // A WAL's number is logged only with the next version edit, so a crash can leave WALs
    // numbered at or above the manifest's next file number. Mark them used (RocksDB's
    // `MarkFileNumberUsed`): the tables written during replay and the new WAL must not
    // take their numbers, or the new WAL would truncate one before the new manifest is
    // durable, and a leftover one would be replayed again at a later open.
    if let Some(&highest) = wals.iter().max() {
        state.next_file_number = state.next_file_number.max(FileId(highest.0 + 1));
    }
    wals.retain(|&id| id >= state.log_number);
    wals.sort();
    Ok(wals)
}

/// The next batch of a WAL and the offset of its record; on damage, the offset where it
/// starts with the error. The reader's error names where the damage starts; a batch that
/// does not decode is cut at its record's start.
fn next_batch<'r>(
    reader: &'r mut LogReader<'_>,
    path: &Path,
) -> std::result::Result<Option<(u64, BatchReader<'r>)>, (u64, Error)> {
    match reader.next_record() {
        Ok(Some((offset, record))) => decode_batch(record, path, offset)
            .map(|batch| Some((offset, batch)))
            .map_err(|e| (offset, e)),
        Ok(None) => Ok(None),
        Err(e) => {
            let at = match &e {
                Error::Corruption { offset, .. } => *offset,
                _ => 0,
            };
            Err((at, e))
        }
    }
}

impl Recovery<'_> {
    /// Replay every WAL at or above the manifest's log number into memtables, writing each to
    /// an L0 SSTable (when it fills up, and at the end); a read-only open keeps them in
    /// memory instead, and they are returned, oldest first.
    pub(super) fn replay_wals(
        mut self,
        state: &mut RecoveredManifest,
        tables: &mut Vec<(Level, Arc<TableFile>)>,
        stats: &Stats,
        mut source: WalSource,
    ) -> Result<Vec<(KeyspaceId, Arc<MemTable>)>> {
        let (fs, dir, opts) = (self.fs, self.dir, self.opts);
        let wals = wals_to_replay(fs, dir, &source, state)?;
        let mut mems = ReplayMems::new(opts, state);
        // Once a WAL is cut short, every later WAL is dropped too (a prefix, no holes), and
        // its bytes are counted here.
        let mut drop_rest: Option<&AtomicU64> = None;
        // The WAL replayed last, and where its last whole record ended.
        let mut previous: Option<(FileId, u64)> = None;
        for id in wals {
            let path = wal_path(dir, id);
            let data = match &mut source {
                WalSource::Directory => fs.read_all(&path)?,
                WalSource::Read(read) => read.remove(&id).unwrap_or_default(),
            };
            if let Some(counter) = drop_rest {
                Stats::add(counter, data.len() as u64);
                continue;
            }
            let mut reader = LogReader::new(&data, &path);
            if !continues(reader.predecessor(), previous, state.log_number) {
                // The WAL before this one ends short of where it ended when this one
                // began: a power loss kept later writes and lost earlier ones. Replaying
                // this WAL would leave a hole, so the write sequence ends there.
                drop_rest = Some(&stats.wal_torn_tail_bytes);
                let written = data.iter().filter(|&&b| b != 0).count();
                Stats::add(&stats.wal_torn_tail_bytes, written as u64);
                continue;
            }
            loop {
                let (offset, batch) = match next_batch(&mut reader, &path) {
                    Ok(Some(found)) => found,
                    Ok(None) => break,
                    Err(damage) => {
                        drop_rest = Some(self.cut_short(damage, &path, &data, stats)?);
                        break;
                    }
                };
                mems.insert(&batch, &path, offset)?;
                let last = (batch.first_seq.0 + u64::from(batch.count)).saturating_sub(1);
                state.last_seq = state.last_seq.max(SeqNo(last));
                if mems.any_full() {
                    self.save_memtables(state, tables, &mut mems)?;
                }
            }
            if let Some(tail) = reader.tail() {
                Stats::add(&stats.wal_torn_tail_bytes, tail.dropped_bytes);
            }
            if reader.records_end() > 0 {
                // An empty WAL is no link: its successor names the one before it.
                previous = Some((id, reader.records_end()));
            }
        }
        self.save_memtables(state, tables, &mut mems)?;
        Ok(self.kept)
    }

    /// Where the replay of WAL `path` (its bytes `data`) stops at the damage `at` found:
    /// the counter the bytes of the rest of it, and of every later WAL, go to. Returns the
    /// error instead when the damage must fail the open.
    fn cut_short<'s>(
        &self,
        (at, e): (u64, Error),
        path: &Path,
        data: &[u8],
        stats: &'s Stats,
    ) -> Result<&'s AtomicU64> {
        match e {
            Error::Corruption { .. }
                if self.opts.read_only && overtaken(self.fs, path, data, at)? =>
            {
                // The writer appended here after this open read these bytes: every write
                // acknowledged before the open began lies before `at`, and what follows (in
                // this WAL and later ones) came after it.
                Ok(&stats.wal_torn_tail_bytes)
            }
            Error::Corruption { .. } if self.opts.wal_recovery == WalRecovery::PointInTime => {
                let dropped = (data.len() as u64).saturating_sub(at);
                Stats::add(&stats.wal_salvaged_bytes, dropped);
                Stats::add(&stats.wal_salvages, 1);
                Ok(&stats.wal_salvaged_bytes)
            }
            e => Err(e),
        }
    }

    /// Save every memtable that holds writes (to an L0 table, or in memory when
    /// read-only), and start it over.
    fn save_memtables(
        &mut self,
        state: &mut RecoveredManifest,
        tables: &mut Vec<(Level, Arc<TableFile>)>,
        mems: &mut ReplayMems,
    ) -> Result<()> {
        for (&ks, (opts, mem)) in &mut mems.mems {
            if mem.is_empty() {
                continue;
            }
            let full = std::mem::replace(
                mem,
                Arc::new(MemTable::with_capacity(opts.write_buffer_size)),
            );
            if self.opts.read_only {
                self.kept.push((ks, full));
                continue;
            }
            let id = state.next_file_number;
            let written = write_table(self.fs, self.dir, opts, self.tables, None, &full, ks, id)?;
            if let Some(file) = written {
                state.next_file_number = FileId(id.0 + 1);
                state.files.insert(id, (Level(0), file.meta.clone()));
                tables.push((Level(0), Arc::new(file)));
            }
        }
        Ok(())
    }
}

/// Whether a WAL whose first fragment names `predecessor` continues the WALs replayed
/// before it (`previous`: the last one and where its records ended). A WAL the manifest
/// already covers (below `log_number`) is in an SSTable; any other must have been replayed
/// to the length it had when its successor began.
pub(super) fn continues(
    predecessor: Option<Predecessor>,
    previous: Option<(FileId, u64)>,
    log_number: FileId,
) -> bool {
    let Some(p) = predecessor else {
        return true; // the first WAL after an open
    };
    p.wal < log_number.0 || previous.is_some_and(|(id, end)| id.0 == p.wal && end >= p.length)
}

/// Check that the WAL record at `offset` of `path` decodes whole, so that a batch is
/// applied entirely or not at all.
pub(super) fn decode_batch<'r>(
    record: &'r [u8],
    path: &Path,
    offset: u64,
) -> Result<BatchReader<'r>> {
    let batch = BatchReader::new(record).map_err(|e| e.in_file(path, offset))?;
    for entry in decode_entries(batch.body(), batch.first_seq) {
        entry.map_err(|e| e.in_file(path, offset))?;
    }
    Ok(batch)
}

/// The WAL the manifest names as the oldest live one must exist: a WAL is deleted only
/// after a manifest edit naming a newer one is durable, so a crash never leaves it missing.
/// If it is missing, that later edit was lost from the manifest's tail (damage that looks
/// like a torn write, or a cut file), and with it the SSTable the edit installed. Opening
/// anyway would drop those writes without a word, bring deleted keys back from older
/// tables, and remove the SSTable as garbage; refuse instead, leaving every file in place.
pub(super) fn check_oldest_wal(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &RecoveredManifest,
) -> Result<()> {
    let wal = wal_path(dir, state.log_number);
    if fs.exists(&wal) {
        return Ok(());
    }
    Err(Error::corruption(
        dir.join(crate::version::manifest_name(state.manifest_id)),
        state.valid_bytes,
        format!(
            "the manifest names {} as the oldest live WAL, but it is missing: an edit was \
             lost from the manifest's tail",
            wal.display()
        ),
    ))
}

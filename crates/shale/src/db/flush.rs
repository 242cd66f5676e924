//! The flush thread: turns the oldest frozen memtable into an L0 SSTable, logs the new file
//! in the manifest, installs the new version and deletes the memtable's WAL.
//!
//! The SSTable is built without any lock held; only the install (manifest edit, version
//! switch, super version store) runs under the state lock.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::state::{DbInner, ImmMemTable};
use super::stats::Stats;
use super::tree::Tree;
use crate::error::{Error, Result};
use crate::filename::{table_path, wal_path};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key;
use crate::keyspace::KeyspaceId;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::rate_limit::{RateLimitedFile, RateLimiter};
use crate::sst::{TableBuilder, TableOptions};
use crate::sync::lock;
use crate::version::table_cache::TableCache;
use crate::version::{FileId, FileMeta, Level, TableFile, VersionEdit};

pub(crate) fn spawn(db: Arc<DbInner>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("shale-flush".into())
        .spawn(move || flush_loop(&db))
        .map_err(|e| Error::io("spawn flush thread", Path::new(""), e))
}

fn flush_loop(db: &DbInner) {
    while let Some((imm, jobs)) = next_flush(db) {
        let start = Instant::now();
        let built = build_tables(db, &jobs);
        install_flush(db, &imm, built, start);
        db.bg_cv.notify_all();
    }
}

/// One table to build: the keyspace's tree, its frozen memtable and the new file's id.
type FlushJob = (Arc<Tree>, Arc<MemTable>, FileId);

/// Wait for the oldest frozen memtable set, and plan one table per keyspace that has
/// writes, each with its keyspace's options; a keyspace dropped since is skipped. `None`
/// once the thread should stop: a background error, or shutdown with nothing to flush.
fn next_flush(db: &DbInner) -> Option<(Arc<ImmMemTable>, Vec<FlushJob>)> {
    let mut state = lock(&db.state);
    let imm = loop {
        if state.bg_error.is_some() {
            return None;
        }
        if let Some(imm) = state.imm.front() {
            break Arc::clone(imm);
        }
        if state.shutting_down {
            return None;
        }
        state = db.bg_cv.wait(state).unwrap_or_else(|e| e.into_inner());
    };
    let mut jobs = Vec::new();
    for slot in imm.mems.slots() {
        if let Some(tree) = state.trees.get(&slot.keyspace).cloned() {
            jobs.push((tree, Arc::clone(&slot.mem), state.versions.new_file_id()));
        }
    }
    Some((imm, jobs))
}

/// Build the tables of `jobs`, with no lock held, and make their directory entries
/// durable.
fn build_tables(db: &DbInner, jobs: &[FlushJob]) -> Result<Vec<TableFile>> {
    let built: Result<Vec<TableFile>> = jobs
        .iter()
        .map(|(tree, mem, id)| {
            write_table(
                db.fs.as_ref(),
                &db.dir,
                &tree.opts(),
                &db.tables,
                Some(&db.rate_limiter),
                mem,
                tree.id,
                *id,
            )
        })
        .filter_map(Result::transpose)
        .collect();
    built.and_then(|files| db.fs.sync_dir(&db.dir).map(|()| files))
}

/// Log the tables built from `imm` and install them; then drop `imm` and its WAL. A
/// failure poisons the database.
fn install_flush(db: &DbInner, imm: &ImmMemTable, built: Result<Vec<TableFile>>, start: Instant) {
    let mut state = lock(&db.state);
    let result = built.and_then(|files| {
        let mut edit = VersionEdit {
            log_number: Some(imm.next_wal_id),
            last_seq: Some(imm.mems.max_seq()),
            ..VersionEdit::default()
        };
        let mut added = Vec::new();
        for file in files {
            if state.versions.version(file.meta.keyspace).is_none() {
                // Dropped while the table was built: never logged, so deleted now.
                file.mark_obsolete();
                continue;
            }
            Stats::add(&db.stats.flush_bytes, file.meta.size);
            edit.new_files.push((Level(0), file.meta.clone()));
            added.push((Level(0), Arc::new(file)));
        }
        state.log_and_apply(edit, &added)
    });
    if let Err(e) = result {
        state.bg_error = Some(format!("flush failed: {e}"));
        db.publish_pressure(&state);
        return;
    }
    state.imm.pop_front();
    for slot in imm.mems.slots() {
        db.install_super_version(&state, slot.keyspace);
    }
    let secs = start.elapsed().as_secs_f64().max(1e-6);
    let rate = imm.mems.approximate_memory_usage() as f64 / secs;
    state.flush_bytes_per_sec = 0.7 * state.flush_bytes_per_sec + 0.3 * rate;
    db.publish_pressure(&state);
    db.tune_rate_limit(&mut state);
    Stats::add(&db.stats.flushes, 1);
    Stats::add(&db.stats.flush_micros, start.elapsed().as_micros() as u64);
    drop(state);
    // The memtable is durable in an SSTable: its WAL is garbage now. A failed delete only
    // leaves a file that the next open removes. Closing it (an unmap, a truncate) is this
    // thread's work, not a writer's or a reader's.
    let _ = db.fs.remove(&wal_path(&db.dir, imm.wal_id));
    drop(lock(&imm.wal).take());
}

/// Write the whole of `mem`, of keyspace `keyspace`, to SSTable `id`. Returns `None` for
/// a memtable with nothing to write: no entry, and no range tombstone that covers a key
/// (`delete_range(k, k)` covers none).
#[expect(
    clippy::too_many_arguments,
    reason = "each is a distinct input of the build"
)]
pub(crate) fn write_table(
    fs: &dyn FileSystem,
    dir: &Path,
    opts: &Options,
    tables: &Arc<TableCache>,
    limiter: Option<&Arc<RateLimiter>>,
    mem: &Arc<MemTable>,
    keyspace: KeyspaceId,
    id: FileId,
) -> Result<Option<TableFile>> {
    let tombstones = mem
        .range_dels()
        .map(|set| set.tombstones())
        .unwrap_or_default();
    if !mem.has_points() && tombstones.is_empty() {
        return Ok(None);
    }
    let path = table_path(dir, id);
    let mut file = fs.create(&path)?;
    if let Some(limiter) = limiter {
        file = Box::new(RateLimitedFile::new(file, Arc::clone(limiter)));
    }
    let mut builder = TableBuilder::new(file, path.clone(), TableOptions::for_level(opts, 0));
    let mut it = mem.iter();
    it.seek_to_first()?;
    while it.valid() {
        builder.add(it.key(), it.value())?;
        it.next()?;
    }
    builder.add_range_dels(tombstones);
    let summary = builder.finish()?;
    let meta = FileMeta::from_summary(id, keyspace, summary);
    debug_assert!(key::compare_internal(meta.smallest.encoded(), meta.largest.encoded()).is_le());
    let file = TableFile::new(meta, Arc::clone(tables));
    file.table()?; // open (and so verify) what was just written
    Ok(Some(file))
}

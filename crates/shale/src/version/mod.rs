//! The version set: which SSTables are live, at which level, and the MANIFEST that logs
//! every change to that set.
//!
//! A [`Version`] is an immutable snapshot of the live files. Readers hold an `Arc<Version>`
//! and never lock it; a flush or compaction builds a new `Version` from the current one and
//! a [`VersionEdit`], logs the edit to the manifest, and installs the result.
//!
//! Invariants:
//! 1. L0 files are ordered newest first (by largest sequence number, then file id); their key
//!    ranges may overlap.
//! 2. Files of L1 and deeper are ordered by smallest key and do not overlap.

mod edit;
mod manifest;
mod set;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

pub use edit::{FileId, FileMeta, Level, VersionEdit, NUM_LEVELS};
pub use manifest::{
    manifest_name, parse_manifest_name, read_current, set_current, RecoveredManifest,
    CURRENT as CURRENT_FILE,
};
pub use set::VersionSet;

use crate::error::Result;
use crate::key::{self, SeqNo, ValueKind};
use crate::perf::Timer;
use crate::sst::filter::FilterKey;
use crate::sst::Table;
use crate::sync::Trend;
use crate::table_cache::{TableCache, TableRef};

/// What a point read through a version did, for statistics.
#[derive(Debug, Clone, Copy, Default)]
pub struct GetCounters {
    /// Tables skipped because their bloom filter ruled the key out.
    pub bloom_useful: u64,
}

impl FileMeta {
    /// The manifest entry of table `id`, from what its builder reported.
    pub fn from_summary(id: FileId, summary: crate::sst::TableSummary) -> FileMeta {
        FileMeta {
            id,
            size: summary.file_size,
            smallest: summary.smallest,
            largest: summary.largest,
            smallest_seq: summary.smallest_seq,
            largest_seq: summary.largest_seq,
        }
    }
}

/// A live SSTable: its manifest entry, and the table cache that opens its reader.
#[derive(Debug)]
pub struct TableFile {
    pub meta: FileMeta,
    tables: Arc<TableCache>,
    /// The open reader, when the table cache had a pin to give it (see `table_cache.rs`):
    /// held until this file leaves the tree.
    pinned: OnceLock<Arc<Table>>,
    /// Set when a compaction has replaced this file: it is deleted once no version lists
    /// it any more (when the last `Arc` drops).
    obsolete: AtomicBool,
}

impl TableFile {
    pub(crate) fn new(meta: FileMeta, tables: Arc<TableCache>) -> TableFile {
        TableFile {
            meta,
            tables,
            pinned: OnceLock::new(),
            obsolete: AtomicBool::new(false),
        }
    }

    pub(crate) fn pinned_table(&self) -> Option<&Arc<Table>> {
        self.pinned.get()
    }

    /// Hold `table` until this file drops. Returns the table held and whether it is
    /// `table`: if another reader pinned one first, that one is kept and `table` dropped.
    pub(crate) fn pin(&self, table: Arc<Table>) -> (&Arc<Table>, bool) {
        let mut ours = false;
        let pinned = self.pinned.get_or_init(|| {
            ours = true;
            table
        });
        (pinned, ours)
    }

    /// The current version no longer lists this file: delete it once older versions,
    /// and the readers using them, are gone too.
    pub(crate) fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
    }

    /// The table's reader, opened (or found open) in the table cache.
    ///
    /// # Errors
    /// As `TableCache::get`: `Io` if the file cannot be opened, `Corruption` if it is
    /// damaged.
    pub fn table(&self) -> Result<Arc<Table>> {
        self.tables.get(self).map(TableRef::into_owned)
    }

    /// [`TableFile::table`], lent for one read: a pinned table costs no reference count.
    ///
    /// # Errors
    /// As `TableCache::get`: `Io` if the file cannot be opened, `Corruption` if it is
    /// damaged.
    pub fn table_ref(&self) -> Result<TableRef<'_>> {
        self.tables.get(self)
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        // Close the table before its file may be deleted.
        if let Some(table) = self.pinned.take() {
            self.tables.unpinned(&table);
        }
        if self.obsolete.load(Ordering::Acquire) {
            // A failed delete leaves a file that the next open removes.
            self.tables.retire(self.meta.id);
        }
    }
}

/// An immutable set of live files.
#[derive(Debug, Default)]
pub struct Version {
    levels: [Vec<Arc<TableFile>>; NUM_LEVELS],
}

impl Version {
    /// Files at `level`, in the order of the invariants above.
    pub fn files(&self, level: usize) -> &[Arc<TableFile>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// Number of live files in all levels.
    pub fn file_count(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// Apply `edit` to this version: drop its deleted files and add `added` (the opened
    /// tables of its new files).
    pub fn apply(&self, edit: &VersionEdit, added: &[(Level, Arc<TableFile>)]) -> Version {
        let mut levels = self.levels.clone();
        for (level, id) in &edit.deleted_files {
            if let Some(files) = levels.get_mut(level.index()) {
                files.retain(|f| f.meta.id != *id);
            }
        }
        for (level, file) in added {
            if let Some(files) = levels.get_mut(level.index()) {
                files.push(Arc::clone(file));
            }
        }
        let mut v = Version { levels };
        v.sort();
        v
    }

    fn sort(&mut self) {
        let [l0, deeper @ ..] = &mut self.levels;
        l0.sort_by_key(|f| std::cmp::Reverse((f.meta.largest_seq, f.meta.id)));
        for files in deeper {
            files.sort_by(|a, b| a.meta.smallest.cmp(&b.meta.smallest));
        }
    }

    /// Build a version from files and their levels.
    pub fn from_files(files: Vec<(Level, Arc<TableFile>)>) -> Version {
        Version::default().apply(&VersionEdit::default(), &files)
    }

    /// The newest entry of `user_key` visible at `snapshot` in the SSTables.
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        fill_cache: bool,
        counters: &mut GetCounters,
    ) -> Result<Option<(ValueKind, Vec<u8>)>> {
        let filter_key = FilterKey::new(user_key);
        // The filters of the tables ahead are in memory but rarely in the CPU's caches:
        // start loading every one's lines first, so that their misses overlap instead of
        // following each other (a key in L1 under three L0 tables waits once, not four
        // times). Only pinned tables: the others would pay a table cache lookup twice.
        let mut last = None;
        for file in self.candidates(user_key, snapshot) {
            if let Some(table) = file.pinned_table() {
                table.prefetch_filter(filter_key);
            }
            last = Some(file);
        }
        // The last table holds most of the data. If this thread's recent gets got past
        // its filter, this one likely will too: start loading the index words and block
        // handles its search reads, so that they arrive with the filter's lines.
        let last_pinned = last.and_then(TableFile::pinned_table);
        if let (Some(table), true) = (last_pinned, LAST_FILTER_PASSES.with(Trend::likely)) {
            table.prefetch_index(user_key);
        }
        for file in self.candidates(user_key, snapshot) {
            let table = file.table_ref()?;
            let filter = Timer::start();
            let may_contain = table.may_contain_key(filter_key);
            filter.stop(|p| &mut p.get_filter_nanos);
            if last.is_some_and(|last| std::ptr::eq(last, file)) {
                LAST_FILTER_PASSES.with(|t| t.record(may_contain));
            }
            if !may_contain {
                counters.bloom_useful += 1;
                crate::perf::count(|p| &mut p.bloom_useful, 1);
                continue;
            }
            if let Some(found) = table.get_unfiltered(user_key, snapshot, fill_cache)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// The tables that may hold `user_key` at `snapshot`, in the order a point read
    /// consults them: every L0 table whose range covers it, newest first, then at most one
    /// table of each deeper level.
    fn candidates<'a>(
        &'a self,
        user_key: &'a [u8],
        snapshot: SeqNo,
    ) -> impl Iterator<Item = &'a TableFile> + 'a {
        let level0 = self
            .files(0)
            .iter()
            .filter(move |f| f.meta.smallest_seq <= snapshot && file_covers(&f.meta, user_key));
        let deeper = (1..NUM_LEVELS).filter_map(move |level| {
            let files = self.files(level);
            // The first file whose largest key is >= user_key.
            let i = files.partition_point(|f| f.meta.largest.user_key() < user_key);
            files.get(i).filter(|f| file_covers(&f.meta, user_key))
        });
        level0.chain(deeper).map(AsRef::as_ref)
    }
}

thread_local! {
    /// Whether this thread's recent point reads that reached the last candidate table got
    /// past its filter. Gets of present keys gain from loading that table's index early
    /// (with its filter); gets of missing keys would only pay for it (a search of the
    /// index's top words and up to eight cache lines of bandwidth), so they stop asking
    /// for it after two rejections in a row.
    static LAST_FILTER_PASSES: Trend = const { Trend::new() };
}

fn file_covers(meta: &FileMeta, user_key: &[u8]) -> bool {
    key::user_key(meta.smallest.encoded()) <= user_key
        && user_key <= key::user_key(meta.largest.encoded())
}

//! The version set: which SSTables are live, at which level, and the MANIFEST that logs
//! every change to that set.
//!
//! A [`Version`] is an immutable snapshot of the live files. Readers hold an `Arc<Version>`
//! and never lock it; a flush or compaction builds a new `Version` from the current one and
//! a [`VersionEdit`], logs the edit to the manifest, and installs the result.
//!
//! The version set also owns what follows from it: the readers of its files (the table
//! cache, `table_cache.rs`), the iterator over one level's files (`level_iter.rs`), and the
//! deletion of files no version refers to any more (`purge.rs`).
//!
//! Invariants:
//! 1. L0 files are ordered newest first (by largest sequence number, then file id); their key
//!    ranges may overlap.
//! 2. Files of L1 and deeper are ordered by smallest key and do not overlap.

mod edit;
mod keyspace;
mod level_iter;
pub(crate) mod manifest;
pub(crate) mod purge;
mod set;
pub(crate) mod table_cache;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

pub use crate::filename::{manifest_name, CURRENT as CURRENT_FILE};
pub use edit::{FileId, FileMeta, Level, VersionEdit, NUM_LEVELS};
pub use keyspace::KeyspaceDef;
pub use level_iter::LevelIter;
pub use manifest::{read_current, RecoveredManifest};
pub use set::VersionSet;

use crate::error::Result;
use crate::key::{self, SeqNo};
use crate::perf::Timer;
use crate::range_del::RangeDels;
use crate::sst::block::RestartWords;
use crate::sst::filter::FilterKey;
use crate::sst::PointEntry;
use crate::sst::Table;
use crate::trend::Trend;
use table_cache::{TableCache, TablePin, TableRef};

/// What a point read through a version did, for statistics.
#[derive(Debug, Clone, Copy, Default)]
pub struct GetCounters {
    /// Tables skipped because their bloom filter ruled the key out.
    pub bloom_useful: u64,
}

impl FileMeta {
    /// The manifest entry of table `id` of keyspace `keyspace`, from what its builder
    /// reported.
    pub fn from_summary(
        id: FileId,
        keyspace: crate::keyspace::KeyspaceId,
        summary: crate::sst::TableSummary,
    ) -> FileMeta {
        FileMeta {
            id,
            keyspace,
            size: summary.file_size,
            smallest: summary.smallest,
            largest: summary.largest,
            smallest_seq: summary.smallest_seq,
            largest_seq: summary.largest_seq,
            range_dels: summary.range_deletions > 0,
        }
    }
}

/// A live SSTable: its manifest entry, and the table cache that opens its reader.
#[derive(Debug)]
pub struct TableFile {
    pub meta: FileMeta,
    tables: Arc<TableCache>,
    /// The open reader, when the table cache had a pin to give it: held until this file
    /// leaves the tree.
    pin: TablePin,
    /// Set when a compaction has replaced this file: it is deleted once no version lists
    /// it any more (when the last `Arc` drops).
    obsolete: AtomicBool,
}

impl TableFile {
    pub(crate) fn new(meta: FileMeta, tables: Arc<TableCache>) -> TableFile {
        TableFile {
            meta,
            tables,
            pin: TablePin::default(),
            obsolete: AtomicBool::new(false),
        }
    }

    pub(crate) fn pinned_table(&self) -> Option<&Arc<Table>> {
        self.pin.table()
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
        self.table_ref().map(TableRef::into_owned)
    }

    /// [`TableFile::table`], lent for one read: a pinned table costs no reference count.
    ///
    /// # Errors
    /// As `TableCache::get`: `Io` if the file cannot be opened, `Corruption` if it is
    /// damaged.
    pub fn table_ref(&self) -> Result<TableRef<'_>> {
        self.tables.get(self.meta.id, self.meta.size, &self.pin)
    }
}

impl Drop for TableFile {
    fn drop(&mut self) {
        // Close the table before its file may be deleted.
        self.tables.unpin(&mut self.pin);
        if self.obsolete.load(Ordering::Acquire) {
            // A failed delete leaves a file that the next open removes.
            self.tables.retire(self.meta.id);
        }
    }
}

/// The fewest files a level needs for its largest keys to be summarised in words: in a
/// smaller level the few steps of a binary search over the files' keys stay in the CPU's
/// caches, and searching words first only adds work.
const WORDS_MIN_FILES: usize = 64;

/// An immutable set of live files.
#[derive(Debug, Default)]
pub struct Version {
    levels: [Vec<Arc<TableFile>>; NUM_LEVELS],
    /// For each level from 1 on with `WORDS_MIN_FILES` files or more, its files' largest
    /// user keys in brief (see `RestartWords`; empty for the others). A point read's
    /// search for its file in a level runs over these, contiguous in memory, and compares
    /// whole keys only where words tie: a binary search over the files themselves reaches
    /// each key through two pointers, two cache misses a step on a level of thousands of
    /// files.
    largest_words: [RestartWords; NUM_LEVELS],
    /// Whether any file holds range tombstones.
    has_range_dels: bool,
    /// The range tombstones of every file, fragmented, once a reader asked.
    range_dels: OnceLock<Arc<RangeDels>>,
}

impl Version {
    /// Files at `level`, in the order of the invariants above.
    pub fn files(&self, level: usize) -> &[Arc<TableFile>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// Apply `edit` to this version: drop its deleted files and add `added` (the opened
    /// tables of its new files). Levels the edit does not touch keep their order and
    /// their words.
    pub fn apply(&self, edit: &VersionEdit, added: &[(Level, Arc<TableFile>)]) -> Version {
        let mut v = Version {
            levels: self.levels.clone(),
            ..Version::default()
        };
        let mut changed = [false; NUM_LEVELS];
        for (level, id) in &edit.deleted_files {
            let i = level.index();
            if let (Some(files), Some(c)) = (v.levels.get_mut(i), changed.get_mut(i)) {
                files.retain(|f| f.meta.id != *id);
                *c = true;
            }
        }
        for (level, file) in added {
            let i = level.index();
            if let (Some(files), Some(c)) = (v.levels.get_mut(i), changed.get_mut(i)) {
                files.push(Arc::clone(file));
                *c = true;
            }
        }
        v.sort(&changed);
        v.has_range_dels = v.levels.iter().flatten().any(|f| f.meta.range_dels);
        for (level, words) in v.largest_words.iter_mut().enumerate().skip(1) {
            *words = match (changed.get(level), self.largest_words.get(level)) {
                (Some(false), Some(unchanged)) => unchanged.clone(),
                _ => match v.levels.get(level) {
                    Some(files) if files.len() >= WORDS_MIN_FILES => {
                        RestartWords::from_sorted(files.iter().map(|f| f.meta.largest.user_key()))
                    }
                    _ => RestartWords::default(),
                },
            };
        }
        v
    }

    /// Put each `changed` level in the order of the invariants above (the others are
    /// still in it, as in the version they were copied from).
    fn sort(&mut self, changed: &[bool; NUM_LEVELS]) {
        let [l0, deeper @ ..] = &mut self.levels;
        if changed[0] {
            l0.sort_by_key(|f| std::cmp::Reverse((f.meta.largest_seq, f.meta.id)));
        }
        for (files, _) in deeper.iter_mut().zip(&changed[1..]).filter(|(_, &c)| c) {
            files.sort_by(|a, b| a.meta.smallest.cmp(&b.meta.smallest));
        }
    }

    /// The range tombstones of every file, fragmented (built at the first call); `None`
    /// when no file has any.
    ///
    /// # Errors
    /// As [`TableFile::table`], opening a table with tombstones.
    pub fn range_dels(&self) -> Result<Option<Arc<RangeDels>>> {
        if !self.has_range_dels {
            return Ok(None);
        }
        if let Some(built) = self.range_dels.get() {
            return Ok(Some(Arc::clone(built)));
        }
        let mut tombstones = Vec::new();
        for file in self.levels.iter().flatten().filter(|f| f.meta.range_dels) {
            if let Some(set) = file.table_ref()?.range_dels() {
                tombstones.extend(set.tombstones());
            }
        }
        let built = self
            .range_dels
            .get_or_init(|| Arc::new(RangeDels::new(&tombstones)));
        Ok(Some(Arc::clone(built)))
    }

    /// The first file of `level` (1 or deeper) whose range reaches `user_key`.
    fn first_reaching(&self, level: usize, user_key: &[u8]) -> Option<&Arc<TableFile>> {
        let files = self.files(level);
        let below = |f: &Arc<TableFile>| ends_before(&f.meta, user_key);
        if files.len() < WORDS_MIN_FILES {
            return files.get(files.partition_point(below));
        }
        let words = self.largest_words.get(level)?;
        debug_assert_eq!(words.count(), files.len());
        // Files before `lo` end below `user_key`, those from `hi` on above it.
        let (lo, hi) = words.bounds(user_key);
        let i = match files.get(lo..hi) {
            Some(tied) => lo + tied.partition_point(below),
            None => files.partition_point(below),
        };
        files.get(i)
    }

    /// Build a version from files and their levels.
    pub fn from_files(files: Vec<(Level, Arc<TableFile>)>) -> Version {
        Version::default().apply(&VersionEdit::default(), &files)
    }

    /// The newest point entry of `user_key` visible at `snapshot` in the SSTables, with its
    /// sequence number. Range tombstones are not consulted: see [`Version::range_dels`].
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        fill_cache: bool,
        counters: &mut GetCounters,
    ) -> Result<Option<PointEntry>> {
        let filter_key = FilterKey::new(user_key);
        // The filters of the tables ahead are in memory but rarely in the CPU's caches:
        // start loading every one's lines first, so that their misses overlap instead of
        // following each other (a key in L1 under three L0 tables waits once, not four
        // times). Only pinned tables: the others would pay a table cache lookup twice.
        let deeper = self.deeper_candidates(user_key);
        let mut last = None;
        for file in self.candidates(user_key, snapshot, &deeper) {
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
        for file in self.candidates(user_key, snapshot, &deeper) {
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
    /// consults them: every L0 table whose range covers it, newest first, then `deeper`
    /// (from [`Version::deeper_candidates`], found once for both of a get's passes).
    fn candidates<'a>(
        &'a self,
        user_key: &'a [u8],
        snapshot: SeqNo,
        deeper: &'a [Option<&'a TableFile>],
    ) -> impl Iterator<Item = &'a TableFile> + 'a {
        let level0 = self
            .files(0)
            .iter()
            .filter(move |f| f.meta.smallest_seq <= snapshot && file_covers(&f.meta, user_key))
            .map(AsRef::as_ref);
        level0.chain(deeper.iter().flatten().copied())
    }

    /// The one table of each level from 1 on whose range covers `user_key`, if any.
    fn deeper_candidates(&self, user_key: &[u8]) -> [Option<&TableFile>; NUM_LEVELS - 1] {
        std::array::from_fn(|i| {
            self.first_reaching(i + 1, user_key)
                .filter(|f| file_covers(&f.meta, user_key))
                .map(AsRef::as_ref)
        })
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

/// Whether `user_key` lies within the file's key range.
fn file_covers(meta: &FileMeta, user_key: &[u8]) -> bool {
    key::compare_bytes(key::user_key(meta.smallest.encoded()), user_key).is_le()
        && !ends_before(meta, user_key)
}

/// Whether the file's key range ends before `user_key`: its largest user key is smaller,
/// or equal but only as the exclusive end of a range tombstone.
fn ends_before(meta: &FileMeta, user_key: &[u8]) -> bool {
    match key::compare_bytes(meta.largest.user_key(), user_key) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Equal => meta.largest.is_range_end(),
        std::cmp::Ordering::Greater => false,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::{TableFile, Version};
    use crate::fs::MemFs;
    use crate::key::{InternalKey, SeqNo, ValueKind};
    use crate::sst::BlockCache;
    use crate::version::edit::{FileId, FileMeta, Level, VersionEdit};
    use crate::version::table_cache::TableCache;

    fn file(tables: &Arc<TableCache>, id: u64, smallest: &str, largest: &str) -> Arc<TableFile> {
        let key = |k: &str| InternalKey::new(k.as_bytes(), SeqNo(id), ValueKind::Put);
        let meta = FileMeta {
            id: FileId(id),
            keyspace: crate::keyspace::KeyspaceId::DEFAULT,
            size: 1,
            smallest: key(smallest),
            largest: key(largest),
            smallest_seq: SeqNo(id),
            largest_seq: SeqNo(id),
            range_dels: false,
        };
        Arc::new(TableFile::new(meta, Arc::clone(tables)))
    }

    /// The file search over the largest keys' words finds what a binary search over the
    /// keys finds, where words tie (keys that agree on 8 bytes past the shared prefix)
    /// and where they do not, before the keys' shared prefix and after it, and after
    /// edits that change one level and leave others as they were.
    #[test]
    fn the_file_search_by_words_matches_a_binary_search_over_the_keys() {
        let tables = Arc::new(TableCache::new(
            Arc::new(MemFs::new()),
            PathBuf::from("/db"),
            Arc::new(BlockCache::new(1 << 20, 4096)),
            64,
            false,
            Arc::default(),
        ));
        // Level 1: 600 files. Past their shared `table/0`, the keys' words (8 bytes) tie
        // in runs of 25 files and differ between runs. Level 2: a few files of other keys.
        let name = |i: u64| format!("table/{:03}/--------/{:06}", i / 50, i);
        let mut files: Vec<_> = (0..600)
            .map(|i| {
                (
                    Level(1),
                    file(&tables, i + 1, &name(2 * i), &name(2 * i + 1)),
                )
            })
            .collect();
        files.extend((0..3).map(|i| {
            (
                Level(2),
                file(&tables, 1000 + i, &format!("a{i}"), &format!("b{i}")),
            )
        }));
        let version = Version::from_files(files);
        let delete = |v: &Version, level, id| {
            let edit = VersionEdit {
                deleted_files: vec![(Level(level), FileId(id))],
                ..VersionEdit::default()
            };
            v.apply(&edit, &[])
        };
        // Level 1 unchanged (its words kept), then changed (its words built again).
        let level2_edited = delete(&version, 2, 1001);
        let level1_edited = delete(&level2_edited, 1, 300);
        let mut probes: Vec<String> = (0..1210).map(name).collect();
        probes.extend(["", "a", "b1", "table/", "table/1", "tablf", "z"].map(String::from));
        for v in [&version, &level2_edited, &level1_edited] {
            for level in 1..3 {
                for probe in &probes {
                    let files = v.files(level);
                    let want =
                        files.partition_point(|f| f.meta.largest.user_key() < probe.as_bytes());
                    let got = v.first_reaching(level, probe.as_bytes());
                    assert_eq!(
                        got.map(|f| f.meta.id),
                        files.get(want).map(|f| f.meta.id),
                        "{probe}"
                    );
                }
            }
        }
        let (lo, hi) = version.largest_words[1].bounds(name(101).as_bytes());
        assert_eq!((lo, hi), (50, 75), "a run of 25 tied words");
        assert_eq!(level1_edited.largest_words[1].count(), 599);
        // Too few files at level 2 for words: a plain binary search serves it.
        assert_eq!(level2_edited.files(2).len(), 2);
        assert_eq!(level2_edited.largest_words[2].count(), 0);
    }
}

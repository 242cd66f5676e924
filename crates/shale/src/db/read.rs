//! The read path: memtable, frozen memtables newest first, then the SSTables; and the
//! iterators that merge all of them.

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::state::DbInner;
use super::super_version::SuperVersion;
use super::tree::Tree;
use crate::error::Result;
use crate::iter::{DbIter, InternalIterator, MergingIter};
use crate::key::{SeqNo, ValueKind};
use crate::options::ReadOptions;
use crate::perf::Timer;
use crate::range_del::RangeDels;
use crate::version::LevelIter;
use crate::version::NUM_LEVELS;

/// The merged internal iterator under a [`DbIterator`].
type Merged = MergingIter<Box<dyn InternalIterator + Send>>;

/// An ordered cursor over the database at one snapshot, created by
/// [`crate::Db::iter`]. Move it with `seek*`, `next`, `prev`; read `key`/`value` while
/// `valid()`. It keeps the memtables and files it reads alive until it is dropped.
pub struct DbIterator {
    inner: DbIter<Merged>,
}

impl DbIterator {
    pub fn valid(&self) -> bool {
        self.inner.valid()
    }
    /// Position at the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()
    }
    /// Position at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()
    }
    /// Position at the first key `>= target`.
    pub fn seek(&mut self, target: impl AsRef<[u8]>) -> Result<()> {
        self.inner.seek(target.as_ref())
    }
    /// Position at the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: impl AsRef<[u8]>) -> Result<()> {
        self.inner.seek_for_prev(target.as_ref())
    }
    #[allow(
        clippy::should_implement_trait,
        reason = "a cursor, like RocksDB's raw iterator: next() moves it and yields nothing"
    )]
    pub fn next(&mut self) -> Result<()> {
        self.inner.next()
    }
    pub fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }
    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        self.inner.key()
    }
    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

/// A Rust [`Iterator`] over `(key, value)` pairs of a range, forward or reverse.
pub struct RangeIter {
    cursor: DbIterator,
    started: bool,
    reverse: bool,
    failed: bool,
}

impl RangeIter {
    /// Iterate from the other end instead: from the last key backwards (or, reversed
    /// again, from the first key forwards). It starts over from that end even if items
    /// were already taken.
    pub fn rev(mut self) -> Self {
        self.reverse = !self.reverse;
        self.started = false;
        self
    }
}

impl Iterator for RangeIter {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let moved = match (self.started, self.reverse) {
            (false, false) => self.cursor.seek_to_first(),
            (false, true) => self.cursor.seek_to_last(),
            (true, false) => self.cursor.next(),
            (true, true) => self.cursor.prev(),
        };
        self.started = true;
        if let Err(e) = moved {
            self.failed = true;
            return Some(Err(e));
        }
        self.cursor
            .valid()
            .then(|| Ok((self.cursor.key().to_vec(), self.cursor.value().to_vec())))
    }
}

/// The smallest key greater than every key starting with `prefix`, if one exists: the
/// exclusive end of a prefix's range.
///
/// ```
/// use shale::prefix_successor;
/// assert_eq!(prefix_successor(b"ab"), Some(b"ac".to_vec()));
/// assert_eq!(prefix_successor(b"a\xff"), Some(b"b".to_vec()));
/// assert_eq!(prefix_successor(b"\xff\xff"), None);
/// assert_eq!(prefix_successor(b""), None);
/// ```
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// Bounds of a `RangeBounds` as (inclusive lower, exclusive upper).
pub(crate) fn to_bounds<K: AsRef<[u8]>>(
    range: &impl RangeBounds<K>,
) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let lower = match range.start_bound() {
        Bound::Included(k) => Some(k.as_ref().to_vec()),
        Bound::Excluded(k) => {
            let mut v = k.as_ref().to_vec();
            v.push(0); // the smallest key after k
            Some(v)
        }
        Bound::Unbounded => None,
    };
    let upper = match range.end_bound() {
        Bound::Included(k) => {
            let mut v = k.as_ref().to_vec();
            v.push(0);
            Some(v)
        }
        Bound::Excluded(k) => Some(k.as_ref().to_vec()),
        Bound::Unbounded => None,
    };
    (lower, upper)
}

impl DbInner {
    fn read_seq(&self, opts: &ReadOptions<'_>) -> SeqNo {
        match opts.snapshot {
            Some(s) => s.seq(),
            None => SeqNo(self.visible_seq.load(Ordering::Acquire)),
        }
    }

    pub(crate) fn get(
        &self,
        tree: &Tree,
        key: &[u8],
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>> {
        self.check_tree(tree)?;
        self.stats.gets.add(1);
        // The super version first, then the sequence number (RocksDB's order). The other
        // way round, a flush and a compaction could run in between, keep only a version
        // newer than the sequence number read, and drop the one it should see.
        let sv = tree.super_version.pin();
        let snapshot = self.read_seq(opts);
        self.get_in(&sv, snapshot, key, opts.fill_cache)
    }

    /// The values of `keys`, in the caller's order, all read at one sequence number
    /// under one pinned super version. The keys are looked up in sorted order, so that
    /// neighbours find their index and data blocks just read; a key given twice is
    /// looked up once.
    pub(crate) fn multi_get<K: AsRef<[u8]>>(
        &self,
        tree: &Tree,
        keys: &[K],
        opts: &ReadOptions<'_>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        self.check_tree(tree)?;
        self.stats.gets.add(keys.len() as u64);
        let sv = tree.super_version.pin();
        let snapshot = self.read_seq(opts);
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            let key = |i: usize| keys.get(i).map(AsRef::as_ref);
            key(a).cmp(&key(b))
        });
        let mut values = vec![None; keys.len()];
        let mut last: Option<(&[u8], usize)> = None;
        for i in order {
            let Some(key) = keys.get(i).map(AsRef::as_ref) else {
                continue;
            };
            let value = match last {
                Some((previous, at)) if previous == key => values.get(at).cloned().flatten(),
                _ => self.get_in(&sv, snapshot, key, opts.fill_cache)?,
            };
            if let Some(slot) = values.get_mut(i) {
                *slot = value;
            }
            last = Some((key, i));
        }
        Ok(values)
    }

    /// `key` as of `snapshot` in the sources of `sv`: memtables newest first, then the
    /// SSTables. The first point entry found decides, unless a range tombstone newer than
    /// it covers the key (see `range_del.rs`): tombstones from every source read so far
    /// are weighed, and the SSTables' all at once.
    fn get_in(
        &self,
        sv: &SuperVersion,
        snapshot: SeqNo,
        key: &[u8],
        fill_cache: bool,
    ) -> Result<Option<Vec<u8>>> {
        let in_memory = Timer::start();
        let mut range_deleted: Option<SeqNo> = None;
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            if let Some(set) = mem.range_dels() {
                range_deleted = range_deleted.max(set.covering(key, snapshot));
            }
            if let Some((kind, seq, value)) = mem.get_entry(key, snapshot) {
                in_memory.stop(|p| &mut p.get_memtable_nanos);
                return Ok(self
                    .visible(kind, seq, range_deleted, value)
                    .map(<[u8]>::to_vec));
            }
        }
        in_memory.stop(|p| &mut p.get_memtable_nanos);
        if let Some(set) = sv.version.range_dels()? {
            range_deleted = range_deleted.max(set.covering(key, snapshot));
        }
        let mut counters = crate::version::GetCounters::default();
        let found = sv.version.get(key, snapshot, fill_cache, &mut counters)?;
        if counters.bloom_useful > 0 {
            self.stats.bloom_useful.add(counters.bloom_useful);
        }
        Ok(found.and_then(|(kind, seq, value)| self.visible(kind, seq, range_deleted, value)))
    }

    /// The value of a point entry found by a read, unless it is a delete or a range
    /// tombstone at `range_deleted` is newer.
    fn visible<V: AsRef<[u8]>>(
        &self,
        kind: ValueKind,
        seq: SeqNo,
        range_deleted: Option<SeqNo>,
        value: V,
    ) -> Option<V> {
        if kind != ValueKind::Put || range_deleted.is_some_and(|t| t > seq) {
            return None;
        }
        self.stats.bytes_read.add(value.as_ref().len() as u64);
        Some(value)
    }

    pub(crate) fn iter(&self, tree: &Tree, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        self.check_tree(tree)?;
        // As in `get`: the super version before the sequence number.
        let sv = tree.super_version.load();
        let snapshot = self.read_seq(opts);
        let merged = MergingIter::new(internal_iters(&sv, opts.fill_cache)?);
        let inner = DbIter::new(
            merged,
            snapshot,
            opts.lower_bound.clone(),
            opts.upper_bound.clone(),
        );
        Ok(DbIterator {
            inner: inner.with_range_dels(range_dels(&sv)?),
        })
    }

    /// The pairs of `tree` whose key starts with `prefix`.
    pub(crate) fn prefix_iter(
        &self,
        tree: &Tree,
        prefix: &[u8],
        opts: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        let upper = prefix_successor(prefix);
        self.range_iter(tree, opts, Some(prefix.to_vec()), upper)
    }

    pub(crate) fn range_iter(
        &self,
        tree: &Tree,
        opts: &ReadOptions<'_>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> Result<RangeIter> {
        let opts = ReadOptions {
            lower_bound: lower,
            upper_bound: upper,
            ..opts.clone()
        };
        Ok(RangeIter {
            cursor: self.iter(tree, &opts)?,
            started: false,
            reverse: false,
            failed: false,
        })
    }
}

/// The range tombstones of every source of a super version; `None` if there are none.
fn range_dels(sv: &SuperVersion) -> Result<Option<Arc<RangeDels>>> {
    let mut sets: Vec<Arc<RangeDels>> = std::iter::once(&sv.mem)
        .chain(sv.imm.iter())
        .filter_map(|mem| mem.range_dels())
        .collect();
    sets.extend(sv.version.range_dels()?);
    Ok(match sets.len() {
        0 | 1 => sets.pop(),
        _ => {
            let tombstones: Vec<_> = sets.iter().flat_map(|s| s.tombstones()).collect();
            Some(Arc::new(RangeDels::new(&tombstones)))
        }
    })
}

/// One internal iterator per source of a super version, newest source first.
fn internal_iters(
    sv: &SuperVersion,
    fill_cache: bool,
) -> Result<Vec<Box<dyn InternalIterator + Send>>> {
    let mut iters: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
    for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        iters.push(Box::new(mem.iter()));
    }
    for file in sv.version.files(0) {
        iters.push(Box::new(file.table()?.iter_opt(fill_cache)));
    }
    for level in 1..NUM_LEVELS {
        let files = sv.version.files(level);
        if !files.is_empty() {
            iters.push(Box::new(LevelIter::new(files.to_vec(), fill_cache)));
        }
    }
    Ok(iters)
}

//! The compaction policy: pure functions of the tree's shape.
//!
//! Level targets are sized from the bottom up (RocksDB's `level_compaction_dynamic_level_
//! bytes`): the last level holds what it holds, each level above it targets a
//! `level_size_multiplier`-th of the one below, and levels whose target would fall under
//! `max_bytes_for_level_base` stay empty. The first used level is the *base level*; L0
//! compacts straight into it. So the last level always holds most of the data and space
//! amplification stays near `1 + 1/multiplier`, however much data there is. (With fixed
//! targets counted from L1, a data set just past a level's target leaves a small last
//! level under full upper ones, each holding stale copies.)
//!
//! ```text
//!   base 1 MiB, multiplier 4, 40 MiB below L0:
//!   L1 L2 L3 | L4        L5       L6
//!   unused   | 2.5 MiB   10 MiB   the rest      <- targets; L0 compacts into L4
//! ```
//!
//! Each level has a score: L0's is its file count over `level0_compaction_trigger`
//! (overlapping files cost every read a probe), other levels' is their size over their
//! target; the last level has none. The level with the highest score >= 1 is compacted:
//! - from L0, every L0 file plus the base-level files they overlap, into the base level;
//! - from Ln, one file (round-robin through the key space, as LevelDB's compaction pointer
//!   does, so every key range gets its turn) plus the files of Ln+1 it overlaps.
//!   A level above the sized base level that still holds data (the last level shrank
//!   after deletions) is drained the same way, and until it is empty it is the base level:
//!   L0 never compacts past a level holding data, which is older than L0's.
//!
//! A single file from Ln (n >= 1) that overlaps nothing in Ln+1 is moved, not rewritten.
//! Files already in a running compaction are never picked again, at most one L0
//! compaction runs at a time, and no task writes into a level a key range that a running
//! task writes into it ([`InFlight`]). Disjoint inputs alone do not ensure that: a manual
//! rewrite of the last level in place spans the gaps between its files, where a file
//! moving down from the level above may land. So the input sets of concurrent tasks are
//! disjoint, and so are the ranges they write into each level.

use crate::version::{FileId, NUM_LEVELS};

/// What the policy needs to know about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelFile<'a> {
    pub id: FileId,
    pub size: u64,
    pub smallest: &'a [u8],
    pub largest: &'a [u8],
}

/// What running compactions hold, which a new task must stay clear of.
pub trait InFlight {
    /// `id` is an input of a running compaction.
    fn busy(&self, id: FileId) -> bool;
    /// A running compaction writes into `level` a key range that overlaps
    /// `[smallest, largest]` (user keys). Two tasks writing overlapping ranges into one
    /// level would leave overlapping files there, which a get's one-file-per-level search
    /// cannot read (RocksDB's `RangeOverlapWithCompaction`).
    fn writes_into(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool;
}

/// The key ranges running compactions write, by output level.
#[derive(Debug, Default)]
pub struct RunningOutputs {
    ranges: Vec<(usize, Vec<u8>, Vec<u8>)>,
}

impl RunningOutputs {
    /// `task` has started: its outputs will lie within its key range.
    pub fn add(&mut self, task: &CompactionTask) {
        self.ranges.push((
            task.output_level,
            task.smallest.clone(),
            task.largest.clone(),
        ));
    }

    /// `task` has ended.
    pub fn remove(&mut self, task: &CompactionTask) {
        let running = |(l, lo, hi): &(usize, Vec<u8>, Vec<u8>)| {
            *l == task.output_level && *lo == task.smallest && *hi == task.largest
        };
        if let Some(i) = self.ranges.iter().position(running) {
            self.ranges.swap_remove(i);
        }
    }

    pub fn overlap(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
        self.ranges
            .iter()
            .any(|(l, lo, hi)| *l == level && smallest <= hi.as_slice() && lo.as_slice() <= largest)
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// A closure that says which files are busy, with no output ranges held (for callers and
/// tests that track only files).
impl<F: Fn(FileId) -> bool> InFlight for F {
    fn busy(&self, id: FileId) -> bool {
        self(id)
    }
    fn writes_into(&self, _level: usize, _smallest: &[u8], _largest: &[u8]) -> bool {
        false
    }
}

/// The knobs of the policy (taken from `Options`).
#[derive(Debug, Clone, Copy)]
pub struct CompactionPolicy {
    pub level0_trigger: usize,
    pub base_bytes: u64,
    pub multiplier: u32,
    /// `rewrite_into[l]`: level `l` stores another codec than level `l - 1`
    /// (`Options::compression_per_level`, `bottommost_compression`), so a file moving into
    /// it is rewritten, not moved (as RocksDB does when the codecs differ).
    pub rewrite_into: [bool; NUM_LEVELS],
}

/// Files to merge from `level` into `output_level` (the next level, or `level` itself for
/// a manual rewrite of the bottom level).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionTask {
    pub level: usize,
    pub output_level: usize,
    /// Input files of `level`.
    pub inputs: Vec<FileId>,
    /// Input files of `output_level` (when it differs from `level`).
    pub next_inputs: Vec<FileId>,
    /// Move the single input down without rewriting it.
    pub trivial_move: bool,
    /// Smallest and largest user key of all inputs.
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
}

impl CompactionTask {
    pub fn all_inputs(&self) -> impl Iterator<Item = FileId> + '_ {
        self.inputs.iter().chain(&self.next_inputs).copied()
    }
}

impl CompactionPolicy {
    /// The base level (where L0 compacts to) and the target size of every level, from
    /// the size of the last level. Levels above the sized base level target 0.
    ///
    /// The base level is never below a level (other than L0) that still holds data: that
    /// is left above the sized base after the last level shrank (deletions), until it is
    /// drained. Its entries are older than L0's, and a get takes the first level that
    /// holds a key, so L0 compacting past it would let its old versions shadow newer
    /// ones. (RocksDB's base level likewise never goes below the first non-empty level.)
    pub fn targets(&self, levels: &[Vec<LevelFile<'_>>]) -> (usize, [u64; NUM_LEVELS]) {
        let last = NUM_LEVELS - 1;
        let size =
            |l: usize| -> u64 { levels.get(l).map_or(0, |f| f.iter().map(|f| f.size).sum()) };
        // Data reaches the last level first (while it is the base level), so its size is
        // what the levels above are sized from.
        let mut targets = [0u64; NUM_LEVELS];
        let mut t = size(last).max(self.base_bytes);
        let mut base = last;
        if let Some(t) = targets.last_mut() {
            *t = u64::MAX;
        }
        for level in (1..last).rev() {
            t /= u64::from(self.multiplier.max(2));
            if t < self.base_bytes {
                break;
            }
            if let Some(slot) = targets.get_mut(level) {
                *slot = t;
            }
            base = level;
        }
        let first_used = (1..last).find(|&l| size(l) > 0).unwrap_or(last);
        (base.min(first_used), targets)
    }

    /// The score of each level; a level needs compaction when its score is >= 1.
    pub fn scores(&self, levels: &[Vec<LevelFile<'_>>]) -> Vec<f64> {
        let (_, targets) = self.targets(levels);
        levels
            .iter()
            .enumerate()
            .map(|(level, files)| {
                let bytes: u64 = files.iter().map(|f| f.size).sum();
                if level + 1 >= NUM_LEVELS {
                    0.0 // the last level has nowhere to go
                } else if level == 0 {
                    files.len() as f64 / self.level0_trigger.max(1) as f64
                } else if targets.get(level).is_none_or(|&t| t == 0) {
                    // Above the sized base level: drain whatever is left there.
                    if bytes > 0 {
                        1.0
                    } else {
                        0.0
                    }
                } else {
                    let target = targets.get(level).copied().unwrap_or(u64::MAX);
                    bytes as f64 / target.max(1) as f64
                }
            })
            .collect()
    }

    /// The next task, if any level needs one. `busy` tells which files are already being
    /// compacted; `pointers[level]` is the largest key of the last file compacted from that
    /// level (the round-robin position).
    pub fn pick(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        busy: &dyn InFlight,
        pointers: &[Vec<u8>],
    ) -> Option<CompactionTask> {
        let mut order: Vec<(usize, f64)> = self
            .scores(levels)
            .into_iter()
            .enumerate()
            .filter(|&(_, score)| score >= 1.0)
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1));
        order.into_iter().find_map(|(level, _)| {
            if level == 0 {
                self.pick_level0(levels, busy)
            } else {
                let pointer = pointers.get(level).map_or(&[][..], Vec::as_slice);
                self.pick_level(levels, level, busy, pointer)
            }
        })
    }

    /// Every L0 file, plus the base-level files they overlap, into the base level. L0 is
    /// always compacted whole: L0 files are ordered by age, and rewriting a subset of them
    /// into a new file could put an older version of a key ahead of a newer one.
    pub fn pick_level0(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        busy: &dyn InFlight,
    ) -> Option<CompactionTask> {
        let l0 = levels.first()?;
        if l0.is_empty() || l0.iter().any(|f| busy.busy(f.id)) {
            return None; // one L0 compaction at a time
        }
        let (smallest, largest) = bounds(l0.iter())?;
        let (base, _) = self.targets(levels);
        task(
            levels,
            0,
            base,
            l0.iter().collect(),
            smallest,
            largest,
            busy,
        )
    }

    fn pick_level(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        level: usize,
        busy: &dyn InFlight,
        pointer: &[u8],
    ) -> Option<CompactionTask> {
        let files = levels.get(level)?;
        // Start after the pointer, wrap around.
        let start = files.partition_point(|f| !pointer.is_empty() && f.largest <= pointer);
        let order = files.iter().skip(start).chain(files.iter().take(start));
        for file in order {
            if busy.busy(file.id) {
                continue;
            }
            let t = task(
                levels,
                level,
                level + 1,
                vec![file],
                file.smallest,
                file.largest,
                busy,
            );
            if let Some(mut t) = t {
                if self.rewrite_into.get(t.output_level) == Some(&true) {
                    t.trivial_move = false;
                }
                return Some(t);
            }
        }
        None
    }

    /// A manual compaction of `[smallest, largest]` (user keys) at `level` (>= 1): every
    /// file of the level overlapping the range, merged into `level + 1` together with the
    /// files there that it overlaps; or, when `in_place` (the bottom level, with nothing
    /// below to merge into), rewritten into `level` itself. L0 goes through
    /// [`CompactionPolicy::pick_level0`].
    pub fn pick_manual(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        level: usize,
        range: (&[u8], &[u8]),
        in_place: bool,
        busy: &dyn InFlight,
    ) -> Option<CompactionTask> {
        if level == 0 {
            return None;
        }
        let inputs: Vec<&LevelFile<'_>> = levels
            .get(level)?
            .iter()
            .filter(|f| overlaps(f, range.0, range.1))
            .collect();
        let (lo, hi) = bounds(inputs.iter().copied())?;
        if !in_place {
            let mut t = task(levels, level, level + 1, inputs, lo, hi, busy)?;
            t.trivial_move = false;
            return Some(t);
        }
        if inputs.iter().any(|f| busy.busy(f.id)) || busy.writes_into(level, lo, hi) {
            return None;
        }
        Some(CompactionTask {
            level,
            output_level: level,
            inputs: inputs.iter().map(|f| f.id).collect(),
            next_inputs: Vec::new(),
            trivial_move: false,
            smallest: lo.to_vec(),
            largest: hi.to_vec(),
        })
    }
}

/// Build the task for `inputs` of `level`: add the overlapping files of `output_level`.
/// `None` if any of them is busy, or a running task writes into the range it would.
fn task<'a>(
    levels: &[Vec<LevelFile<'a>>],
    level: usize,
    output_level: usize,
    inputs: Vec<&LevelFile<'a>>,
    smallest: &'a [u8],
    largest: &'a [u8],
    busy: &dyn InFlight,
) -> Option<CompactionTask> {
    if inputs.iter().any(|f| busy.busy(f.id)) {
        return None;
    }
    let next: Vec<&LevelFile<'_>> = levels
        .get(output_level)
        .map(|files| {
            files
                .iter()
                .filter(|f| overlaps(f, smallest, largest))
                .collect()
        })
        .unwrap_or_default();
    if next.iter().any(|f| busy.busy(f.id)) {
        return None;
    }
    let (lo, hi) = bounds(inputs.iter().chain(next.iter()).copied())?;
    if busy.writes_into(output_level, lo, hi) {
        return None;
    }
    Some(CompactionTask {
        level,
        output_level,
        trivial_move: level >= 1 && inputs.len() == 1 && next.is_empty(),
        inputs: inputs.iter().map(|f| f.id).collect(),
        next_inputs: next.iter().map(|f| f.id).collect(),
        smallest: lo.to_vec(),
        largest: hi.to_vec(),
    })
}

fn overlaps(f: &LevelFile<'_>, smallest: &[u8], largest: &[u8]) -> bool {
    f.smallest <= largest && smallest <= f.largest
}

fn bounds<'a, 'b: 'a>(
    mut files: impl Iterator<Item = &'a LevelFile<'b>>,
) -> Option<(&'b [u8], &'b [u8])> {
    let first = files.next()?;
    let (mut lo, mut hi) = (first.smallest, first.largest);
    for f in files {
        lo = lo.min(f.smallest);
        hi = hi.max(f.largest);
    }
    Some((lo, hi))
}

#[cfg(test)]
mod tests;

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
mod tests {
    use super::*;

    fn file(id: u64, size: u64, lo: &'static str, hi: &'static str) -> LevelFile<'static> {
        LevelFile {
            id: FileId(id),
            size,
            smallest: lo.as_bytes(),
            largest: hi.as_bytes(),
        }
    }

    fn policy() -> CompactionPolicy {
        CompactionPolicy {
            level0_trigger: 4,
            base_bytes: 100,
            multiplier: 10,
            rewrite_into: [false; NUM_LEVELS],
        }
    }

    /// A tree with `l0` in L0 and `rest` as `(level, files)`.
    fn tree(
        l0: Vec<LevelFile<'static>>,
        rest: Vec<(usize, Vec<LevelFile<'static>>)>,
    ) -> Vec<Vec<LevelFile<'static>>> {
        let mut v = vec![Vec::new(); NUM_LEVELS];
        v[0] = l0;
        for (level, files) in rest {
            v[level] = files;
        }
        v
    }

    const LAST: usize = NUM_LEVELS - 1;

    #[test]
    fn nothing_to_do_below_triggers() {
        let lv = tree(
            vec![file(1, 10, "a", "z")],
            vec![(LAST, vec![file(2, 50, "a", "m")])],
        );
        assert_eq!(policy().pick(&lv, &|_| false, &[]), None);
    }

    #[test]
    fn targets_grow_up_from_the_last_level() {
        let p = policy();
        // A small tree: everything below L0 belongs in the last level.
        let (base, _) = p.targets(&tree(Vec::new(), vec![(LAST, vec![file(1, 50, "a", "b")])]));
        assert_eq!(base, LAST);
        // 10,000 bytes below L0: L5 targets 1,000, L4 100, L3 would be 10 < 100.
        let (base, targets) = p.targets(&tree(
            Vec::new(),
            vec![(LAST, vec![file(1, 10_000, "a", "b")])],
        ));
        assert_eq!(base, 4);
        assert_eq!(
            (targets[4], targets[5], targets[LAST]),
            (100, 1000, u64::MAX)
        );
        assert_eq!(targets[3], 0);
    }

    #[test]
    fn l0_takes_all_its_files_into_the_base_level() {
        let l0 = || {
            vec![
                file(10, 1, "c", "f"),
                file(11, 1, "a", "d"),
                file(12, 1, "e", "g"),
                file(13, 1, "b", "c"),
            ]
        };
        let last = vec![
            file(1, 10, "a", "b"),
            file(2, 10, "c", "d"),
            file(3, 10, "x", "z"),
        ];
        let t = policy()
            .pick(&tree(l0(), vec![(LAST, last)]), &|_| false, &[])
            .unwrap();
        assert_eq!((t.level, t.output_level), (0, LAST));
        assert_eq!(t.inputs.len(), 4);
        assert_eq!(t.next_inputs, vec![FileId(1), FileId(2)]);
        assert!(!t.trivial_move);
        assert_eq!(
            (t.smallest.as_slice(), t.largest.as_slice()),
            (&b"a"[..], &b"g"[..])
        );
        // While it runs, no other L0 compaction is picked.
        let busy = |id| id == FileId(10);
        assert_eq!(policy().pick(&tree(l0(), Vec::new()), &busy, &[]), None);
    }

    #[test]
    fn a_move_into_a_level_of_another_codec_is_a_rewrite() {
        // Base level L5 (target 100) holds 500 bytes in one file that overlaps nothing in
        // L6, as an append-only load leaves it.
        let lv = tree(
            Vec::new(),
            vec![
                (5, vec![file(1, 500, "a", "c")]),
                (LAST, vec![file(8, 1000, "m", "z")]),
            ],
        );
        let t = policy().pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.level, t.output_level), (5, LAST));
        assert!(t.trivial_move);
        let mut rewrite = policy();
        rewrite.rewrite_into[LAST] = true;
        let t = rewrite.pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.inputs, t.next_inputs), (vec![FileId(1)], Vec::new()));
        assert!(!t.trivial_move, "L6 takes another codec: rewrite");
        // Moves between upper levels stay moves.
        let lv = tree(
            Vec::new(),
            vec![
                (4, vec![file(1, 500, "a", "c")]),
                (5, vec![file(2, 100, "m", "n")]),
                (LAST, vec![file(8, 10_000, "m", "z")]),
            ],
        );
        let t = rewrite.pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.level, t.output_level), (4, 5));
        assert!(t.trivial_move);
        // Unless L5 takes another codec than L4 (`compression_per_level`).
        rewrite.rewrite_into[5] = true;
        let t = rewrite.pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.level, t.output_level), (4, 5));
        assert!(!t.trivial_move, "L5 takes another codec: rewrite");
    }

    #[test]
    fn oversized_level_moves_a_lone_file_and_round_robins() {
        // Base level L4 (target 100) holds 180 bytes; L5 has one file overlapping d..f.
        let l4 = vec![
            file(1, 60, "a", "c"),
            file(2, 60, "d", "f"),
            file(3, 60, "g", "i"),
        ];
        let lv = tree(
            Vec::new(),
            vec![
                (4, l4),
                (5, vec![file(9, 10, "e", "e")]),
                (LAST, vec![file(8, 10_000, "a", "z")]),
            ],
        );
        let t = policy().pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.level, t.inputs.clone()), (4, vec![FileId(1)]));
        assert!(t.trivial_move, "nothing in L5 overlaps a..c");
        let mut pointers = vec![Vec::new(); NUM_LEVELS];
        pointers[4] = b"c".to_vec();
        let t = policy().pick(&lv, &|_| false, &pointers).unwrap();
        assert_eq!(t.inputs, vec![FileId(2)]);
        assert_eq!(t.next_inputs, vec![FileId(9)]);
        assert!(!t.trivial_move);
        // Busy files are skipped.
        let t = policy()
            .pick(&lv, &|id| id == FileId(2), &pointers)
            .unwrap();
        assert_eq!(t.inputs, vec![FileId(3)]);
    }

    #[test]
    fn data_above_the_base_level_is_drained() {
        let lv = tree(
            Vec::new(),
            vec![
                (2, vec![file(1, 5, "a", "b")]),
                (LAST, vec![file(2, 50, "x", "y")]),
            ],
        );
        let t = policy().pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.level, t.output_level), (2, 3));
    }

    /// Running tasks as the database tracks them.
    struct Running {
        files: Vec<FileId>,
        outputs: RunningOutputs,
    }

    impl InFlight for Running {
        fn busy(&self, id: FileId) -> bool {
            self.files.contains(&id)
        }
        fn writes_into(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
            self.outputs.overlap(level, smallest, largest)
        }
    }

    #[test]
    fn no_task_writes_into_a_range_a_running_task_writes() {
        // L6 holds a..c and m..z; a manual rewrite of L6 in place is running, writing
        // a..z into L6. L5's lone file d..e overlaps no L6 file, so it would move into
        // the gap, inside the range the rewrite's outputs span.
        let lv = tree(
            Vec::new(),
            vec![
                (5, vec![file(3, 500, "d", "e")]),
                (LAST, vec![file(1, 1000, "a", "c"), file(2, 1000, "m", "z")]),
            ],
        );
        let rewrite = policy()
            .pick_manual(&lv, LAST, (b"a", b"z"), true, &|_| false)
            .unwrap();
        assert_eq!((rewrite.output_level, rewrite.inputs.len()), (LAST, 2));
        let mut running = Running {
            files: rewrite.all_inputs().collect(),
            outputs: RunningOutputs::default(),
        };
        running.outputs.add(&rewrite);
        assert_eq!(policy().pick(&lv, &running, &[]), None);
        // Without the rewrite running, the move goes ahead; and with it, a task writing
        // elsewhere does too.
        let t = policy().pick(&lv, &|_| false, &[]).unwrap();
        assert!(t.trivial_move && t.output_level == LAST);
        running.outputs.remove(&rewrite);
        assert!(running.outputs.is_empty());
        let mut elsewhere = rewrite.clone();
        elsewhere.output_level = 4;
        running.outputs.add(&elsewhere);
        assert!(policy().pick(&lv, &running, &[]).is_some());
    }

    #[test]
    fn l0_never_compacts_past_a_level_holding_data() {
        // The last level shrank below the base size (deletions), leaving data in L5
        // above it: L0 must compact into L5, whose files are older than L0's, not past
        // them into L6.
        let l0 = || (10..14).map(|id| file(id, 1, "b", "c")).collect::<Vec<_>>();
        let lv = tree(
            l0(),
            vec![
                (5, vec![file(1, 5, "a", "m")]),
                (LAST, vec![file(2, 50, "a", "z")]),
            ],
        );
        assert_eq!(policy().targets(&lv).0, 5);
        let t = policy().pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.level, t.output_level), (0, 5));
        // Once L5 is drained, the base is the last level again.
        let lv = tree(l0(), vec![(LAST, vec![file(2, 50, "a", "z")])]);
        assert_eq!(policy().targets(&lv).0, LAST);
    }

    #[test]
    fn range_and_in_place_never_take_part_of_l0() {
        let l0 = vec![
            file(10, 1, "a", "c"),
            file(11, 1, "c", "e"),
            file(12, 1, "x", "y"),
        ];
        let lv = tree(l0, Vec::new());
        for in_place in [false, true] {
            let picked = policy().pick_manual(&lv, 0, (b"a", b"b"), in_place, &|_| false);
            assert_eq!(picked, None);
        }
        let t = policy().pick_level0(&lv, &|_| false).unwrap();
        assert_eq!(t.inputs.len(), 3);
    }

    type SimLevel = std::collections::BTreeMap<u64, (u64, Vec<u8>, Vec<u8>)>;

    /// Simulation: random flushes into L0, compactions applied instantly; the tree keeps
    /// every level near its target and L0 below its trigger.
    #[test]
    fn simulated_load_keeps_levels_in_shape() {
        let p = CompactionPolicy {
            level0_trigger: 4,
            base_bytes: 1000,
            multiplier: 10,
            rewrite_into: [false; NUM_LEVELS],
        };
        // level -> id -> (size, lo, hi); keys are u32 encoded big-endian
        let mut tree: Vec<SimLevel> = vec![SimLevel::new(); NUM_LEVELS];
        let mut next_id = 1u64;
        let mut rng = 0x1234_5678_u64;
        let mut rand = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..2000 {
            let a = (rand() % 1_000_000) as u32;
            let b = a + (rand() % 50_000) as u32;
            tree[0].insert(
                next_id,
                (100, a.to_be_bytes().to_vec(), b.to_be_bytes().to_vec()),
            );
            next_id += 1;
            loop {
                let view: Vec<Vec<LevelFile<'_>>> = tree
                    .iter()
                    .map(|l| {
                        let mut v: Vec<LevelFile<'_>> = l
                            .iter()
                            .map(|(&id, (s, lo, hi))| LevelFile {
                                id: FileId(id),
                                size: *s,
                                smallest: lo,
                                largest: hi,
                            })
                            .collect();
                        v.sort_by(|x, y| x.smallest.cmp(y.smallest));
                        v
                    })
                    .collect();
                let Some(t) = p.pick(&view, &|_| false, &[]) else {
                    break;
                };
                drop(view);
                let mut size = 0;
                for id in &t.inputs {
                    size += tree[t.level].remove(&id.0).unwrap().0;
                }
                for id in &t.next_inputs {
                    size += tree[t.output_level].remove(&id.0).unwrap().0;
                }
                // One output file per 500 bytes across the task's key range.
                let lo = u32::from_be_bytes(t.smallest.clone().try_into().unwrap());
                let hi = u32::from_be_bytes(t.largest.clone().try_into().unwrap());
                let n = size.div_ceil(500).max(1);
                let step = (u64::from(hi - lo) / n).max(1);
                for i in 0..n {
                    let s = lo as u64 + i * step;
                    let e = if i + 1 == n { hi as u64 } else { s + step - 1 };
                    tree[t.output_level].insert(
                        next_id,
                        (
                            size / n,
                            (s as u32).to_be_bytes().to_vec(),
                            (e as u32).to_be_bytes().to_vec(),
                        ),
                    );
                    next_id += 1;
                }
            }
            assert!(tree[0].len() < p.level0_trigger);
            let view: Vec<Vec<LevelFile<'_>>> = tree
                .iter()
                .map(|l| {
                    l.iter()
                        .map(|(&id, (s, lo, hi))| LevelFile {
                            id: FileId(id),
                            size: *s,
                            smallest: lo,
                            largest: hi,
                        })
                        .collect()
                })
                .collect();
            let (base, targets) = p.targets(&view);
            drop(view);
            for (level, files) in tree.iter().enumerate().skip(1).take(NUM_LEVELS - 2) {
                let bytes: u64 = files.values().map(|f| f.0).sum();
                if level < base {
                    assert_eq!(bytes, 0, "L{level} above the base level L{base} holds data");
                } else {
                    assert!(
                        bytes < targets[level],
                        "L{level} holds {bytes} > {}",
                        targets[level]
                    );
                }
                // Levels >= 1 never overlap.
                let mut ranges: Vec<_> =
                    files.values().map(|f| (f.1.clone(), f.2.clone())).collect();
                ranges.sort();
                for w in ranges.windows(2) {
                    assert!(w[0].1 < w[1].0, "overlap in L{level}");
                }
            }
        }
    }
}

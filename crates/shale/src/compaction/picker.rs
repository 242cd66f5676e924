//! The compaction policy: pure functions of the tree's shape.
//!
//! Each level has a score: L0's is its file count over `level0_compaction_trigger`
//! (overlapping files cost every read a probe), deeper levels' is their size over their
//! target (`max_bytes_for_level_base * level_size_multiplier^(n-1)`). The level with the
//! highest score >= 1 is compacted into the next one:
//! - from L0, every L0 file plus the L1 files they overlap;
//! - from Ln, one file (round-robin through the key space, as LevelDB's compaction pointer
//!   does, so every key range gets its turn) plus the files of Ln+1 it overlaps.
//!
//! A single file from Ln (n >= 1) that overlaps nothing in Ln+1 is moved, not rewritten.
//! Files already in a running compaction are never picked again, and at most one L0
//! compaction runs at a time; the input sets of concurrent tasks are then disjoint, and so
//! are their output key ranges.

use crate::version::{FileId, NUM_LEVELS};

/// What the policy needs to know about a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelFile<'a> {
    pub id: FileId,
    pub size: u64,
    pub smallest: &'a [u8],
    pub largest: &'a [u8],
}

/// The knobs of the policy (taken from `Options`).
#[derive(Debug, Clone, Copy)]
pub struct CompactionPolicy {
    pub level0_trigger: usize,
    pub base_bytes: u64,
    pub multiplier: u32,
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
    /// Target size in bytes of `level` (>= 1).
    pub fn target_bytes(&self, level: usize) -> u64 {
        let mut t = self.base_bytes;
        for _ in 1..level {
            t = t.saturating_mul(u64::from(self.multiplier));
        }
        t
    }

    /// The score of each level; a level needs compaction when its score is >= 1.
    pub fn scores(&self, levels: &[Vec<LevelFile<'_>>]) -> Vec<f64> {
        levels
            .iter()
            .enumerate()
            .map(|(level, files)| {
                if level + 1 >= NUM_LEVELS {
                    0.0 // the last level has nowhere to go
                } else if level == 0 {
                    files.len() as f64 / self.level0_trigger.max(1) as f64
                } else {
                    let bytes: u64 = files.iter().map(|f| f.size).sum();
                    bytes as f64 / self.target_bytes(level) as f64
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
        busy: &dyn Fn(FileId) -> bool,
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

    fn pick_level0(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        busy: &dyn Fn(FileId) -> bool,
    ) -> Option<CompactionTask> {
        let l0 = levels.first()?;
        if l0.is_empty() || l0.iter().any(|f| busy(f.id)) {
            return None; // one L0 compaction at a time
        }
        let (smallest, largest) = bounds(l0.iter())?;
        task(levels, 0, l0.iter().collect(), smallest, largest, busy)
    }

    fn pick_level(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        level: usize,
        busy: &dyn Fn(FileId) -> bool,
        pointer: &[u8],
    ) -> Option<CompactionTask> {
        let files = levels.get(level)?;
        // Start after the pointer, wrap around.
        let start = files.partition_point(|f| !pointer.is_empty() && f.largest <= pointer);
        let order = files.iter().skip(start).chain(files.iter().take(start));
        for file in order {
            if busy(file.id) {
                continue;
            }
            if let Some(t) = task(levels, level, vec![file], file.smallest, file.largest, busy) {
                return Some(t);
            }
        }
        None
    }

    /// Every file of `level` overlapping `[smallest, largest]` (user keys), for a manual
    /// compaction of that range.
    pub fn pick_range(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        level: usize,
        smallest: &[u8],
        largest: &[u8],
        busy: &dyn Fn(FileId) -> bool,
    ) -> Option<CompactionTask> {
        let files = levels.get(level)?;
        let mut inputs: Vec<&LevelFile<'_>> = files
            .iter()
            .filter(|f| overlaps(f, smallest, largest))
            .collect();
        if level == 0 {
            // L0 files overlap each other: pull in every one overlapping the chosen ones,
            // so that no older version of a key is left above a newer one.
            let (lo, hi) = bounds(inputs.iter().copied())?;
            inputs = files.iter().filter(|f| overlaps(f, lo, hi)).collect();
        }
        let (lo, hi) = bounds(inputs.iter().copied())?;
        let mut t = task(levels, level, inputs, lo, hi, busy)?;
        t.trivial_move = false;
        Some(t)
    }

    /// Rewrite the files of `level` overlapping `[smallest, largest]` in place: for the
    /// bottom level, where a manual compaction has nothing below to merge into.
    pub fn pick_in_place(
        &self,
        levels: &[Vec<LevelFile<'_>>],
        level: usize,
        smallest: &[u8],
        largest: &[u8],
        busy: &dyn Fn(FileId) -> bool,
    ) -> Option<CompactionTask> {
        let inputs: Vec<&LevelFile<'_>> = levels
            .get(level)?
            .iter()
            .filter(|f| overlaps(f, smallest, largest))
            .collect();
        if inputs.iter().any(|f| busy(f.id)) {
            return None;
        }
        let (lo, hi) = bounds(inputs.iter().copied())?;
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

/// Build the task for `inputs` of `level`: add the overlapping files of `level + 1`.
/// `None` if any of them is busy.
fn task<'a>(
    levels: &[Vec<LevelFile<'a>>],
    level: usize,
    inputs: Vec<&LevelFile<'a>>,
    smallest: &'a [u8],
    largest: &'a [u8],
    busy: &dyn Fn(FileId) -> bool,
) -> Option<CompactionTask> {
    if inputs.iter().any(|f| busy(f.id)) {
        return None;
    }
    let next: Vec<&LevelFile<'_>> = levels
        .get(level + 1)
        .map(|files| {
            files
                .iter()
                .filter(|f| overlaps(f, smallest, largest))
                .collect()
        })
        .unwrap_or_default();
    if next.iter().any(|f| busy(f.id)) {
        return None;
    }
    let (lo, hi) = bounds(inputs.iter().chain(next.iter()).copied())?;
    Some(CompactionTask {
        level,
        output_level: level + 1,
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
        }
    }

    fn levels(
        l0: Vec<LevelFile<'static>>,
        l1: Vec<LevelFile<'static>>,
    ) -> Vec<Vec<LevelFile<'static>>> {
        let mut v = vec![l0, l1];
        v.resize(NUM_LEVELS, Vec::new());
        v
    }

    #[test]
    fn nothing_to_do_below_triggers() {
        let lv = levels(vec![file(1, 10, "a", "z")], vec![file(2, 50, "a", "m")]);
        assert_eq!(policy().pick(&lv, &|_| false, &[]), None);
    }

    #[test]
    fn l0_takes_all_its_files_and_the_overlapping_l1_files() {
        let l0 = vec![
            file(10, 1, "c", "f"),
            file(11, 1, "a", "d"),
            file(12, 1, "e", "g"),
            file(13, 1, "b", "c"),
        ];
        let l1 = vec![
            file(1, 10, "a", "b"),
            file(2, 10, "c", "d"),
            file(3, 10, "x", "z"),
        ];
        let t = policy().pick(&levels(l0, l1), &|_| false, &[]).unwrap();
        assert_eq!(t.level, 0);
        assert_eq!(t.inputs.len(), 4);
        assert_eq!(t.next_inputs, vec![FileId(1), FileId(2)]);
        assert!(!t.trivial_move);
        assert_eq!(
            (t.smallest.as_slice(), t.largest.as_slice()),
            (&b"a"[..], &b"g"[..])
        );
        // While it runs, no other L0 compaction is picked.
        let l0 = vec![
            file(10, 1, "c", "f"),
            file(11, 1, "a", "d"),
            file(12, 1, "e", "g"),
            file(13, 1, "b", "c"),
        ];
        let l1 = vec![file(1, 10, "a", "b")];
        assert_eq!(
            policy().pick(&levels(l0, l1), &|id| id == FileId(10), &[]),
            None
        );
    }

    #[test]
    fn oversized_level_moves_a_lone_file_and_round_robins() {
        let l1 = vec![
            file(1, 60, "a", "c"),
            file(2, 60, "d", "f"),
            file(3, 60, "g", "i"),
        ];
        let mut lv = levels(Vec::new(), l1);
        lv[2] = vec![file(9, 10, "e", "e")];
        let t = policy().pick(&lv, &|_| false, &[]).unwrap();
        assert_eq!((t.level, t.inputs.clone()), (1, vec![FileId(1)]));
        assert!(t.trivial_move, "nothing in L2 overlaps a..c");
        let pointers = vec![Vec::new(), b"c".to_vec()];
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
    fn highest_score_wins_and_targets_grow() {
        let p = policy();
        assert_eq!(p.target_bytes(1), 100);
        assert_eq!(p.target_bytes(3), 10_000);
        let l0 = (0..5).map(|i| file(20 + i, 1, "a", "b")).collect();
        let l1 = vec![file(1, 1000, "a", "z")]; // score 10 > L0's 1.25
        let t = p.pick(&levels(l0, l1), &|_| false, &[]).unwrap();
        assert_eq!(t.level, 1);
    }

    #[test]
    fn range_picks_overlapping_files_transitively_in_l0() {
        let l0 = vec![
            file(10, 1, "a", "c"),
            file(11, 1, "c", "e"),
            file(12, 1, "x", "y"),
        ];
        let t = policy()
            .pick_range(&levels(l0, Vec::new()), 0, b"a", b"b", &|_| false)
            .unwrap();
        assert_eq!(t.inputs, vec![FileId(10), FileId(11)]);
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
                    size += tree[t.level + 1].remove(&id.0).unwrap().0;
                }
                // One output file per 500 bytes across the task's key range.
                let lo = u32::from_be_bytes(t.smallest.clone().try_into().unwrap());
                let hi = u32::from_be_bytes(t.largest.clone().try_into().unwrap());
                let n = size.div_ceil(500).max(1);
                let step = (u64::from(hi - lo) / n).max(1);
                for i in 0..n {
                    let s = lo as u64 + i * step;
                    let e = if i + 1 == n { hi as u64 } else { s + step - 1 };
                    tree[t.level + 1].insert(
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
            for (level, files) in tree.iter().enumerate().skip(1).take(NUM_LEVELS - 2) {
                let bytes: u64 = files.values().map(|f| f.0).sum();
                assert!(bytes < p.target_bytes(level), "L{level} holds {bytes}");
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

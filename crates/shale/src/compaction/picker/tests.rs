//! The policy's unit tests and a simulated load: pure functions, no I/O.

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
            let mut ranges: Vec<_> = files.values().map(|f| (f.1.clone(), f.2.clone())).collect();
            ranges.sort();
            for w in ranges.windows(2) {
                assert!(w[0].1 < w[1].0, "overlap in L{level}");
            }
        }
    }
}

//! Simulated power loss and the kill -9 image, on `MemFs`.
//!
//! A deterministic workload (sync and non-sync writes, batches, flushes, compactions,
//! reopens, with 64 KiB memtables and 16 KiB tables) runs on a `MemFs` planned to crash
//! during its k-th mutating file-system operation, for many k. The crash image is opened
//! again and must hold exactly a prefix of the write sequence: at least every write
//! acknowledged with `sync` (and every write before a successful flush, compaction or
//! close), at most the writes attempted. A process crash (kill -9) must keep every
//! acknowledged write. Some crash points crash a second time while recovering.
//!
//! CI mode samples 1,250 crash points. `SHALE_CRASH_POINTS=10000` runs every k of as many
//! workload seeds as it takes to reach that many points.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use common::{Oracle, Rng, Step, DIR};
use shale::fs::WritableFile;
use shale::fs::{CrashKind, FileLock, FileSystem, MemFs, PowerLoss, RandomAccessFile};
use shale::{Db, WriteOptions};

const KEYS: u64 = 300;
const STEPS: usize = 400;

#[derive(Default, Debug)]
struct Tally {
    points: u64,
    power_loss: u64,
    torn: u64,
    journaled: u64,
    write_back: u64,
    process: u64,
    double: u64,
    /// Writes that had to survive (acknowledged with sync, or before a flush, or any
    /// acknowledged write for kill -9), summed over crash points.
    required: u64,
    /// Writes found in the recovered prefix, summed.
    recovered: u64,
    /// Acknowledged writes lost by power loss (allowed: not synced), summed.
    unsynced_lost: u64,
}

/// The crash to simulate at the `i`-th point: plain power loss, a torn last write, a
/// journaled prefix of the unsynced directory changes, write-back that reached some files
/// and not others, or a kill -9, in turn.
fn crash_kind(i: u64, rng: &mut Rng) -> CrashKind {
    match i % 5 {
        0 => CrashKind::PowerLoss(PowerLoss::default()),
        1 => CrashKind::PowerLoss(PowerLoss {
            tear_last_write: Some(rng.below(1500)),
            ..PowerLoss::default()
        }),
        2 => CrashKind::PowerLoss(PowerLoss {
            keep_dir_ops: 1 + rng.below(6) as usize,
            ..PowerLoss::default()
        }),
        3 => CrashKind::PowerLoss(PowerLoss {
            write_back: Some(rng.below(u64::MAX)),
            keep_dir_ops: rng.below(3) as usize,
            ..PowerLoss::default()
        }),
        _ => CrashKind::Process,
    }
}

/// Run the workload crashing at op `k`, as the `tally.points`-th crash point. `Ok(false)`
/// if it finished before op `k`.
fn crash_point(steps: &[Step], oracle: &Oracle, k: u64, tally: &mut Tally) -> Result<bool, String> {
    let i = tally.points;
    let mut rng = Rng::new(k.wrapping_mul(7919) ^ i);
    let kind = crash_kind(i, &mut rng);
    let mem = MemFs::new();
    mem.crash_at_op(k, kind);
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let run = common::run(&fs, steps);
    if !mem.crashed() {
        if let Some((step, e)) = run.error {
            return Err(format!("error without a crash at {step}: {e}"));
        }
        return Ok(false);
    }
    // The database on the dead instance sees every operation fail; let it go.
    drop(run.db);
    let p = run.progress;
    let hi = p.acked + usize::from(p.in_flight);
    let lo = match kind {
        CrashKind::Process => p.acked,
        CrashKind::PowerLoss(_) => p.durable,
    };
    let mut image = mem.crash_image().ok_or("no crash image")?;
    if i % 6 == 1 {
        // Crash again, during recovery (or the close after it). Six is prime to the five
        // crash kinds, so every kind is crashed again in turn.
        let again = 1 + rng.below(40);
        image.crash_at_op(again, crash_kind(i / 6, &mut rng));
        if let Ok(db) = Db::open(DIR, common::options(Arc::new(image.clone()))) {
            drop(db);
        }
        if let Some(second) = image.crash_image() {
            image = second;
            tally.double += 1;
        } else {
            image.cancel_crash(); // recovery and close finished first
        }
    }
    let j = common::verify(Arc::new(image), oracle, KEYS, lo, hi)
        .map_err(|e| format!("{kind:?}: {e}"))?;
    tally.points += 1;
    match kind {
        CrashKind::Process => tally.process += 1,
        CrashKind::PowerLoss(l) if l.write_back.is_some() => tally.write_back += 1,
        CrashKind::PowerLoss(l) if l.tear_last_write.is_some() => tally.torn += 1,
        CrashKind::PowerLoss(l) if l.keep_dir_ops > 0 => tally.journaled += 1,
        CrashKind::PowerLoss(_) => tally.power_loss += 1,
    }
    tally.required += lo as u64;
    tally.recovered += j as u64;
    tally.unsynced_lost += p.acked.saturating_sub(j) as u64;
    Ok(true)
}

/// Mutating operations, flushes and compactions of one uncrashed run of `steps`.
fn ops_of(steps: &[Step]) -> (u64, u64, u64) {
    let mem = MemFs::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let run = common::run(&fs, steps);
    assert!(run.error.is_none(), "{:?}", run.error.map(|e| e.1));
    run.db.unwrap().wait_idle().unwrap();
    (mem.ops(), run.progress.flushes, run.progress.compactions)
}

#[test]
fn power_loss_recovers_a_prefix_with_every_synced_write() {
    if !shale_trials::in_own_process(
        module_path!(),
        "power_loss_recovers_a_prefix_with_every_synced_write",
    ) {
        return;
    }
    shale_trials::count_panics();
    let started = Instant::now();
    let target = shale_trials::env_count("SHALE_CRASH_POINTS", 0);
    let long = target > 0;
    let mut tally = Tally::default();
    let mut seeds = 0;
    let mut total_ops = 0;
    let (mut total_flushes, mut total_compactions) = (0, 0);
    for seed in 1u64.. {
        let steps = common::workload(seed, STEPS, KEYS);
        let oracle = Oracle::new(&steps);
        let (total, flushes, compactions) = ops_of(&steps);
        total_flushes += flushes;
        total_compactions += compactions;
        seeds += 1;
        // CI mode: 1,250 points spread over the first seed's run. Long mode: every k.
        let stride = if long { 1 } else { (total / 1250).max(1) };
        total_ops += total;
        let mut k = 1 + seed % stride;
        loop {
            match crash_point(&steps, &oracle, k, &mut tally) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => panic!("seed {seed}, crash at op {k}: {e}"),
            }
            if long && tally.points >= target {
                break;
            }
            k += stride;
        }
        if !long || tally.points >= target {
            break;
        }
    }
    println!(
        "power loss: {} crash points over {seeds} workload(s) of {STEPS} steps \
         ({total_ops} file-system operations, {total_flushes} flushes, {total_compactions} \
         compactions when run to the end) in {:.1} s: \
         {} plain power loss, {} torn last write, {} journaled directory prefix, \
         {} write-back to some files, {} kill -9, \
         {} crashed again during recovery; {} writes required (synced or before a flush), \
         {} recovered, 0 lost; {} acknowledged unsynced writes dropped by power loss; panics {}",
        tally.points,
        started.elapsed().as_secs_f64(),
        tally.power_loss,
        tally.torn,
        tally.journaled,
        tally.write_back,
        tally.process,
        tally.double,
        tally.required,
        tally.recovered,
        tally.unsynced_lost,
        shale_trials::panics(),
    );
    assert_eq!(shale_trials::panics(), 0);
}

/// The durability checker: a full run, closed cleanly, leaves nothing a power loss
/// could drop, and never renamed a file or moved on before the syncs that make the
/// rename durable.
#[test]
fn clean_close_leaves_nothing_unsynced_and_no_rename_skips_its_syncs() {
    let steps = common::workload(99, STEPS, KEYS);
    let mem = MemFs::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let run = common::run(&fs, &steps);
    assert!(run.error.is_none(), "{:?}", run.error.map(|e| e.1));
    let db = run.db.unwrap();
    db.close().unwrap();
    drop(db);
    assert_eq!(mem.violations(), Vec::<String>::new());
    assert_eq!(mem.unsynced(), Vec::<String>::new());
    // And power loss now loses nothing.
    let oracle = Oracle::new(&steps);
    let n = oracle.writes();
    let j = common::verify(
        Arc::new(mem.power_loss(PowerLoss::default())),
        &oracle,
        KEYS,
        n,
        n,
    )
    .unwrap();
    assert_eq!(j, n);
}

/// kill -9 without close keeps every acknowledged write, sync or not.
#[test]
fn kill_without_close_keeps_every_acknowledged_write() {
    let steps = common::workload(7, STEPS, KEYS);
    let mem = MemFs::new();
    let fs: Arc<dyn FileSystem> = Arc::new(mem.clone());
    let run = common::run(&fs, &steps);
    assert!(run.error.is_none(), "{:?}", run.error.map(|e| e.1));
    let image = mem.process_crash();
    drop(run.db);
    let oracle = Oracle::new(&steps);
    let n = oracle.writes();
    assert_eq!(
        common::verify(Arc::new(image), &oracle, KEYS, n, n).unwrap(),
        n
    );
}

/// A `MemFs` whose SSTable creation waits for a gate, so a test can hold a frozen memtable
/// unflushed.
#[derive(Debug)]
struct GatedFs {
    mem: MemFs,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl FileSystem for GatedFs {
    fn create(&self, path: &Path) -> shale::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            let (lock, cv) = &*self.open;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
        }
        self.mem.create(path)
    }
    fn create_log(&self, path: &Path) -> shale::Result<Box<dyn WritableFile>> {
        self.mem.create_log(path)
    }
    fn open(&self, path: &Path) -> shale::Result<Arc<dyn RandomAccessFile>> {
        self.mem.open(path)
    }
    fn read_all(&self, path: &Path) -> shale::Result<Vec<u8>> {
        self.mem.read_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> shale::Result<()> {
        self.mem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> shale::Result<()> {
        self.mem.remove(path)
    }
    fn list(&self, dir: &Path) -> shale::Result<Vec<String>> {
        self.mem.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> shale::Result<()> {
        self.mem.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> shale::Result<()> {
        self.mem.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.mem.exists(path)
    }
    fn lock(&self, path: &Path) -> shale::Result<Box<dyn FileLock>> {
        self.mem.lock(path)
    }
}

/// Regression: a sync write made the *current* WAL durable, but the WAL of the memtable
/// frozen just before (still waiting for its flush) was never synced, so power loss kept
/// the later sync write and lost earlier non-sync writes: a hole, not a prefix. The old
/// WAL is now synced when the memtable is switched.
#[test]
fn sync_write_after_memtable_switch_keeps_earlier_writes() {
    let mem = MemFs::new();
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let fs = Arc::new(GatedFs {
        mem: mem.clone(),
        open: Arc::clone(&gate),
    });
    let db = Db::open(DIR, common::options(fs)).unwrap();
    let wals = || {
        mem.files()
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "wal"))
            .count()
    };
    let value = vec![b'v'; 1000];
    let mut n = 0u32;
    // Non-sync writes until the memtable is frozen and a second WAL exists.
    while wals() < 2 {
        db.put(format!("k{n:05}"), &value).unwrap();
        n += 1;
    }
    db.write(
        {
            let mut b = shale::WriteBatch::new();
            b.put("synced", "yes");
            b
        },
        WriteOptions::sync(),
    )
    .unwrap();
    let image = mem.power_loss(PowerLoss::default());
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    drop(db);

    let db = Db::open(DIR, common::options(Arc::new(image))).unwrap();
    assert_eq!(db.get("synced").unwrap().as_deref(), Some(&b"yes"[..]));
    for i in 0..n {
        let got = db.get(format!("k{i:05}")).unwrap();
        assert!(
            got.as_ref() == Some(&value),
            "write {i} of {n}, acknowledged before the synced one, was lost"
        );
    }
}

/// `Db::sync_wal` makes the unsynced writes before it survive a power loss, across a
/// memtable switch too; the writes after it, never synced, are what the control shows a
/// power loss takes (so the check would catch a `sync_wal` that did nothing).
#[test]
fn sync_wal_makes_earlier_unsynced_writes_survive_power_loss() {
    let mem = MemFs::new();
    let db = Db::open(DIR, common::options(Arc::new(mem.clone()))).unwrap();
    let value = vec![7u8; 100];
    // Enough to fill a 64 KiB memtable and switch WALs several times, and to leave the
    // active memtable about 125 writes short of the next switch: the 50 writes after
    // `sync_wal` stay in it, never flushed (at 2,000 the 25th of them filled it, and a
    // flush that finished before the power loss kept them).
    let n = 1_900;
    for i in 0..n {
        db.put(format!("k{i:05}"), &value).unwrap();
    }
    db.sync_wal().unwrap();
    for i in 0..50 {
        db.put(format!("late{i:02}"), &value).unwrap();
    }
    let image = mem.power_loss(PowerLoss::default());
    drop(db);

    let db = Db::open(DIR, common::options(Arc::new(image))).unwrap();
    for i in 0..n {
        assert_eq!(
            db.get(format!("k{i:05}")).unwrap().as_ref(),
            Some(&value),
            "write {i} of {n}, acknowledged before sync_wal, was lost"
        );
    }
    let late = (0..50)
        .filter(|i| db.get(format!("late{i:02}")).unwrap().is_some())
        .count();
    assert_eq!(
        late, 0,
        "writes never synced survived a power loss that drops unsynced bytes"
    );
}

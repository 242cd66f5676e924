//! The kill -9 loop. Spawn `shale-stress` on one database, SIGKILL it at a
//! random moment (a fifth of the time before it has even finished opening, so recovery is
//! killed too), reopen, check every key against the oracle log (`verify.rs`), and loop on
//! the same database. A third of the cycles run with the semantic index on, and their
//! verification checks the index as well.
//!
//! CI mode: 200 cycles. Long mode: `SHALE_KILL_CYCLES=2000`. `SHALE_KILL_SEED` picks the
//! kill times and workloads (the default is fixed, so a failure reruns the same way).

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shale::Db;
use shale_stress::oracle::{Expected, RunLog};
use shale_stress::verify::verify;
use shale_stress::workload::{open, options, Rng};

const KEYS: u32 = 2000;
const THREADS: u32 = 2;
/// The signal `Child::kill` sends on Unix.
const SIGKILL: i32 = 9;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Default)]
struct Totals {
    cycles: u64,
    semantic_cycles: u64,
    killed_before_ready: u64,
    ops: u64,
    acked: u64,
    keys: u64,
    pending_applied: u64,
    pending_absent: u64,
    unlogged_survived: u64,
    unlogged_lost: u64,
    hits: u64,
    failures: Vec<String>,
}

/// One cycle: run the stress process, kill it, verify. Errors are failures of the engine
/// (or of the stress process's own checks).
fn cycle(
    db_dir: &Path,
    oracle: &Path,
    n: u64,
    rng: &mut Rng,
    expected: &mut Expected,
    t: &mut Totals,
) -> Result<(), String> {
    let semantic = n % 3 == 2;
    let _ = std::fs::remove_file(oracle);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_shale-stress"));
    cmd.arg("--db")
        .arg(db_dir)
        .arg("--oracle")
        .arg(oracle)
        .args(["--seed", &rng.next_u64().to_string()])
        .args(["--wid-base", &((n + 1) << 32).to_string()])
        .args(["--threads", &THREADS.to_string()])
        .args(["--keys", &KEYS.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if semantic {
        cmd.arg("--semantic");
    }
    let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    if rng.percent(20) {
        // Somewhere in process start, open, recovery, or the first writes.
        std::thread::sleep(Duration::from_micros(rng.below(40_000)));
        t.killed_before_ready += 1;
    } else {
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("read: {e}"))?;
        if line.trim() != "ready" {
            let status = child.wait().map_err(|e| format!("wait: {e}"))?;
            return Err(format!("stress process did not start: {status}"));
        }
        std::thread::sleep(Duration::from_micros(5_000 + rng.below(250_000)));
    }
    child.kill().map_err(|e| format!("kill: {e}"))?;
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    if status.signal() != Some(SIGKILL) {
        return Err(format!("stress process failed on its own: {status}"));
    }
    // Killed before it created the log: it wrote nothing.
    let log = if oracle.exists() {
        RunLog::read(oracle)?
    } else {
        RunLog::default()
    };
    t.ops += log.ops;
    let (db, index) = open(db_dir, semantic).map_err(|e| format!("open failed: {e}"))?;
    let v = verify(&db, expected, &log, KEYS, index.as_ref())?;
    db.close().map_err(|e| format!("close failed: {e}"))?;
    t.cycles += 1;
    t.semantic_cycles += u64::from(semantic);
    t.acked += v.acked;
    t.keys += v.keys;
    t.pending_applied += v.pending_applied;
    t.pending_absent += v.pending_absent;
    t.unlogged_survived += v.unlogged_survived;
    t.unlogged_lost += v.unlogged_lost;
    t.hits += v.hits;
    Ok(())
}

#[test]
fn kill_loop_loses_no_acknowledged_write() {
    let cycles = env_u64("SHALE_KILL_CYCLES", 200);
    let seed = env_u64("SHALE_KILL_SEED", 0x5eed);
    // A kill -9 loses nothing the OS holds, so tmpfs (where fsync costs nothing) models it
    // as well as a disk does, and lets each cycle do ten times the work.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let db_dir = dir.path().join("db");
    let oracle = dir.path().join("oracle.log");
    let mut rng = Rng::new(seed);
    let mut expected = Expected::default();
    let mut t = Totals::default();
    let start = Instant::now();
    for n in 0..cycles {
        if let Err(e) = cycle(&db_dir, &oracle, n, &mut rng, &mut expected, &mut t) {
            // The expected state is no longer known: stop at the first failure.
            t.failures.push(format!("cycle {n} (seed {seed:#x}): {e}"));
            break;
        }
    }
    println!(
        "kill loop: {} cycles ({} with the semantic index, {} killed before ready) in {:.1} s; \
         {} ops, {} acknowledged writes verified, {} keys checked, pending writes found \
         applied {} / absent {}, WAL-less writes survived {} / lost {}, {} search hits \
         checked; failures {}",
        t.cycles,
        t.semantic_cycles,
        t.killed_before_ready,
        start.elapsed().as_secs_f64(),
        t.ops,
        t.acked,
        t.keys,
        t.pending_applied,
        t.pending_absent,
        t.unlogged_survived,
        t.unlogged_lost,
        t.hits,
        t.failures.len()
    );
    assert!(t.failures.is_empty(), "{:#?}", t.failures);
}

/// The verifier is what makes the loop's zero mean something: it must catch a lost
/// acknowledged write, a resurrected delete, a stale value and a torn pending batch.
#[test]
fn verifier_catches_lost_resurrected_stale_and_torn() {
    use shale_stress::workload::{key, value};
    let dir = tempfile::tempdir().unwrap();
    let log = RunLog::parse("p 0 1 +0 +2 +4\nd 0 1\np 0 2 -2\nd 0 2\np 0 3 +0 +4\n").unwrap();
    let keys = 6;
    let check = |setup: &dyn Fn(&Db)| {
        let db = Db::open(dir.path(), options()).unwrap();
        for k in 0..keys {
            db.delete(key(k)).unwrap();
        }
        setup(&db);
        let r = verify(&db, &mut Expected::default(), &log, keys, None);
        db.close().unwrap();
        r
    };
    // The right state, with the pending batch absent, then applied.
    let base = |db: &Db| {
        db.put(key(0), value(0, 1)).unwrap();
        db.put(key(4), value(4, 1)).unwrap();
    };
    check(&base).unwrap();
    check(&|db: &Db| {
        db.put(key(0), value(0, 3)).unwrap();
        db.put(key(4), value(4, 3)).unwrap();
    })
    .unwrap();
    let err = |setup: &dyn Fn(&Db)| check(setup).unwrap_err();
    assert!(err(&|db: &Db| {
        base(db);
        db.put(key(0), value(0, 3)).unwrap();
    })
    .contains("torn"));
    assert!(err(&|db: &Db| {
        base(db);
        db.put(key(2), value(2, 1)).unwrap();
    })
    .contains("resurrected"));
    assert!(err(&|db: &Db| {
        base(db);
        db.put(key(5), value(5, 1)).unwrap();
        db.delete(key(5)).unwrap();
        db.put(key(1), value(1, 1)).unwrap();
    })
    .contains("resurrected"));
    assert!(err(&|db: &Db| db.put(key(4), value(4, 1)).unwrap()).contains("k00000"));
    assert!(err(&|db: &Db| {
        base(db);
        db.put(key(3), "k00003 w1 garbage").unwrap();
    })
    .contains("wrong value"));
}

/// WAL-less writes: a kill may lose them, but only a suffix of each thread's, and never a
/// write acknowledged with the WAL.
#[test]
fn verifier_judges_walless_writes_by_a_cut() {
    use shale_stress::workload::{key, value};
    let dir = tempfile::tempdir().unwrap();
    // Thread 0: WAL-less put k0 (w1), WAL-less put k1 (w2), logged put k2 (w3), WAL-less
    // put k0 (w4).
    let log = RunLog::parse("n 0 1 +0\nd 0 1\nn 0 2 +1\nd 0 2\np 0 3 +2\nd 0 3\nn 0 4 +0\nd 0 4\n")
        .unwrap();
    let keys = 3;
    let check = |state: [Option<u64>; 3]| {
        let db = Db::open(dir.path(), options()).unwrap();
        for (k, wid) in (0u32..).zip(state) {
            match wid {
                Some(wid) => db.put(key(k), value(k, wid)).unwrap(),
                None => db.delete(key(k)).unwrap(),
            }
        }
        let r = verify(&db, &mut Expected::default(), &log, keys, None);
        db.close().unwrap();
        r
    };
    // Cuts after w4, after w2, after w1, and before w1.
    for state in [
        [Some(4), Some(2), Some(3)],
        [Some(1), Some(2), Some(3)],
        [Some(1), None, Some(3)],
        [None, None, Some(3)],
    ] {
        check(state).unwrap_or_else(|e| panic!("{state:?}: {e}"));
    }
    // w4 survived, so w2 did; w2 survived, so w1 did; w3 had the WAL.
    for state in [
        [Some(4), None, Some(3)],
        [None, Some(2), Some(3)],
        [Some(4), Some(2), None],
    ] {
        let e = check(state).unwrap_err();
        assert!(e.contains("acknowledged write lost"), "{state:?}: {e}");
    }
}

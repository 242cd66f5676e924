//! The I/O-error sweep. The workload of `crash_power_loss.rs` (writes, batches,
//! flushes, compactions, reopens) runs on `FaultFs` over `MemFs`, failing its k-th
//! file-system operation (every kind: create, write, flush, sync, sync_dir, rename,
//! remove, read), once or from then on, with `EIO` or `ENOSPC`. For each trial:
//!
//! - no panic, in any thread;
//! - every error the caller sees is `Io` or `Poisoned` (never `Corruption`, never a
//!   wrong value);
//! - after a write, flush or compaction failed, the next write is refused with
//!   `Poisoned`, and the open database still reads exactly the acknowledged writes;
//! - reopened on the healthy file system, the database holds every acknowledged write
//!   (and at most the one that failed); after a power loss, every synced one.
//!
//! CI mode samples about 400 trials. `SHALE_IO_FAULT_POINTS=n` sweeps every k in all
//! four modes, over as many workload seeds as it takes to reach `n` trials.

use crate::common;

use std::sync::Arc;
use std::time::Instant;

use common::{Oracle, Step};
use shale::fs::{Errno, Fault, FaultFs, FileSystem, MemFs, OpKind, PowerLoss};
use shale::Error;

const KEYS: u64 = 200;
const STEPS: usize = 250;

#[derive(Default, Debug)]
struct Tally {
    trials: u64,
    injected: u64,
    /// Errors returned to the caller of a workload step.
    errors_seen: u64,
    /// Probe writes after a failure, refused with `Poisoned`.
    refused: u64,
    /// Failures that happened only in the background or were ignored (removing an
    /// obsolete file): the workload finished.
    absorbed: u64,
    /// Live reads of a failed database that themselves failed (persistent read faults).
    live_read_errors: u64,
    /// Acknowledged writes found after the healthy reopen, summed.
    writes_verified: u64,
    /// Synced writes found after the power-loss image, summed.
    synced_verified: u64,
}

fn mode_name(persistent: bool, errno: Errno) -> String {
    format!(
        "{} {}",
        if persistent { "persistent" } else { "once" },
        match errno {
            Errno::Eio => "EIO",
            Errno::Enospc => "ENOSPC",
        }
    )
}

/// One trial. `Ok(false)` if the workload ended before the k-th operation.
fn trial(steps: &[Step], oracle: &Oracle, fault: Fault, tally: &mut Tally) -> Result<bool, String> {
    let mem = MemFs::new();
    let faulty = FaultFs::new(Arc::new(mem.clone()));
    faulty.arm(fault);
    let fs: Arc<dyn FileSystem> = Arc::new(faulty.clone());
    let run = common::run(&fs, steps);
    if faulty.injected() == 0 {
        if let Some((step, e)) = run.error {
            return Err(format!("error without a fault at {step}: {e}"));
        }
        return Ok(false);
    }
    let p = run.progress;
    let hi = p.acked + usize::from(p.in_flight);
    match &run.error {
        None => tally.absorbed += 1,
        Some((step, e)) => {
            tally.errors_seen += 1;
            if !matches!(e, Error::Io { .. } | Error::Poisoned(_)) {
                return Err(format!("{step}: error of the wrong kind: {e}"));
            }
            let in_open = step == "open" || step == "reopen" || step.starts_with("Reopen");
            if let (Some(db), false) = (&run.db, in_open) {
                match db.put("probe", "must be refused") {
                    Err(Error::Poisoned(_)) => tally.refused += 1,
                    other => {
                        return Err(format!(
                            "{step} failed with {e}, yet the next write gave {other:?}"
                        ))
                    }
                }
                match common::read_state(db, KEYS) {
                    Ok(state) => {
                        if oracle.find_prefix(&state, p.acked, hi).is_none() {
                            return Err(format!(
                                "after {step} failed ({e}), the open database does not hold \
                                 the {} acknowledged writes",
                                p.acked
                            ));
                        }
                    }
                    Err(Error::Io { .. } | Error::Poisoned(_)) => tally.live_read_errors += 1,
                    Err(other) => return Err(format!("live read after {step}: {other}")),
                }
            }
        }
    }
    drop(run.db); // close on the faulty file system; errors ignored
    tally.injected += faulty.injected();

    let power_loss = mem.power_loss(PowerLoss::default());
    let j = common::verify(Arc::new(mem), oracle, KEYS, p.acked, hi)
        .map_err(|e| format!("healthy reopen: {e}"))?;
    tally.writes_verified += j as u64;
    let j = common::verify(Arc::new(power_loss), oracle, KEYS, p.durable, hi)
        .map_err(|e| format!("power loss after the failure: {e}"))?;
    tally.synced_verified += p.durable.min(j) as u64;
    tally.trials += 1;
    Ok(true)
}

/// Operations (every kind) of one fault-free run of `steps`.
fn ops_of(steps: &[Step]) -> u64 {
    let faulty = FaultFs::new(Arc::new(MemFs::new()));
    let fs: Arc<dyn FileSystem> = Arc::new(faulty.clone());
    let run = common::run(&fs, steps);
    assert!(run.error.is_none(), "{:?}", run.error.map(|e| e.1));
    drop(run.db);
    faulty.count(&OpKind::ALL)
}

#[test]
fn io_errors_never_panic_lose_acknowledged_writes_or_allow_writes_after_failure() {
    if !shale_trials::in_own_process(
        module_path!(),
        "io_errors_never_panic_lose_acknowledged_writes_or_allow_writes_after_failure",
    ) {
        return;
    }
    shale_trials::count_panics();
    let started = Instant::now();
    let target = shale_trials::env_count("SHALE_IO_FAULT_POINTS", 0);
    let long = target > 0;
    let modes = [
        (false, Errno::Eio),
        (true, Errno::Eio),
        (false, Errno::Enospc),
        (true, Errno::Enospc),
    ];
    let mut tally = Tally::default();
    let mut per_mode = vec![0u64; modes.len()];
    let (mut seeds, mut total_ops) = (0, 0);
    'seeds: for seed in 100u64.. {
        let steps = common::workload(seed, STEPS, KEYS);
        let oracle = Oracle::new(&steps);
        let total = ops_of(&steps);
        seeds += 1;
        total_ops += total;
        // CI mode: about 100 trials per mode spread over the run. Long mode: every k.
        let stride = if long { 1 } else { (total / 100).max(1) };
        for (m, &(persistent, errno)) in modes.iter().enumerate() {
            let mut k = 1 + (seed + m as u64) % stride;
            loop {
                let fault = Fault {
                    at: k,
                    kinds: OpKind::ALL.to_vec(),
                    persistent,
                    errno,
                };
                match trial(&steps, &oracle, fault, &mut tally) {
                    Ok(true) => per_mode[m] += 1,
                    Ok(false) => break,
                    Err(e) => panic!(
                        "seed {seed}, {} at op {k}: {e}",
                        mode_name(persistent, errno)
                    ),
                }
                if long && tally.trials >= target {
                    break 'seeds;
                }
                k += stride;
            }
        }
        if !long {
            break;
        }
    }
    let modes_text: Vec<String> = modes
        .iter()
        .zip(&per_mode)
        .map(|(&(p, e), n)| format!("{n} {}", mode_name(p, e)))
        .collect();
    println!(
        "I/O-error sweep: {} trials over {seeds} workload(s) of {STEPS} steps \
         ({total_ops} file-system operations) in {:.1} s ({}); {} faults injected; \
         {} errors returned to the caller, {} later writes refused as Poisoned, {} absorbed \
         (background or ignorable), {} live reads failed cleanly; {} acknowledged writes \
         verified after a healthy reopen, {} synced writes after power loss; 0 lost; panics {}",
        tally.trials,
        started.elapsed().as_secs_f64(),
        modes_text.join(", "),
        tally.injected,
        tally.errors_seen,
        tally.refused,
        tally.absorbed,
        tally.live_read_errors,
        tally.writes_verified,
        tally.synced_verified,
        shale_trials::panics(),
    );
    assert_eq!(shale_trials::panics(), 0);
}

/// Regression: a failed `compact_range` (here: the disk is full when its output table is
/// created) returned the error but left the database accepting writes, unlike a failed
/// background compaction. It now refuses them with `Poisoned` until reopened.
#[test]
fn failed_manual_compaction_refuses_later_writes() {
    let mem = MemFs::new();
    let faulty = FaultFs::new(Arc::new(mem.clone()));
    let opts = shale::Options {
        level0_compaction_trigger: 8, // no background compaction
        ..common::options(Arc::new(faulty.clone()))
    };
    let db = shale::Db::open(common::DIR, opts).unwrap();
    for round in 0..2 {
        for i in 0..50 {
            db.put(format!("k{i:03}"), format!("v{round}")).unwrap();
        }
        db.flush().unwrap();
    }
    faulty.arm(Fault {
        at: 1,
        kinds: vec![OpKind::Create],
        persistent: true,
        errno: Errno::Enospc,
    });
    assert!(matches!(
        db.compact_range(None, None),
        Err(Error::Io { .. })
    ));
    faulty.disarm();
    assert!(matches!(db.put("after", "x"), Err(Error::Poisoned(_))));
    assert_eq!(db.get("k007").unwrap().as_deref(), Some(&b"v1"[..]));
    drop(db);
    let db = shale::Db::open(common::DIR, common::options(Arc::new(mem))).unwrap();
    assert_eq!(db.get("k007").unwrap().as_deref(), Some(&b"v1"[..]));
    db.put("after", "x").unwrap();
}

/// Regression: `close` flushes writes that skipped the WAL; when that flush failed (or the
/// database was already poisoned, so the flush thread saved nothing), `close` still
/// returned `Ok`, although those acknowledged writes were lost.
#[test]
fn close_reports_a_final_flush_that_failed() {
    for already_poisoned in [false, true] {
        let mem = MemFs::new();
        let faulty = FaultFs::new(Arc::new(mem.clone()));
        let db = shale::Db::open(common::DIR, common::options(Arc::new(faulty.clone()))).unwrap();
        if already_poisoned {
            db.put("logged", "x").unwrap();
            faulty.arm(Fault {
                at: 1,
                kinds: vec![OpKind::Create],
                persistent: false,
                errno: Errno::Eio,
            });
            assert!(db.flush().is_err());
            faulty.disarm();
        }
        let mut batch = shale::WriteBatch::new();
        batch.put("unlogged", "y");
        let written = db.write(batch, shale::WriteOptions::no_wal());
        if already_poisoned {
            assert!(matches!(written, Err(Error::Poisoned(_))), "{written:?}");
        } else {
            written.unwrap();
            // The first create is close's new WAL, the second the flush's table.
            faulty.arm(Fault {
                at: 2,
                kinds: vec![OpKind::Create],
                persistent: true,
                errno: Errno::Enospc,
            });
        }
        let closed = db.close();
        assert!(
            matches!(closed, Err(Error::Poisoned(_))),
            "poisoned before: {already_poisoned}: {closed:?}"
        );
    }
}

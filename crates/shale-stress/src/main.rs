//! `shale-stress`: a random mixed workload on one database, with every write logged to an
//! oracle file outside the process (see `oracle.rs`), meant to be killed at any moment.
//!
//! ```text
//! shale-stress --db DIR --oracle FILE [--seed N] [--wid-base N] [--threads N]
//!              [--keys N] [--ops N] [--semantic]
//! ```
//!
//! Each thread owns the keys `k` with `k % threads == tid` and keeps their model, so every
//! read of its own keys has one right answer even while other threads write: point reads,
//! range scans (forward and backward; the other threads' keys in them are checked to be
//! well-formed values), reads at a snapshot taken before later writes, and with
//! `--semantic` searches whose hits on its keys must be their current text. The workload:
//! puts, deletes (a third of them, without `--semantic`, range deletes over the one key),
//! batches of 2 to 6 entries, `flush`, `compact_range`, on 64 KiB memtables and 16 KiB
//! tables; one write in 8 synced (so the group-commit leader's fsync path is killed in the
//! middle too), one in 8 without the WAL, the rest through the WAL unsynced. It prints
//! `ready` once the database is open, and runs until killed (or `--ops` per thread, then
//! closes and prints `finished`). A failed check prints `FAIL` and exits with status 3; an
//! engine error exits with status 4.

use std::path::PathBuf;
use std::process::exit;
use std::sync::atomic::{AtomicU64, Ordering};

use shale::{Db, ReadOptions, WriteBatch, WriteOptions};
use shale_stress::oracle::{Entry, OracleWriter};
use shale_stress::verify::read_all;
use shale_stress::workload::{self, key, parse_value, value, Rng};

struct Args {
    db: PathBuf,
    oracle: PathBuf,
    seed: u64,
    wid_base: u64,
    threads: u32,
    keys: u32,
    ops: u64,
    semantic: bool,
}

fn usage(why: &str) -> ! {
    eprintln!("shale-stress: {why}");
    eprintln!(
        "usage: shale-stress --db DIR --oracle FILE [--seed N] [--wid-base N] [--threads N] \
         [--keys N] [--ops N] [--semantic]"
    );
    exit(2)
}

fn parse_args() -> Args {
    let mut args = Args {
        db: PathBuf::new(),
        oracle: PathBuf::new(),
        seed: 1,
        wid_base: 1,
        threads: 2,
        keys: 2000,
        ops: u64::MAX,
        semantic: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--semantic" {
            args.semantic = true;
            continue;
        }
        let Some(v) = it.next() else {
            usage(&format!("{flag} needs a value"))
        };
        let num = || -> u64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("bad {flag} {v}")))
        };
        match flag.as_str() {
            "--db" => args.db = PathBuf::from(&v),
            "--oracle" => args.oracle = PathBuf::from(&v),
            "--seed" => args.seed = num(),
            "--wid-base" => args.wid_base = num(),
            "--threads" => args.threads = num().clamp(1, 64) as u32,
            "--keys" => args.keys = num().clamp(1, 99_999) as u32,
            "--ops" => args.ops = num(),
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    if args.db.as_os_str().is_empty() || args.oracle.as_os_str().is_empty() {
        usage("--db and --oracle are required");
    }
    args
}

fn fail(msg: String) -> ! {
    eprintln!("FAIL: {msg}");
    exit(3)
}

fn engine<T>(what: &str, r: shale::Result<T>) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("ENGINE ERROR during {what}: {e}");
        exit(4)
    })
}

/// One writer thread and the model of the keys it owns.
struct Worker<'a> {
    tid: u32,
    threads: u32,
    keys: u32,
    /// The semantic index, when the run has one (`--semantic`).
    index: Option<&'a shale_search::semantic::VectorIndex>,
    db: &'a Db,
    oracle: &'a OracleWriter,
    next_wid: &'a AtomicU64,
    /// `model[k]`: write id of key `k`'s live value (only this thread's keys are kept).
    model: Vec<Option<u64>>,
    rng: Rng,
    ops: u64,
}

impl Worker<'_> {
    fn own_key(&mut self) -> u32 {
        let per = (self.keys - self.tid).div_ceil(self.threads);
        self.tid + self.threads * self.rng.below(per.into()) as u32
    }

    fn owns(&self, k: u32) -> bool {
        k % self.threads == self.tid
    }

    /// Log, issue and acknowledge one write of `entries` (distinct keys).
    fn write(&mut self, entries: &[Entry]) {
        let wid = self.next_wid.fetch_add(1, Ordering::Relaxed);
        // One write in 8 is synced, one in 8 skips the WAL, the rest are the default.
        let opts = match wid % 8 {
            0 => WriteOptions::sync(),
            4 => WriteOptions::no_wal(),
            _ => WriteOptions::default(),
        };
        let oracle = |r: std::io::Result<()>| {
            r.unwrap_or_else(|e| {
                eprintln!("oracle write failed: {e}");
                exit(5)
            })
        };
        oracle(
            self.oracle
                .pending(self.tid, wid, entries, !opts.disable_wal),
        );
        let mut batch = WriteBatch::new();
        for &(k, put) in entries {
            if put {
                batch.put(key(k), value(k, wid));
            } else if self.index.is_none() && self.rng.percent(33) {
                // A range tombstone over `[key, key ++ 0x00)`, which holds this key alone:
                // the same delete to the oracle, through the engine's range-delete path
                // (an index refuses ranges over its prefix, so not with `--semantic`).
                let mut end = key(k);
                end.push(0);
                batch.delete_range(key(k), end);
            } else {
                batch.delete(key(k));
            }
        }
        engine("write", self.db.write(batch, opts));
        oracle(self.oracle.done(self.tid, wid));
        for &(k, put) in entries {
            self.model[k as usize] = put.then_some(wid);
        }
    }

    fn check_get(&mut self, k: u32, opts: &ReadOptions<'_>, model: &[Option<u64>], at: &str) {
        let got = engine("get", self.db.get_opt(key(k), opts));
        let got = got.map(|v| {
            parse_value(k, &v).unwrap_or_else(|| fail(format!("{at}: k{k:05}: malformed value")))
        });
        if got != model[k as usize] {
            fail(format!(
                "{at}: get k{k:05} = {got:?}, model says {:?}",
                model[k as usize]
            ));
        }
    }

    /// Scan `[lo, hi)`, forward or backward; this thread's keys must match `model`
    /// exactly, every value must be well formed, and the order strict.
    fn check_scan(&mut self, opts: &ReadOptions<'_>, model: &[Option<u64>], at: &str) {
        let lo = self.rng.below(self.keys.into()) as u32;
        let hi = (lo + 1 + self.rng.below(120) as u32).min(self.keys);
        let backward = self.rng.percent(30);
        let iter = engine("range", self.db.range_opt(key(lo)..key(hi), opts));
        let mut seen = Vec::new();
        let pairs: Vec<_> = if backward {
            iter.rev().collect()
        } else {
            iter.collect()
        };
        for pair in pairs {
            let (k, v) = engine("range next", pair);
            let i =
                workload::key_index(&k).unwrap_or_else(|| fail(format!("{at}: scan: unknown key")));
            let wid = parse_value(i, &v)
                .unwrap_or_else(|| fail(format!("{at}: scan: k{i:05} malformed value")));
            seen.push((i, wid));
        }
        if backward {
            seen.reverse();
        }
        if seen.windows(2).any(|w| w[0].0 >= w[1].0) || seen.iter().any(|&(i, _)| i < lo || i >= hi)
        {
            fail(format!(
                "{at}: scan [{lo}, {hi}) backward={backward} out of order or range"
            ));
        }
        let mine: Vec<(u32, u64)> = seen.into_iter().filter(|&(i, _)| self.owns(i)).collect();
        let want: Vec<(u32, u64)> = (lo..hi)
            .filter(|&i| self.owns(i))
            .filter_map(|i| model[i as usize].map(|w| (i, w)))
            .collect();
        if mine != want {
            fail(format!(
                "{at}: scan [{lo}, {hi}) backward={backward}: {mine:?}, model {want:?}"
            ));
        }
    }

    /// A snapshot, a few writes after it, then reads at the snapshot that must not see them.
    fn check_snapshot(&mut self) {
        let snap = self.db.snapshot();
        let frozen = self.model.clone();
        for _ in 0..1 + self.rng.below(8) {
            self.random_write();
        }
        let opts = ReadOptions::at(&snap);
        for _ in 0..8 {
            let k = self.own_key();
            self.check_get(k, &opts, &frozen, "snapshot");
        }
        self.check_scan(&opts, &frozen, "snapshot");
    }

    fn check_search(&mut self) {
        let query = workload::words(&mut self.rng, 3);
        let Some(index) = self.index else { return };
        let opts = shale_search::semantic::SearchOptions::k(10).exact();
        for hit in engine("search", index.search(&query, &opts)) {
            let i =
                workload::key_index(&hit.key).unwrap_or_else(|| fail("search: unknown key".into()));
            let wid = parse_value(i, &hit.document)
                .unwrap_or_else(|| fail(format!("search: k{i:05}: text is no value ever written")));
            if self.owns(i) && self.model[i as usize] != Some(wid) {
                fail(format!(
                    "search: k{i:05} returned write {wid}, live is {:?}",
                    self.model[i as usize]
                ));
            }
        }
    }

    fn random_write(&mut self) {
        let roll = self.rng.below(100);
        if roll < 60 {
            let k = self.own_key();
            self.write(&[(k, true)]);
        } else if roll < 80 {
            let k = self.own_key();
            self.write(&[(k, false)]);
        } else {
            let n = 2 + self.rng.below(5);
            let mut entries: Vec<Entry> = Vec::new();
            for _ in 0..n {
                let k = self.own_key();
                if entries.iter().all(|&(e, _)| e != k) {
                    entries.push((k, self.rng.percent(75)));
                }
            }
            self.write(&entries);
        }
    }

    fn step(&mut self) {
        let roll = self.rng.below(1000);
        let latest = ReadOptions::default();
        let model = std::mem::take(&mut self.model);
        match roll {
            0..=649 => {
                self.model = model;
                self.random_write();
                return;
            }
            650..=849 => {
                let k = self.own_key();
                self.check_get(k, &latest, &model, "get");
            }
            850..=919 => self.check_scan(&latest, &model, "scan"),
            920..=949 => {
                self.model = model;
                self.check_snapshot();
                return;
            }
            950..=989 if self.index.is_some() => {
                self.model = model;
                self.check_search();
                return;
            }
            990..=995 => engine("flush", self.db.flush()),
            996..=999 => {
                let lo = self.rng.below(self.keys.into()) as u32;
                let hi = (lo + self.rng.below(500) as u32).min(self.keys - 1);
                let whole = self.rng.percent(30);
                let (a, b) = (key(lo), key(hi));
                let range = if whole {
                    (None, None)
                } else {
                    (Some(&a[..]), Some(&b[..]))
                };
                engine("compact_range", self.db.compact_range(range.0, range.1));
            }
            _ => {
                let k = self.own_key();
                self.check_get(k, &latest, &model, "get");
            }
        }
        self.model = model;
    }
}

fn main() {
    let args = parse_args();
    let oracle = OracleWriter::open(&args.oracle).unwrap_or_else(|e| {
        eprintln!("cannot open the oracle log {}: {e}", args.oracle.display());
        exit(2)
    });
    let (db, index) = engine("open", workload::open(&args.db, args.semantic));
    // The driver verified the database before this run: start from what it holds.
    let start = read_all(&db, args.keys).unwrap_or_else(|e| fail(format!("at start: {e}")));
    println!("ready");
    let next_wid = AtomicU64::new(args.wid_base);
    std::thread::scope(|s| {
        for tid in 0..args.threads {
            let mut model = vec![None; args.keys as usize];
            for (&k, &wid) in &start {
                if k % args.threads == tid {
                    model[k as usize] = Some(wid);
                }
            }
            let mut worker = Worker {
                tid,
                threads: args.threads,
                keys: args.keys,
                index: index.as_ref(),
                db: &db,
                oracle: &oracle,
                next_wid: &next_wid,
                model,
                rng: Rng::new(args.seed.wrapping_mul(1000).wrapping_add(tid.into())),
                ops: 0,
            };
            s.spawn(move || {
                while worker.ops < args.ops {
                    worker.step();
                    worker.ops += 1;
                    if worker.ops.is_multiple_of(16) {
                        let _ = worker.oracle.ops(worker.tid, worker.ops);
                    }
                }
                let _ = worker.oracle.ops(worker.tid, worker.ops);
            });
        }
    });
    engine("close", db.close());
    println!("finished");
}

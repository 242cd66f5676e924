//! The workloads (db_bench and YCSB names) and the loop that measures them.
//!
//! A *group* of workloads runs in one process on one database: a workload that needs a
//! fresh database (the fills, `ycsb-load`, `lab`) opens a new one; the others run on what
//! the group holds, loading it first (unmeasured) if it does not hold what they need.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use crate::engine::{self, BenchResult, Durability, Engine, Parity};
use crate::gen::{fnv64, shuffled, KeyGen, Rng, ValueGen};
use crate::metrics::{self, Latencies};
use crate::record::Record;
use crate::ycsb::{ScrambledZipfian, SkewedLatest};

/// Every workload, in the default order.
pub const ALL: &[&str] = &[
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readmissing",
    "seekrandom",
    "readseq",
    "readwhilewriting",
    "deleterandom",
    "fillrandom-nowal",
    "fillbatch",
    "fillsync",
    "fillsync-threads-1",
    "fillsync-threads-2",
    "fillsync-threads-8",
    "fillsync-threads-32",
    "ycsb-load",
    "ycsb-a",
    "ycsb-b",
    "ycsb-c",
    "ycsb-f",
    "ycsb-d",
    "ycsb-e",
    "lab",
];

/// Whether `name` starts from an empty database (and so starts a new group).
pub fn is_fresh(name: &str) -> bool {
    matches!(
        name,
        "fillseq"
            | "fillrandom"
            | "fillrandom-nowal"
            | "fillbatch"
            | "fillsync"
            | "ycsb-load"
            | "lab"
    ) || name.starts_with("fillsync-threads-")
}

/// Whether `name` is a workload this binary knows.
pub fn is_known(name: &str) -> bool {
    ALL.contains(&name) || sync_threads(name).is_some()
}

fn sync_threads(name: &str) -> Option<usize> {
    name.strip_prefix("fillsync-threads-")?
        .parse()
        .ok()
        .filter(|&n| n > 0)
}

/// Sizes and counts of one run, resolved from the command line.
#[derive(Debug, Clone)]
pub struct Config {
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub threads: usize,
    pub sync_num: u64,
    pub ycsb_records: u64,
    pub ycsb_ops: u64,
    pub lab_sizes: Vec<u64>,
    pub seed: u64,
    pub parity: Parity,
    pub db_dir: PathBuf,
    pub run: u32,
    pub command: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loaded {
    Nothing,
    /// Keys `0..n`, each once, `value_size` values.
    Keys(u64),
    /// YCSB records `0..n`.
    Ycsb(u64),
}

/// What one measured workload did.
struct Outcome {
    ops: u64,
    seconds: f64,
    lat: Latencies,
    /// Key + value bytes moved (written or read), for MB/s.
    bytes: u64,
    /// Key + value bytes the user wrote (0 for read-only workloads).
    user_bytes_written: u64,
    /// Live user bytes afterwards, when known.
    live_bytes: Option<u64>,
    note: Option<String>,
}

/// Runs workloads for one engine; owns its database directory.
pub struct Runner {
    cfg: Config,
    engine_name: String,
    dir: PathBuf,
    engine: Option<Box<dyn Engine>>,
    loaded: Loaded,
    keys: KeyGen,
    machine: String,
    git_commit: String,
    date: String,
}

impl Runner {
    pub fn new(cfg: Config, engine_name: &str) -> Runner {
        let dir = cfg
            .db_dir
            .join(format!("{engine_name}-{}", std::process::id()));
        let keys = KeyGen {
            key_size: cfg.key_size,
        };
        Runner {
            cfg,
            engine_name: engine_name.to_string(),
            dir,
            engine: None,
            loaded: Loaded::Nothing,
            keys,
            machine: crate::machine::describe(),
            git_commit: crate::machine::git_commit(),
            date: crate::machine::date(),
        }
    }

    /// Run `workloads` in order; one record per measured workload (`lab` gives several).
    pub fn run_group(
        &mut self,
        workloads: &[String],
        emit: &mut dyn FnMut(&Record),
    ) -> BenchResult<()> {
        for w in workloads {
            self.run_one(w, emit)?;
        }
        self.close()?;
        let _ = std::fs::remove_dir_all(&self.dir);
        Ok(())
    }

    fn close(&mut self) -> BenchResult<()> {
        if let Some(e) = self.engine.take() {
            e.close()?;
        }
        Ok(())
    }

    fn fresh(&mut self) -> BenchResult<()> {
        self.close()?;
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir)?;
        self.engine = Some(engine::open(
            &self.engine_name,
            &self.dir,
            &self.cfg.parity,
        )?);
        self.loaded = Loaded::Nothing;
        Ok(())
    }

    fn engine(&self) -> BenchResult<&dyn Engine> {
        self.engine
            .as_deref()
            .ok_or_else(|| "no engine open".into())
    }

    fn entry_bytes(&self) -> u64 {
        (self.cfg.key_size + self.cfg.value_size) as u64
    }

    fn ensure_keys(&mut self) -> BenchResult<()> {
        if self.loaded != Loaded::Keys(self.cfg.num) {
            eprintln!(
                "[{}] loading {} keys (not measured)",
                self.engine_name, self.cfg.num
            );
            self.fresh()?;
            self.fill(true, Durability::Buffered, &ProgressBar::hidden())?;
            self.engine()?.wait_background()?;
        }
        Ok(())
    }

    fn ensure_ycsb(&mut self) -> BenchResult<u64> {
        if let Loaded::Ycsb(n) = self.loaded {
            return Ok(n);
        }
        eprintln!(
            "[{}] loading {} YCSB records (not measured)",
            self.engine_name, self.cfg.ycsb_records
        );
        self.fresh()?;
        self.ycsb_load(&ProgressBar::hidden())?;
        self.engine()?.wait_background()?;
        Ok(self.cfg.ycsb_records)
    }

    fn progress(&self, name: &str, len: u64) -> ProgressBar {
        let pb = ProgressBar::new(len);
        pb.set_style(
            ProgressStyle::with_template("{prefix:>22} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        pb.set_prefix(format!("{}/{name}", self.engine_name));
        pb
    }

    fn run_one(&mut self, name: &str, emit: &mut dyn FnMut(&Record)) -> BenchResult<()> {
        if name == "lab" {
            return self.lab(emit);
        }
        let durability = match name {
            "fillrandom-nowal" => Durability::NoWal,
            n if n == "fillsync" || sync_threads(n).is_some() => Durability::Sync,
            _ => Durability::Buffered,
        };
        if is_fresh(name) {
            self.fresh()?;
        }
        if !self.engine()?.supports(durability) {
            eprintln!(
                "[{}] {name}: skipped, the engine has no {durability:?} mode",
                self.engine_name
            );
            return Ok(());
        }
        let threads_needed = match name {
            n if sync_threads(n).is_some() => sync_threads(n).unwrap_or(1),
            "readwhilewriting" => 2,
            "readrandom" | "readmissing" | "seekrandom" | "ycsb-a" | "ycsb-b" | "ycsb-c"
            | "ycsb-d" | "ycsb-e" | "ycsb-f" => self.cfg.threads,
            _ => 1,
        };
        if threads_needed > 1 && self.engine()?.shared().is_none() {
            eprintln!(
                "[{}] {name}: skipped, the engine cannot be shared between threads",
                self.engine_name
            );
            return Ok(());
        }
        match name {
            "readrandom" | "readmissing" | "seekrandom" | "readseq" | "overwrite"
            | "readwhilewriting" | "deleterandom" => self.ensure_keys()?,
            n if n.starts_with("ycsb-") && n != "ycsb-load" => {
                self.ensure_ycsb()?;
            }
            _ => {}
        }

        metrics::reset_peak_rss();
        let io0 = metrics::io_write_bytes();
        let cpu0 = metrics::cpu_seconds();
        let total = match name {
            "fillsync" => self.cfg.sync_num,
            n if sync_threads(n).is_some() => self.cfg.sync_num,
            n if n.starts_with("ycsb-") && n != "ycsb-load" => self.cfg.ycsb_ops,
            "ycsb-load" => self.cfg.ycsb_records,
            _ => self.cfg.num,
        };
        let pb = self.progress(name, total);
        let out = match name {
            "fillseq" => self.fill(false, durability, &pb)?,
            "fillrandom" | "fillrandom-nowal" => self.fill(true, durability, &pb)?,
            "fillbatch" => self.fill_batch(&pb)?,
            "fillsync" => self.fill_sync(1, &pb)?,
            n if sync_threads(n).is_some() => self.fill_sync(threads_needed, &pb)?,
            "overwrite" => self.overwrite(&pb)?,
            "readrandom" => self.read(false, &pb)?,
            "readmissing" => self.read(true, &pb)?,
            "seekrandom" => self.seek_random(&pb)?,
            "readseq" => self.read_seq(&pb)?,
            "readwhilewriting" => self.read_while_writing(&pb)?,
            "deleterandom" => self.delete_random(&pb)?,
            "ycsb-load" => self.ycsb_load(&pb)?,
            n => match n.strip_prefix("ycsb-").and_then(|c| c.chars().next()) {
                Some(c @ 'a'..='f') => self.ycsb_run(c, &pb)?,
                _ => return Err(format!("unknown workload {name:?}").into()),
            },
        };
        pb.finish_and_clear();
        let wrote = out.user_bytes_written > 0;
        if wrote {
            // Background work caused by the writes counts towards write amplification.
            self.engine()?.wait_background()?;
        }
        let io_bytes = metrics::io_write_bytes().saturating_sub(io0);
        let cpu = metrics::cpu_seconds() - cpu0;
        let disk = metrics::dir_bytes(&self.dir);
        let rec = self.record(
            name,
            durability,
            threads_needed,
            &out,
            wrote,
            io_bytes,
            disk,
            cpu,
        );
        emit(&rec);
        Ok(())
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call site that assembles a record"
    )]
    fn record(
        &self,
        name: &str,
        durability: Durability,
        threads: usize,
        out: &Outcome,
        wrote: bool,
        io_bytes: u64,
        disk: u64,
        cpu: f64,
    ) -> Record {
        let secs = out.seconds.max(1e-9);
        Record {
            engine: self.engine_name.clone(),
            workload: name.to_string(),
            run: self.cfg.run,
            ops: out.ops,
            seconds: out.seconds,
            ops_per_sec: out.ops as f64 / secs,
            mb_per_sec: out.bytes as f64 / secs / 1e6,
            mean_us: out.lat.mean_us(),
            p50_us: out.lat.quantile_us(0.5),
            p99_us: out.lat.quantile_us(0.99),
            p999_us: out.lat.quantile_us(0.999),
            max_us: out.lat.max_us(),
            write_amp: wrote.then(|| io_bytes as f64 / out.user_bytes_written.max(1) as f64),
            space_amp: out
                .live_bytes
                .filter(|&b| b > 0)
                .map(|b| disk as f64 / b as f64),
            disk_bytes: disk,
            user_bytes_written: out.user_bytes_written,
            peak_rss_bytes: metrics::peak_rss_bytes(),
            cpu_seconds: cpu,
            threads,
            key_size: self.cfg.key_size,
            value_size: self.cfg.value_size,
            durability: format!("{durability:?}"),
            parity: self.cfg.parity.clone(),
            caveats: self
                .engine
                .as_ref()
                .map(|e| e.caveats())
                .unwrap_or_default(),
            note: out.note.clone(),
            git_commit: self.git_commit.clone(),
            date: self.date.clone(),
            machine: self.machine.clone(),
            command: self.cfg.command.clone(),
        }
    }

    /// Write keys `0..num` once each, in order or shuffled.
    fn fill(
        &mut self,
        random: bool,
        durability: Durability,
        pb: &ProgressBar,
    ) -> BenchResult<Outcome> {
        let num = self.cfg.num;
        let mut rng = Rng::new(self.cfg.seed);
        let order = if random {
            shuffled(num, &mut rng)
        } else {
            (0..num).collect()
        };
        let mut values = ValueGen::new(self.cfg.seed);
        let (keys, vs) = (self.keys, self.cfg.value_size);
        let e = self.engine()?;
        let mut lat = Latencies::new();
        let mut key = Vec::with_capacity(keys.key_size);
        let start = Instant::now();
        for (i, &n) in order.iter().enumerate() {
            keys.key(n, &mut key);
            let v = values.next(vs);
            let t = Instant::now();
            e.put(&key, v, durability)?;
            lat.record_since(t);
            tick(pb, i);
        }
        let seconds = start.elapsed().as_secs_f64();
        self.loaded = Loaded::Keys(num);
        let bytes = num * self.entry_bytes();
        Ok(Outcome {
            ops: num,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: None,
        })
    }

    /// Keys `0..num` once each in random order, 100 per atomic batch (db_bench fillbatch
    /// uses 1000); latency is per batch, ops count entries.
    fn fill_batch(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        const BATCH: usize = 100;
        let num = self.cfg.num;
        let order = shuffled(num, &mut Rng::new(self.cfg.seed));
        let mut values = ValueGen::new(self.cfg.seed);
        let (keys, vs) = (self.keys, self.cfg.value_size);
        let e = self.engine()?;
        let mut lat = Latencies::new();
        let mut ops = Vec::with_capacity(BATCH);
        let start = Instant::now();
        for chunk in order.chunks(BATCH) {
            ops.clear();
            for &n in chunk {
                let mut key = Vec::with_capacity(keys.key_size);
                keys.key(n, &mut key);
                ops.push((key, Some(values.next(vs).to_vec())));
            }
            lat.time(|| e.write_batch(&ops, Durability::Buffered))?;
            pb.inc(chunk.len() as u64);
        }
        let seconds = start.elapsed().as_secs_f64();
        self.loaded = Loaded::Keys(num);
        let bytes = num * self.entry_bytes();
        Ok(Outcome {
            ops: num,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: Some(format!("batches of {BATCH}; latency per batch")),
        })
    }

    /// `sync_num` synced puts of random keys from `threads` concurrent writers.
    fn fill_sync(&mut self, threads: usize, pb: &ProgressBar) -> BenchResult<Outcome> {
        let per_thread = self.cfg.sync_num / threads as u64;
        let (keys, vs, seed) = (self.keys, self.cfg.value_size, self.cfg.seed);
        let start = Instant::now();
        let lat = parallel(self.engine()?, threads, |e, t, lat| {
            let mut rng = Rng::new(seed + t as u64);
            let mut values = ValueGen::new(seed + t as u64);
            let mut key = Vec::new();
            for i in 0..per_thread {
                keys.key(rng.below(1 << 40), &mut key);
                let v = values.next(vs);
                lat.time(|| e.put(&key, v, Durability::Sync))?;
                tick(pb, i as usize);
            }
            Ok(())
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let ops = per_thread * threads as u64;
        let bytes = ops * self.entry_bytes();
        self.loaded = Loaded::Nothing;
        Ok(Outcome {
            ops,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: None,
        })
    }

    /// `num` puts of uniformly random existing keys.
    fn overwrite(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let num = self.cfg.num;
        let mut rng = Rng::new(self.cfg.seed + 1);
        let mut values = ValueGen::new(self.cfg.seed + 1);
        let (keys, vs) = (self.keys, self.cfg.value_size);
        let e = self.engine()?;
        let mut lat = Latencies::new();
        let mut key = Vec::new();
        let start = Instant::now();
        for i in 0..num {
            keys.key(rng.below(num), &mut key);
            let v = values.next(vs);
            lat.time(|| e.put(&key, v, Durability::Buffered))?;
            tick(pb, i as usize);
        }
        let seconds = start.elapsed().as_secs_f64();
        let bytes = num * self.entry_bytes();
        Ok(Outcome {
            ops: num,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: None,
        })
    }

    /// `num` gets of random existing keys (or of keys that sort among them but are absent).
    fn read(&mut self, missing: bool, pb: &ProgressBar) -> BenchResult<Outcome> {
        let (num, threads, keys, seed) = (self.cfg.num, self.cfg.threads, self.keys, self.cfg.seed);
        let per_thread = num / threads as u64;
        let found = AtomicU64::new(0);
        let start = Instant::now();
        let lat = parallel(self.engine()?, threads, |e, t, lat| {
            let mut rng = Rng::new(seed + 100 + t as u64);
            let mut key = Vec::new();
            let mut hits = 0;
            for i in 0..per_thread {
                let n = rng.below(num);
                if missing {
                    keys.missing_key(n, &mut key);
                } else {
                    keys.key(n, &mut key);
                }
                hits += u64::from(lat.time(|| e.get(&key))?.is_some());
                tick(pb, i as usize);
            }
            found.fetch_add(hits, Ordering::Relaxed);
            Ok(())
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let ops = per_thread * threads as u64;
        let hits = found.load(Ordering::Relaxed);
        let expected = if missing { 0 } else { ops };
        let note =
            (hits != expected).then(|| format!("{hits} of {ops} keys found, expected {expected}"));
        Ok(Outcome {
            ops,
            seconds,
            lat,
            bytes: hits * self.entry_bytes() + (ops - hits) * self.cfg.key_size as u64,
            user_bytes_written: 0,
            live_bytes: Some(self.cfg.num * self.entry_bytes()),
            note,
        })
    }

    /// Seek to a random existing key and read the next 100 entries (db_bench's seekrandom
    /// with `--seek_nexts=100`).
    fn seek_random(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let (num, threads, keys, seed) = (self.cfg.num, self.cfg.threads, self.keys, self.cfg.seed);
        let ops = (num / 10).max(1);
        let per_thread = ops / threads as u64;
        let visited = AtomicU64::new(0);
        let start = Instant::now();
        let lat = parallel(self.engine()?, threads, |e, t, lat| {
            let mut rng = Rng::new(seed + 200 + t as u64);
            let mut key = Vec::new();
            let mut n = 0;
            for i in 0..per_thread {
                keys.key(rng.below(num), &mut key);
                n += lat.time(|| e.scan(&key, 101))? as u64;
                tick(pb, i as usize);
            }
            visited.fetch_add(n, Ordering::Relaxed);
            Ok(())
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let ops = per_thread * threads as u64;
        Ok(Outcome {
            ops,
            seconds,
            lat,
            bytes: visited.load(Ordering::Relaxed) * self.entry_bytes(),
            user_bytes_written: 0,
            live_bytes: Some(num * self.entry_bytes()),
            note: Some(format!("{ops} seeks (num/10), each seek + 100 next")),
        })
    }

    /// One full forward scan; latency per entry is the scan time divided by entries.
    fn read_seq(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let e = self.engine()?;
        let start = Instant::now();
        let n = e.scan(b"", usize::MAX)? as u64;
        let seconds = start.elapsed().as_secs_f64();
        pb.set_position(n);
        let mut lat = Latencies::new();
        lat.record_ns((seconds * 1e9 / n.max(1) as f64) as u64);
        let note =
            (n != self.cfg.num).then(|| format!("scanned {n} entries, expected {}", self.cfg.num));
        Ok(Outcome {
            ops: n,
            seconds,
            lat,
            bytes: n * self.entry_bytes(),
            user_bytes_written: 0,
            live_bytes: Some(self.cfg.num * self.entry_bytes()),
            note: Some(
                note.unwrap_or_else(|| "one scan; latency columns are not per entry".into()),
            ),
        })
    }

    /// `threads` readers do `num` random gets in all while one writer overwrites random
    /// keys as fast as it can; the reader latencies are reported.
    fn read_while_writing(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let (num, keys, seed, vs) = (self.cfg.num, self.keys, self.cfg.seed, self.cfg.value_size);
        let readers = self.cfg.threads.max(1);
        let per_thread = num / readers as u64;
        let shared = self.engine()?.shared().ok_or("engine is not shareable")?;
        let done = AtomicBool::new(false);
        let writes = AtomicU64::new(0);
        let start = Instant::now();
        let lat = std::thread::scope(|s| -> BenchResult<Latencies> {
            let writer = s.spawn(|| -> BenchResult<()> {
                let mut rng = Rng::new(seed + 300);
                let mut values = ValueGen::new(seed + 300);
                let mut key = Vec::new();
                while !done.load(Ordering::Relaxed) {
                    keys.key(rng.below(num), &mut key);
                    shared.put(&key, values.next(vs), Durability::Buffered)?;
                    writes.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            });
            let lat = parallel(shared, readers, |e, t, lat| {
                let mut rng = Rng::new(seed + 400 + t as u64);
                let mut key = Vec::new();
                for i in 0..per_thread {
                    keys.key(rng.below(num), &mut key);
                    lat.time(|| e.get(&key))?;
                    tick(pb, i as usize);
                }
                Ok(())
            });
            done.store(true, Ordering::Relaxed);
            writer.join().map_err(|_| "writer panicked")??;
            lat
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let ops = per_thread * readers as u64;
        let w = writes.load(Ordering::Relaxed);
        Ok(Outcome {
            ops,
            seconds,
            lat,
            bytes: ops * self.entry_bytes(),
            user_bytes_written: w * self.entry_bytes(),
            live_bytes: Some(num * self.entry_bytes()),
            note: Some(format!(
                "{readers} reader(s); 1 writer did {w} puts ({:.0}/s)",
                w as f64 / seconds.max(1e-9)
            )),
        })
    }

    /// Delete every key once, in random order.
    fn delete_random(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let num = self.cfg.num;
        let order = shuffled(num, &mut Rng::new(self.cfg.seed + 500));
        let keys = self.keys;
        let e = self.engine()?;
        let mut lat = Latencies::new();
        let mut key = Vec::new();
        let start = Instant::now();
        for (i, &n) in order.iter().enumerate() {
            keys.key(n, &mut key);
            lat.time(|| e.delete(&key, Durability::Buffered))?;
            tick(pb, i);
        }
        let seconds = start.elapsed().as_secs_f64();
        self.loaded = Loaded::Nothing;
        let bytes = num * self.cfg.key_size as u64;
        Ok(Outcome {
            ops: num,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: None,
            note: None,
        })
    }

    fn ycsb_key(&self, record: u64, out: &mut Vec<u8>) {
        ycsb_key(self.keys, record, out);
    }

    /// Insert YCSB records `0..ycsb_records` (keys hashed, as YCSB's `insertorder=hashed`).
    fn ycsb_load(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let n = self.cfg.ycsb_records;
        let mut values = ValueGen::new(self.cfg.seed + 600);
        let vs = self.cfg.value_size;
        let mut lat = Latencies::new();
        let mut key = Vec::new();
        let start = Instant::now();
        for i in 0..n {
            self.ycsb_key(i, &mut key);
            let v = values.next(vs);
            let e = self.engine()?;
            lat.time(|| e.put(&key, v, Durability::Buffered))?;
            tick(pb, i as usize);
        }
        let seconds = start.elapsed().as_secs_f64();
        self.loaded = Loaded::Ycsb(n);
        let bytes = n * self.entry_bytes();
        Ok(Outcome {
            ops: n,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: None,
        })
    }

    /// YCSB core workloads A to F over scrambled-zipfian (D: latest) record choice.
    fn ycsb_run(&mut self, workload: char, pb: &ProgressBar) -> BenchResult<Outcome> {
        let records0 = match self.loaded {
            Loaded::Ycsb(n) => n,
            _ => return Err("YCSB workload without loaded records".into()),
        };
        let records = AtomicU64::new(records0);
        let (threads, seed, vs, ops_total) = (
            self.cfg.threads,
            self.cfg.seed,
            self.cfg.value_size,
            self.cfg.ycsb_ops,
        );
        let per_thread = ops_total / threads as u64;
        let written = AtomicU64::new(0);
        let keys = self.keys;
        let start = Instant::now();
        let lat = parallel(self.engine()?, threads, |e, t, lat| {
            let mut rng = Rng::new(seed + 700 + t as u64 * 31 + workload as u64);
            let mut values = ValueGen::new(seed + 700 + t as u64);
            let mut zipf = ScrambledZipfian::new();
            let mut latest = SkewedLatest::new(records0);
            let mut key = Vec::new();
            let mut w = 0u64;
            for i in 0..per_thread {
                let r = rng.unit();
                let n = records.load(Ordering::Relaxed);
                let pick = |rng: &mut Rng, zipf: &mut ScrambledZipfian| zipf.next(rng, n);
                let t0 = Instant::now();
                match workload {
                    'a' | 'b' => {
                        let update = if workload == 'a' { 0.5 } else { 0.05 };
                        ycsb_key(keys, pick(&mut rng, &mut zipf), &mut key);
                        if r < update {
                            e.put(&key, values.next(vs), Durability::Buffered)?;
                            w += 1;
                        } else {
                            e.get(&key)?;
                        }
                    }
                    'c' => {
                        ycsb_key(keys, pick(&mut rng, &mut zipf), &mut key);
                        e.get(&key)?;
                    }
                    'd' => {
                        if r < 0.05 {
                            ycsb_key(keys, records.fetch_add(1, Ordering::Relaxed), &mut key);
                            e.put(&key, values.next(vs), Durability::Buffered)?;
                            w += 1;
                        } else {
                            ycsb_key(keys, latest.next(&mut rng, n), &mut key);
                            e.get(&key)?;
                        }
                    }
                    'e' => {
                        if r < 0.05 {
                            ycsb_key(keys, records.fetch_add(1, Ordering::Relaxed), &mut key);
                            e.put(&key, values.next(vs), Durability::Buffered)?;
                            w += 1;
                        } else {
                            ycsb_key(keys, pick(&mut rng, &mut zipf), &mut key);
                            let len = 1 + rng.below(100) as usize;
                            e.scan(&key, len)?;
                        }
                    }
                    _ => {
                        // F: read-modify-write half the time, counted as one operation.
                        ycsb_key(keys, pick(&mut rng, &mut zipf), &mut key);
                        e.get(&key)?;
                        if r < 0.5 {
                            e.put(&key, values.next(vs), Durability::Buffered)?;
                            w += 1;
                        }
                    }
                }
                lat.record_since(t0);
                tick(pb, i as usize);
            }
            written.fetch_add(w, Ordering::Relaxed);
            Ok(())
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let ops = per_thread * threads as u64;
        let final_records = records.load(Ordering::Relaxed);
        self.loaded = Loaded::Ycsb(final_records);
        let wbytes = written.load(Ordering::Relaxed) * self.entry_bytes();
        Ok(Outcome {
            ops,
            seconds,
            lat,
            bytes: ops * self.entry_bytes(),
            user_bytes_written: wbytes,
            live_bytes: Some(final_records * self.entry_bytes()),
            note: Some(format!(
                "{records0} records, {threads} thread(s), zipfian 0.99"
            )),
        })
    }

    /// The course-lab figures: for each size, PUT then GET then DEL every key, values of
    /// 1..=100 random bytes; one record per (size, operation) with the mean latency.
    fn lab(&mut self, emit: &mut dyn FnMut(&Record)) -> BenchResult<()> {
        for n in self.cfg.lab_sizes.clone() {
            self.fresh()?;
            let order = shuffled(n, &mut Rng::new(self.cfg.seed + n));
            let mut sizes = Rng::new(self.cfg.seed + 800);
            let lens: Vec<usize> = (0..n).map(|_| 1 + sizes.below(100) as usize).collect();
            let value_bytes: u64 = lens.iter().map(|&l| l as u64).sum();
            let kv_bytes = n * self.cfg.key_size as u64 + value_bytes;
            for op in ["put", "get", "del"] {
                metrics::reset_peak_rss();
                let io0 = metrics::io_write_bytes();
                let cpu0 = metrics::cpu_seconds();
                let mut values = ValueGen::new(self.cfg.seed + 900);
                let mut lat = Latencies::new();
                let mut key = Vec::new();
                let e = self.engine()?;
                let start = Instant::now();
                for &k in &order {
                    self.keys.key(k, &mut key);
                    let len = lens.get(k as usize).copied().unwrap_or(1);
                    match op {
                        "put" => {
                            lat.time(|| e.put(&key, values.next(len), Durability::Buffered))?
                        }
                        "get" => {
                            lat.time(|| e.get(&key))?;
                        }
                        _ => lat.time(|| e.delete(&key, Durability::Buffered))?,
                    }
                }
                let seconds = start.elapsed().as_secs_f64();
                let written = match op {
                    "put" => kv_bytes,
                    "del" => n * self.cfg.key_size as u64,
                    _ => 0,
                };
                let out = Outcome {
                    ops: n,
                    seconds,
                    lat,
                    bytes: if op == "del" {
                        n * self.cfg.key_size as u64
                    } else {
                        kv_bytes
                    },
                    user_bytes_written: written,
                    live_bytes: (op != "del").then_some(kv_bytes),
                    note: Some("values 1..=100 random bytes; no wait for background work".into()),
                };
                let io_bytes = metrics::io_write_bytes().saturating_sub(io0);
                let cpu = metrics::cpu_seconds() - cpu0;
                let disk = metrics::dir_bytes(&self.dir);
                let name = format!("lab-{op}-{}k", n / 1000);
                emit(&self.record(
                    &name,
                    Durability::Buffered,
                    1,
                    &out,
                    written > 0,
                    io_bytes,
                    disk,
                    cpu,
                ));
            }
        }
        self.loaded = Loaded::Nothing;
        Ok(())
    }
}

/// YCSB record `record`'s key: hashed, as YCSB's `insertorder=hashed`.
fn ycsb_key(keys: KeyGen, record: u64, out: &mut Vec<u8>) {
    keys.key(fnv64(record) % 10_000_000_000_000_000, out);
}

fn tick(pb: &ProgressBar, i: usize) {
    if i % 4096 == 4095 {
        pb.inc(4096);
    }
}

/// Run `f(engine, thread_index, latencies)` on `threads` threads (the calling thread if
/// one) and merge their latencies. Engines that cannot be shared only run with one.
fn parallel(
    engine: &dyn Engine,
    threads: usize,
    f: impl Fn(&dyn Engine, usize, &mut Latencies) -> BenchResult<()> + Sync,
) -> BenchResult<Latencies> {
    let mut all = Latencies::new();
    if threads <= 1 {
        f(engine, 0, &mut all)?;
        return Ok(all);
    }
    let shared = engine
        .shared()
        .ok_or("engine is not shareable between threads")?;
    let f = &f;
    let results: Vec<BenchResult<Latencies>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut lat = Latencies::new();
                    f(shared, t, &mut lat).map(|()| lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("benchmark thread panicked".into()))
            })
            .collect()
    });
    for r in results {
        all.merge(&r?);
    }
    Ok(all)
}

//! The db_bench workloads: fills, overwrites, point reads, seeks, scans, reads while
//! writing, deletes.

use super::stages::GetStages;
use super::*;

/// Checkpoints taken by the `checkpoint` workload.
pub(super) const CHECKPOINTS: usize = 10;

/// Entries per atomic batch of the `fillbatch` and `fillkeyspaces` workloads.
const FILL_BATCH: usize = 100;

/// Keys per call of the `multiget` workload.
pub(super) const MULTIGET_BATCH: usize = 32;

/// Keys each range of the `deleterange` workload covers (of every `2 *` this many).
pub(super) const RANGE_DELETE_KEYS: u64 = 100;

/// Random gets timed after the range deletes of the `deleterange` workload.
const GETS_AFTER_RANGE_DELETES: u64 = 100_000;

impl Runner {
    /// Write keys `0..num` once each, in order or shuffled.
    pub(super) fn fill(
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
        Ok(Outcome::load(num, seconds, lat, bytes))
    }

    /// Keys `0..num` once each in random order, [`FILL_BATCH`] per atomic batch (db_bench
    /// fillbatch uses 1000); latency is per batch, ops count entries.
    pub(super) fn fill_batch(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let filled = self.fill_batches(
            pb,
            |_, key, value| (key, Some(value)),
            |e, ops| Some(e.write_batch(ops, Durability::Buffered)),
        )?;
        let Some((seconds, lat)) = filled else {
            unreachable!("write_batch always writes");
        };
        let num = self.cfg.num;
        self.loaded = Loaded::Keys(num);
        let bytes = num * self.entry_bytes();
        Ok(Outcome {
            ops: num,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: Some(format!("batches of {FILL_BATCH}; latency per batch")),
        })
    }

    /// As `fill_batch`, the batches spread over `KEYSPACES` keyspaces (RocksDB column
    /// families, fjall keyspaces): key `n` goes to keyspace `n % KEYSPACES`, so each batch
    /// of 100 writes into all of them atomically. The engine is opened again with them.
    pub(super) fn fill_keyspaces(&mut self, pb: &ProgressBar) -> BenchResult<Option<Outcome>> {
        const KEYSPACES: usize = 4;
        let parity = self.cfg.parity.clone();
        self.cfg.parity.keyspaces = KEYSPACES;
        let opened = self.fresh();
        self.cfg.parity = parity;
        opened?;
        let filled = self.fill_batches(
            pb,
            |n, key, value| ((n % KEYSPACES as u64) as usize, key, value),
            |e, ops| e.write_batch_in(ops, Durability::Buffered),
        )?;
        let Some((seconds, lat)) = filled else {
            return Ok(None);
        };
        let num = self.cfg.num;
        self.loaded = Loaded::Nothing;
        let bytes = num * self.entry_bytes();
        Ok(Some(Outcome {
            ops: num,
            seconds,
            lat,
            bytes,
            user_bytes_written: bytes,
            live_bytes: Some(bytes),
            note: Some(format!(
                "batches of {FILL_BATCH} over {KEYSPACES} keyspaces; latency per batch"
            )),
        }))
    }

    /// Keys `0..num` once each in random order, [`FILL_BATCH`] per atomic batch: `entry`
    /// makes a batch entry of a key's number, the key and its value, and `write` writes a
    /// batch (`None`: the engine cannot, and nothing more is written). The seconds it took
    /// and the latency of each batch.
    fn fill_batches<T>(
        &self,
        pb: &ProgressBar,
        entry: impl Fn(u64, Vec<u8>, Vec<u8>) -> T,
        write: impl Fn(&dyn Engine, &[T]) -> Option<BenchResult<()>>,
    ) -> BenchResult<Option<(f64, Latencies)>> {
        let num = self.cfg.num;
        let order = shuffled(num, &mut Rng::new(self.cfg.seed));
        let mut values = ValueGen::new(self.cfg.seed);
        let (keys, vs) = (self.keys, self.cfg.value_size);
        let e = self.engine()?;
        let mut lat = Latencies::new();
        let mut ops = Vec::with_capacity(FILL_BATCH);
        let start = Instant::now();
        for chunk in order.chunks(FILL_BATCH) {
            ops.clear();
            for &n in chunk {
                let mut key = Vec::with_capacity(keys.key_size);
                keys.key(n, &mut key);
                ops.push(entry(n, key, values.next(vs).to_vec()));
            }
            let Some(done) = lat.time(|| write(e, &ops)) else {
                return Ok(None);
            };
            done?;
            pb.inc(chunk.len() as u64);
        }
        Ok(Some((start.elapsed().as_secs_f64(), lat)))
    }

    /// `sync_num` synced puts of random keys from `threads` concurrent writers.
    pub(super) fn fill_sync(&mut self, threads: usize, pb: &ProgressBar) -> BenchResult<Outcome> {
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
        Ok(Outcome::load(ops, seconds, lat, bytes))
    }

    /// `num` puts of uniformly random existing keys.
    pub(super) fn overwrite(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
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
        Ok(Outcome::load(num, seconds, lat, bytes))
    }

    /// `num` gets of random existing keys (or of keys that sort among them but are absent).
    pub(super) fn read(&mut self, missing: bool, pb: &ProgressBar) -> BenchResult<Outcome> {
        let (num, threads, keys, seed) = (self.cfg.num, self.cfg.threads, self.keys, self.cfg.seed);
        let per_thread = self.cfg.read_ops.unwrap_or(num) / threads as u64;
        let found = AtomicU64::new(0);
        // Other engines would leave every counter at zero.
        let shale = self.engine_name == "shale";
        let stages = (self.cfg.get_breakdown && shale).then(GetStages::default);
        let start = Instant::now();
        let lat = parallel(self.engine()?, threads, |e, t, lat| {
            let mut rng = Rng::new(seed + 100 + t as u64);
            let mut key = Vec::new();
            let mut hits = 0;
            if stages.is_some() {
                GetStages::start_thread();
            }
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
            if let Some(s) = &stages {
                s.finish_thread();
            }
            found.fetch_add(hits, Ordering::Relaxed);
            Ok(())
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let ops = per_thread * threads as u64;
        let hits = found.load(Ordering::Relaxed);
        let expected = if missing { 0 } else { ops };
        let missed =
            (hits != expected).then(|| format!("{hits} of {ops} keys found, expected {expected}"));
        let breakdown = stages.map(|s| s.describe(ops));
        let note = match (missed, breakdown) {
            (Some(m), Some(b)) => Some(format!("{m}; {b}")),
            (m, b) => m.or(b),
        };
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

    /// Read random existing keys [`MULTIGET_BATCH`] at a time through the engine's
    /// batched read (db_bench's `multireadrandom` with `--multiread_batched`); `num` keys
    /// in all, the same keys `readrandom` reads. Latencies are per batch.
    pub(super) fn multi_get(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
        let (num, threads, keys, seed) = (self.cfg.num, self.cfg.threads, self.keys, self.cfg.seed);
        let batches = num / MULTIGET_BATCH as u64 / threads as u64;
        let found = AtomicU64::new(0);
        let start = Instant::now();
        let lat = parallel(self.engine()?, threads, |e, t, lat| {
            let mut rng = Rng::new(seed + 100 + t as u64);
            let mut batch = vec![Vec::new(); MULTIGET_BATCH];
            let mut hits = 0;
            for i in 0..batches {
                for key in &mut batch {
                    keys.key(rng.below(num), key);
                }
                hits += lat.time(|| e.multi_get(&batch))? as u64;
                tick(pb, i as usize * MULTIGET_BATCH);
            }
            found.fetch_add(hits, Ordering::Relaxed);
            Ok(())
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let ops = batches * MULTIGET_BATCH as u64 * threads as u64;
        let hits = found.load(Ordering::Relaxed);
        let note = (hits != ops).then(|| format!("{hits} of {ops} keys found, expected {ops}"));
        Ok(Outcome {
            ops,
            seconds,
            lat,
            bytes: hits * self.entry_bytes(),
            user_bytes_written: 0,
            live_bytes: Some(self.cfg.num * self.entry_bytes()),
            note,
        })
    }

    /// Seek to a random existing key and read the next 100 entries (db_bench's seekrandom
    /// with `--seek_nexts=100`).
    pub(super) fn seek_random(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
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
    pub(super) fn read_seq(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
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

    /// [`CHECKPOINTS`] checkpoints of the loaded database, one after another, each into a
    /// fresh directory beside it (deleted after); latencies are per checkpoint. `None`
    /// if the engine has none.
    pub(super) fn checkpoints(&mut self, pb: &ProgressBar) -> BenchResult<Option<Outcome>> {
        let parent = self.dir.with_extension("checkpoints");
        let _ = std::fs::remove_dir_all(&parent);
        std::fs::create_dir_all(&parent)?;
        let e = self.engine()?;
        let mut lat = Latencies::new();
        let start = Instant::now();
        for i in 0..CHECKPOINTS {
            let dir = parent.join(format!("{i}"));
            let t = Instant::now();
            let Some(made) = e.checkpoint(&dir) else {
                return Ok(None);
            };
            made?;
            lat.record_since(t);
            pb.set_position(i as u64 + 1);
        }
        let seconds = start.elapsed().as_secs_f64();
        let copy_bytes = metrics::dir_bytes(&parent.join("0"));
        std::fs::remove_dir_all(&parent)?;
        Ok(Some(Outcome {
            ops: CHECKPOINTS as u64,
            seconds,
            lat,
            bytes: 0,
            user_bytes_written: 0,
            live_bytes: Some(self.cfg.num * self.entry_bytes()),
            note: Some(format!(
                "{CHECKPOINTS} checkpoints of {} keys in a row, each into a new directory on \
                 the same file system (a copy holds {copy_bytes} bytes, mostly hard links)",
                self.cfg.num
            )),
        }))
    }

    /// Delete the first half of every block of `2 * RANGE_DELETE_KEYS` keys of the loaded
    /// database, one range delete per block, in key order; latencies are per range delete.
    /// Then, timed apart and reported in the note: random gets over the whole key space
    /// (half of them land in a deleted range) and a full scan, which must find half the
    /// keys. `None` if the engine has no range delete.
    pub(super) fn delete_ranges(&mut self, pb: &ProgressBar) -> BenchResult<Option<Outcome>> {
        let (num, keys, seed) = (self.cfg.num, self.keys, self.cfg.seed);
        let blocks = num / (2 * RANGE_DELETE_KEYS);
        let e = self.engine()?;
        let mut lat = Latencies::new();
        let (mut start_key, mut end_key) = (Vec::new(), Vec::new());
        let start = Instant::now();
        for b in 0..blocks {
            keys.key(2 * b * RANGE_DELETE_KEYS, &mut start_key);
            keys.key((2 * b + 1) * RANGE_DELETE_KEYS, &mut end_key);
            let t = Instant::now();
            let Some(done) = e.delete_range(&start_key, &end_key) else {
                return Ok(None);
            };
            done?;
            lat.record_since(t);
            tick(pb, (b * 2 * RANGE_DELETE_KEYS) as usize);
        }
        let seconds = start.elapsed().as_secs_f64();

        let mut rng = Rng::new(seed + 600);
        let (mut key, mut found) = (Vec::new(), 0u64);
        let gets = Instant::now();
        for _ in 0..GETS_AFTER_RANGE_DELETES {
            keys.key(rng.below(num), &mut key);
            found += u64::from(e.get(&key)?.is_some());
        }
        let gets_per_sec = GETS_AFTER_RANGE_DELETES as f64 / gets.elapsed().as_secs_f64();
        let scan = Instant::now();
        let scanned = e.scan(b"", usize::MAX)? as u64;
        let scan_secs = scan.elapsed().as_secs_f64();
        self.loaded = Loaded::Nothing;
        let deleted = blocks * RANGE_DELETE_KEYS;
        let wrong = if scanned == num - deleted {
            String::new()
        } else {
            format!(
                " WRONG: the scan found {scanned}, expected {}",
                num - deleted
            )
        };
        Ok(Some(Outcome {
            ops: blocks,
            seconds,
            lat,
            bytes: 0,
            user_bytes_written: blocks * 2 * self.cfg.key_size as u64,
            live_bytes: Some((num - deleted) * self.entry_bytes()),
            note: Some(format!(
                "{blocks} range deletes of {RANGE_DELETE_KEYS} keys each ({deleted} of {num} keys); \
                 then {GETS_AFTER_RANGE_DELETES} random gets at {gets_per_sec:.0}/s ({found} \
                 found) and a full scan of {scanned} keys in {scan_secs:.3} s{wrong}"
            )),
        }))
    }

    /// `threads` readers do `num` random gets in all while one writer overwrites random
    /// keys as fast as it can; the reader latencies are reported. With `snapshot`, every
    /// get takes a fresh snapshot and reads through it (snapshotwhilewriting).
    pub(super) fn read_while_writing(
        &mut self,
        probe: Probe,
        pb: &ProgressBar,
    ) -> BenchResult<Outcome> {
        let (num, keys, seed, vs) = (self.cfg.num, self.keys, self.cfg.seed, self.cfg.value_size);
        let rate = self.cfg.writer_rate;
        let files = metrics::dir_files(&self.dir);
        let readers = self.cfg.threads.max(1);
        let per_thread = num / readers as u64;
        let shared = self.engine()?.shared().ok_or("engine is not shareable")?;
        let done = AtomicBool::new(false);
        let writes = AtomicU64::new(0);
        let start = Instant::now();
        let lat = std::thread::scope(|s| -> BenchResult<Latencies> {
            let writer = s.spawn(|| {
                let w = Writer {
                    keys,
                    num,
                    seed: seed + 300,
                    value_size: vs,
                    rate,
                };
                w.run(shared, &done, &writes, start)
            });
            let lat = parallel(shared, readers, |e, t, lat| {
                let mut rng = Rng::new(seed + 400 + t as u64);
                let mut key = Vec::new();
                for i in 0..per_thread {
                    keys.key(rng.below(num), &mut key);
                    probe.time(e, &key, lat)?;
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
                "{readers} reader(s){}; 1 writer did {w} puts ({:.0}/s{}); {files} files in \
                 the db directory at the start",
                probe.describe(),
                w as f64 / seconds.max(1e-9),
                if rate > 0 {
                    format!(", paced to {rate}/s")
                } else {
                    String::new()
                }
            )),
        })
    }

    /// Delete every key once, in random order.
    pub(super) fn delete_random(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
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
}

/// What the reader of a `*whilewriting` workload times.
#[derive(Clone, Copy)]
pub(super) enum Probe {
    Get,
    /// A snapshot taken, read through once, and released.
    SnapshotGet,
    /// A snapshot taken and released, nothing read.
    SnapshotCreate,
}

impl Probe {
    /// Time one probe of `key` on `e` into `lat`.
    fn time(self, e: &dyn Engine, key: &[u8], lat: &mut Latencies) -> BenchResult<()> {
        match self {
            Probe::Get => lat.time(|| e.get(key))?,
            Probe::SnapshotGet => lat.time(|| e.snapshot_get(key).unwrap_or(Ok(None)))?,
            Probe::SnapshotCreate => {
                lat.time(|| e.snapshot_create().unwrap_or(Ok(())).map(|()| None))?
            }
        };
        Ok(())
    }

    /// What the note adds after the reader count.
    fn describe(self) -> &'static str {
        match self {
            Probe::Get => "",
            Probe::SnapshotGet => ", each get through a new snapshot",
            Probe::SnapshotCreate => " timing snapshot creation and release alone",
        }
    }
}

/// The writer of a `*whilewriting` workload: random overwrites of keys `0..num`, paced to
/// `rate` puts per second (0: as fast as the engine takes them).
struct Writer {
    keys: KeyGen,
    num: u64,
    seed: u64,
    value_size: usize,
    rate: u64,
}

impl Writer {
    /// Put until `done`, counting the puts in `writes`; the pace is measured from `start`.
    fn run(
        &self,
        e: &(dyn Engine + Sync),
        done: &AtomicBool,
        writes: &AtomicU64,
        start: Instant,
    ) -> BenchResult<()> {
        let mut rng = Rng::new(self.seed);
        let mut values = ValueGen::new(self.seed);
        let mut key = Vec::new();
        let mut done_puts = 0u64;
        while !done.load(Ordering::Relaxed) {
            self.keys.key(rng.below(self.num), &mut key);
            e.put(&key, values.next(self.value_size), Durability::Buffered)?;
            done_puts += 1;
            writes.fetch_add(1, Ordering::Relaxed);
            if self.rate > 0 && done_puts.is_multiple_of(64) {
                // The client's pacing, not the engine's: sleep until the schedule catches
                // up with the puts done.
                let due = std::time::Duration::from_secs_f64(done_puts as f64 / self.rate as f64);
                if let Some(ahead) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(ahead);
                }
            }
        }
        Ok(())
    }
}

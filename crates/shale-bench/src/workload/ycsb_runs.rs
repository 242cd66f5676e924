//! YCSB: the load phase and workloads A to F.

use super::*;

impl Runner {
    pub(super) fn ycsb_key(&self, record: u64, out: &mut Vec<u8>) {
        ycsb_key(self.keys, record, out);
    }

    /// Insert YCSB records `0..ycsb_records` (keys hashed, as YCSB's `insertorder=hashed`).
    pub(super) fn ycsb_load(&mut self, pb: &ProgressBar) -> BenchResult<Outcome> {
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
        Ok(Outcome::load(n, seconds, lat, bytes))
    }

    /// YCSB core workloads A to F over scrambled-zipfian (D: latest) record choice.
    pub(super) fn ycsb_run(&mut self, workload: char, pb: &ProgressBar) -> BenchResult<Outcome> {
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
            let mut client = YcsbClient {
                rng: Rng::new(seed + 700 + t as u64 * 31 + workload as u64),
                values: ValueGen::new(seed + 700 + t as u64),
                zipf: ScrambledZipfian::new(),
                latest: SkewedLatest::new(records0),
                key: Vec::new(),
                keys,
                value_size: vs,
            };
            let mut w = 0u64;
            for i in 0..per_thread {
                let r = client.rng.unit();
                let n = records.load(Ordering::Relaxed);
                let t0 = Instant::now();
                w += u64::from(client.op(workload, e, r, n, &records)?);
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
}

/// One client thread of a YCSB workload: its generators and its key buffer.
struct YcsbClient {
    rng: Rng,
    values: ValueGen,
    zipf: ScrambledZipfian,
    latest: SkewedLatest,
    key: Vec<u8>,
    keys: KeyGen,
    value_size: usize,
}

impl YcsbClient {
    /// One operation of `workload` on `e`, given its draw `r` in [0, 1) and the `n`
    /// records there are; whether it wrote. D and E insert record `records` (claimed).
    fn op(
        &mut self,
        workload: char,
        e: &dyn Engine,
        r: f64,
        n: u64,
        records: &AtomicU64,
    ) -> BenchResult<bool> {
        let (keys, vs, key) = (self.keys, self.value_size, &mut self.key);
        match workload {
            'a' | 'b' => {
                let update = if workload == 'a' { 0.5 } else { 0.05 };
                ycsb_key(keys, self.zipf.next(&mut self.rng, n), key);
                if r < update {
                    e.put(key, self.values.next(vs), Durability::Buffered)?;
                    return Ok(true);
                }
                e.get(key)?;
            }
            'c' => {
                ycsb_key(keys, self.zipf.next(&mut self.rng, n), key);
                e.get(key)?;
            }
            'd' | 'e' if r < 0.05 => {
                ycsb_key(keys, records.fetch_add(1, Ordering::Relaxed), key);
                e.put(key, self.values.next(vs), Durability::Buffered)?;
                return Ok(true);
            }
            'd' => {
                ycsb_key(keys, self.latest.next(&mut self.rng, n), key);
                e.get(key)?;
            }
            'e' => {
                ycsb_key(keys, self.zipf.next(&mut self.rng, n), key);
                let len = 1 + self.rng.below(100) as usize;
                e.scan(key, len)?;
            }
            _ => {
                // F: read-modify-write half the time, counted as one operation.
                ycsb_key(keys, self.zipf.next(&mut self.rng, n), key);
                e.get(key)?;
                if r < 0.5 {
                    e.put(key, self.values.next(vs), Durability::Buffered)?;
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }
}

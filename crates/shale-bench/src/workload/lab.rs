//! The course-lab figures: PUT / GET / DEL throughput and mean latency at 20k, 100k and
//! 200k entries with values of 1 to 100 bytes.

use super::*;

impl Runner {
    /// The course-lab figures: for each size, PUT then GET then DEL every key, values of
    /// 1..=100 random bytes; one record per (size, operation) with the mean latency.
    pub(super) fn lab(&mut self, emit: &mut dyn FnMut(&Record)) -> BenchResult<()> {
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

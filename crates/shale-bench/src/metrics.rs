//! Process-level measurements read from /proc and getrusage, and latency recording.
//!
//! Each (engine, workload group) runs in its own child process, so these counters belong
//! to one engine. Linux only; elsewhere they read as zero.

use std::path::Path;
use std::time::Instant;

use hdrhistogram::Histogram;

/// Bytes this process caused to be written to storage (`write_bytes` of /proc/self/io;
/// counted when pages are dirtied, so it includes data not yet written back).
pub fn io_write_bytes() -> u64 {
    proc_field("/proc/self/io", "write_bytes:").unwrap_or(0)
}

/// Bytes this process caused to be read from storage (`read_bytes` of /proc/self/io):
/// reads the page cache served are not counted.
pub fn io_read_bytes() -> u64 {
    proc_field("/proc/self/io", "read_bytes:").unwrap_or(0)
}

/// Peak resident set size in bytes (VmHWM).
pub fn peak_rss_bytes() -> u64 {
    proc_field("/proc/self/status", "VmHWM:").map_or(0, |kib| kib * 1024)
}

/// Reset VmHWM to the current RSS, so the next peak belongs to the next workload.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn proc_field(path: &str, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    line.get(name.len()..)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// User plus system CPU seconds of the whole process (all threads).
pub fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole `rusage` into the pointer we pass and nothing else.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    if rc != 0 {
        return 0.0;
    }
    // SAFETY: getrusage succeeded, so it initialised the struct (and zeroed is valid anyway).
    let u = unsafe { usage.assume_init() };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// Total bytes of the files under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    dir_sum(dir, &|m| m.len())
}

/// Number of files under `dir` (SSTables plus each engine's few logs and manifests).
pub fn dir_files(dir: &Path) -> u64 {
    dir_sum(dir, &|_| 1)
}

/// `per_file` summed over the files under `dir`, recursively.
fn dir_sum(dir: &Path, per_file: &dyn Fn(&std::fs::Metadata) -> u64) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_sum(&e.path(), per_file),
            Ok(m) => per_file(&m),
            Err(_) => 0,
        })
        .sum()
}

/// Latencies of one thread's operations, in nanoseconds.
pub struct Latencies {
    hist: Histogram<u64>,
}

impl Latencies {
    pub fn new() -> Latencies {
        Latencies {
            // 1 ns .. 1 hour, 3 significant digits.
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("constant bounds are valid"),
        }
    }

    /// Time `f` and record it.
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.record_since(start);
        out
    }

    pub fn record_since(&mut self, start: Instant) {
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(ns.max(1));
    }

    pub fn record_ns(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }

    pub fn merge(&mut self, other: &Latencies) {
        let _ = self.hist.add(&other.hist);
    }

    /// Latency at `q` (0..=1) in microseconds.
    pub fn quantile_us(&self, q: f64) -> f64 {
        self.hist.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_us(&self) -> f64 {
        self.hist.max() as f64 / 1000.0
    }

    pub fn mean_us(&self) -> f64 {
        self.hist.mean() / 1000.0
    }
}

//! One vector measurement as a workload emits it ([`VectorRecord`]), and the settings common
//! to a run ([`RunInfo`]) that make it a [`Record`] of the results file.

use crate::engine::Parity;
use crate::metrics::Latencies;
use crate::record::Record;

/// One vector measurement, before the settings common to a run are added.
pub struct VectorRecord {
    engine: String,
    workload: String,
    ops: u64,
    seconds: f64,
    threads: usize,
    /// (mean, p50, p99, p99.9, max) in µs.
    lat: [f64; 5],
    recall: Option<f64>,
    cpu_seconds: f64,
    peak_rss_bytes: u64,
    /// The index's own byte count (see `Record::index_bytes`).
    index_bytes: Option<u64>,
    note: Option<String>,
}

impl VectorRecord {
    pub fn new(engine: &str, workload: &str, ops: u64, seconds: f64) -> VectorRecord {
        let mean = seconds * 1e6 / ops.max(1) as f64;
        VectorRecord {
            engine: engine.into(),
            workload: workload.into(),
            ops,
            seconds,
            threads: 1,
            lat: [mean; 5],
            recall: None,
            cpu_seconds: 0.0,
            peak_rss_bytes: 0,
            index_bytes: None,
            note: None,
        }
    }

    pub fn threads(mut self, t: usize) -> Self {
        self.threads = t;
        self
    }

    pub fn latencies(mut self, l: &Latencies) -> Self {
        self.lat = [
            l.mean_us(),
            l.quantile_us(0.5),
            l.quantile_us(0.99),
            l.quantile_us(0.999),
            l.max_us(),
        ];
        self
    }

    /// Only a mean is known (a batch call): every latency column shows it.
    pub fn mean_only(mut self, mean_us: f64) -> Self {
        self.lat = [mean_us; 5];
        self
    }

    pub fn recall(mut self, r: f64) -> Self {
        self.recall = Some(r);
        self
    }

    pub fn cpu(mut self, s: f64) -> Self {
        self.cpu_seconds = s;
        self
    }

    pub fn rss(mut self, b: u64) -> Self {
        self.peak_rss_bytes = b;
        self
    }

    pub fn index_bytes(mut self, b: u64) -> Self {
        self.index_bytes = Some(b);
        self
    }

    pub fn note(mut self, n: String) -> Self {
        self.note = Some(n);
        self
    }
}

pub type Emit<'a> = dyn FnMut(VectorRecord) + 'a;

/// `100000` -> `100k`.
pub fn short(n: usize) -> String {
    if n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// What every record of one `shale-bench vector` run shares.
pub struct RunInfo {
    pub command: String,
    pub machine: String,
    pub git_commit: String,
    /// The load average when the run started.
    pub load_at_start: String,
}

impl RunInfo {
    /// This process's command line and machine, and the load average now.
    pub fn now() -> RunInfo {
        RunInfo {
            command: std::env::args().collect::<Vec<_>>().join(" "),
            machine: crate::machine::describe(),
            git_commit: crate::machine::git_commit(),
            load_at_start: load_average(),
        }
    }

    /// `v` as a line of the results file, dated now, its note ending with the load average.
    pub fn record(&self, v: VectorRecord) -> Record {
        let secs = v.seconds.max(1e-9);
        Record {
            engine: v.engine,
            workload: v.workload,
            run: 0,
            ops: v.ops,
            seconds: v.seconds,
            ops_per_sec: v.ops as f64 / secs,
            mb_per_sec: 0.0,
            mean_us: v.lat[0],
            p50_us: v.lat[1],
            p99_us: v.lat[2],
            p999_us: v.lat[3],
            max_us: v.lat[4],
            write_amp: None,
            space_amp: None,
            settle_seconds: None,
            disk_read_bytes: None,
            memory_limit_bytes: None,
            disk_bytes: 0,
            user_bytes_written: 0,
            peak_rss_bytes: v.peak_rss_bytes,
            index_bytes: v.index_bytes,
            cpu_seconds: v.cpu_seconds,
            threads: v.threads,
            key_size: 0,
            value_size: 0,
            durability: "n/a".into(),
            parity: Parity::default(),
            caveats: vec![format!(
                "vector workloads: load average {} (1/5/15 min) when the run started \
                 (each note gives it at its result); two shared cores",
                self.load_at_start
            )],
            recall: v.recall,
            note: Some(format!(
                "{}; load average {} at this result",
                v.note.unwrap_or_default(),
                load_average()
            )),
            git_commit: self.git_commit.clone(),
            // The time of this result, so that a report spans the run.
            date: crate::machine::date(),
            machine: self.machine.clone(),
            command: self.command.clone(),
        }
    }
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

//! One JSON line per (engine, workload, run): the measurements and the settings behind them.

use serde::{Deserialize, Serialize};

use crate::engine::Parity;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    pub engine: String,
    pub workload: String,
    pub run: u32,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    pub mb_per_sec: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    /// Bytes written to storage (incl. background work finished before measuring) per
    /// user byte written; absent for read-only workloads.
    pub write_amp: Option<f64>,
    /// Bytes in the database directory after background work, per live user byte.
    pub space_amp: Option<f64>,
    /// Seconds the engine's wait for background work took after a writing workload's
    /// clock stopped (not in `seconds`): a flush of the active memtable, then the pending
    /// flushes and compactions; fjall's wait adds 100 ms of idle polling. Absent for
    /// read-only workloads and in results recorded before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_seconds: Option<f64>,
    /// Bytes the workload read from the storage device (`read_bytes` of /proc/self/io):
    /// what the page cache did not serve. Absent in results recorded before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_read_bytes: Option<u64>,
    /// The memory cgroup limit the engine's process ran under (`--memory-limit-mib`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    pub disk_bytes: u64,
    pub user_bytes_written: u64,
    pub peak_rss_bytes: u64,
    /// Vector index builds: the index's size in bytes as its library counts it (the note
    /// says how: usearch's `memory_usage`, faiss's serialized size, the size of the file
    /// hnswlib or rabitqlib saves). Absent where not measured, Shale's graph included for
    /// now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_bytes: Option<u64>,
    pub cpu_seconds: f64,
    pub threads: usize,
    pub key_size: usize,
    pub value_size: usize,
    pub durability: String,
    pub parity: Parity,
    pub caveats: Vec<String>,
    /// Vector search: recall@k against exact search (absent for key-value workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recall: Option<f64>,
    pub note: Option<String>,
    pub git_commit: String,
    pub date: String,
    pub machine: String,
    pub command: String,
}

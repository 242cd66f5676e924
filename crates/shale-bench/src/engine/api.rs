//! The `Engine` trait every benchmarked store implements, and the durability its writes ask for.
//!
//! An engine is opened on a fresh directory, driven through `&self`, and closed once.
//! Engines that can be shared between threads say so through [`Engine::shared`];
//! multi-threaded workloads skip the others.

use serde::{Deserialize, Serialize};

/// The result of every fallible step of the benchmark, engine or not.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How durable a write must be before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// The WAL is fdatasync'ed before the write returns.
    Sync,
    /// The WAL is handed to the OS (write(2)) but not synced: survives a process crash.
    Buffered,
    /// No WAL: the write lives only in the memtable until a flush.
    NoWal,
}

/// A key-value store under test.
pub trait Engine {
    /// Write `key` = `value`.
    fn put(&self, key: &[u8], value: &[u8], durability: Durability) -> BenchResult<()>;
    /// Read `key`; the length of its value if present.
    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>>;
    /// Read `keys` in one call, all at one moment if the engine has such a call; how
    /// many were found. The default is a loop of [`Engine::get`] (an engine without a
    /// batched read says so in its caveats).
    fn multi_get(&self, keys: &[Vec<u8>]) -> BenchResult<usize> {
        let mut found = 0;
        for key in keys {
            found += usize::from(self.get(key)?.is_some());
        }
        Ok(found)
    }
    /// Write an openable copy of the database as of now into `dir` (which does not
    /// exist). `None` if the engine has no checkpoints.
    fn checkpoint(&self, dir: &std::path::Path) -> Option<BenchResult<()>> {
        let _ = dir;
        None
    }
    /// Take a snapshot and read `key` through it (the snapshot is released after): the
    /// cost of pinning a consistent view, which must not grow with the size of the tree.
    /// `None` if the engine has no snapshots.
    fn snapshot_get(&self, key: &[u8]) -> Option<BenchResult<Option<usize>>> {
        let _ = key;
        None
    }
    /// Take a snapshot and release it: what pinning a consistent view costs alone.
    /// `None` if the engine has no snapshots.
    fn snapshot_create(&self) -> Option<BenchResult<()>> {
        None
    }
    /// Delete `key`.
    fn delete(&self, key: &[u8], durability: Durability) -> BenchResult<()>;
    /// Delete every key in `[start, end)` with the engine's range delete, in one write.
    /// `None` if the engine has no range delete.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Option<BenchResult<()>> {
        let _ = (start, end);
        None
    }
    /// Apply puts (`Some(value)`) and deletes (`None`) atomically.
    fn write_batch(
        &self,
        ops: &[(Vec<u8>, Option<Vec<u8>>)],
        durability: Durability,
    ) -> BenchResult<()>;
    /// Apply puts into the keyspaces `Parity::keyspaces` opened, as one atomic batch: each
    /// `(i, key, value)` into keyspace `i`. `None` if the engine has no keyspaces.
    fn write_batch_in(
        &self,
        ops: &[(usize, Vec<u8>, Vec<u8>)],
        durability: Durability,
    ) -> Option<BenchResult<()>> {
        let _ = (ops, durability);
        None
    }
    /// Visit up to `limit` entries from the first key `>= start`; the number visited.
    fn scan(&self, start: &[u8], limit: usize) -> BenchResult<usize>;
    /// Flush memtables and wait until background flushes and compactions are done.
    fn wait_background(&self) -> BenchResult<()>;
    /// Close, making everything written durable.
    fn close(self: Box<Self>) -> BenchResult<()>;
    /// `Some(self)` if the engine may be used from several threads at once.
    fn shared(&self) -> Option<&(dyn Engine + Sync)>;
    /// What this engine could not match of the parity settings and durability modes.
    fn caveats(&self) -> Vec<String> {
        Vec::new()
    }
    /// Whether the engine has this durability mode (if not, the workload is skipped).
    fn supports(&self, durability: Durability) -> bool {
        let _ = durability;
        true
    }
}

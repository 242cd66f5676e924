//! The `Engine` trait every benchmarked store implements, and the parity settings they
//! are all opened with.
//!
//! An engine is opened on a fresh directory, driven through `&self`, and closed once.
//! Engines that can be shared between threads say so through [`Engine::shared`];
//! multi-threaded workloads skip the others.

use std::path::Path;

use serde::{Deserialize, Serialize};

#[cfg(feature = "fjall")]
mod fjall;
#[cfg(feature = "leveldb")]
mod leveldb;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod shale;

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

/// Block compression, the same for every engine that has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CompressionChoice {
    None,
    Lz4,
    /// Zstandard at level 3 (Shale only: the peers are built without it).
    Zstd,
    /// Snappy (Shale only: the peers are built without it).
    Snappy,
}

impl CompressionChoice {
    /// The name `--compression` takes.
    pub fn name(self) -> &'static str {
        match self {
            CompressionChoice::None => "none",
            CompressionChoice::Lz4 => "lz4",
            CompressionChoice::Zstd => "zstd",
            CompressionChoice::Snappy => "snappy",
        }
    }
}

/// Settings applied to every engine, so results compare like with like.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Parity {
    pub block_cache_bytes: usize,
    pub write_buffer_bytes: usize,
    /// Memtables an engine may hold at once, the active one included (Shale's
    /// `max_write_buffers`, RocksDB's `max_write_buffer_number`; LevelDB has two and fjall
    /// no such limit). More of them defer more flush work past the end of a fill.
    #[serde(default = "default_write_buffers")]
    pub write_buffers: usize,
    pub target_file_bytes: u64,
    pub block_bytes: usize,
    pub filter_bits_per_key: u32,
    pub compression: CompressionChoice,
    pub background_threads: usize,
    pub level_base_bytes: u64,
    /// Keys between restart points in a data block (Shale only; RocksDB and LevelDB keep
    /// their default, also 16).
    #[serde(default = "default_restart_interval")]
    pub restart_interval: usize,
    /// SSTables each engine keeps open at most (RocksDB's default, unlimited, runs out of
    /// descriptors on a tree of tens of thousands of files).
    #[serde(default = "default_max_open_files")]
    pub max_open_files: usize,
    /// How Shale and RocksDB read table files (the other engines have one way each).
    #[serde(default)]
    pub file_reads: FileReads,
    /// RocksDB only: the settings its own tuning guide gives for point lookups, instead of
    /// its defaults (see `engine/rocksdb.rs`).
    #[serde(default)]
    pub rocksdb_point_lookup: bool,
    /// Shale only: the codec of tables compacted into the last level
    /// (`Options::bottommost_compression`); `None` keeps `compression` there too.
    #[serde(default)]
    pub bottommost_compression: Option<CompressionChoice>,
    /// Keyspaces (RocksDB column families, fjall keyspaces) the engine opens beside its
    /// default one, `ks0`, `ks1`, ...: set by the `fillkeyspaces` workload alone.
    #[serde(default)]
    pub keyspaces: usize,
}

/// How an engine that has the choice reads its table files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FileReads {
    /// Each engine's own default: Shale maps its files, RocksDB reads with `pread`.
    #[default]
    EngineDefault,
    /// `pread` into a buffer (Shale `mmap_reads = false`, RocksDB's default).
    Pread,
    /// Reads from a mapping (Shale's default, RocksDB `allow_mmap_reads`).
    Mmap,
}

impl FileReads {
    /// The name `--file-reads` takes.
    pub fn name(self) -> &'static str {
        match self {
            FileReads::EngineDefault => "engine-default",
            FileReads::Pread => "pread",
            FileReads::Mmap => "mmap",
        }
    }

    /// What the report says of it.
    pub fn describe(self) -> &'static str {
        match self {
            FileReads::EngineDefault => "each engine's default (Shale: mmap; RocksDB: pread)",
            FileReads::Pread => "pread (Shale and RocksDB)",
            FileReads::Mmap => "mmap (Shale and RocksDB)",
        }
    }
}

fn default_restart_interval() -> usize {
    16
}

fn default_max_open_files() -> usize {
    1000
}

/// Shale's default; RocksDB's is 2. Results recorded before this field existed ran Shale
/// with 4 and RocksDB with 2.
fn default_write_buffers() -> usize {
    4
}

impl Default for Parity {
    fn default() -> Self {
        Parity {
            block_cache_bytes: 64 << 20,
            write_buffer_bytes: 64 << 20,
            write_buffers: default_write_buffers(),
            target_file_bytes: 64 << 20,
            block_bytes: 4096,
            filter_bits_per_key: 10,
            compression: CompressionChoice::Lz4,
            background_threads: 2,
            level_base_bytes: 256 << 20,
            restart_interval: default_restart_interval(),
            max_open_files: default_max_open_files(),
            file_reads: FileReads::EngineDefault,
            rocksdb_point_lookup: false,
            bottommost_compression: None,
            keyspaces: 0,
        }
    }
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

/// Engines compiled into this binary.
pub fn available() -> Vec<&'static str> {
    let mut v = vec!["shale"];
    if cfg!(feature = "rocksdb") {
        v.push("rocksdb");
    }
    if cfg!(feature = "fjall") {
        v.push("fjall");
    }
    if cfg!(feature = "leveldb") {
        v.push("leveldb");
    }
    if cfg!(feature = "redb") {
        v.push("redb");
    }
    v
}

/// Open engine `name` on the empty directory `dir`.
///
/// # Errors
/// An unknown or not-compiled-in engine, or the engine's own open error.
pub fn open(name: &str, dir: &Path, parity: &Parity) -> BenchResult<Box<dyn Engine>> {
    match name {
        "shale" => Ok(Box::new(shale::ShaleEngine::open(dir, parity)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb::RocksEngine::open(dir, parity)?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall::FjallEngine::open(dir, parity)?)),
        #[cfg(feature = "leveldb")]
        "leveldb" => Ok(Box::new(leveldb::LevelDbEngine::open(dir, parity)?)),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(redb::RedbEngine::open(dir, parity)?)),
        other => Err(format!(
            "engine {other:?} is not compiled in (available: {}); build with --features {other}",
            available().join(",")
        )
        .into()),
    }
}

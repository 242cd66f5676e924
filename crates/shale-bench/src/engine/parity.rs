//! The settings every engine is opened with, so that results compare like with like.

use serde::{Deserialize, Serialize};

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

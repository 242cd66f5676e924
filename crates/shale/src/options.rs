//! Options: what a user can tune, their defaults and their validation.
//!
//! [`Options::validate`] checks every field and reports *all* problems at once, so a user
//! fixing a configuration file does not discover them one reopen at a time.

use std::fmt;
use std::sync::Arc;

use crate::compaction_filter::CompactionFilter;
use crate::fs::{FileSystem, PosixFs};
use crate::snapshot::Snapshot;

/// Number of levels in the tree (L0 to L6): fixed, so that every option that names a level
/// (`compression_per_level`, the level targets) has the same shape in every database.
pub const NUM_LEVELS: usize = 7;

/// The largest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 64 * 1024;
/// The largest value accepted, in bytes.
pub const MAX_VALUE_BYTES: usize = 256 * 1024 * 1024;
/// The most entries one `WriteBatch` may hold (2^28; at least 512 MiB of batch, as a
/// delete of an empty key takes 2 bytes). A batch is
/// applied to one memtable, whose entries are numbered by a `u32`: this keeps a batch
/// plus a full memtable within that count.
pub const MAX_BATCH_ENTRIES: u32 = 1 << 28;

/// Block compression, chosen per SSTable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Store blocks as they are.
    None,
    /// LZ4: fast to compress and very fast to decompress; the default.
    Lz4,
    /// Zstandard at the given level (1..=22): smaller files, slower compaction.
    Zstd(i32),
    /// Snappy: similar to LZ4, for compatibility with LevelDB-era expectations.
    Snappy,
}

/// The options a keyspace keeps for its own tree. They are stored in the manifest with
/// the keyspace, so a reopened database builds its tables as before; the other
/// [`Options`] (cache, threads, level sizes, triggers) are the database's.
///
/// The default keyspace takes these from the database's `Options`; `compression_per_level`
/// and `bottommost_compression` apply to it alone, and a named keyspace uses its one
/// codec at every level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyspaceOptions {
    /// Size at which its memtable is frozen (as `Options::write_buffer_size`).
    pub write_buffer_size: usize,
    /// Uncompressed size of a data block (as `Options::block_size`).
    pub block_size: usize,
    /// Bloom filter bits per key, 0 for none (as `Options::filter_bits_per_key`).
    pub filter_bits_per_key: u32,
    /// Block codec at every level.
    pub compression: Compression,
}

impl KeyspaceOptions {
    /// The database's settings of these options.
    pub fn from_db(opts: &Options) -> KeyspaceOptions {
        KeyspaceOptions {
            write_buffer_size: opts.write_buffer_size,
            block_size: opts.block_size,
            filter_bits_per_key: opts.filter_bits_per_key,
            compression: opts.compression,
        }
    }

    /// `db` with these options in place of its own: what the keyspace's flushes and
    /// compactions build tables with. The compaction filter is left out: a keyspace's is
    /// [`Options::keyspace_filter`].
    pub fn apply_to(&self, db: &Options) -> Options {
        let mut opts = db.clone();
        opts.compaction_filter = None;
        opts.keyspace_compaction_filters = Vec::new();
        opts.write_buffer_size = self.write_buffer_size;
        opts.block_size = self.block_size;
        opts.filter_bits_per_key = self.filter_bits_per_key;
        opts.compression = self.compression;
        opts.compression_per_level = Vec::new();
        opts.bottommost_compression = None;
        opts
    }

    /// Every problem with these options, as `Options::validate` words them.
    pub fn validate(&self, db: &Options) -> Result<(), Vec<String>> {
        self.apply_to(db).validate()
    }
}

/// Options fixed when a database is opened.
#[derive(Clone)]
pub struct Options {
    /// Create the database if the directory holds none. Default: true.
    pub create_if_missing: bool,
    /// Fail if a database already exists. Default: false.
    pub error_if_exists: bool,
    /// A filter that compactions of the default keyspace ask about each key's newest value
    /// (keep, remove or change it): see [`CompactionFilter`]. Default: none.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// The filters of other keyspaces, by name (RocksDB's per-column-family
    /// `compaction_filter`): a keyspace's compactions ask its own, none if it has none.
    /// Given at open, so a filter runs from the keyspace's first compaction. Default: none.
    pub keyspace_compaction_filters: Vec<(String, Arc<dyn CompactionFilter>)>,
    /// Open for reading only: no lock is taken and nothing in the directory is written or
    /// deleted, so any number of read-only handles, in any processes, may open a database
    /// beside its one writer. A handle sees the database as of its open: the SSTables its
    /// manifest lists, opened then (so a writer's later compaction cannot take them away),
    /// and its WALs replayed into memory. Writes, flushes, compactions and checkpoints fail
    /// with `InvalidArgument`; no background thread runs. The database must exist
    /// (`create_if_missing` does not apply). Default: false.
    pub read_only: bool,
    /// Bytes a memtable may hold before it is frozen and flushed. Larger means fewer, larger
    /// L0 files and less write amplification, but more memory and a longer WAL replay.
    /// Default: 64 MiB.
    pub write_buffer_size: usize,
    /// Memtables (the active one plus frozen ones waiting for flush) allowed in memory.
    /// When flushing falls behind, writes are slowed as this fills and stopped when it is
    /// full. Default: 4.
    pub max_write_buffers: usize,
    /// Target size of an SSTable written by compaction (a flush writes one file per
    /// memtable). Default: 64 MiB.
    pub max_file_size: u64,
    /// Uncompressed size of a data block. Smaller blocks make point reads cheaper and the
    /// index larger. Default: 4 KiB.
    pub block_size: usize,
    /// Keys between restart points in a block. More means better prefix compression and a
    /// longer linear scan inside a block. Default: 16.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. 10 bits gives about 1% false
    /// positives. Default: 10.
    pub filter_bits_per_key: u32,
    /// Compression of SSTable blocks. Default: LZ4.
    pub compression: Compression,
    /// Compression of the tables compactions write to the last level (L6), which holds
    /// most of a settled tree (about 90% with the default `level_size_multiplier`);
    /// `None` uses `compression`. RocksDB's `bottommost_compression`. The usual choice is
    /// a fast codec above and a dense one at the bottom, for example LZ4 and
    /// `Zstd(3)`: most of the data then takes zstd's space, while the recent data that
    /// flushes and the upper levels rewrite often pays LZ4's CPU. When the two codecs
    /// differ, a file entering L6 is rewritten, never moved as it is (as RocksDB does), so
    /// append-only loads get the codec too; `Db::repair`, which writes everything to L6,
    /// uses it as well. Default: `None`.
    pub bottommost_compression: Option<Compression>,
    /// Compression per level, RocksDB's `compression_per_level`: entry `i` is the codec of
    /// the tables written into level `i` (L0 is what flushes write), and the last entry
    /// also covers every deeper level. Empty uses `compression` everywhere; at most
    /// `NUM_LEVELS` (7) entries. `bottommost_compression`, when set, still decides L6.
    /// A file moving into a level with another codec is rewritten, not moved.
    ///
    /// Levels are the tree's own numbers. The tree is sized from the bottom (see
    /// `max_bytes_for_level_base`), so L6 always holds most of the data and L5 about a
    /// tenth of it, however large the tree is. RocksDB with
    /// `level_compaction_dynamic_level_bytes` instead counts entries after the first from
    /// its base level, so there a small tree's data takes entry 1's codec; here it takes
    /// the last entry's. TiKV's `[None, None, Lz4, Lz4, Lz4, Zstd(3), Zstd(3)]` means here:
    /// flushes and the small top levels uncompressed, L5 and L6 dense. Default: empty.
    pub compression_per_level: Vec<Compression>,
    /// Byte budget of the block cache. Default: 64 MiB. Once the cache is full, a data
    /// block is cached at its third miss, if the first two were recent (within about as
    /// many misses as the cache holds blocks; `block_size` sets that estimate), not at its
    /// first: a block read once or twice would evict one as likely to be read again. With
    /// `mmap_reads`, an uncompressed block is a view into the mapping and is charged only
    /// its small header: the budget then bounds heap use, and the OS page cache holds the
    /// bytes.
    pub cache_size: usize,
    /// SSTables kept open at once (each holds a file descriptor, its index block and its
    /// bloom filter); others are reopened when read. About half are pinned: the first
    /// tables opened while pins are left stay open until compaction deletes them, and a get
    /// reads them with no lock. The rest share a CLOCK cache. A tree of fewer files than
    /// half this budget is read without ever taking the table cache's locks. Must leave
    /// room under the process's open-file limit (`ulimit -n`), which is checked at open.
    /// Default: 1000.
    pub max_open_files: usize,
    /// Read SSTables through read-only memory mappings instead of `pread`: a block read
    /// costs no system call and no copy. With the file in the OS page cache that saved
    /// about 1.2 µs of a get that misses the block cache (3M keys, 2 cores: 313 k against
    /// 228 k random gets/s; bench-results/LOG.md, "Read-path questions"). The price: a disk error under a
    /// mapping kills the process with `SIGBUS` instead of returning `Error::Io`, and
    /// mapped pages count toward the process's resident memory (they are the page
    /// cache's, and reclaimable). With data many times the memory the process may use,
    /// turn it off: a get that misses the page cache then also pays for the kernel's
    /// reclaim of mapped pages (10M keys under a 128 MiB limit: 0.74x RocksDB's gets
    /// mapped, 1.18x with `pread`; BENCHMARKS.md, "Data five times larger than the
    /// memory").
    /// Default: true on 64-bit targets.
    pub mmap_reads: bool,
    /// Length past which the live MANIFEST is replaced by a new one that starts with a
    /// snapshot of the live files (RocksDB's option of the same name). Every flush and
    /// compaction appends an edit, and an open replays the whole manifest, so this bounds
    /// how long an open takes to read it after a long run. A roll writes the metadata of
    /// every live file under the database's state lock, so a manifest is never rolled
    /// before the edits since its snapshot are as long as the snapshot. So any value is
    /// safe: even 1 does not make a large tree roll at every edit, only whenever its
    /// manifest has doubled. Default: 64 MiB.
    pub max_manifest_file_size: u64,
    /// L0 files that trigger a compaction into the base level. Default: 4.
    pub level0_compaction_trigger: usize,
    /// L0 files at which writes start to be slowed. Default: 20.
    pub level0_slowdown_trigger: usize,
    /// L0 files at which writes stop until compaction catches up. Default: 36.
    pub level0_stop_trigger: usize,
    /// The smallest level target. Level targets are sized from the last level up, each a
    /// `level_size_multiplier`-th of the one below; levels whose target would fall below
    /// this stay empty, and L0 compacts into the first level used (the base level).
    /// Default: 256 MiB.
    pub max_bytes_for_level_base: u64,
    /// Growth factor between level targets. Default: 10.
    pub level_size_multiplier: u32,
    /// Background threads: one flushes, the others (at least one) compact. Default: 2.
    pub background_threads: usize,
    /// Ceiling on the bytes per second flushes and compactions may write; 0 means no
    /// limit. Pacing background writes keeps them from taking the disk from foreground
    /// reads in bursts, at the risk of stalls if set below what the write load needs.
    /// Default: 0.
    pub rate_limit_bytes_per_sec: u64,
    /// Let the engine set the background write rate itself: the foreground write rate
    /// times the measured write amplification, with 2x headroom, never below 8 MiB/s and
    /// never above `rate_limit_bytes_per_sec` (when non-zero). Default: false.
    pub rate_limit_auto_tune: bool,
    /// What open does with a damaged WAL record (a torn tail is always dropped silently).
    /// Default: [`WalRecovery::Strict`].
    pub wal_recovery: WalRecovery,
    /// The file system every file goes through (the real one by default).
    pub fs: Arc<dyn FileSystem>,
}

/// What opening a database does when WAL replay meets a damaged record that is not a torn
/// tail (a checksum mismatch or a bad length in the middle of a log, a batch that does not
/// decode). RocksDB calls this `WALRecoveryMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalRecovery {
    /// Refuse to open: `Error::Corruption` naming the WAL and the record's offset, every
    /// file left as it was. Nothing acknowledged is ever dropped without a word.
    Strict,
    /// Salvage a consistent prefix ("point in time"): replay every record before the
    /// damaged one, and drop that record and everything after it, in its WAL and in every
    /// later WAL, so the database holds exactly the writes up to some moment, with no
    /// holes and no reordering. The dropped writes are lost for good (open persists the
    /// salvaged state); `Db::stats()` reports the cut in `wal_salvages` and the
    /// bytes dropped in `wal_salvaged_bytes`. Opt in only after `Strict` failed and the loss is accepted,
    /// like RocksDB's `kPointInTimeRecovery`.
    PointInTime,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            read_only: false,
            compaction_filter: None,
            keyspace_compaction_filters: Vec::new(),
            write_buffer_size: 64 << 20,
            max_write_buffers: 4,
            max_file_size: 64 << 20,
            block_size: 4096,
            block_restart_interval: 16,
            filter_bits_per_key: 10,
            compression: Compression::Lz4,
            bottommost_compression: None,
            compression_per_level: Vec::new(),
            cache_size: 64 << 20,
            max_open_files: 1000,
            mmap_reads: cfg!(target_pointer_width = "64"),
            max_manifest_file_size: 64 << 20,
            wal_recovery: WalRecovery::Strict,
            level0_compaction_trigger: 4,
            level0_slowdown_trigger: 20,
            level0_stop_trigger: 36,
            max_bytes_for_level_base: 256 << 20,
            level_size_multiplier: 10,
            background_threads: 2,
            rate_limit_bytes_per_sec: 0,
            rate_limit_auto_tune: false,
            fs: Arc::new(PosixFs),
        }
    }
}

impl Options {
    /// The compaction filter of keyspace `name` (`"default"`: `compaction_filter`).
    pub fn keyspace_filter(&self, name: &str) -> Option<Arc<dyn CompactionFilter>> {
        if name == crate::keyspace::DEFAULT_NAME {
            return self.compaction_filter.clone();
        }
        self.keyspace_compaction_filters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, f)| Arc::clone(f))
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("read_only", &self.read_only)
            .field("compaction_filter", &self.compaction_filter.is_some())
            .field(
                "keyspace_compaction_filters",
                &self
                    .keyspace_compaction_filters
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_write_buffers", &self.max_write_buffers)
            .field("max_file_size", &self.max_file_size)
            .field("block_size", &self.block_size)
            .field("block_restart_interval", &self.block_restart_interval)
            .field("filter_bits_per_key", &self.filter_bits_per_key)
            .field("compression", &self.compression)
            .field("bottommost_compression", &self.bottommost_compression)
            .field("compression_per_level", &self.compression_per_level)
            .field("cache_size", &self.cache_size)
            .field("max_open_files", &self.max_open_files)
            .field("mmap_reads", &self.mmap_reads)
            .field("max_manifest_file_size", &self.max_manifest_file_size)
            .field("wal_recovery", &self.wal_recovery)
            .field("level0_compaction_trigger", &self.level0_compaction_trigger)
            .field("level0_slowdown_trigger", &self.level0_slowdown_trigger)
            .field("level0_stop_trigger", &self.level0_stop_trigger)
            .field("max_bytes_for_level_base", &self.max_bytes_for_level_base)
            .field("level_size_multiplier", &self.level_size_multiplier)
            .field("background_threads", &self.background_threads)
            .field("rate_limit_bytes_per_sec", &self.rate_limit_bytes_per_sec)
            .field("rate_limit_auto_tune", &self.rate_limit_auto_tune)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// The codec of the tables written into `level`: `bottommost_compression` in the last
    /// level if set, else `compression_per_level` (its last entry for deeper levels), else
    /// `compression`.
    pub fn compression_for_level(&self, level: usize) -> Compression {
        if level == NUM_LEVELS - 1 {
            if let Some(c) = self.bottommost_compression {
                return c;
            }
        }
        let per_level = &self.compression_per_level;
        per_level
            .get(level)
            .or(per_level.last())
            .copied()
            .unwrap_or(self.compression)
    }

    /// Check every option; return the list of all problems found.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut p = Problems::default();
        self.check_combinations(&mut p);
        self.check_sizes(&mut p);
        self.check_compression(&mut p);
        self.check_levels(&mut p);
        self.check_resources(&mut p);
        match p.0.is_empty() {
            true => Ok(()),
            false => Err(p.0),
        }
    }

    /// Options that are each fine but cannot go together.
    fn check_combinations(&self, p: &mut Problems) {
        p.check(!(self.read_only && self.error_if_exists), || {
            "read_only with error_if_exists can never open".into()
        });
        let default_named = self
            .keyspace_compaction_filters
            .iter()
            .any(|(name, _)| name == crate::keyspace::DEFAULT_NAME);
        p.check(!default_named, || {
            "keyspace_compaction_filters names the default keyspace: its filter is \
             compaction_filter"
                .into()
        });
    }

    /// Memtables, files, blocks and filters.
    fn check_sizes(&self, p: &mut Problems) {
        let sizes = [
            (
                "write_buffer_size",
                self.write_buffer_size as u64,
                64 << 10..=4 << 30,
                "64 KiB and 4 GiB",
            ),
            (
                "max_write_buffers",
                self.max_write_buffers as u64,
                2..=64,
                "2 and 64",
            ),
            (
                "max_file_size",
                self.max_file_size,
                16 << 10..=4 << 30,
                "16 KiB and 4 GiB",
            ),
            (
                "block_size",
                self.block_size as u64,
                256..=4 << 20,
                "256 B and 4 MiB",
            ),
            (
                "block_restart_interval",
                self.block_restart_interval as u64,
                1..=1024,
                "1 and 1024",
            ),
        ];
        for (name, value, range, shown) in sizes {
            p.check(range.contains(&value), || {
                format!("{name} = {value} must be between {shown}")
            });
        }
        p.check(self.filter_bits_per_key <= 64, || {
            format!(
                "filter_bits_per_key = {} must be at most 64 (0 disables filters)",
                self.filter_bits_per_key
            )
        });
    }

    /// The codecs, each zstd level in zstd's range.
    fn check_compression(&self, p: &mut Problems) {
        p.check(self.compression_per_level.len() <= NUM_LEVELS, || {
            format!(
                "compression_per_level has {} entries; there are {NUM_LEVELS} levels",
                self.compression_per_level.len()
            )
        });
        let per_level = self
            .compression_per_level
            .iter()
            .enumerate()
            .map(|(level, &c)| (format!("compression_per_level[{level}]"), Some(c)));
        let codecs = [
            ("compression".to_owned(), Some(self.compression)),
            (
                "bottommost_compression".to_owned(),
                self.bottommost_compression,
            ),
        ];
        for (name, c) in codecs.into_iter().chain(per_level) {
            if let Some(Compression::Zstd(level)) = c {
                p.check((1..=22).contains(&level), || {
                    format!("{name}: zstd compression level {level} must be between 1 and 22")
                });
            }
        }
    }

    /// The shape of the tree: L0's triggers and the levels' sizes.
    fn check_levels(&self, p: &mut Problems) {
        p.check(self.level0_compaction_trigger >= 1, || {
            "level0_compaction_trigger must be at least 1".to_owned()
        });
        p.check(
            self.level0_compaction_trigger <= self.level0_slowdown_trigger
                && self.level0_slowdown_trigger <= self.level0_stop_trigger,
            || {
                format!(
                    "L0 triggers must satisfy compaction ({}) <= slowdown ({}) <= stop ({})",
                    self.level0_compaction_trigger,
                    self.level0_slowdown_trigger,
                    self.level0_stop_trigger
                )
            },
        );
        p.check(self.max_bytes_for_level_base >= 1 << 20, || {
            format!(
                "max_bytes_for_level_base = {} must be at least 1 MiB",
                self.max_bytes_for_level_base
            )
        });
        p.check((2..=100).contains(&self.level_size_multiplier), || {
            format!(
                "level_size_multiplier = {} must be between 2 and 100",
                self.level_size_multiplier
            )
        });
    }

    /// Threads, file descriptors, the manifest and the I/O rate.
    fn check_resources(&self, p: &mut Problems) {
        p.check((2..=64).contains(&self.background_threads), || {
            format!(
                "background_threads = {} must be between 2 (a flush and a compaction thread) \
                 and 64",
                self.background_threads
            )
        });
        p.check(self.max_manifest_file_size >= 1, || {
            "max_manifest_file_size must be at least 1 (there is no \"never roll\")".to_owned()
        });
        p.check(self.max_open_files >= 16, || {
            format!(
                "max_open_files = {} must be at least 16",
                self.max_open_files
            )
        });
        if let Some(limit) = open_file_limit() {
            let wanted = (self.max_open_files as u64).saturating_add(OPEN_FILE_HEADROOM);
            p.check(wanted <= limit, || {
                format!(
                    "max_open_files = {} leaves fewer than {OPEN_FILE_HEADROOM} of the \
                     process's {limit} file descriptors (ulimit -n) for WALs, the manifest \
                     and the application",
                    self.max_open_files
                )
            });
        }
        p.check(
            self.rate_limit_bytes_per_sec == 0 || self.rate_limit_bytes_per_sec >= 1 << 20,
            || {
                format!(
                    "rate_limit_bytes_per_sec = {} must be 0 (no limit) or at least 1 MiB/s",
                    self.rate_limit_bytes_per_sec
                )
            },
        );
    }
}

/// The problems [`Options::validate`] found so far.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn check(&mut self, ok: bool, problem: impl FnOnce() -> String) {
        if !ok {
            self.0.push(problem());
        }
    }
}

/// File descriptors kept free beside `max_open_files`.
const OPEN_FILE_HEADROOM: u64 = 64;

/// The process's soft limit on open files, if it can be read.
fn open_file_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass and nothing else.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (rc == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// Per-read options.
#[derive(Debug, Clone)]
pub struct ReadOptions<'a> {
    /// Read at this snapshot instead of the latest state.
    pub snapshot: Option<&'a Snapshot>,
    /// Iterators: the smallest key to return (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: the key at which to stop (exclusive).
    pub upper_bound: Option<Vec<u8>>,
    /// Put blocks read for this operation into the block cache. Default: true (set it
    /// false for one-off scans so they do not evict the working set).
    pub fill_cache: bool,
}

impl Default for ReadOptions<'_> {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            lower_bound: None,
            upper_bound: None,
            fill_cache: true,
        }
    }
}

impl<'a> ReadOptions<'a> {
    /// Read at `snapshot`.
    pub fn at(snapshot: &'a Snapshot) -> Self {
        ReadOptions {
            snapshot: Some(snapshot),
            ..ReadOptions::default()
        }
    }
}

/// Per-write options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Make the write durable (fdatasync) before returning: survives power loss.
    /// Without it the write survives a crash of the process but not of the machine.
    pub sync: bool,
    /// Skip the WAL: the write is lost on any crash until its memtable is flushed. Not
    /// with `sync` (nothing would be synced): that pair is `InvalidArgument`, as in
    /// RocksDB.
    pub disable_wal: bool,
}

impl WriteOptions {
    /// Writes that survive power loss.
    pub fn sync() -> Self {
        WriteOptions {
            sync: true,
            disable_wal: false,
        }
    }

    /// Writes that skip the WAL.
    pub fn no_wal() -> Self {
        WriteOptions {
            sync: false,
            disable_wal: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Options::default().validate().unwrap();
    }

    #[test]
    fn reports_every_problem_at_once() {
        let opts = Options {
            write_buffer_size: 1,
            block_size: 0,
            block_restart_interval: 0,
            level0_stop_trigger: 1,
            compression: Compression::Zstd(99),
            bottommost_compression: Some(Compression::Zstd(0)),
            ..Options::default()
        };
        let problems = opts.validate().unwrap_err();
        assert_eq!(problems.len(), 6, "{problems:#?}");
        assert!(problems
            .iter()
            .any(|p| p.starts_with("bottommost_compression")));
    }

    #[test]
    fn per_level_compression_is_checked() {
        let opts = Options {
            compression_per_level: vec![Compression::None; NUM_LEVELS + 1],
            ..Options::default()
        };
        let problems = opts.validate().unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(problems[0].contains("8 entries"), "{problems:#?}");
        let opts = Options {
            compression_per_level: vec![Compression::Lz4, Compression::Zstd(23)],
            ..Options::default()
        };
        let problems = opts.validate().unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert!(problems[0].starts_with("compression_per_level[1]"));
    }

    #[test]
    fn codec_per_level() {
        let mut opts = Options::default();
        assert!((0..NUM_LEVELS).all(|l| opts.compression_for_level(l) == Compression::Lz4));
        opts.compression_per_level = vec![Compression::None, Compression::Snappy];
        let codecs: Vec<_> = (0..NUM_LEVELS)
            .map(|l| opts.compression_for_level(l))
            .collect();
        assert_eq!(codecs[0], Compression::None);
        assert!(codecs[1..].iter().all(|&c| c == Compression::Snappy));
        opts.bottommost_compression = Some(Compression::Zstd(3));
        assert_eq!(opts.compression_for_level(5), Compression::Snappy);
        assert_eq!(opts.compression_for_level(6), Compression::Zstd(3));
    }
}

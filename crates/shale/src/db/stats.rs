//! Counters the engine keeps about itself. Every field is a relaxed atomic: cheap to bump
//! on hot paths, read as a best-effort snapshot by [`Stats::snapshot`]. The counters every
//! read bumps are [`Striped`], so that readers on different cores do not fight over one
//! cache line.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::striped::Striped;

/// Live counters.
#[derive(Debug, Default)]
pub struct Stats {
    pub writes: AtomicU64,
    pub write_groups: AtomicU64,
    pub user_bytes_written: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_syncs: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_bytes: AtomicU64,
    pub flush_micros: AtomicU64,
    /// Time writers waited because memtables were full (hard limit).
    pub stall_micros: AtomicU64,
    pub stalls: AtomicU64,
    /// Time writers were delayed in proportion to the flush backlog (soft limit).
    pub slowdown_micros: AtomicU64,
    pub gets: Striped,
    /// Value bytes returned by gets.
    pub bytes_read: Striped,
    /// SSTables a get skipped because their bloom filter ruled the key out.
    pub bloom_useful: Striped,
    pub wal_torn_tail_bytes: AtomicU64,
    /// Damaged WAL records `WalRecovery::PointInTime` cut the log at when opening (0 or 1),
    /// and the WAL bytes it dropped: the damaged record and everything logged after it.
    pub wal_salvages: AtomicU64,
    pub wal_salvaged_bytes: AtomicU64,
    pub compactions: AtomicU64,
    pub trivial_moves: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub compaction_entries_dropped: AtomicU64,
    pub compaction_micros: AtomicU64,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub writes: u64,
    pub write_groups: u64,
    pub user_bytes_written: u64,
    pub wal_bytes: u64,
    pub wal_syncs: u64,
    pub flushes: u64,
    pub flush_bytes: u64,
    pub flush_micros: u64,
    pub stall_micros: u64,
    pub stalls: u64,
    pub slowdown_micros: u64,
    pub gets: u64,
    pub bytes_read: u64,
    pub bloom_useful: u64,
    pub wal_torn_tail_bytes: u64,
    pub wal_salvages: u64,
    pub wal_salvaged_bytes: u64,
    pub compactions: u64,
    pub trivial_moves: u64,
    pub compaction_bytes_read: u64,
    pub compaction_bytes_written: u64,
    pub compaction_entries_dropped: u64,
    pub compaction_micros: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
    /// Blocks read from a file and not cached: the full cache's admission filter turned
    /// them away, as it does a block's first two recent misses (see
    /// `cache/doorkeeper.rs`).
    pub block_cache_rejections: u64,
    pub block_cache_usage_bytes: u64,
    pub block_cache_capacity_bytes: u64,
    /// Index blocks and bloom filters of open tables, held outside the block cache.
    pub pinned_table_metadata_bytes: u64,
    /// SSTable readers open in the table cache.
    pub open_tables: u64,
    /// The background write rate in force (0: unlimited).
    pub rate_limit_bytes_per_sec: u64,
    /// Time flushes and compactions waited for the rate limiter.
    pub rate_limit_wait_micros: u64,
}

impl StatsSnapshot {
    /// Every counter under its field's name, grouped as the CLI prints them (cache, write
    /// pressure, flushes, compactions, writes, WAL, reads, rate limit): the one list the
    /// CLI and the Python bindings show. The destructuring names each field with no `..`,
    /// so a counter added to the struct fails to compile here until it is listed.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        macro_rules! named {
            ($($field:ident),* $(,)?) => {{
                let StatsSnapshot { $($field),* } = self;
                vec![$((stringify!($field), *$field)),*]
            }};
        }
        named!(
            block_cache_usage_bytes,
            block_cache_capacity_bytes,
            block_cache_hits,
            block_cache_misses,
            block_cache_rejections,
            pinned_table_metadata_bytes,
            open_tables,
            stalls,
            stall_micros,
            slowdown_micros,
            flushes,
            flush_bytes,
            flush_micros,
            compactions,
            trivial_moves,
            compaction_bytes_read,
            compaction_bytes_written,
            compaction_entries_dropped,
            compaction_micros,
            writes,
            write_groups,
            user_bytes_written,
            wal_bytes,
            wal_syncs,
            wal_torn_tail_bytes,
            wal_salvages,
            wal_salvaged_bytes,
            gets,
            bytes_read,
            bloom_useful,
            rate_limit_bytes_per_sec,
            rate_limit_wait_micros,
        )
    }
}

impl Stats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// [`Stats::add`] for a counter that only the holder of one lock ever changes (the
    /// write path's counters, under the log lock): a plain load and store. A locked
    /// read-modify-write would, on x86, wait for the WAL and arena stores before it to
    /// reach the cache, on every write.
    pub(crate) fn add_serialized(counter: &AtomicU64, n: u64) {
        let now = counter.load(Ordering::Relaxed);
        counter.store(now.wrapping_add(n), Ordering::Relaxed);
    }

    /// Read every counter.
    pub fn snapshot(&self) -> StatsSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            writes: r(&self.writes),
            write_groups: r(&self.write_groups),
            user_bytes_written: r(&self.user_bytes_written),
            wal_bytes: r(&self.wal_bytes),
            wal_syncs: r(&self.wal_syncs),
            flushes: r(&self.flushes),
            flush_bytes: r(&self.flush_bytes),
            flush_micros: r(&self.flush_micros),
            stall_micros: r(&self.stall_micros),
            stalls: r(&self.stalls),
            slowdown_micros: r(&self.slowdown_micros),
            gets: self.gets.load(),
            bytes_read: self.bytes_read.load(),
            bloom_useful: self.bloom_useful.load(),
            wal_torn_tail_bytes: r(&self.wal_torn_tail_bytes),
            wal_salvages: r(&self.wal_salvages),
            wal_salvaged_bytes: r(&self.wal_salvaged_bytes),
            compactions: r(&self.compactions),
            trivial_moves: r(&self.trivial_moves),
            compaction_bytes_read: r(&self.compaction_bytes_read),
            compaction_bytes_written: r(&self.compaction_bytes_written),
            compaction_entries_dropped: r(&self.compaction_entries_dropped),
            compaction_micros: r(&self.compaction_micros),
            ..StatsSnapshot::default()
        }
    }
}

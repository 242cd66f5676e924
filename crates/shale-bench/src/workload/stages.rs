//! The per-stage breakdown of Shale's gets (`--get-breakdown`): each reader thread turns on
//! the engine's perf context (`shale::perf`, per thread) for its gets and adds what it
//! counted here when it is done. Shared by the reader threads of one workload behind a
//! mutex taken once per thread; the timers cost a clock read per stage, so the workload's
//! own rate is lower with it on. Other engines leave every counter at zero.

use std::sync::Mutex;

use shale::perf::PerfContext;

/// The stage timings and counts of every reader thread, summed.
#[derive(Default)]
pub struct GetStages(Mutex<PerfContext>);

impl GetStages {
    /// Turn the perf context on for the calling thread and clear what it held.
    pub fn start_thread() {
        shale::perf::enable(true);
        let _ = shale::perf::take();
    }

    /// Add what the calling thread counted since `start_thread`, and turn its timers off.
    pub fn finish_thread(&self) {
        let p = shale::perf::take();
        shale::perf::enable(false);
        let mut sum = self.0.lock().unwrap_or_else(|e| e.into_inner());
        sum.get_memtable_nanos += p.get_memtable_nanos;
        sum.get_filter_nanos += p.get_filter_nanos;
        sum.get_block_read_nanos += p.get_block_read_nanos;
        sum.get_decompress_nanos += p.get_decompress_nanos;
        sum.bloom_useful += p.bloom_useful;
        sum.block_cache_hits += p.block_cache_hits;
        sum.block_cache_misses += p.block_cache_misses;
    }

    /// The breakdown per get over `gets` gets, for the record's note.
    pub fn describe(&self, gets: u64) -> String {
        let sum = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let per = |v: u64| v as f64 / gets.max(1) as f64;
        format!(
            "per get: memtable {:.0} ns, filter {:.0} ns, block read {:.0} ns, decompress {:.0} ns; \
             bloom-useful {:.2}, block cache hits {:.2}, misses {:.2}",
            per(sum.get_memtable_nanos),
            per(sum.get_filter_nanos),
            per(sum.get_block_read_nanos),
            per(sum.get_decompress_nanos),
            per(sum.bloom_useful),
            per(sum.block_cache_hits),
            per(sum.block_cache_misses),
        )
    }
}

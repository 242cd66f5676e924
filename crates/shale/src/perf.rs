//! Per-thread stage timings of reads and writes, like RocksDB's perf context.
//!
//! Off by default: a disabled timer costs one thread-local read. Turn it on for the
//! current thread with [`enable`], run the operations to study, then [`take`] the
//! counters (which resets them). Times are in nanoseconds and accumulate over every
//! operation the thread ran since the last `take`.
//!
//! A write's WAL and memtable time is charged to the thread that led its write group:
//! a follower sees only the time it waited in the queue.
//!
//! ```
//! shale::perf::enable(true);
//! // ... db.get(..), db.put(..) ...
//! let stages = shale::perf::take();
//! println!("memtable {} ns, block reads {} ns", stages.get_memtable_nanos, stages.get_block_read_nanos);
//! ```

use std::cell::{Cell, RefCell};
use std::time::Instant;

/// Accumulated stage timings and counts of the current thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PerfContext {
    /// Waiting in the writer queue (for a leader to commit us, or to become leader).
    pub write_queue_nanos: u64,
    /// Back-pressure: proportional slowdown and stalls.
    pub write_delay_nanos: u64,
    /// Appending to the WAL.
    pub write_wal_nanos: u64,
    /// Making the WAL durable (sync writes).
    pub write_wal_sync_nanos: u64,
    /// Inserting into the memtable.
    pub write_memtable_nanos: u64,
    /// Looking in the active and frozen memtables.
    pub get_memtable_nanos: u64,
    /// Probing bloom filters.
    pub get_filter_nanos: u64,
    /// Reading blocks from files (including checksum verification).
    pub get_block_read_nanos: u64,
    /// Decompressing blocks.
    pub get_decompress_nanos: u64,
    /// Tables skipped because their bloom filter said the key is absent.
    pub bloom_useful: u64,
    pub block_cache_hits: u64,
    pub block_cache_misses: u64,
}

thread_local! {
    static ENABLED: Cell<bool> = const { Cell::new(false) };
    static CONTEXT: RefCell<PerfContext> = RefCell::new(PerfContext::default());
}

/// Turn stage timing on or off for the current thread.
pub fn enable(on: bool) {
    ENABLED.with(|e| e.set(on));
}

/// True if stage timing is on for the current thread.
pub fn enabled() -> bool {
    ENABLED.with(Cell::get)
}

/// The current thread's counters, reset to zero.
pub fn take() -> PerfContext {
    CONTEXT.with(|c| std::mem::take(&mut *c.borrow_mut()))
}

/// Add to one of the current thread's counters (when enabled).
pub(crate) fn count(field: fn(&mut PerfContext) -> &mut u64, n: u64) {
    if enabled() {
        CONTEXT.with(|c| *field(&mut c.borrow_mut()) += n);
    }
}

/// Times a stage: started only when timing is enabled.
pub(crate) struct Timer(Option<Instant>);

impl Timer {
    pub fn start() -> Timer {
        Timer(enabled().then(Instant::now))
    }

    /// Charge the time since `start` to `field`.
    pub fn stop(self, field: fn(&mut PerfContext) -> &mut u64) {
        if let Some(t0) = self.0 {
            let nanos = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
            CONTEXT.with(|c| *field(&mut c.borrow_mut()) += nanos);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_records_nothing_and_take_resets() {
        enable(false);
        Timer::start().stop(|p| &mut p.write_wal_nanos);
        count(|p| &mut p.bloom_useful, 3);
        assert_eq!(take(), PerfContext::default());
        enable(true);
        count(|p| &mut p.bloom_useful, 3);
        let t = Timer::start();
        std::thread::sleep(std::time::Duration::from_millis(1));
        t.stop(|p| &mut p.get_block_read_nanos);
        let got = take();
        assert_eq!(got.bloom_useful, 3);
        assert!(got.get_block_read_nanos >= 1_000_000);
        assert_eq!(take(), PerfContext::default());
        enable(false);
    }
}

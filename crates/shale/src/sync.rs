//! Small helpers shared by every module: locking, striped counters, prefetching and
//! per-thread trends.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning: every critical section in Shale leaves its data
/// consistent before doing anything that can panic, so a panicking holder cannot leave it
/// half-done.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ask the CPU to start loading the cache line that holds `value`, so that a later access
/// does not wait for memory. A hint only; a no-op on targets other than x86-64.
#[inline]
pub(crate) fn prefetch<T>(value: &T) {
    prefetch_address(std::ptr::from_ref(value).cast());
}

/// [`prefetch`] every cache line that holds part of `values`: the lines then load in
/// parallel, where a loop that reads them in order would wait for memory a few lines at
/// a time until the hardware prefetcher noticed the stream.
#[inline]
pub(crate) fn prefetch_slice<T>(values: &[T]) {
    let range = values.as_ptr_range();
    let start = range.start.cast::<u8>();
    for offset in line_offsets(start as usize, range.end as usize) {
        prefetch_address(start.wrapping_offset(offset));
    }
}

/// Memory that a later step will read, kept as addresses alone, so that it can be
/// prefetched without first reading the pointer that leads to it. A cache entry holds the
/// hint of its value's hot bytes: a hit starts loading them before it touches the value,
/// whose own first touch is a wait for memory, and the two waits overlap.
///
/// The addresses are never dereferenced; a stale hint only wastes a prefetch.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PrefetchHint {
    /// Byte ranges as (start, end) addresses; empty ranges are skipped.
    ranges: [(usize, usize); 2],
}

impl PrefetchHint {
    /// A hint for the bytes of up to two ranges of memory.
    pub(crate) fn new(first: *const [u8], second: *const [u8]) -> PrefetchHint {
        let range = |r: *const [u8]| {
            let start = r.cast::<u8>() as usize;
            (start, start.saturating_add(r.len()))
        };
        PrefetchHint {
            ranges: [range(first), range(second)],
        }
    }

    /// [`prefetch_slice`] both ranges.
    #[inline]
    pub(crate) fn prefetch(&self) {
        for &(start, end) in &self.ranges {
            let base = std::ptr::without_provenance::<u8>(start);
            for offset in line_offsets(start, end) {
                prefetch_address(base.wrapping_offset(offset));
            }
        }
    }
}

/// The offsets from `start` of the starts of the cache lines that hold `start..end`. The
/// first is at or before `start`: a range that begins mid-line may reach one more line
/// than its length alone would take.
fn line_offsets(start: usize, end: usize) -> impl Iterator<Item = isize> {
    let first = start - start % CACHE_LINE;
    (first..end)
        .step_by(CACHE_LINE)
        .map(move |line| line.wrapping_sub(start) as isize)
}

/// The cache line size assumed by [`prefetch_slice`] (x86-64 and most ARM cores).
const CACHE_LINE: usize = 64;

#[inline]
fn prefetch_address(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and never faults, whatever the
    // address: one in a line the caller may read, or a `PrefetchHint`'s, which may have
    // been freed or unmapped since.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// What happened lately, as a 2-bit saturating counter (a branch predictor's): an outcome
/// is [`likely`](Trend::likely) once it happened twice more than its opposite, recently.
/// Kept per thread (in a `thread_local!`) to choose, for the next call, the way of doing
/// something that recent calls would have gained from.
#[derive(Debug, Default)]
pub(crate) struct Trend(Cell<u8>);

impl Trend {
    pub(crate) const fn new() -> Trend {
        Trend(Cell::new(0))
    }

    pub(crate) fn likely(&self) -> bool {
        self.0.get() >= 2
    }

    pub(crate) fn record(&self, happened: bool) {
        let n = self.0.get();
        self.0.set(if happened {
            (n + 1).min(3)
        } else {
            n.saturating_sub(1)
        });
    }
}

/// Slots of a [`Striped`] counter: threads beyond this many share slots.
const STRIPES: usize = 16;

/// One slot on a cache line (two, against the adjacent-line prefetcher) of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Stripe(AtomicU64);

/// A counter for paths that many threads run at once (every get bumps a few). A shared
/// atomic would be one cache line that every core takes exclusive in turn: on two cores,
/// reads of missing keys ran slower with two threads than with one. Each thread adds to
/// its own slot instead (the slot is picked round-robin at the thread's first add), and a
/// read sums the slots.
#[derive(Debug, Default)]
pub struct Striped {
    stripes: [Stripe; STRIPES],
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static MY_STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed) % STRIPES;
}

impl Striped {
    pub fn add(&self, n: u64) {
        let i = MY_STRIPE.try_with(|i| *i).unwrap_or(0);
        if let Some(stripe) = self.stripes.get(i) {
            stripe.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// The sum of the slots: exact once the adders have stopped, a close lower bound
    /// while they run.
    pub fn load(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

#[cfg(test)]
mod tests {
    use super::{line_offsets, PrefetchHint, Striped, Trend, CACHE_LINE};

    /// A hint is only addresses: prefetching memory that has since been freed (a cache
    /// entry's value dropped) or that was never mapped does nothing.
    #[test]
    fn a_hint_to_freed_or_unmapped_memory_is_harmless() {
        let block = vec![7u8; 4096];
        let header = [1u8; 24];
        let hint = PrefetchHint::new(&block[..], &header[..]);
        drop(block);
        hint.prefetch();
        let unmapped = std::ptr::slice_from_raw_parts(std::ptr::without_provenance(64), 4096);
        PrefetchHint::new(unmapped, unmapped).prefetch();
        PrefetchHint::default().prefetch();
    }

    #[test]
    fn a_trend_follows_the_recent_outcomes() {
        let t = Trend::new();
        assert!(!t.likely());
        t.record(true);
        assert!(!t.likely(), "once is not yet a trend");
        t.record(true);
        assert!(t.likely());
        for _ in 0..10 {
            t.record(true);
        }
        // Saturated: two opposite outcomes in a row end it, one does not.
        t.record(false);
        assert!(t.likely());
        t.record(false);
        assert!(!t.likely());
        for _ in 0..10 {
            t.record(false);
        }
        t.record(true);
        assert!(!t.likely());
    }

    #[test]
    fn line_offsets_name_every_line_a_range_touches() {
        let lines = |start, len| line_offsets(start, start + len).collect::<Vec<_>>();
        let l = CACHE_LINE as isize;
        assert_eq!(lines(4096, 0), Vec::<isize>::new());
        assert_eq!(lines(4096, 1), [0]);
        assert_eq!(lines(4096, 64), [0]);
        assert_eq!(lines(4096, 65), [0, l]);
        // 128 bytes from mid-line touch three lines; the first starts before the range.
        assert_eq!(lines(4096 + 16, 128), [-16, l - 16, 2 * l - 16]);
        assert_eq!(lines(4096 + 63, 2), [-63, 1]);
    }

    #[test]
    fn striped_counter_sums_every_threads_adds() {
        let c = Striped::default();
        std::thread::scope(|s| {
            for t in 0..20u64 {
                let c = &c;
                s.spawn(move || {
                    for _ in 0..1000 {
                        c.add(t);
                    }
                });
            }
        });
        assert_eq!(c.load(), 1000 * (0..20).sum::<u64>());
    }
}

//! Prefetching: asking the CPU to start loading memory that a later step reads, so that
//! the wait for it overlaps other work. Hints only: a no-op on targets other than x86-64,
//! and never a fault, whatever the address.
//!
//! Thread safety: plain functions and a `Copy` value of addresses; nothing is shared.

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

#[cfg(test)]
mod tests {
    use super::{line_offsets, PrefetchHint, CACHE_LINE};

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
}

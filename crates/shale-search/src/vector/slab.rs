//! Huge-page slabs: where a graph's codes and level-0 lists live once it outgrows its
//! first chunk.
//!
//! A search is a chain of cache misses on codes and neighbour lists spread over the whole
//! graph, and with 4 KiB pages most of those loads also miss the TLB: a 100,000-node graph
//! of 50-dimensional vectors holds 20 MB of them, some 5,000 pages, more than the
//! second-level TLB maps. Linux backs a region with 2 MiB pages where it is advised to
//! (`MADV_HUGEPAGE`, transparent huge pages), and one TLB entry then maps 512 times as
//! much. So a [`Slabs`] maps 2 MiB-aligned anonymous regions, advises them so, and hands
//! out pieces by bumping a pointer; the pieces are zero (fresh anonymous memory) and live
//! until the `Slabs` is dropped, never freed one by one. Where the system does not grant
//! huge pages (another OS, THP disabled) a slab is ordinary anonymous memory.
//!
//! [`Zeroed`] is a zero-initialised array either on the heap or in a slab, so the store
//! keeps one type for both.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::sync::Mutex;

use memmap2::{MmapMut, MmapOptions};

use crate::sync::lock;

/// A huge page: what slabs are aligned to and made of, and the unit their memory is
/// counted in (a huge page is backed whole as soon as one byte of it is touched).
pub(super) const HUGE_PAGE: usize = 2 << 20;

/// A slab holds at least this many pieces of the size that opened it, so what is left
/// unused at its end, when the next piece does not fit, is at most a 64th of it. A slab
/// is address space until its pages are touched, so a large one costs a small graph
/// nothing.
const PIECES_PER_SLAB: usize = 64;

/// A bump allocator over huge-page-advised anonymous mappings. Pieces are handed out in
/// order and returned all at once, when the `Slabs` is dropped.
#[derive(Default)]
pub(super) struct Slabs {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Every mapping, the one being carved last. Each is one huge page longer than the
    /// slab inside it, so that the slab can start on a huge-page boundary.
    maps: Vec<MmapMut>,
    /// Address of the next free byte of the current slab, and of its end.
    next: usize,
    end: usize,
    /// Huge pages touched in the slabs before the current one.
    closed_bytes: usize,
    /// Where the current slab starts.
    start: usize,
}

impl Slabs {
    /// `layout.size()` zero bytes aligned to `layout.align()` (at most a huge page), valid
    /// until `self` is dropped; `None` if the system refuses a new mapping.
    pub(super) fn alloc(&self, layout: Layout) -> Option<NonNull<u8>> {
        let mut s = lock(&self.state);
        let align = layout.align();
        if align > HUGE_PAGE {
            return None;
        }
        let fits = |s: &State| {
            let at = s.next.checked_next_multiple_of(align)?;
            (at.checked_add(layout.size())? <= s.end).then_some(at)
        };
        let at = match fits(&s) {
            Some(at) => at,
            None => {
                let want = layout.size().checked_mul(PIECES_PER_SLAB)?;
                let bytes = want.checked_next_multiple_of(HUGE_PAGE)?;
                let map = MmapOptions::new()
                    .len(bytes.checked_add(HUGE_PAGE)?)
                    .map_anon()
                    .ok()?;
                #[cfg(target_os = "linux")]
                {
                    // Advice only: without transparent huge pages the slab still works.
                    let _ = map.advise(memmap2::Advice::HugePage);
                }
                let base = map.as_ptr() as usize;
                let start = base.checked_next_multiple_of(HUGE_PAGE)?;
                s.closed_bytes += s.touched();
                s.maps.push(map);
                s.start = start;
                s.next = start;
                s.end = start + bytes;
                start
            }
        };
        s.next = at + layout.size();
        NonNull::new(at as *mut u8)
    }

    /// Memory the slabs hold: every huge page a piece has been carved from.
    pub(super) fn bytes(&self) -> usize {
        let s = lock(&self.state);
        s.closed_bytes + s.touched()
    }
}

impl State {
    /// The current slab's bytes in use, rounded up to whole huge pages.
    fn touched(&self) -> usize {
        (self.next - self.start).next_multiple_of(HUGE_PAGE)
    }
}

/// Types whose all-zero bytes are a valid value.
///
/// # Safety
/// Only for types where that holds.
pub(super) unsafe trait ZeroValid {}

// SAFETY: `AtomicU32` has `u32`'s bit validity, and zero is a `u32`.
unsafe impl ZeroValid for AtomicU32 {}

/// `len` values of `T`, all zero when made, on the heap or in a [`Slabs`] that the owner
/// keeps alive for longer than this array.
pub(super) struct Zeroed<T> {
    ptr: NonNull<T>,
    len: usize,
    /// The heap layout to free on drop; `None` for a piece of a slab.
    heap: Option<Layout>,
}

// SAFETY: `Zeroed<T>` owns its `T`s as a `Box<[T]>` would (a slab piece is used by this
// array alone), so it is `Send` and `Sync` exactly when `T` is.
unsafe impl<T: Send> Send for Zeroed<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for Zeroed<T> {}

impl<T: ZeroValid> Zeroed<T> {
    /// `len` zero values: from `slabs` if given and it has memory, else from the heap's
    /// zeroed path (which leaves fresh pages untouched).
    ///
    /// # Safety
    /// A `Zeroed` made from `slabs` must be dropped before `slabs` is (the owner declares
    /// the slabs after everything that holds their pieces).
    ///
    /// # Panics
    /// If the array overflows the address space.
    pub(super) unsafe fn new(len: usize, slabs: Option<&Slabs>) -> Zeroed<T> {
        let layout = Layout::array::<T>(len.max(1))
            .unwrap_or_else(|_| panic!("an array of {len} values overflows the address space"));
        if let Some(ptr) = slabs.and_then(|s| s.alloc(layout)) {
            return Zeroed {
                ptr: ptr.cast(),
                len,
                heap: None,
            };
        }
        // SAFETY: `layout` has a non-zero size (at least one `T`, and every `ZeroValid`
        // type here has a size).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
        let Some(ptr) = NonNull::new(ptr) else {
            std::alloc::handle_alloc_error(layout)
        };
        Zeroed {
            ptr,
            len,
            heap: Some(layout),
        }
    }

    /// `len` zero values on the heap.
    ///
    /// # Panics
    /// As [`Zeroed::new`].
    pub(super) fn heap(len: usize) -> Zeroed<T> {
        // SAFETY: no slab, so nothing this array must be dropped before.
        unsafe { Zeroed::new(len, None) }
    }

    /// Bytes of this array on the heap (a slab's are counted by [`Slabs::bytes`]).
    pub(super) fn heap_bytes(&self) -> usize {
        self.heap.map_or(0, |l| l.size())
    }
}

impl<T> std::ops::Deref for Zeroed<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` is the start of `len` initialised (zero-valid, then written through
        // `&T`'s interior mutability only) values that live as long as `self` (a heap
        // allocation it frees on drop, or a slab piece its owner keeps alive, see `new`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for Zeroed<T> {
    fn drop(&mut self) {
        // `T`s here need no drop of their own: they are `ZeroValid` plain data.
        if let Some(layout) = self.heap {
            // SAFETY: allocated in `new` with this layout, freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn pieces_are_zero_aligned_disjoint_and_counted_in_huge_pages() {
        let slabs = Slabs::default();
        assert_eq!(slabs.bytes(), 0);
        let layout = Layout::from_size_align(100_000, 64).unwrap();
        let mut seen = Vec::new();
        for _ in 0..90 {
            let p = slabs.alloc(layout).expect("an anonymous mapping");
            assert_eq!(p.as_ptr() as usize % 64, 0);
            // SAFETY: a fresh piece of `layout.size()` bytes that only this test uses.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), layout.size()) };
            assert!(bytes.iter().all(|&b| b == 0), "a piece starts zeroed");
            bytes.fill(0xAB);
            seen.push(p.as_ptr() as usize);
        }
        seen.sort_unstable();
        assert!(
            seen.windows(2).all(|w| w[1] - w[0] >= layout.size()),
            "pieces overlap"
        );
        // A slab for 64 pieces of 100,000 bytes is four huge pages, which hold 83 of them
        // (each piece starts on a 64-byte boundary): 90 pieces fill one slab and touch one
        // huge page of the next.
        assert_eq!(slabs.bytes(), 5 * HUGE_PAGE);
    }

    #[test]
    fn arrays_from_slabs_and_heap_read_the_same() {
        let slabs = Slabs::default();
        // SAFETY: the array is dropped at the end of the test, before `slabs`.
        let a = unsafe { Zeroed::<AtomicU32>::new(1000, Some(&slabs)) };
        let b = Zeroed::<AtomicU32>::heap(1000);
        assert_eq!(a.heap_bytes(), 0);
        assert_eq!(b.heap_bytes(), 4000);
        for (x, y) in a.iter().zip(b.iter()) {
            assert_eq!(x.load(Ordering::Relaxed), 0);
            assert_eq!(y.load(Ordering::Relaxed), 0);
        }
        a[999].store(7, Ordering::Relaxed);
        assert_eq!(a[999].load(Ordering::Relaxed), 7);
        drop((a, b));
    }
}

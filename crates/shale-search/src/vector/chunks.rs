//! A flat directory of lazily created chunks, indexed by chunk number: how the graph's node
//! arrays (`store.rs`) and the full-vector file (`vector_file.rs`) grow while other threads
//! read them.
//!
//! The directory is one array of pointers, one per chunk that the whole `u32` id range
//! could need, from the allocator's zeroed path: only the pages of it that name a created
//! chunk are ever touched (8 KiB of it for the first million ids of 1024-node chunks), and
//! finding a chunk is one load, not a walk.
//!
//! # Thread safety
//!
//! Every method but `drop` takes `&self`. A chunk is installed once, by compare-and-swap
//! (a thread that loses the race drops its own chunk and uses the winner's), and is never
//! moved, replaced or freed before the directory is dropped; so a reference to it lives as
//! long as the directory.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Chunks of `T`, created on first use.
pub(super) struct Chunks<T> {
    dir: Box<[AtomicPtr<T>]>,
    /// One more than the highest chunk number ever installed: where `drop` and `iter` stop.
    bound: AtomicUsize,
}

impl<T> Chunks<T> {
    /// A directory for chunks `0..count`, all absent.
    ///
    /// # Panics
    /// If `count` is 0 or the directory overflows the address space.
    pub(super) fn new(count: usize) -> Chunks<T> {
        let layout = std::alloc::Layout::array::<AtomicPtr<T>>(count)
            .ok()
            .filter(|l| l.size() > 0)
            .unwrap_or_else(|| panic!("a directory of {count} chunks"));
        // SAFETY: `layout` has a non-zero size (checked above).
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<AtomicPtr<T>>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: a fresh allocation of `[AtomicPtr<T>; count]`'s layout; all-zero bytes are a
        // valid (null) `AtomicPtr`; the box frees it with the same layout.
        let dir = unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, count)) };
        Chunks {
            dir,
            bound: AtomicUsize::new(0),
        }
    }

    /// Chunk `c`, if it exists.
    #[inline]
    pub(super) fn get(&self, c: usize) -> Option<&T> {
        let ptr = self.dir.get(c)?.load(Ordering::Acquire);
        // SAFETY: a non-null pointer in the directory came from `Box::into_raw`, was
        // installed once and is freed only by `drop` (see the module comment), which `&self`
        // outlives. The acquire load pairs with the release of the installing CAS, so the
        // chunk's construction is visible.
        (!ptr.is_null()).then(|| unsafe { &*ptr })
    }

    /// Chunk `c`, created by `make` if it does not exist yet.
    ///
    /// # Errors
    /// `make`'s error (nothing is installed then); `None` from `make` is not possible:
    /// out-of-range `c` is reported as `Ok(None)`.
    pub(super) fn get_or_try_init<E>(
        &self,
        c: usize,
        make: impl FnOnce() -> Result<T, E>,
    ) -> Result<Option<&T>, E> {
        if let Some(chunk) = self.get(c) {
            return Ok(Some(chunk));
        }
        let Some(slot) = self.dir.get(c) else {
            return Ok(None);
        };
        let fresh = Box::into_raw(Box::new(make()?));
        let installed = match slot.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => {
                self.bound.fetch_max(c + 1, Ordering::AcqRel);
                fresh
            }
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` just above and was never shared:
                // another thread installed its chunk first.
                drop(unsafe { Box::from_raw(fresh) });
                winner
            }
        };
        // SAFETY: as in `get`.
        Ok(Some(unsafe { &*installed }))
    }

    /// Every chunk that exists, with its number, in order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        let bound = self.bound.load(Ordering::Acquire);
        (0..bound).filter_map(|c| Some((c, self.get(c)?)))
    }

    /// Bytes of the directory's pages that name a chunk (the rest is never touched).
    pub(super) fn directory_bytes(&self) -> usize {
        (self.bound.load(Ordering::Acquire) * std::mem::size_of::<AtomicPtr<T>>())
            .next_multiple_of(4096)
    }
}

impl<T> Drop for Chunks<T> {
    fn drop(&mut self) {
        let bound = *self.bound.get_mut();
        for slot in self.dir.iter_mut().take(bound) {
            let chunk = std::mem::replace(slot.get_mut(), std::ptr::null_mut());
            if !chunk.is_null() {
                // SAFETY: installed once from `Box::into_raw`, dropped here once; `&mut self`
                // means no reference into it is left.
                drop(unsafe { Box::from_raw(chunk) });
            }
        }
    }
}

// SAFETY: the directory hands out `&T` to any thread and moves `T`s between threads (made
// in one, dropped in another), exactly what `T: Send + Sync` allows.
unsafe impl<T: Send + Sync> Sync for Chunks<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Send for Chunks<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_made_once_and_found_again() {
        let chunks: Chunks<String> = Chunks::new(1 << 22);
        assert!(chunks.get(5).is_none());
        let made = chunks
            .get_or_try_init(5, || Ok::<_, ()>("five".to_string()))
            .unwrap()
            .unwrap();
        assert_eq!(made, "five");
        let again = chunks
            .get_or_try_init(5, || Err::<String, _>("not called"))
            .unwrap();
        assert_eq!(again.map(String::as_str), Some("five"));
        assert_eq!(
            chunks.get_or_try_init(7, || Err::<String, _>("refused")),
            Err("refused")
        );
        assert!(chunks.get(7).is_none());
        assert_eq!(
            chunks.get_or_try_init(1 << 22, || Ok::<_, ()>(String::new())),
            Ok(None)
        );
        chunks
            .get_or_try_init(0, || Ok::<_, ()>("zero".into()))
            .unwrap();
        let all: Vec<(usize, &str)> = chunks.iter().map(|(c, s)| (c, s.as_str())).collect();
        assert_eq!(all, [(0, "zero"), (5, "five")]);
        assert_eq!(chunks.directory_bytes(), 4096);
    }
}

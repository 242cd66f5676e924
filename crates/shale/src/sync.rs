//! Small synchronisation helpers shared by every module.

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
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch has no architectural effect and never faults; the address comes
    // from a valid reference in any case.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

//! [`lock`]: how Shale takes a mutex.

use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning: every critical section in Shale leaves its data
/// consistent before doing anything that can panic, so a panicking holder cannot leave it
/// half-done.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

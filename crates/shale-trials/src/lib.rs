//! What a long randomized trial needs around it: panics counted in every thread
//! (background threads included, so a trial that catches its own panic still fails if any
//! thread panicked), and counts from the environment.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static PANICS: AtomicU64 = AtomicU64::new(0);
static HOOK: Once = Once::new();

/// Count panics in every thread from now on.
pub fn count_panics() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::Relaxed);
            previous(info);
        }));
    });
}

/// Panics counted so far.
pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// A count from the environment, or `default` (CI mode).
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

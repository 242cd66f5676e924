//! [`TimeSpent`]: how often something took time, and how much in all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A count of occurrences and their total duration, for metrics and tests. Relaxed
/// atomics: each field is exact, the pair read together may be one occurrence apart.
#[derive(Debug, Default)]
pub struct TimeSpent {
    count: AtomicU64,
    micros: AtomicU64,
}

impl TimeSpent {
    pub fn record(&self, spent: Duration) {
        let micros = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(micros, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn total(&self) -> Duration {
        Duration::from_micros(self.micros.load(Ordering::Relaxed))
    }
}

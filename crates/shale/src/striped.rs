//! [`Striped`]: a counter that many threads bump at once without sharing a cache line.
//!
//! Thread safety: `Sync`; adds are relaxed atomics, each thread on its own slot.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

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
    use super::Striped;

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

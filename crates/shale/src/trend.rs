//! [`Trend`]: a per-thread 2-bit predictor of what happened lately, for paths that choose
//! between two ways of doing a step by what recent calls would have gained from.
//!
//! Thread safety: a `Trend` is a `Cell`, kept in a `thread_local!`: one thread each.

use std::cell::Cell;

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

#[cfg(test)]
mod tests {
    use super::Trend;

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
}

//! A rate limiter for background I/O: flushes and compactions write their SSTables through
//! it so they do not take the disk from foreground writes and reads in bursts.
//!
//! A token bucket: tokens (bytes) accrue at `rate` per second up to a burst of 100 ms
//! worth. A writer takes the tokens for its bytes; if that leaves the bucket in debt, it
//! waits exactly as long as the debt takes to repay, on a condition variable that a rate
//! change also signals. No polling.
//!
//! Auto-tuning (optional) sets the rate from what the tree needs: the foreground write
//! rate times the measured write amplification, with headroom, clamped between a floor
//! and the configured ceiling. Background work then runs as slowly as keeps up, and no
//! slower.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::fs::WritableFile;
use crate::sync::lock;

/// Never auto-tune below this (bytes per second).
pub const AUTO_TUNE_FLOOR: u64 = 8 << 20;
/// Headroom over the measured need when auto-tuning.
const AUTO_TUNE_HEADROOM: f64 = 2.0;
/// Writes are charged in pieces of at most this many bytes, so one large append does not
/// hold the bucket for long.
const CHUNK: usize = 64 << 10;

struct Bucket {
    /// Bytes available; negative while writers owe.
    available: f64,
    last_refill: Instant,
}

/// Limits background write bandwidth.
pub struct RateLimiter {
    /// Bytes per second; 0 means unlimited.
    rate: AtomicU64,
    bucket: Mutex<Bucket>,
    changed: Condvar,
    /// Total time writers waited, in microseconds.
    pub waited_micros: AtomicU64,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("bytes_per_sec", &self.rate())
            .finish()
    }
}

impl RateLimiter {
    /// A limiter at `bytes_per_sec` (0: unlimited).
    pub fn new(bytes_per_sec: u64) -> RateLimiter {
        RateLimiter {
            rate: AtomicU64::new(bytes_per_sec),
            bucket: Mutex::new(Bucket {
                available: 0.0,
                last_refill: Instant::now(),
            }),
            changed: Condvar::new(),
            waited_micros: AtomicU64::new(0),
        }
    }

    /// The current rate in bytes per second (0: unlimited).
    pub fn rate(&self) -> u64 {
        self.rate.load(Ordering::Relaxed)
    }

    /// Change the rate; waiting writers re-plan at once.
    pub fn set_rate(&self, bytes_per_sec: u64) {
        self.rate.store(bytes_per_sec, Ordering::Relaxed);
        self.changed.notify_all();
    }

    /// Set the rate from the foreground write rate and the write amplification measured
    /// over the same period, within `[AUTO_TUNE_FLOOR, ceiling]` (ceiling 0: none).
    pub fn auto_tune(&self, foreground_bytes_per_sec: f64, write_amp: f64, ceiling: u64) {
        let need = foreground_bytes_per_sec * write_amp.max(1.0) * AUTO_TUNE_HEADROOM;
        let mut rate = (need as u64).max(AUTO_TUNE_FLOOR);
        if ceiling > 0 {
            rate = rate.min(ceiling);
        }
        self.set_rate(rate);
    }

    /// Take `bytes` tokens, waiting as long as the rate requires.
    pub fn request(&self, bytes: usize) {
        if self.rate() == 0 {
            return;
        }
        let mut bucket = lock(&self.bucket);
        self.refill(&mut bucket);
        bucket.available -= bytes as f64;
        let start = Instant::now();
        while bucket.available < 0.0 {
            let rate = self.rate();
            if rate == 0 {
                bucket.available = 0.0;
                break;
            }
            // The debt (ours and that of writers before us) takes this long to repay.
            let wait = Duration::from_secs_f64(-bucket.available / rate as f64);
            bucket = self
                .changed
                .wait_timeout(bucket, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            self.refill(&mut bucket);
        }
        let waited = start.elapsed().as_micros() as u64;
        if waited > 0 {
            self.waited_micros.fetch_add(waited, Ordering::Relaxed);
        }
    }

    /// Add the tokens accrued since the last refill, up to a 100 ms burst.
    fn refill(&self, bucket: &mut Bucket) {
        let rate = self.rate() as f64;
        let now = Instant::now();
        let accrued = now.duration_since(bucket.last_refill).as_secs_f64() * rate;
        bucket.available = (bucket.available + accrued).min(rate * 0.1);
        bucket.last_refill = now;
    }
}

/// A file whose appends are paced by a [`RateLimiter`].
pub struct RateLimitedFile {
    inner: Box<dyn WritableFile>,
    limiter: Arc<RateLimiter>,
}

impl RateLimitedFile {
    pub fn new(inner: Box<dyn WritableFile>, limiter: Arc<RateLimiter>) -> Self {
        RateLimitedFile { inner, limiter }
    }
}

impl WritableFile for RateLimitedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        for piece in data.chunks(CHUNK) {
            self.limiter.request(piece.len());
            self.inner.append(piece)?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_to_the_rate() {
        let limiter = RateLimiter::new(1 << 20); // 1 MiB/s
        let start = Instant::now();
        for _ in 0..16 {
            limiter.request(32 << 10); // 512 KiB in all
        }
        let secs = start.elapsed().as_secs_f64();
        // 512 KiB at 1 MiB/s is 0.5 s (less the initial burst allowance, which starts empty).
        assert!(secs >= 0.4, "took {secs:.3} s");
        assert!(secs < 2.0, "took {secs:.3} s");
        assert!(limiter.waited_micros.load(Ordering::Relaxed) > 300_000);
    }

    #[test]
    fn unlimited_and_rate_changes() {
        let limiter = RateLimiter::new(0);
        let start = Instant::now();
        limiter.request(1 << 30);
        assert!(start.elapsed() < Duration::from_millis(50));
        limiter.auto_tune(10e6, 5.0, 0);
        assert_eq!(limiter.rate(), 100_000_000);
        limiter.auto_tune(1.0, 1.0, 0);
        assert_eq!(limiter.rate(), AUTO_TUNE_FLOOR);
        limiter.auto_tune(1e9, 10.0, 50 << 20);
        assert_eq!(limiter.rate(), 50 << 20);
    }
}

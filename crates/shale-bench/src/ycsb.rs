//! YCSB request generators, after Gray et al., "Quickly generating billion-record
//! synthetic databases" (SIGMOD 1994) and YCSB's `ZipfianGenerator`,
//! `ScrambledZipfianGenerator` and `SkewedLatestGenerator`.
//!
//! Not thread-safe: each client thread owns its generators.

use crate::gen::{fnv64, Rng};

/// The skew YCSB uses by default.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// Item count the scrambled generator draws from before hashing, and its precomputed
/// zeta, both taken from YCSB so the distribution matches theirs.
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// Zipfian over `0..items`; `items` may grow (zeta is then extended incrementally).
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta2: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(from: u64, to: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in from..to {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

impl Zipfian {
    pub fn new(items: u64, theta: f64) -> Zipfian {
        Self::with_zetan(items, theta, zeta(0, items, theta, 0.0))
    }

    fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2 = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta2,
            zetan,
            eta: 0.0,
        };
        z.eta = z.eta_for();
        z
    }

    fn eta_for(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2 / self.zetan)
    }

    /// A value in `0..items`, small values most likely.
    pub fn next(&mut self, rng: &mut Rng, items: u64) -> u64 {
        if items > self.items {
            self.zetan = zeta(self.items, items, self.theta, self.zetan);
            self.items = items;
            self.eta = self.eta_for();
        }
        let u = rng.unit();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let v = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.items - 1)
    }
}

/// Zipfian popularity spread over the key space by hashing, so hot keys are not adjacent.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    inner: Zipfian,
}

impl ScrambledZipfian {
    pub fn new() -> ScrambledZipfian {
        ScrambledZipfian {
            inner: Zipfian::with_zetan(SCRAMBLED_ITEMS, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    /// A record number in `0..records`.
    pub fn next(&mut self, rng: &mut Rng, records: u64) -> u64 {
        let v = self.inner.next(rng, SCRAMBLED_ITEMS);
        fnv64(v) % records.max(1)
    }
}

/// YCSB's "latest": recently inserted records are the most popular (workload D).
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    inner: Zipfian,
}

impl SkewedLatest {
    pub fn new(records: u64) -> SkewedLatest {
        SkewedLatest {
            inner: Zipfian::new(records.max(2), ZIPFIAN_CONSTANT),
        }
    }

    /// A record number in `0..records`, `records - 1` the most likely.
    pub fn next(&mut self, rng: &mut Rng, records: u64) -> u64 {
        let records = records.max(2);
        let back = self.inner.next(rng, records);
        records - 1 - back.min(records - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipfian_favours_small_values() {
        let mut z = Zipfian::new(1000, ZIPFIAN_CONSTANT);
        let mut rng = Rng::new(3);
        let draws: Vec<u64> = (0..10_000).map(|_| z.next(&mut rng, 1000)).collect();
        assert!(draws.iter().all(|&v| v < 1000));
        let zeros = draws.iter().filter(|&&v| v == 0).count();
        assert!(zeros > 500, "{zeros}");
    }

    #[test]
    fn scrambled_and_latest_stay_in_range() {
        let (mut s, mut l, mut rng) =
            (ScrambledZipfian::new(), SkewedLatest::new(100), Rng::new(5));
        for records in 100..300 {
            assert!(s.next(&mut rng, records) < records);
            assert!(l.next(&mut rng, records) < records);
        }
    }
}

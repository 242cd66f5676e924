//! The seeded random generators of Shale's tests, benchmarks, stress and chaos tools, so
//! that a printed seed replays a run. Not for keys, nonces or anything an attacker sees.
//!
//! - [`SplitMix64`] (Steele, Lea and Flood, "Fast splittable pseudorandom number
//!   generators", 2014): any state is a good one, so a seed is used as it is.
//! - [`XorShift64Star`] (Marsaglia's xorshift with Vigna's multiplier): the generator of the
//!   model test, the fuzz smoke test and the chaos tool, whose recorded seeds replay with it.
//!   A zero state stays zero: seed it with anything else.
//!
//! Both answer `below(n)` by a modulo: its bias is below 2^-40 for the `n` these tools use.

/// splitmix64. See the crate documentation.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator whose state is `seed`.
    pub const fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// A generator whose state is `seed` mixed with the golden ratio's bits, so that the
    /// streams of small seeds (0, 1, 2...) do not start from nearby states.
    pub const fn seeded(seed: u64) -> SplitMix64 {
        SplitMix64(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// True with probability `p` percent.
    pub fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    /// Uniform in `[0, 1)`, 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// xorshift64*. See the crate documentation.
#[derive(Debug, Clone)]
pub struct XorShift64Star(u64);

impl XorShift64Star {
    /// A generator whose state is `seed` (which must not be 0).
    pub const fn new(seed: u64) -> XorShift64Star {
        XorShift64Star(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequences_recorded_seeds_replay_with() {
        // splitmix64's reference output for state 0 (Vigna's splitmix64.c).
        let mut s = SplitMix64::new(0);
        assert_eq!(s.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(s.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        let mut x = XorShift64Star::new(1);
        assert_eq!(x.next_u64(), 0x47e4_ce4b_896c_dd1d);
        assert_eq!(x.below(0), 0);
        assert!((0..1000).all(|_| s.unit() < 1.0));
    }
}

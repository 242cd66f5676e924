//! The bloom filter: one per SSTable, over *user* keys, so a point read at any snapshot can
//! skip a table that cannot hold its key without touching a data block.
//!
//! ```text
//! filter = bits[n] k:u8          n >= 8 bytes; bit i lives in bits[i / 8] at (1 << (i % 8))
//! ```
//!
//! A classic (not cache-blocked) bloom filter: probes are spread over the whole bit array by
//! double hashing, `g_i = h + i * delta (mod 8n)`, with `h = xxh3_64(user_key)` and
//! `delta = rotr(h, 33) | 1` (Kirsch and Mitzenmacher: two hash values are as good as `k`).
//! The whole filter of a table is in memory while the table is open, so the extra cache
//! misses of a non-blocked filter are a few per lookup, and the false-positive rate stays at
//! the textbook value (~0.8% at 10 bits per key) instead of a blocked filter's higher one.
//!
//! `k = round(bits_per_key * ln 2)`, clamped to 1..=30. Values of the `k` byte above 30 are
//! reserved for future encodings: a reader treats them, and any filter too short to be
//! valid, as "may contain", so a damaged or newer filter costs reads, never correctness.
//!
//! Thread safety: [`BloomFilter`] is immutable and `Sync`; the builder belongs to one thread.

use xxhash_rust::xxh3::xxh3_64;

/// Largest number of probes; also the largest `k` byte a reader understands.
const MAX_PROBES: u8 = 30;

fn probes_for(bits_per_key: u32) -> u8 {
    let k = (f64::from(bits_per_key) * std::f64::consts::LN_2).round();
    // The clamp bounds the value, so the conversion below cannot truncate.
    let k = k.clamp(1.0, f64::from(MAX_PROBES));
    u8::try_from(k as u32).unwrap_or(MAX_PROBES)
}

fn hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// A user key's filter hash, computed once by a point read and tried against the filter of
/// every table it visits (the hash does not depend on the table).
#[derive(Debug, Clone, Copy)]
pub struct FilterKey(u64);

impl FilterKey {
    pub fn new(user_key: &[u8]) -> FilterKey {
        FilterKey(hash(user_key))
    }
}

/// Collects the hashes of the user keys of one table.
#[derive(Debug)]
pub struct BloomFilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomFilterBuilder {
    /// `bits_per_key` must be at least 1 (0 means "no filter" and the caller builds none).
    pub fn new(bits_per_key: u32) -> Self {
        BloomFilterBuilder {
            bits_per_key: bits_per_key.max(1),
            hashes: Vec::new(),
        }
    }

    /// Add a user key. Adding the same key twice only wastes a little space.
    pub fn add_key(&mut self, user_key: &[u8]) {
        self.hashes.push(hash(user_key));
    }

    /// Keys added so far.
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The encoded filter.
    pub fn finish(&self) -> Vec<u8> {
        let bits_wanted = (self.hashes.len() as u64).saturating_mul(u64::from(self.bits_per_key));
        // At least 64 bits: a tiny filter has a terrible false-positive rate.
        let bytes = usize::try_from(bits_wanted.max(64).div_ceil(8)).unwrap_or(usize::MAX);
        let k = probes_for(self.bits_per_key);
        let mut out = vec![0u8; bytes];
        let nbits = (bytes as u64) * 8;
        for &h in &self.hashes {
            let delta = h.rotate_right(33) | 1;
            let mut g = h;
            for _ in 0..k {
                let bit = g % nbits;
                // `bit < nbits = 8 * bytes`, so the byte index is in range.
                if let Some(byte) = usize::try_from(bit / 8).ok().and_then(|i| out.get_mut(i)) {
                    *byte |= 1 << (bit % 8);
                }
                g = g.wrapping_add(delta);
            }
        }
        out.push(k);
        out
    }
}

/// A decoded bloom filter.
#[derive(Debug, Clone)]
pub struct BloomFilter {
    data: Vec<u8>,
}

impl BloomFilter {
    /// Wrap encoded filter bytes. Never fails: a malformed filter answers "may contain".
    pub fn new(data: Vec<u8>) -> Self {
        BloomFilter { data }
    }

    /// Bytes held in memory.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// False only if `user_key` was certainly not added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_key(FilterKey::new(user_key))
    }

    /// [`BloomFilter::may_contain`] for a key already hashed.
    pub fn may_contain_key(&self, key: FilterKey) -> bool {
        match self.probes(key) {
            Some((bits, mut probes)) => {
                probes.all(|(i, mask)| bits.get(i).is_none_or(|&byte| byte & mask != 0))
            }
            None => true,
        }
    }

    /// Start loading the cache lines that [`BloomFilter::may_contain_key`] reads for
    /// `key`: a point read does this for every table it may visit before it probes the
    /// first, so that the memory waits of all the probes overlap.
    pub fn prefetch(&self, key: FilterKey) {
        if let Some((bits, probes)) = self.probes(key) {
            for (i, _) in probes {
                if let Some(byte) = bits.get(i) {
                    crate::prefetch::prefetch(byte);
                }
            }
        }
    }

    /// The bit array and `key`'s probes in it, each a byte index and the mask of its bit
    /// in that byte; `None` if the filter says "may contain" for every key (empty, too
    /// short, or an unknown encoding).
    fn probes(&self, key: FilterKey) -> Option<(&[u8], impl Iterator<Item = (usize, u8)>)> {
        let (&k, bits) = self.data.split_last()?;
        if bits.is_empty() || k == 0 || k > MAX_PROBES {
            return None;
        }
        let nbits = (bits.len() as u64).saturating_mul(8);
        let h = key.0;
        let delta = h.rotate_right(33) | 1;
        let probes = (0..u64::from(k)).map(move |i| {
            let bit = h.wrapping_add(i.wrapping_mul(delta)) % nbits;
            // `bit < nbits = 8 * bits.len()`, so the index fits (and is in range).
            (
                usize::try_from(bit / 8).unwrap_or(usize::MAX),
                1u8 << (bit % 8),
            )
        });
        Some((bits, probes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(n: u32, bits_per_key: u32) -> BloomFilter {
        let mut b = BloomFilterBuilder::new(bits_per_key);
        for i in 0..n {
            b.add_key(format!("user-key-{i}").as_bytes());
        }
        BloomFilter::new(b.finish())
    }

    #[test]
    fn probes_are_clamped() {
        assert_eq!(probes_for(0), 1);
        assert_eq!(probes_for(1), 1);
        assert_eq!(probes_for(10), 7);
        assert_eq!(probes_for(64), 30);
    }

    #[test]
    fn no_false_negatives_and_low_false_positive_rate() {
        let f = build(10_000, 10);
        for i in 0..10_000 {
            assert!(f.may_contain(format!("user-key-{i}").as_bytes()), "key {i}");
        }
        let trials = 100_000;
        let fp = (0..trials)
            .filter(|i| f.may_contain(format!("absent-{i}").as_bytes()))
            .count();
        let rate = fp as f64 / f64::from(trials);
        assert!(rate < 0.02, "false-positive rate {rate}");
    }

    #[test]
    fn encoding_round_trip_and_layout() {
        let mut b = BloomFilterBuilder::new(10);
        b.add_key(b"a");
        let bytes = b.finish();
        assert_eq!(bytes.len(), 8 + 1, "64-bit minimum plus the k byte");
        assert_eq!(bytes.last(), Some(&7));
        let f = BloomFilter::new(bytes.clone());
        assert!(f.may_contain(b"a"));
        assert_eq!(BloomFilter::new(bytes).data, f.data);
        let empty = BloomFilter::new(BloomFilterBuilder::new(10).finish());
        assert!(!empty.may_contain(b"a"));
    }

    #[test]
    fn malformed_filters_may_contain_everything() {
        for data in [vec![], vec![7], vec![0; 9], {
            let mut v = vec![0; 9];
            v[8] = 31;
            v
        }] {
            assert!(BloomFilter::new(data).may_contain(b"anything"));
        }
    }
}

//! Key, value and random-number generators shared by every engine, so each engine sees
//! the same bytes in the same order.
//!
//! Keys are 16 bytes made from a `u64` (`format!("{:016}", n)`, then padded or cut to
//! `--key-size`). Values are slices of a buffer that compresses to about half its size,
//! like db_bench's `RandomGenerator`.

pub use shale_rng::SplitMix64 as Rng;

/// FNV-1a over the 8 little-endian bytes of `v`, as YCSB's `fnvhash64` does.
pub fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for b in v.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

/// Builds keys of one fixed size.
#[derive(Debug, Clone, Copy)]
pub struct KeyGen {
    pub key_size: usize,
}

impl KeyGen {
    /// The key for number `n`: its decimal digits, zero-padded to 16, then padded with
    /// `'x'` or cut to `key_size`. Keys for different `n < 10^min(16, key_size)` differ.
    pub fn key(&self, n: u64, out: &mut Vec<u8>) {
        out.clear();
        let digits = format!("{n:016}");
        out.extend_from_slice(digits.as_bytes());
        out.resize(self.key_size, b'x');
    }

    /// A key that sorts among the keys of `key` but is never written (db_bench's
    /// readmissing): the last digit is replaced by `'.'`.
    pub fn missing_key(&self, n: u64, out: &mut Vec<u8>) {
        self.key(n, out);
        let last = out.len().min(16).saturating_sub(1);
        if let Some(b) = out.get_mut(last) {
            *b = b'.';
        }
    }
}

/// Values: windows into a 1 MiB buffer in which every 100-byte run is 50 random bytes
/// written twice, so LZ4 or Snappy shrink values to roughly half.
#[derive(Debug)]
pub struct ValueGen {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGen {
    pub fn new(seed: u64) -> ValueGen {
        let mut rng = Rng::seeded(seed);
        let mut data = Vec::with_capacity(1 << 20);
        while data.len() < 1 << 20 {
            let fragment: Vec<u8> = (0..50).map(|_| b' ' + (rng.below(95) as u8)).collect();
            data.extend_from_slice(&fragment);
            data.extend_from_slice(&fragment);
        }
        ValueGen { data, pos: 0 }
    }

    /// The next value of `len` bytes (`len` at most 512 KiB).
    pub fn next(&mut self, len: usize) -> &[u8] {
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        let start = self.pos;
        self.pos += len;
        self.data.get(start..start + len).unwrap_or(&[])
    }
}

/// A random permutation of `0..n`: every key written exactly once, in random order.
pub fn shuffled(n: u64, rng: &mut Rng) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_requested_size_and_order() {
        let g = KeyGen { key_size: 16 };
        let (mut a, mut b, mut m) = (Vec::new(), Vec::new(), Vec::new());
        g.key(41, &mut a);
        g.key(42, &mut b);
        g.missing_key(42, &mut m);
        assert_eq!(a.len(), 16);
        assert!(a < b);
        assert_ne!(m, b);
        assert_eq!(m.len(), 16);
    }

    #[test]
    fn shuffle_is_a_permutation() {
        let mut v = shuffled(1000, &mut Rng::seeded(7));
        v.sort_unstable();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn values_compress_to_about_half() {
        let mut g = ValueGen::new(1);
        let v = g.next(1000).to_vec();
        assert_eq!(v.len(), 1000);
        let distinct: std::collections::HashSet<&[u8]> = v.chunks(50).collect();
        assert!(distinct.len() <= 11, "{}", distinct.len());
    }
}

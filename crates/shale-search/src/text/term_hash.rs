//! The hasher of the maps keyed by terms (the inverted index's dictionary, the analyzer's
//! stem cache): xxh3, seeded per map.

use std::hash::{BuildHasher, Hasher};

/// The dictionary's hasher: xxh3 of each term, seeded per index (terms come from users,
/// so the seed is random), several times faster than SipHash on short terms.
#[derive(Debug, Clone, Copy)]
pub struct TermHashing(u64);

impl Default for TermHashing {
    fn default() -> Self {
        TermHashing(std::collections::hash_map::RandomState::new().hash_one(0x54u8))
    }
}

impl BuildHasher for TermHashing {
    type Hasher = TermHasher;
    fn build_hasher(&self) -> TermHasher {
        TermHasher(self.0)
    }
}

pub struct TermHasher(u64);

impl Hasher for TermHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    fn write_u8(&mut self, byte: u8) {
        self.0 = self.0.rotate_left(8) ^ u64::from(byte);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

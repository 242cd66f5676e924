//! The block cache's admission filter: which misses earn a block a place in a full shard
//! (the `cache` module says why it exists).

/// How many misses of each key the current window and the one before it saw, as 2-bit
/// saturating counters in an array of 8 per key of the window (16 bits per key), indexed
/// by one hash: a count can be too high where keys share a counter (a counter is shared at
/// a window's end about 12% of the time), which only admits a block early. Two
/// generations, so that a miss just before a window turns over still counts for the whole
/// next window.
///
/// Invariant: `seen <= window`; when `seen` reaches `window`, `current` becomes `previous`
/// and starts again at zero.
pub(super) struct Doorkeeper {
    pub(super) current: Vec<u64>,
    pub(super) previous: Vec<u64>,
    seen: usize,
    window: usize,
}

impl Doorkeeper {
    pub(super) const BITS_PER_KEY: usize = 16;
    /// The misses of a key in the two generations that earn it a place: a full shard
    /// caches a block at its third miss. A block that comes back three times within about
    /// the cache's worth of misses is one the cache will hit again; one that a shard sees
    /// only twice in that span is about as likely to be read again as the block its insert
    /// would evict, so the exchange (an eviction, and a decompression into the evicted
    /// block's buffer, long out of the CPU's caches) is all cost.
    const PRIOR_MISSES: u64 = 2;
    /// The most offers one generation remembers: 2 MiB of counters per generation, the
    /// window of a shard of two million blocks (a cache of about 128 GiB of 4 KiB blocks;
    /// a larger cache's filter remembers a shorter reuse distance than it could hold). A
    /// larger window would cost memory in proportion to `cache_size` outside its budget,
    /// and for a cache sized "unbounded" (`usize::MAX`) an allocation that cannot succeed.
    pub(super) const MAX_WINDOW: usize = 1 << 20;

    pub(super) fn new(window: usize) -> Doorkeeper {
        let window = window.clamp(1, Self::MAX_WINDOW);
        let words = (window * Self::BITS_PER_KEY).div_ceil(64);
        Doorkeeper {
            current: vec![0; words],
            previous: vec![0; words],
            seen: 0,
            window,
        }
    }

    /// Whether the key of hash `h` missed often enough before (then admit it); if not,
    /// count this miss.
    pub(super) fn admit(&mut self, h: u64) -> bool {
        // The cache's hash is weak in some bits (block offsets are multiples of a few KiB)
        // and the shard was chosen by others: remix it (SplitMix64's finaliser).
        let mut h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        let counters = (self.current.len() * 32) as u64;
        // `h % counters < counters`, so the word index is in range of both generations.
        let counter = h % counters.max(1);
        let (word, shift) = ((counter / 32) as usize, (counter % 32) * 2);
        let count_in = |words: &[u64]| words.get(word).map_or(0, |w| (w >> shift) & 3);
        if count_in(&self.current) + count_in(&self.previous) >= Self::PRIOR_MISSES {
            return true;
        }
        if let Some(w) = self.current.get_mut(word) {
            if (*w >> shift) & 3 < 3 {
                *w += 1 << shift;
            }
        }
        self.seen += 1;
        if self.seen >= self.window {
            std::mem::swap(&mut self.current, &mut self.previous);
            self.current.fill(0);
            self.seen = 0;
        }
        false
    }
}

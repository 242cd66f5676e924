//! Caches with a budget, on one [`ClockCache`]: the block cache of decoded data blocks
//! (`sst/block_cache.rs`, charged by size) and the table cache of open SSTable readers
//! (`version/table_cache.rs`, charged one per file).
//!
//! The cache is split into shards by a hash of the key, each with its own small mutex, so
//! readers on different blocks rarely meet. A shard evicts with CLOCK (second chance):
//! every hit sets the entry's reference bit; the hand sweeps the ring, clearing set bits
//! and evicting the first entry whose bit is already clear. That keeps hot blocks (index
//! probes, the working set of point reads) and lets one-off scan blocks go first, at the
//! cost of one bit per entry instead of LRU's list splicing on every hit.
//!
//! A cache made `with_admission` (the block cache) also has an **admission** filter (after
//! TinyLFU's "doorkeeper", Einziger et al.). Once a shard is full, caching a block means
//! evicting one, and a block read once and never again is not worth that: its insert
//! evicts a block that might have been read, into memory long out of the CPU's caches. So
//! a full shard admits a block only at its third miss, and only if the first two were
//! recent: among the last half to whole shard's worth of misses it turned away, which
//! small counters in two generations remember. A block that comes back twice within about
//! the cache's size in other blocks (one the cache will hit) gets in; a scan, or uniform
//! reads over data many times the cache, pass through (the measurements are in
//! bench-results/LOG.md, "Block cache admission at the third miss"). Until a shard is
//! full, every block is admitted.
//!
//! Index and filter blocks are not here: each open table pins its own (see
//! `sst/reader.rs`); their total is reported separately.
//!
//! Invariant: `usage` of a shard is the sum of the `charge` of its live entries, and it
//! exceeds `capacity` only while a single entry larger than the whole shard is held (the
//! last one inserted, until the next insert).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use crate::prefetch::PrefetchHint;
use crate::sync::lock;

mod doorkeeper;

use doorkeeper::Doorkeeper;

/// Shards of every cache (each with its own mutex).
pub(crate) const SHARDS: usize = 16;

/// Cache keys are small integers that are already well spread (table ids count up,
/// offsets and file numbers are distinct): a multiply-rotate mix is all the hashing they
/// need, several times cheaper than the standard library's DoS-resistant default on this
/// hot path.
#[derive(Default, Clone, Copy)]
struct IntHasher(u64);

impl std::hash::Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// The entries of a shard by key. A hit reads only its key's bucket, which holds the value
/// and the reference bit: the fewer dependent cache misses, the better, for a cache larger
/// than the CPU's is cold, and each one costs a wait for memory (and often a page walk).
type KeyMap<K, V> = HashMap<K, Entry<V>, std::hash::BuildHasherDefault<IntHasher>>;

struct Entry<V> {
    value: V,
    charge: usize,
    referenced: bool,
    /// The entry's place in the clock ring.
    slot: usize,
    /// What a hit reads of the value first, loaded before the value is cloned.
    hint: PrefetchHint,
}

struct Shard<K, V> {
    map: KeyMap<K, V>,
    /// The clock ring: the key of each entry, in the order the hand visits them; `None`
    /// marks a free slot.
    ring: Vec<Option<K>>,
    free: Vec<usize>,
    hand: usize,
    usage: usize,
    /// The admission filter of a full shard; `None` admits everything.
    doorkeeper: Option<Doorkeeper>,
}

impl<K, V> Shard<K, V> {
    fn new(doorkeeper: Option<Doorkeeper>) -> Self {
        Shard {
            map: KeyMap::default(),
            ring: Vec::new(),
            free: Vec::new(),
            hand: 0,
            usage: 0,
            doorkeeper,
        }
    }
}

/// What [`ClockCache::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inserted {
    /// Entries evicted to make room.
    pub evicted: u64,
    /// False if the admission filter turned the value away (it was not cached).
    pub admitted: bool,
}

/// A sharded CLOCK cache: values with a charge each, within a total capacity.
pub struct ClockCache<K, V> {
    shards: Vec<Mutex<Shard<K, V>>>,
    shard_capacity: usize,
}

impl<K: Copy + Eq + Hash, V: Clone> ClockCache<K, V> {
    /// A cache holding values whose charges add up to at most about `capacity`; it admits
    /// every value.
    pub fn new(capacity: usize) -> Self {
        ClockCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::new(None))).collect(),
            shard_capacity: capacity / SHARDS,
        }
    }

    /// [`ClockCache::new`] with an admission filter: once full, a shard admits a value only
    /// if it was offered before within the last `entries / 2` to `entries` offers turned
    /// away (two generations of half that), where `entries` is the number of values the
    /// whole cache holds when full. That admits a value whose reuse distance is under
    /// about the cache's size: one that a cache of this size could have hit.
    pub fn with_admission(capacity: usize, entries: usize) -> Self {
        let window = entries / SHARDS / 2;
        ClockCache {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Shard::new(Some(Doorkeeper::new(window)))))
                .collect(),
            shard_capacity: capacity / SHARDS,
        }
    }

    fn hash(key: &K) -> u64 {
        let mut h = IntHasher::default();
        key.hash(&mut h);
        h.finish()
    }

    fn shard_of(&self, h: u64) -> Option<&Mutex<Shard<K, V>>> {
        self.shards.get((h as usize ^ (h >> 40) as usize) % SHARDS)
    }

    fn shard(&self, key: &K) -> Option<&Mutex<Shard<K, V>>> {
        self.shard_of(Self::hash(key))
    }

    /// The cached value, marking it recently used.
    pub fn get(&self, key: &K) -> Option<V> {
        let shard = self.shard(key)?;
        let mut s = lock(shard);
        let entry = s.map.get_mut(key)?;
        entry.referenced = true;
        entry.hint.prefetch();
        Some(entry.value.clone())
    }

    /// Add `value` unless `key` is present (then the present value is kept and returned);
    /// evict others as needed to stay within the budget. Returns the value now cached (or
    /// `value` itself if it was not admitted) and what happened.
    pub fn insert(&self, key: K, value: V, charge: usize) -> (V, Inserted) {
        self.insert_hinted(key, value, charge, PrefetchHint::default())
    }

    /// [`ClockCache::insert`], with what a hit on the entry should start loading before it
    /// touches the value (see [`PrefetchHint`]).
    pub(crate) fn insert_hinted(
        &self,
        key: K,
        value: V,
        charge: usize,
        hint: PrefetchHint,
    ) -> (V, Inserted) {
        let turned_away = Inserted {
            evicted: 0,
            admitted: false,
        };
        let h = Self::hash(&key);
        let Some(shard) = self.shard_of(h) else {
            return (value, turned_away);
        };
        if self.shard_capacity == 0 {
            return (value, turned_away);
        }
        let charge = charge.max(1);
        let mut s = lock(shard);
        if let Some(existing) = s.map.get(&key) {
            let kept = Inserted {
                evicted: 0,
                admitted: true,
            };
            return (existing.value.clone(), kept);
        }
        let full = s.usage + charge > self.shard_capacity;
        // The shard picked its key by the hash's low bits: the filter uses the high ones.
        if full
            && s.doorkeeper
                .as_mut()
                .is_some_and(|d| !d.admit(h.rotate_left(32)))
        {
            return (value, turned_away);
        }
        // Evicted values are dropped after the shard's lock is released: the last
        // reference to a table closes it, which takes its blocks out of the block cache
        // and unmaps its file, too long to make the shard's other readers wait.
        // (Usually one is evicted: `first` keeps that one without an allocation.)
        let (mut first, mut more) = (None, Vec::new());
        let mut evicted = 0;
        while s.usage + charge > self.shard_capacity && s.usage > 0 {
            let Some(value) = s.evict_one() else { break };
            evicted += 1;
            match first {
                None => first = Some(value),
                Some(_) => more.push(value),
            }
        }
        let slot = s.ring_slot(key);
        let entry = Entry {
            value: value.clone(),
            charge,
            referenced: false,
            slot,
            hint,
        };
        s.map.insert(key, entry);
        s.usage += charge;
        drop(s);
        drop((first, more));
        let inserted = Inserted {
            evicted,
            admitted: true,
        };
        (value, inserted)
    }

    /// Drop `key` if cached (its value after the shard's lock is released, as in
    /// `insert`).
    pub fn remove(&self, key: &K) {
        let Some(shard) = self.shard(key) else { return };
        let mut s = lock(shard);
        let taken = s.map.remove(key).inspect(|entry| {
            if let Some(place) = s.ring.get_mut(entry.slot) {
                *place = None;
            }
            s.usage -= entry.charge;
            s.free.push(entry.slot);
        });
        drop(s);
        drop(taken);
    }

    /// The sum of the charges held.
    pub fn usage(&self) -> usize {
        self.shards.iter().map(|s| lock(s).usage).sum()
    }

    /// The budget.
    pub fn capacity(&self) -> usize {
        self.shard_capacity * SHARDS
    }

    /// Call `f` on every cached value.
    pub fn for_each(&self, mut f: impl FnMut(&V)) {
        for shard in &self.shards {
            for entry in lock(shard).map.values() {
                f(&entry.value);
            }
        }
    }
}

impl<K: Copy + Eq + Hash, V> Shard<K, V> {
    /// A place in the ring for `key`: a free one, else a new one at the end.
    fn ring_slot(&mut self, key: K) -> usize {
        match self.free.pop() {
            Some(i) => {
                if let Some(place) = self.ring.get_mut(i) {
                    *place = Some(key);
                }
                i
            }
            None => {
                self.ring.push(Some(key));
                self.ring.len() - 1
            }
        }
    }

    /// Advance the hand until one entry is evicted, and return its value (`None` if the
    /// ring is empty).
    fn evict_one(&mut self) -> Option<V> {
        let n = self.ring.len();
        // Two sweeps clear every reference bit, so this ends.
        for _ in 0..2 * n + 1 {
            let i = self.hand % n.max(1);
            self.hand = i + 1;
            let Some(Some(key)) = self.ring.get(i) else {
                continue;
            };
            let key = *key;
            match self.map.get_mut(&key) {
                Some(entry) if entry.referenced => entry.referenced = false,
                _ => {
                    if let Some(place) = self.ring.get_mut(i) {
                        *place = None;
                    }
                    self.free.push(i);
                    // Every key in the ring is in the map (`insert` and `remove` keep
                    // them in step); a stray one only frees its slot.
                    if let Some(entry) = self.map.remove(&key) {
                        self.usage -= entry.charge;
                        return Some(entry.value);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    /// A value that records, when its last reference drops, whether any shard of its
    /// cache was locked then.
    struct Probe {
        cache: std::sync::OnceLock<Arc<ClockCache<u64, Arc<Probe>>>>,
        locked_at_drop: Arc<AtomicU64>,
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            if let Some(cache) = self.cache.get() {
                let locked = cache
                    .shards
                    .iter()
                    .filter(|s| s.try_lock().is_err())
                    .count();
                self.locked_at_drop
                    .fetch_add(locked as u64, Ordering::Relaxed);
            }
        }
    }

    #[test]
    fn an_unbounded_cache_size_opens_with_a_bounded_admission_filter() {
        // As the block cache sizes it for `cache_size: usize::MAX` and 4 KiB blocks.
        let cache = ClockCache::<u64, u64>::with_admission(usize::MAX, usize::MAX / 4096);
        assert_eq!(cache.capacity(), usize::MAX / SHARDS * SHARDS);
        let words: usize = cache
            .shards
            .iter()
            .map(|shard| {
                lock(shard)
                    .doorkeeper
                    .as_ref()
                    .map_or(0, |d| d.current.len() + d.previous.len())
            })
            .sum();
        assert_eq!(
            words,
            SHARDS * 2 * Doorkeeper::MAX_WINDOW * Doorkeeper::BITS_PER_KEY / 64
        );
    }

    #[test]
    fn evicted_and_removed_values_drop_outside_the_shard_lock() {
        let cache = Arc::new(ClockCache::<u64, Arc<Probe>>::new(SHARDS));
        let locked_at_drop = Arc::new(AtomicU64::new(0));
        let probe = || {
            let p = Arc::new(Probe {
                cache: std::sync::OnceLock::new(),
                locked_at_drop: Arc::clone(&locked_at_drop),
            });
            let _ = p.cache.set(Arc::clone(&cache));
            p
        };
        // One unit per shard: every insert into a used shard evicts.
        for key in 0..200u64 {
            cache.insert(key, probe(), 1);
        }
        for key in 0..200u64 {
            cache.remove(&key);
        }
        assert_eq!(locked_at_drop.load(Ordering::Relaxed), 0);
    }

    /// Inserts, hits and removes in a pseudo-random mix: whatever CLOCK evicts, every key
    /// the cache answers for has its own value, the usage is the sum of those keys'
    /// charges, and freed ring slots are reused rather than the ring growing.
    #[test]
    fn the_ring_and_the_map_stay_in_step() {
        let cache: ClockCache<u64, u64> = ClockCache::new(SHARDS * 64);
        let mut rng = shale_rng::SplitMix64::new(0x2545_f491_4f6c_dd1d);
        for _ in 0..20_000 {
            let x = rng.next_u64();
            let key = x % 500;
            match x >> 60 {
                0..=7 => {
                    cache.insert(key, key * 10, 1 + (x >> 32) as usize % 8);
                }
                8..=12 => {
                    if let Some(v) = cache.get(&key) {
                        assert_eq!(v, key * 10);
                    }
                }
                _ => cache.remove(&key),
            }
        }
        let mut present = 0;
        for shard in &cache.shards {
            let s = lock(shard);
            let charges: usize = s.map.values().map(|e| e.charge).sum();
            assert_eq!(s.usage, charges);
            assert!(s.usage <= cache.shard_capacity);
            for (key, entry) in &s.map {
                assert_eq!(entry.value, key * 10);
                assert_eq!(s.ring[entry.slot], Some(*key), "the ring holds its key");
            }
            let in_ring = s.ring.iter().flatten().count();
            assert_eq!(in_ring, s.map.len(), "no stray keys in the ring");
            assert_eq!(
                s.ring.len(),
                in_ring + s.free.len(),
                "every slot used or free"
            );
            assert!(s.ring.len() <= 64, "freed slots are reused");
            present += s.map.len();
        }
        assert!(present > 0);
    }

    #[test]
    fn clock_keeps_hot_values_while_others_stream_through() {
        let cache: ClockCache<u64, u64> = ClockCache::new(16 * 100);
        cache.insert(0, 0, 10);
        let mut evicted = 0;
        for key in 1..2000u64 {
            // Keep touching the hot value while streaming others through.
            assert!(cache.get(&0).is_some(), "hot value evicted at {key}");
            let (_, inserted) = cache.insert(key, key, 10);
            assert!(inserted.admitted, "no admission filter");
            evicted += inserted.evicted;
            assert!(cache.usage() <= cache.capacity() + 10);
        }
        assert!(
            cache.get(&0).is_some(),
            "a value hit every round survives a scan"
        );
        assert!(evicted > 1000);
    }
}

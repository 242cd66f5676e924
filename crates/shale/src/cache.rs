//! Caches with a budget: the block cache (decoded data blocks shared by every table of a
//! database, charged by size) and, on the same [`ClockCache`], the table cache of open
//! SSTable readers (`table_cache.rs`, charged one per file).
//!
//! The cache is split into shards by a hash of the key, each with its own small mutex, so
//! readers on different blocks rarely meet. A shard evicts with CLOCK (second chance):
//! every hit sets the entry's reference bit; the hand sweeps the ring, clearing set bits
//! and evicting the first entry whose bit is already clear. That keeps hot blocks (index
//! probes, the working set of point reads) and lets one-off scan blocks go first, at the
//! cost of one bit per entry instead of LRU's list splicing on every hit.
//!
//! Index and filter blocks are not here: each open table pins its own (see
//! `sst/reader.rs`); their total is reported separately.
//!
//! Invariant: `usage` of a shard is the sum of the `charge` of its live entries, and it
//! exceeds `capacity` only while a single entry larger than the whole shard is held (the
//! last one inserted, until the next insert).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::sst::block::Block;
use crate::sync::lock;

/// Identifies a block: the cache id of its table and its offset in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlockKey {
    pub table: u64,
    pub offset: u64,
}

const SHARDS: usize = 16;

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

type KeyMap<K> = HashMap<K, usize, std::hash::BuildHasherDefault<IntHasher>>;

struct Slot<K, V> {
    key: K,
    value: V,
    charge: usize,
    referenced: bool,
}

struct Shard<K, V> {
    map: KeyMap<K>,
    /// The clock ring; `None` marks a free slot.
    ring: Vec<Option<Slot<K, V>>>,
    free: Vec<usize>,
    hand: usize,
    usage: usize,
}

impl<K, V> Default for Shard<K, V> {
    fn default() -> Self {
        Shard {
            map: KeyMap::default(),
            ring: Vec::new(),
            free: Vec::new(),
            hand: 0,
            usage: 0,
        }
    }
}

/// A sharded CLOCK cache: values with a charge each, within a total capacity.
pub struct ClockCache<K, V> {
    shards: Vec<Mutex<Shard<K, V>>>,
    shard_capacity: usize,
}

impl<K: Copy + Eq + Hash, V: Clone> ClockCache<K, V> {
    /// A cache holding values whose charges add up to at most about `capacity`.
    pub fn new(capacity: usize) -> Self {
        ClockCache {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            shard_capacity: capacity / SHARDS,
        }
    }

    fn shard(&self, key: &K) -> Option<&Mutex<Shard<K, V>>> {
        let mut h = IntHasher::default();
        key.hash(&mut h);
        let h = h.finish();
        self.shards.get((h as usize ^ (h >> 40) as usize) % SHARDS)
    }

    /// The cached value, marking it recently used.
    pub fn get(&self, key: &K) -> Option<V> {
        let shard = self.shard(key)?;
        let mut s = lock(shard);
        let &i = s.map.get(key)?;
        let slot = s.ring.get_mut(i)?.as_mut()?;
        slot.referenced = true;
        Some(slot.value.clone())
    }

    /// Add `value` unless `key` is present (then the present value is kept and returned);
    /// evict others as needed to stay within the budget. Returns the value now cached
    /// and how many entries were evicted.
    pub fn insert(&self, key: K, value: V, charge: usize) -> (V, u64) {
        let Some(shard) = self.shard(&key) else {
            return (value, 0);
        };
        if self.shard_capacity == 0 {
            return (value, 0);
        }
        let charge = charge.max(1);
        let mut s = lock(shard);
        if let Some(existing) = s
            .map
            .get(&key)
            .and_then(|&i| s.ring.get(i))
            .and_then(Option::as_ref)
        {
            return (existing.value.clone(), 0);
        }
        let mut evicted = 0;
        while s.usage + charge > self.shard_capacity && s.usage > 0 {
            evicted += s.evict_one();
        }
        let slot = Slot {
            key,
            value: value.clone(),
            charge,
            referenced: false,
        };
        let i = match s.free.pop() {
            Some(i) => {
                if let Some(place) = s.ring.get_mut(i) {
                    *place = Some(slot);
                }
                i
            }
            None => {
                s.ring.push(Some(slot));
                s.ring.len() - 1
            }
        };
        s.map.insert(key, i);
        s.usage += charge;
        (value, evicted)
    }

    /// Drop `key` if cached.
    pub fn remove(&self, key: &K) {
        let Some(shard) = self.shard(key) else { return };
        let mut s = lock(shard);
        if let Some(i) = s.map.remove(key) {
            if let Some(slot) = s.ring.get_mut(i).and_then(Option::take) {
                s.usage -= slot.charge;
                s.free.push(i);
            }
        }
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
            for slot in lock(shard).ring.iter().flatten() {
                f(&slot.value);
            }
        }
    }
}

impl<K: Copy + Eq + Hash, V> Shard<K, V> {
    /// Advance the hand until one entry is evicted; returns 1, or 0 if the ring is empty.
    fn evict_one(&mut self) -> u64 {
        let n = self.ring.len();
        // Two sweeps clear every reference bit, so this ends.
        for _ in 0..2 * n + 1 {
            let i = self.hand % n.max(1);
            self.hand = i + 1;
            let Some(Some(slot)) = self.ring.get_mut(i) else {
                continue;
            };
            if slot.referenced {
                slot.referenced = false;
                continue;
            }
            if let Some(slot) = self.ring.get_mut(i).and_then(Option::take) {
                self.map.remove(&slot.key);
                self.usage -= slot.charge;
                self.free.push(i);
                return 1;
            }
        }
        0
    }
}

/// Counters of cache traffic.
#[derive(Debug, Default)]
pub struct CacheStats {
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    pub inserts: AtomicU64,
    pub evictions: AtomicU64,
}

/// The block cache: decoded data blocks by (table, offset), charged by size.
pub struct BlockCache {
    blocks: ClockCache<BlockKey, Arc<Block>>,
    next_table_id: AtomicU64,
    pub stats: CacheStats,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity())
            .field("usage", &self.usage())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding at most about `capacity` bytes of blocks (0 disables caching).
    pub fn new(capacity: usize) -> BlockCache {
        BlockCache {
            blocks: ClockCache::new(capacity),
            next_table_id: AtomicU64::new(1),
            stats: CacheStats::default(),
        }
    }

    /// A fresh id for a table's keys.
    pub fn new_table_id(&self) -> u64 {
        self.next_table_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The cached block, if present.
    pub fn get(&self, key: &BlockKey) -> Option<Arc<Block>> {
        let found = self.blocks.get(key);
        let counter = if found.is_some() {
            &self.stats.hits
        } else {
            &self.stats.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Add `block`, evicting others as needed to stay within the budget.
    pub fn insert(&self, key: BlockKey, block: Arc<Block>) {
        let charge = block.size();
        let (_, evicted) = self.blocks.insert(key, block, charge);
        self.stats.inserts.fetch_add(1, Ordering::Relaxed);
        self.stats.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Drop the block at `key`, if cached.
    pub fn remove(&self, key: &BlockKey) {
        self.blocks.remove(key);
    }

    /// Bytes of blocks held.
    pub fn usage(&self) -> usize {
        self.blocks.usage()
    }

    /// The budget in bytes.
    pub fn capacity(&self) -> usize {
        self.blocks.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block::BlockBuilder;
    use std::path::Path;

    fn block(n: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        for i in 0..n {
            let k = crate::key::InternalKey::new(
                format!("k{i:05}").as_bytes(),
                crate::key::SeqNo(1),
                crate::key::ValueKind::Put,
            );
            b.add(k.encoded(), &[7u8; 100]);
        }
        Arc::new(Block::new(b.finish().to_vec(), Arc::from(Path::new("t")), 0).unwrap())
    }

    #[test]
    fn stays_within_budget_and_keeps_hot_blocks() {
        let cache = BlockCache::new(16 * 8 * 1024);
        let b = block(30); // ~3.5 KiB
        let size = b.size();
        let t = cache.new_table_id();
        let hot = BlockKey {
            table: t,
            offset: 0,
        };
        cache.insert(hot, Arc::clone(&b));
        for off in 1..2000u64 {
            // Keep touching the hot block while streaming others through.
            assert!(cache.get(&hot).is_some(), "hot block evicted at {off}");
            cache.insert(
                BlockKey {
                    table: t,
                    offset: off * 4096,
                },
                Arc::clone(&b),
            );
            assert!(cache.usage() <= cache.capacity() + size);
        }
        assert!(
            cache.get(&hot).is_some(),
            "a block hit on every round survives a scan"
        );
        assert!(cache.stats.evictions.load(Ordering::Relaxed) > 1000);
    }

    #[test]
    fn zero_capacity_caches_nothing() {
        let cache = BlockCache::new(0);
        let key = BlockKey {
            table: 1,
            offset: 0,
        };
        cache.insert(key, block(3));
        assert!(cache.get(&key).is_none());
        assert_eq!(cache.usage(), 0);
    }
}

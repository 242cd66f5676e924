//! [`BlockBuilder`]: encodes sorted entries into one block (format in `block/mod.rs`).
//! Owned by one thread (the table builder's).

use std::cmp::Ordering;

use crate::codec;
use crate::key::compare_internal;

/// Builds one block. Reused across blocks with [`BlockBuilder::reset`].
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    finished: bool,
}

impl BlockBuilder {
    /// # Panics
    /// If `restart_interval` is 0 (options validation rejects it).
    pub fn new(restart_interval: usize) -> Self {
        assert!(restart_interval >= 1, "restart_interval must be at least 1");
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval,
            last_key: Vec::new(),
            finished: false,
        }
    }

    /// Forget everything added, keeping the allocations.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.finished = false;
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Size of the block if it were finished now.
    pub fn current_size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Append an entry.
    ///
    /// # Panics
    /// If called after [`BlockBuilder::finish`] without a reset, or if the block grows past
    /// 4 GiB (the table builder caps key and value sizes so that it cannot). In debug
    /// builds, if `key` does not sort after the previous key.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        assert!(!self.finished, "BlockBuilder::add after finish");
        debug_assert!(
            self.buf.is_empty() || compare_internal(key, &self.last_key) == Ordering::Greater,
            "block keys must be strictly increasing"
        );
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            let offset = u32::try_from(self.buf.len())
                .expect("block offsets fit in u32: key and value sizes are capped");
            self.restarts.push(offset);
            self.counter = 0;
            0
        };
        let delta = key.get(shared..).unwrap_or_default();
        codec::put_varint(&mut self.buf, shared as u64);
        codec::put_varint(&mut self.buf, delta.len() as u64);
        codec::put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(delta);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(delta);
        self.counter += 1;
    }

    /// Append the restart array and return the finished block. Valid until the next
    /// `reset`.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &r in &self.restarts {
                codec::put_u32(&mut self.buf, r);
            }
            let n = u32::try_from(self.restarts.len())
                .expect("restart count fits in u32: at most one per entry of a < 4 GiB block");
            codec::put_u32(&mut self.buf, n);
            self.finished = true;
        }
        &self.buf
    }
}

//! [`Block`] (validated, immutable block contents) and [`BlockIter`] (a cursor over it).
//!
//! A `Block` may be shared between threads behind an `Arc`; each `BlockIter` owns an `Arc`
//! and belongs to one thread. Invariants of a `Block`, checked by [`Block::new`]: the
//! restart array fits in the bytes, it is non-empty, it starts at 0, it is strictly
//! increasing, and every restart offset is inside the entry area. Entries themselves are
//! checked as they are decoded; a bad one makes the movement return `Error::Corruption`.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use super::BlockBytes;
use crate::codec::{self, Decoder};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::prefetch::PrefetchHint;

/// The largest block whose search loads it whole beforehand (see `Block::hot_bytes`):
/// 16 KiB, four default blocks.
const PREFETCH_WHOLE_MAX: usize = 16 << 10;

/// Restart points `first..=last` of a block: where a seek's binary search runs
/// (what [`super::RestartWords::range`] narrows a seek to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartRange {
    pub first: usize,
    pub last: usize,
}

/// A block's decoded bytes, with its restart array validated (and read in place: no copy,
/// so a block read from disk costs no allocation beyond its bytes).
#[derive(Debug)]
pub struct Block {
    data: BlockBytes,
    /// End of the entry area, which is where the restart array starts.
    entries_end: usize,
    /// Number of restart points (at least 1).
    restart_count: usize,
    /// For error reports: the file and the file offset of the block's handle.
    file: Arc<Path>,
    offset: u64,
}

impl Block {
    /// Validate the restart array of `data`, the decoded (decompressed) bytes of the block
    /// whose handle starts at `offset` in `file`.
    ///
    /// # Errors
    /// `Error::Corruption` if the restart array is malformed.
    pub fn new(data: impl Into<BlockBytes>, file: Arc<Path>, offset: u64) -> Result<Block> {
        let data = data.into();
        let corrupt = |reason: String| Error::corruption(&*file, offset, reason);
        let len = data.len();
        let count_at = len
            .checked_sub(4)
            .ok_or_else(|| corrupt(format!("block of {len} bytes is too short")))?;
        let count = codec::get_u32(data.get(count_at..).unwrap_or_default())
            .ok_or_else(|| corrupt("block restart count unreadable".into()))?;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let entries_end = count
            .checked_mul(4)
            .and_then(|bytes| count_at.checked_sub(bytes))
            .filter(|_| count >= 1)
            .ok_or_else(|| {
                corrupt(format!(
                    "block of {len} bytes cannot hold {count} restart points"
                ))
            })?;
        let mut d = Decoder::new(data.get(entries_end..count_at).unwrap_or_default());
        let mut prev = None;
        for i in 0..count {
            let r = d
                .u32("restart point")
                .map_err(|e| corrupt(e.reason))
                .map(|r| usize::try_from(r).unwrap_or(usize::MAX))?;
            let in_order = match prev {
                None => r == 0,
                Some(prev) => r > prev && r < entries_end,
            };
            if !in_order {
                return Err(corrupt(format!(
                    "restart point {i} at {r} is out of order or outside the {entries_end} \
                     bytes of entries"
                )));
            }
            prev = Some(r);
        }
        Ok(Block {
            data,
            entries_end,
            restart_count: count,
            file,
            offset,
        })
    }

    /// Whether the block holds no entry (its one restart point is the end of its entries).
    pub fn is_empty(&self) -> bool {
        self.entries_end == 0
    }

    /// Bytes held in memory (for cache accounting): the heap bytes of the data (none for a
    /// view into a mapping, whose pages belong to the OS page cache).
    pub fn size(&self) -> usize {
        std::mem::size_of::<Block>() + self.data.heap_bytes()
    }

    /// The offset of restart point `index`, or `None` past the last one. [`Block::new`]
    /// checked that the offsets are in order and inside the entry area.
    fn restart(&self, index: usize) -> Option<usize> {
        if index >= self.restart_count {
            return None;
        }
        let at = self.entries_end + 4 * index;
        let r = codec::get_u32(self.data.get(at..at + 4)?)?;
        usize::try_from(r).ok()
    }

    /// What a search of the block reads, to be loaded into the CPU's caches before it
    /// starts: a search of a block that no cache line holds would otherwise wait for its
    /// restart array, then a restart key, then the entries, one after the other. A block
    /// larger than `PREFETCH_WHOLE_MAX` (a large `block_size`) has only its restart array
    /// loaded: a search reads a small part of the rest.
    fn hot_bytes(&self) -> &[u8] {
        if self.data.len() <= PREFETCH_WHOLE_MAX {
            &self.data[..]
        } else {
            self.data.get(self.entries_end..).unwrap_or_default()
        }
    }

    /// A hint for a cache that holds this block: the bytes a search reads first, and the
    /// block's own fields, with the reference counts an `Arc` keeps just before them (a
    /// layout the standard library does not promise: were it different, a hit would only
    /// wait for them as it did before the hint).
    pub(crate) fn prefetch_hint(self: &Arc<Self>) -> PrefetchHint {
        let counts = 2 * std::mem::size_of::<usize>();
        let fields = std::ptr::slice_from_raw_parts(
            Arc::as_ptr(self).cast::<u8>().wrapping_sub(counts),
            counts + std::mem::size_of::<Block>(),
        );
        PrefetchHint::new(fields, self.hot_bytes())
    }

    /// Length of the block's bytes (entries and restart array).
    pub fn byte_len(&self) -> usize {
        self.data.len()
    }

    /// A cursor over the entries; not positioned until a seek.
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter {
            block: Arc::clone(self),
            current: self.entries_end,
            next_offset: self.entries_end,
            restart_index: 0,
            key: Vec::new(),
            value: (0, 0),
        }
    }

    /// Number of restart points (at least 1).
    pub(crate) fn restart_count(&self) -> usize {
        self.restart_count
    }

    /// The full key stored at restart point `index` (restart entries share nothing with
    /// their predecessor), read in place.
    pub(super) fn restart_key(&self, index: usize) -> Result<&[u8]> {
        let at = self.restart(index).unwrap_or(self.entries_end);
        let (shared, delta, _, _) = decode_entry(self, at)
            .map_err(|e| self.corruption(at.saturating_add(e.offset), &e.reason))?;
        if shared != 0 {
            return Err(self.corruption(at, "restart entry shares a key prefix"));
        }
        Ok(self.data.get(delta.0..delta.1).unwrap_or_default())
    }

    /// The last restart point within `range` whose key is `< target` (restart `range.first`
    /// when none is): every entry before it is `< target` too, so the first entry `>= target`
    /// is in its interval or the next one.
    fn last_restart_before(&self, target: &[u8], range: RestartRange) -> Result<usize> {
        let last_restart = self.restart_count - 1;
        let (mut left, mut right) = (range.first.min(last_restart), range.last.min(last_restart));
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            if compare_internal(self.restart_key(mid)?, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        Ok(left)
    }

    /// A point read's seek: the value of the first entry whose key is `>= target`, with
    /// that key in `key`, or `None` when every entry sorts before `target`. The same answer
    /// as [`InternalIterator::seek`] on an iterator, without one: no reference count, no
    /// restart index kept up to date, and the key buffer is the caller's.
    pub fn seek_entry<'b>(&'b self, target: &[u8], key: &mut Vec<u8>) -> Result<Option<&'b [u8]>> {
        let all = RestartRange {
            first: 0,
            last: self.restart_count - 1,
        };
        let restart = self.last_restart_before(target, all)?;
        let mut at = self.restart(restart).unwrap_or(self.entries_end);
        key.clear();
        while at < self.entries_end {
            let (value, end) = self.read_entry(at, key)?;
            if compare_internal(key, target) != Ordering::Less {
                // In range: `decode_entry` checked it.
                return Ok(Some(self.data.get(value.0..value.1).unwrap_or_default()));
            }
            at = end;
        }
        key.clear();
        Ok(None)
    }

    /// Decode the entry at `at` into `key`, which holds the key of the entry before it (or
    /// nothing, at a restart point). Returns the entry's value range and where the next
    /// entry starts.
    fn read_entry(&self, at: usize, key: &mut Vec<u8>) -> Result<((usize, usize), usize)> {
        let (shared, delta, value, end) = decode_entry(self, at)
            .map_err(|e| self.corruption(at.saturating_add(e.offset), &e.reason))?;
        if shared > key.len() {
            let why = format!("shares {shared} bytes with a {}-byte key", key.len());
            return Err(self.corruption(at, &why));
        }
        key.truncate(shared);
        // In range: `decode_entry` checked it.
        key.extend_from_slice(self.data.get(delta.0..delta.1).unwrap_or_default());
        Ok((value, end))
    }

    fn corruption(&self, at: usize, reason: &str) -> Error {
        Error::corruption(
            &*self.file,
            self.offset,
            format!("bad block entry at byte {at} of the block: {reason}"),
        )
    }
}

/// A cursor over one [`Block`]. Invalid when `current == entries_end`.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `entries_end` when not valid.
    current: usize,
    /// Offset just past the current entry.
    next_offset: usize,
    /// Index of the restart interval that holds `current`.
    restart_index: usize,
    key: Vec<u8>,
    /// `value` as a range of `block.data`.
    value: (usize, usize),
}

/// Decode the entry header at `at`: (shared, key delta range, value range, end), all as
/// offsets into `block.data`. Most lengths fit one varint byte, so that case is decoded
/// directly; the general case goes through the checked decoder.
#[allow(clippy::type_complexity)]
fn decode_entry(
    block: &Block,
    at: usize,
) -> Result<(usize, (usize, usize), (usize, usize), usize), codec::DecodeError> {
    let area = block.data.get(at..block.entries_end).unwrap_or_default();
    let (shared, unshared, value_len, header) = match area {
        [a, b, c, ..] if (a | b | c) < 0x80 => (*a as usize, *b as usize, *c as usize, 3),
        _ => {
            let mut d = Decoder::new(area);
            let shared = d.varint_usize("shared key length")?;
            let unshared = d.varint_usize("unshared key length")?;
            let value_len = d.varint_usize("value length")?;
            (shared, unshared, value_len, d.position())
        }
    };
    let key_end = header
        .checked_add(unshared)
        .filter(|&e| e <= area.len())
        .ok_or_else(|| codec::DecodeError::new(header, "key runs past the block"))?;
    let value_end = key_end
        .checked_add(value_len)
        .filter(|&e| e <= area.len())
        .ok_or_else(|| codec::DecodeError::new(key_end, "value runs past the block"))?;
    // Offsets inside `area` are below `entries_end`, so adding `at` cannot overflow.
    Ok((
        shared,
        (at + header, at + key_end),
        (at + key_end, at + value_end),
        at + value_end,
    ))
}

impl BlockIter {
    fn invalidate(&mut self) {
        self.current = self.block.entries_end;
        self.next_offset = self.block.entries_end;
        self.key.clear();
        self.value = (0, 0);
    }

    fn fail<T>(&mut self, err: Error) -> Result<T> {
        self.invalidate();
        Err(err)
    }

    /// Decode the entry at `next_offset`, whose predecessor's key is in `self.key`.
    /// Returns `Ok(false)` at the end of the entries.
    fn parse_next(&mut self) -> Result<bool> {
        let at = self.next_offset;
        if at >= self.block.entries_end {
            self.invalidate();
            return Ok(false);
        }
        let (value, end) = match self.block.read_entry(at, &mut self.key) {
            Ok(entry) => entry,
            Err(e) => return self.fail(e),
        };
        self.current = at;
        self.value = value;
        self.next_offset = end;
        while self
            .block
            .restart(self.restart_index + 1)
            .is_some_and(|r| r <= self.current)
        {
            self.restart_index += 1;
        }
        Ok(true)
    }

    /// Position just before restart point `index`, so `parse_next` decodes it.
    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.next_offset = self.block.restart(index).unwrap_or(self.block.entries_end);
    }

    fn is_valid(&self) -> bool {
        self.current < self.block.entries_end
    }

    /// [`InternalIterator::seek`], told that the last restart point whose key is `< target`
    /// (or restart 0) is within `range`, as [`super::RestartWords::range`] finds it.
    pub fn seek_in(&mut self, target: &[u8], range: RestartRange) -> Result<()> {
        let restart = match self.block.last_restart_before(target, range) {
            Ok(restart) => restart,
            Err(e) => return self.fail(e),
        };
        self.seek_to_restart(restart);
        while self.parse_next()? {
            if compare_internal(&self.key, target) != Ordering::Less {
                return Ok(());
            }
        }
        Ok(())
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.is_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_to_restart(0);
        self.parse_next().map(drop)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.seek_to_restart(self.block.restart_count - 1);
        while self.parse_next()? {
            if self.next_offset >= self.block.entries_end {
                break;
            }
        }
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let all = RestartRange {
            first: 0,
            last: self.block.restart_count - 1,
        };
        self.seek_in(target, all)
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.is_valid());
        self.parse_next().map(drop)
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.is_valid());
        // Entries decode only forwards: go back to the restart point before the current
        // entry and scan up to the entry that ends where the current one starts.
        let original = self.current;
        let mut index = self.restart_index;
        while self.block.restart(index).is_some_and(|r| r >= original) {
            if index == 0 {
                self.invalidate();
                return Ok(());
            }
            index -= 1;
        }
        self.seek_to_restart(index);
        loop {
            if !self.parse_next()? {
                let at = original;
                return self.fail(self.block.corruption(at, "entries overlap on prev"));
            }
            if self.next_offset >= original {
                return Ok(());
            }
        }
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value.0..self.value.1)
            .unwrap_or_default()
    }
}

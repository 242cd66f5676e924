//! [`RestartWords`]: a dense, in-memory summary of a block's restart keys that narrows a
//! seek before it touches the block.
//!
//! A binary search over a large block (an SSTable's index block holds one entry per data
//! block, thousands of them, every one a restart point) decodes an entry at each step, and
//! each step lands on a cache line no other step shares: most of the cost of a point read
//! that misses the block cache was those misses. This summary keeps, for each restart
//! point, eight bytes of its user key in one `u64`, so the search runs over an array a
//! quarter the size with no decoding, and the block is then searched only between the two
//! restart points the words cannot tell apart (usually one or two).
//!
//! The eight bytes are taken after the prefix that every restart key shares (`skip`):
//! keys of one table often agree on their first bytes (zero-padded numbers, a common
//! table prefix), and words taken from the start would all be equal. Keys shorter than
//! `skip + 8` bytes are padded with zeros. Built when a table opens; nothing is stored.
//!
//! Invariant: `words` is non-decreasing, and `words[i] < word(u)` implies that restart
//! `i`'s user key is `< u` (and `>` likewise): after the shared prefix, a smaller padded
//! word means a smaller byte at the first difference, or a key that ended first.

use std::cmp::Ordering;
use std::sync::Arc;

use super::reader::Block;
use crate::error::Result;
use crate::key;

#[derive(Debug)]
pub struct RestartWords {
    skip: Vec<u8>,
    words: Vec<u64>,
}

/// Restart points `first..=last` of a block: where a seek's binary search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartRange {
    pub first: usize,
    pub last: usize,
}

fn word(after_skip: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = after_skip.len().min(8);
    if let (Some(dst), Some(src)) = (w.get_mut(..n), after_skip.get(..n)) {
        dst.copy_from_slice(src);
    }
    u64::from_be_bytes(w)
}

/// How many of `words` (non-decreasing, none below `w`) equal `w`, found by galloping from
/// the front. Runs of equal words are short (restart keys that agree on eight bytes past
/// the shared prefix), and a binary search over the whole tail would land each probe on a
/// cache line the first search never touched: on a table's index that doubled the cost
/// of the lookup.
fn equal_run(words: &[u64], w: u64) -> usize {
    // Invariant: `words[..known]` all equal `w`; `words[step - 1]`, if any, is the next probe.
    let mut known = 0;
    let mut step = 1;
    while words.get(step - 1) == Some(&w) {
        known = step;
        step *= 2;
    }
    let unknown = words.get(known..step.min(words.len())).unwrap_or_default();
    known + unknown.partition_point(|&x| x == w)
}

impl RestartWords {
    /// Summarise `block`'s restart keys.
    ///
    /// # Errors
    /// `Corruption` if a restart entry does not decode.
    pub fn new(block: &Arc<Block>) -> Result<RestartWords> {
        let count = block.restart_count();
        let first = key::user_key(block.restart_key(0)?).to_vec();
        let last = key::user_key(block.restart_key(count - 1)?);
        let shared = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let mut skip = first;
        skip.truncate(shared);
        let mut words = Vec::with_capacity(count);
        for i in 0..count {
            let user_key = key::user_key(block.restart_key(i)?);
            words.push(word(user_key.get(shared..).unwrap_or_default()));
        }
        Ok(RestartWords { skip, words })
    }

    /// Heap bytes held.
    pub fn size(&self) -> usize {
        self.skip.capacity() + self.words.capacity() * std::mem::size_of::<u64>()
    }

    /// The restart points among which the last one whose key sorts before any internal
    /// key of `user_key` lies (restart 0 when none does): what [`BlockIter::seek`]
    /// searches for.
    ///
    /// [`BlockIter::seek`]: super::BlockIter
    pub fn range(&self, user_key: &[u8]) -> RestartRange {
        let n = self.words.len();
        // Restarts in `lo..hi` have the target's word; those before sort before it,
        // those from `hi` on after it.
        let (lo, hi) = match user_key.get(..self.skip.len()) {
            Some(head) if head == self.skip.as_slice() => {
                let w = word(user_key.get(self.skip.len()..).unwrap_or_default());
                let lo = self.words.partition_point(|&x| x < w);
                let after = self.words.get(lo..).unwrap_or_default();
                (lo, lo + equal_run(after, w))
            }
            // Outside the shared prefix: before every restart key or after all of them.
            _ => match key::compare_bytes(user_key, &self.skip) {
                Ordering::Less => (0, 0),
                _ => (n, n),
            },
        };
        RestartRange {
            first: lo.saturating_sub(1),
            last: hi.saturating_sub(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::equal_run;

    #[test]
    fn equal_run_matches_a_linear_count() {
        for len in 0..40usize {
            for run in 0..=len {
                let words: Vec<u64> = (0..len)
                    .map(|i| if i < run { 5 } else { 6 + i as u64 })
                    .collect();
                assert_eq!(equal_run(&words, 5), run, "len {len} run {run}");
            }
        }
    }
}

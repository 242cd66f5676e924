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
//! The summary serves any sorted keys: a version also keeps one per level over its files'
//! largest keys ([`RestartWords::from_sorted`]), where a "restart point" is a file.
//!
//! Invariant: `words` is non-decreasing, and `words[i] < word(u)` implies that restart
//! `i`'s user key is `< u` (and `>` likewise): after the shared prefix, a smaller padded
//! word means a smaller byte at the first difference, or a key that ended first.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use super::reader::{Block, RestartRange};
use crate::error::Result;
use crate::key;

#[derive(Debug, Default, Clone)]
pub struct RestartWords {
    skip: Vec<u8>,
    words: Vec<u64>,
    /// Every `GROUP`th word (`top[j] == words[j * GROUP]`): the first level of a search.
    /// A table's index has one word per data block, and a binary search over all of them
    /// (800 KB for 3M keys) misses the CPU's caches at each of its last steps. `top` is
    /// a sixteenth of that and stays cached; the search then reads one group, two cache
    /// lines.
    top: Vec<u64>,
}

/// Words per group of [`RestartWords::top`]: 128 bytes.
const GROUP: usize = 16;

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
        if block.is_empty() {
            // The index of a table that holds only range tombstones.
            return Ok(RestartWords::default());
        }
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
        Ok(RestartWords::with_words(skip, words))
    }

    /// Summarise `keys`, user keys in non-decreasing order.
    pub fn from_sorted<'k, I>(keys: I) -> RestartWords
    where
        I: IntoIterator<Item = &'k [u8]>,
        I::IntoIter: Clone,
    {
        let keys = keys.into_iter();
        let (first, last) = (keys.clone().next(), keys.clone().last());
        let (Some(first), Some(last)) = (first, last) else {
            return RestartWords::default();
        };
        let shared = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let words = keys
            .map(|k| word(k.get(shared..).unwrap_or_default()))
            .collect();
        RestartWords::with_words(first.get(..shared).unwrap_or_default().to_vec(), words)
    }

    fn with_words(skip: Vec<u8>, words: Vec<u64>) -> RestartWords {
        let top = words.iter().step_by(GROUP).copied().collect();
        RestartWords { skip, words, top }
    }

    /// How many keys were summarised.
    pub fn count(&self) -> usize {
        self.words.len()
    }

    /// Heap bytes held.
    pub fn size(&self) -> usize {
        self.skip.capacity()
            + (self.words.capacity() + self.top.capacity()) * std::mem::size_of::<u64>()
    }

    /// The number of words `< w`: a binary search over `top`, then over one group.
    fn lower_bound(&self, w: u64) -> usize {
        let group = self.group(w);
        let start = group.start;
        let words = self.words.get(group).unwrap_or_default();
        start + words.partition_point(|&x| x < w)
    }

    /// The words among which `lower_bound(w)` lies (or just past which), found in `top`.
    fn group(&self, w: u64) -> Range<usize> {
        // `words[(j - 1) * GROUP] < w <= words[j * GROUP]` (where they exist), so the
        // answer is in `(j - 1) * GROUP + 1 ..= j * GROUP`: inside group `j - 1` or at its
        // end. With `j == 0` it is 0.
        let j = self.top.partition_point(|&x| x < w);
        let start = j.saturating_sub(1) * GROUP;
        start..(j * GROUP).min(self.words.len())
    }

    /// The restart points whose words a search for `user_key` reads after `top`: a
    /// caller can start loading them (and what it keeps per restart point) early. `None`
    /// when the key lies outside the shared prefix and no word is read.
    pub fn group_of(&self, user_key: &[u8]) -> Option<Range<usize>> {
        let rest = user_key.strip_prefix(self.skip.as_slice())?;
        Some(self.group(word(rest)))
    }

    /// Start loading the words of `restarts` into the CPU's caches.
    pub fn prefetch(&self, restarts: Range<usize>) {
        if let Some(words) = self.words.get(restarts) {
            crate::prefetch::prefetch_slice(words);
        }
    }

    /// Restarts `lo..hi` have `user_key`'s word: those before `lo` sort before any
    /// internal key of `user_key`, those from `hi` on after all of them.
    pub fn bounds(&self, user_key: &[u8]) -> (usize, usize) {
        let n = self.words.len();
        // `compare_bytes`, not `==`, which calls `memcmp` (see `compare_bytes`).
        match user_key.get(..self.skip.len()) {
            Some(head) if key::compare_bytes(head, &self.skip).is_eq() => {
                let w = word(user_key.get(self.skip.len()..).unwrap_or_default());
                let lo = self.lower_bound(w);
                let after = self.words.get(lo..).unwrap_or_default();
                (lo, lo + equal_run(after, w))
            }
            // Outside the shared prefix: before every restart key or after all of them.
            _ => match key::compare_bytes(user_key, &self.skip) {
                Ordering::Less => (0, 0),
                _ => (n, n),
            },
        }
    }

    /// The restart points among which the last one whose key sorts before any internal
    /// key of `user_key` lies (restart 0 when none does): what [`BlockIter::seek`]
    /// searches for.
    ///
    /// [`BlockIter::seek`]: super::BlockIter
    pub fn range(&self, user_key: &[u8]) -> RestartRange {
        let (lo, hi) = self.bounds(user_key);
        RestartRange {
            first: lo.saturating_sub(1),
            last: hi.saturating_sub(1),
        }
    }

    /// The number of restart keys that sort before any internal key of `user_key`, when
    /// the words alone decide it: no restart key has `user_key`'s word, so every restart
    /// key from that point on sorts after all of `user_key`'s internal keys. `None` when
    /// a word ties and only the keys themselves can tell.
    pub fn restarts_before(&self, user_key: &[u8]) -> Option<usize> {
        let (lo, hi) = self.bounds(user_key);
        (lo == hi).then_some(lo)
    }
}

#[cfg(test)]
mod tests {
    use super::{equal_run, RestartWords, GROUP};

    #[test]
    fn the_two_level_search_matches_a_binary_search_over_all_words() {
        for len in [
            0,
            1,
            2,
            GROUP - 1,
            GROUP,
            GROUP + 1,
            5 * GROUP,
            5 * GROUP + 7,
        ] {
            // Runs of equal words, gaps between them.
            let words: Vec<u64> = (0..len as u64).map(|i| 10 * (i / 3)).collect();
            let rw = RestartWords {
                skip: Vec::new(),
                top: words.iter().step_by(GROUP).copied().collect(),
                words: words.clone(),
            };
            for w in 0..=10 * (len as u64 / 3 + 1) {
                let want = words.partition_point(|&x| x < w);
                assert_eq!(rw.lower_bound(w), want, "len {len} w {w}");
                // What `group_of` tells a caller to prefetch is what the search reads.
                let group = rw.group(w);
                assert!(group.start <= want && want <= group.end, "len {len} w {w}");
                assert!(group.len() <= GROUP, "len {len} w {w}");
            }
        }
    }

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

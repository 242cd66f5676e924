//! The log store's entry cache: the last appended entries, in memory (invariant 3 of
//! `log_store.rs`).

use std::collections::VecDeque;

use crate::Entry;

/// Encoded bytes of entries the cache holds at most (it always keeps the last one).
pub(super) const CACHE_BYTES: usize = 32 << 20;

/// The last appended entries (invariant 3), with their encoded sizes.
#[derive(Debug, Default)]
pub(super) struct EntryCache {
    entries: VecDeque<(Entry, usize)>,
    pub(super) bytes: usize,
}

impl EntryCache {
    pub(super) fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|(e, _)| e.log_id.index)
    }

    /// The index after the last entry held.
    pub(super) fn end_index(&self) -> Option<u64> {
        self.entries
            .back()
            .map(|(e, _)| e.log_id.index.saturating_add(1))
    }

    /// Add entries just made durable; they start a new run if they do not continue the
    /// one held.
    pub(super) fn push(&mut self, appended: Vec<(Entry, usize)>) {
        let continues = match (appended.first(), self.end_index()) {
            (Some((first, _)), Some(end)) => first.log_id.index == end,
            _ => true,
        };
        if !continues {
            self.clear();
        }
        for (entry, len) in appended {
            self.bytes = self.bytes.saturating_add(len);
            self.entries.push_back((entry, len));
        }
        while self.bytes > CACHE_BYTES && self.entries.len() > 1 {
            self.pop_front();
        }
    }

    fn pop_front(&mut self) {
        if let Some((_, len)) = self.entries.pop_front() {
            self.bytes = self.bytes.saturating_sub(len);
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Drop the entries from `index` on.
    pub(super) fn truncate(&mut self, index: u64) {
        while let Some((e, len)) = self.entries.back() {
            if e.log_id.index < index {
                break;
            }
            self.bytes = self.bytes.saturating_sub(*len);
            self.entries.pop_back();
        }
    }

    /// Drop the entries up to `upto` inclusive.
    pub(super) fn purge(&mut self, upto: u64) {
        while self.first_index().is_some_and(|first| first <= upto) {
            self.pop_front();
        }
    }

    /// The entries `[start, end)` if the cache holds all of them; `end: None` reaches to
    /// the last entry held, so the range must start inside the cache.
    pub(super) fn get(&self, start: u64, end: Option<u64>) -> Option<Vec<Entry>> {
        let first = self.first_index()?;
        let held_end = self.end_index()?;
        let end = end.unwrap_or(held_end);
        if start < first || start >= held_end || end > held_end || end <= start {
            return None;
        }
        let from = usize::try_from(start - first).ok()?;
        let to = usize::try_from(end - first).ok()?;
        if to > self.entries.len() {
            // The run is contiguous (`push`), so this cannot be; read the disk if it is.
            return None;
        }
        Some(
            self.entries
                .range(from..to)
                .map(|(e, _)| e.clone())
                .collect(),
        )
    }
}

//! Compaction filters: a user's say over the values a compaction rewrites (RocksDB's
//! `CompactionFilter`).

/// What becomes of a value a compaction is about to write: see [`CompactionFilter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterDecision {
    /// Write it as it is.
    Keep,
    /// Delete the key: the value is written as a tombstone of the same sequence number,
    /// which hides older versions in deeper levels and is itself dropped once nothing older
    /// is left below it.
    Remove,
    /// Write this value instead.
    Change(Vec<u8>),
}

/// Called by compactions for the values they rewrite (`Options::compaction_filter`).
///
/// A compaction asks only about a key's newest version, and only when no live snapshot
/// can read it (its sequence number is above every snapshot's), so a snapshot's reads never
/// change. Files that a compaction moves down a level without rewriting them, flushes and
/// `Db::repair` do not ask. Called from compaction threads, with no lock held: it must not
/// call back into the database.
pub trait CompactionFilter: Send + Sync {
    /// The fate of `value`, the newest value of `key`, as a compaction writes it into
    /// `level`.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> FilterDecision;
}

//! SSTables: sorted, immutable, checksummed files of internal keys.
//!
//! A [`TableBuilder`] writes one table front to back during a flush or compaction; a
//! [`Table`] opens it, keeps its index, bloom filter and properties in memory, and answers
//! point reads ([`Table::get`]) and scans ([`TableIter`]). The byte layout is described in
//! `format.rs` (file, trailer, footer), `block/mod.rs` (entries and restarts), `filter.rs`
//! and `properties.rs`.
//!
//! Thread safety: a `Table` is immutable and shared between threads behind an `Arc`;
//! builders and iterators belong to one thread. Invariants: a table is never modified after
//! its footer is written and synced; every block on disk is followed by a trailer whose
//! CRC covers it, and nothing read from disk is trusted before that CRC is checked.

pub mod block;
mod block_cache;
mod builder;
pub mod compress;
pub mod filter;
pub mod format;
mod iter;
mod properties;
mod reader;

#[cfg(test)]
mod tests;

pub use block_cache::{BlockCache, BlockKey};
pub use builder::{TableBuilder, TableOptions, TableSummary};
pub use filter::{BloomFilter, BloomFilterBuilder};
pub use format::BlockHandle;
pub use iter::TableIter;
pub use properties::TableProperties;
pub(crate) use reader::PointEntry;
pub use reader::Table;

//! Shale: an embedded LSM-tree key-value engine.
//!
//! Open a [`Db`] with [`Options`], write with [`Db::put`], [`Db::delete`] or an atomic
//! [`WriteBatch`], read with [`Db::get`]. See `docs/architecture.md` for how the parts fit.

// Bytes from disk and arguments from users never reach an unchecked unwrap or index.
#![deny(clippy::unwrap_used, clippy::indexing_slicing)]

pub(crate) mod batch;
pub(crate) mod cache;
pub(crate) mod codec;
pub(crate) mod compaction;
pub(crate) mod compaction_filter;
mod db;
pub mod error;
pub(crate) mod filename;
pub mod fs;
/// Fuzz entry points, one per decoder (used by `fuzz/` and `tests/engine/fuzz_smoke.rs`).
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod inspect;
pub(crate) mod iter;
pub(crate) mod key;
pub(crate) mod keyspace;
pub(crate) mod memtable;
pub mod options;
pub mod perf;
mod prefetch;
pub(crate) mod range_del;
pub(crate) mod rate_limit;
pub(crate) mod snapshot;
pub(crate) mod sst;
mod striped;
mod sync;
mod trend;
pub mod ttl;
pub(crate) mod verify;
pub(crate) mod version;
pub(crate) mod wal;

pub use batch::{BatchEntry, WriteBatch};
pub use compaction_filter::{CompactionFilter, FilterDecision};
pub use db::{
    prefix_successor, Db, DbIterator, Keyspace, LiveFile, RangeIter, RepairReport, Snapshot,
    StatsSnapshot, Transaction, WriteHook, LOST_DIR,
};
pub use error::{Error, Result};
pub use key::{SeqNo, ValueKind};
pub use keyspace::KeyspaceId;
pub use options::{Compression, KeyspaceOptions, Options, ReadOptions, WalRecovery, WriteOptions};
pub use ttl::TtlDb;

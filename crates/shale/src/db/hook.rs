//! Write hooks: the one seam between the engine and the layers that keep data derived from
//! it in step with every write (the semantic index of `semantic/`).
//!
//! ```text
//!   Db::write ── admit (each hook; no lock: may wait for room) ──► log lock:
//!              check (each hook; may refuse the batch) ──
//!              derive (each hook; adds its records to the batch's derived records) ──
//!              WAL (batch + derived, one record) ── memtable ──
//!              committed (each hook, with the batch, the derived records and the
//!              batch's first sequence number) ── visible
//! ```
//!
//! Derived records are how a layer keeps an index that is exact at every write (the text
//! index of `shale-search`): they are ordinary entries, in a keyspace the hook owns, that
//! commit atomically with the batch they follow and are numbered right after it. After a
//! crash they are recovered exactly as the batch is, so the index and the data never
//! disagree.
//!
//! A hook sees every write committed after [`Db::attach`](crate::Db::attach) returns, in commit order, and
//! nothing before: `attach` installs it under the `log` lock and returns a snapshot of
//! exactly the writes before it, so the layer reads the past from the snapshot and the
//! future from the hook, with no gap and no overlap. Because `check` and `committed` run
//! under the `log` lock, a write either sees a hook in both or in neither, and hooks see
//! batches in the order of their sequence numbers.
//!
//! What a hook must not do under the lock: block, or call back into the database (a write
//! would deadlock). `admit`, outside the lock, is where a hook may wait.
//!
//! This file is the contract; `attach.rs` attaches, detaches and closes hooks.

use std::any::Any;
use std::sync::Arc;

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::key::SeqNo;

/// A layer that follows every write of a database. See the module documentation.
pub trait WriteHook: Send + Sync {
    /// A name unique among a database's hooks (the semantic index's name).
    fn name(&self) -> &str;

    /// The keyspaces the hook follows or writes derived records to: none of them can be
    /// dropped while the hook is attached. By default none.
    fn keyspaces(&self) -> &[crate::keyspace::KeyspaceId] {
        &[]
    }

    /// Before `batch` is committed, with no lock held: the place to wait for room (a
    /// bounded queue's back-pressure). Best effort: a hook attached meanwhile may miss a
    /// batch here, never in `check` or `committed`.
    ///
    /// # Errors
    /// The batch is refused and nothing of it is written.
    fn admit(&self, batch: &WriteBatch) -> Result<()> {
        let _ = batch;
        Ok(())
    }

    /// Under the `log` lock, before `batch` is written: refuse a batch the hook cannot
    /// follow (a value its index cannot hold). Must not block.
    ///
    /// # Errors
    /// The batch is refused and nothing of it is written; other batches of its write group
    /// are not affected.
    fn check(&self, batch: &WriteBatch) -> Result<()>;

    /// Under the `log` lock, once every hook's `check` passed `batch`: append to `derived`
    /// the records that keep the hook's data in step with `batch`, in a keyspace the hook
    /// owns (and names in [`WriteHook::keyspaces`]). They are written in the same WAL
    /// record as `batch` and numbered after it, so a reader sees both or neither. Must not
    /// block, and must not change the hook's state (a later hook may still refuse the
    /// batch): `committed` is where the hook learns that it was written. By default
    /// nothing.
    ///
    /// # Errors
    /// The batch is refused and nothing of it is written, as by `check`.
    fn derive(&self, batch: &WriteBatch, derived: &mut WriteBatch) -> Result<()> {
        let _ = (batch, derived);
        Ok(())
    }

    /// Under the `log` lock, after `batch` and its `derived` records (those of every hook)
    /// are in the WAL and the memtable, the batch's entries numbered from `first` and the
    /// derived ones right after them: record it. Must not block or fail (a hook that cannot
    /// follow a batch records that as its own failure).
    fn committed(&self, batch: &WriteBatch, derived: &WriteBatch, first: SeqNo);

    /// [`Db::checkpoint`](crate::Db::checkpoint) is copying the database into `db_dir`: copy the hook's own files
    /// there (a semantic index: into `indexes/<name>/`), as of a moment at or after the
    /// copy's. Called after the SSTables are linked, before the copy's CURRENT is written.
    /// By default nothing.
    ///
    /// # Errors
    /// The checkpoint fails with it.
    fn checkpoint(&self, db_dir: &std::path::Path) -> Result<()> {
        let _ = db_dir;
        Ok(())
    }

    /// The database is closing (before it syncs and stops its threads): stop the hook's own
    /// work. Called once.
    ///
    /// # Errors
    /// The hook's failure to close, which `Db::close` reports.
    fn close(&self) -> Result<()>;

    /// The hook as `Any`, so that its layer can find its own type again (see
    /// [`Db::hook`](crate::Db::hook)).
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

//! Optimistic transactions with snapshot isolation (RocksDB's OptimisticTransactionDB,
//! fjall's optimistic transactions).
//!
//! ```text
//!   Db::transaction     a snapshot S
//!   get                 the transaction's own write, else the key at S; the key is tracked
//!   put / delete        buffered in the transaction; the key is tracked
//!   commit              one conditional write (DbInner::write_if), alone in its group:
//!                       under the log lock, after every earlier write is in a memtable,
//!                       each tracked key's newest version must be at or below S, else
//!                       Error::Conflict and nothing is written
//! ```
//!
//! The check reads only memtables: every write after S is still in one while the oldest
//! memtable of the current super version began at or before S + 1. A transaction that
//! outlives that (a flush moved writes newer than S into an SSTable) cannot tell whether its
//! keys changed and fails with `Conflict` as well, as RocksDB's does (`TryAgain`). Only keys
//! read with `get` and keys written are tracked: a range read is not (no phantom
//! protection), as in RocksDB's optimistic transactions.
//!
//! A transaction spans keyspaces: `get_in`, `put_in` and `delete_in` name one, its commit
//! is one batch across them, and each tracked key is checked against its own keyspace's
//! memtables.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::state::{DbInner, LogState};
use super::tree::Tree;
use super::{Db, Keyspace, Snapshot};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::options::{ReadOptions, WriteOptions};
use crate::sync::lock;

/// A key of a keyspace.
type Key = (KeyspaceId, Vec<u8>);

/// An optimistic transaction: reads at its snapshot and its own writes, writes buffered
/// until [`Transaction::commit`]. See the module documentation. Dropping it without a
/// commit discards it. It keeps the database's internals alive, not its handle: once the
/// database is closed, its calls fail with `Closed`.
pub struct Transaction {
    db: Arc<DbInner>,
    snapshot: Snapshot,
    /// The buffered writes: a value, or `None` for a delete.
    writes: BTreeMap<Key, Option<Vec<u8>>>,
    /// Keys read, and so checked at commit (written keys are checked too).
    reads: BTreeSet<Key>,
}

impl Db {
    /// Begin an optimistic transaction at a snapshot of the database as of now.
    pub fn transaction(&self) -> Transaction {
        Transaction {
            db: Arc::clone(&self.inner),
            snapshot: self.snapshot(),
            writes: BTreeMap::new(),
            reads: BTreeSet::new(),
        }
    }
}

impl Transaction {
    /// The value of `key`: the transaction's own write if it made one, else the value at
    /// its snapshot. The key is checked at commit.
    ///
    /// # Errors
    /// The read's own errors.
    pub fn get(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let tree = Arc::clone(&self.db.default);
        self.get_tree(&tree, key.as_ref())
    }

    /// [`Transaction::get`] in keyspace `ks` (of the same database).
    ///
    /// # Errors
    /// `InvalidArgument` for a keyspace of another database; the read's own errors.
    pub fn get_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let tree = Arc::clone(self.tree_of(ks)?);
        self.get_tree(&tree, key.as_ref())
    }

    fn get_tree(&mut self, tree: &Tree, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let tracked = (tree.id, key.to_vec());
        if let Some(written) = self.writes.get(&tracked) {
            return Ok(written.clone());
        }
        self.reads.insert(tracked);
        self.db.get(tree, key, &ReadOptions::at(&self.snapshot))
    }

    /// `ks`'s tree, if `ks` is a keyspace of this transaction's database.
    fn tree_of<'a>(&self, ks: &'a Keyspace) -> Result<&'a Arc<Tree>> {
        match Arc::ptr_eq(&ks.inner, &self.db) {
            true => Ok(&ks.tree),
            false => Err(Error::invalid(
                "the keyspace belongs to another database than the transaction",
            )),
        }
    }

    /// Set `key` to `value` when the transaction commits.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.writes.insert(
            (KeyspaceId::DEFAULT, key.as_ref().to_vec()),
            Some(value.as_ref().to_vec()),
        );
    }

    /// Delete `key` when the transaction commits.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.writes
            .insert((KeyspaceId::DEFAULT, key.as_ref().to_vec()), None);
    }

    /// [`Transaction::put`] in keyspace `ks`.
    ///
    /// # Errors
    /// `InvalidArgument` for a keyspace of another database.
    pub fn put_in(
        &mut self,
        ks: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let id = self.tree_of(ks)?.id;
        self.writes
            .insert((id, key.as_ref().to_vec()), Some(value.as_ref().to_vec()));
        Ok(())
    }

    /// [`Transaction::delete`] in keyspace `ks`.
    ///
    /// # Errors
    /// `InvalidArgument` for a keyspace of another database.
    pub fn delete_in(&mut self, ks: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        let id = self.tree_of(ks)?.id;
        self.writes.insert((id, key.as_ref().to_vec()), None);
        Ok(())
    }

    /// Commit with the default write options.
    ///
    /// # Errors
    /// See [`Transaction::commit_opt`].
    pub fn commit(self) -> Result<()> {
        self.commit_opt(WriteOptions::default())
    }

    /// Write the transaction's writes atomically, if no key it read or wrote has a newer
    /// version than its snapshot.
    ///
    /// # Errors
    /// `Conflict` if one has (or if the memtables no longer reach back to the snapshot):
    /// nothing is written, and the caller may run the transaction again. Otherwise the
    /// errors of [`Db::write`] (a key or value over the limits, a refusal by a hook).
    pub fn commit_opt(self, opts: WriteOptions) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let mut batch = WriteBatch::new();
        for ((ks, key), value) in &self.writes {
            match value {
                Some(value) => batch.put_in(*ks, key, value),
                None => batch.delete_in(*ks, key),
            }
        }
        let since = self.snapshot.seq();
        let mut keys = self.reads;
        keys.extend(self.writes.into_keys());
        let condition =
            Box::new(move |db: &DbInner, log: &LogState| db.unchanged_since(&keys, since, log));
        self.db.admit(&batch)?;
        self.db.write_if(batch, opts, Some(condition)).map(drop)
    }
}

impl DbInner {
    /// `Ok` if no key of `keys` has a version newer than `since`; `Conflict` naming the
    /// first that has, or saying that the memtables no longer reach back to `since`. Runs
    /// under the `log` lock (`log`), so no write lands meanwhile.
    fn unchanged_since(&self, keys: &BTreeSet<Key>, since: SeqNo, log: &LogState) -> Result<()> {
        if log.last_seq <= since {
            return Ok(());
        }
        let mut keyspaces: Vec<KeyspaceId> = keys.iter().map(|(ks, _)| *ks).collect();
        keyspaces.dedup();
        for ks in keyspaces {
            let in_ks = keys.range((ks, Vec::new())..).take_while(|(k, _)| *k == ks);
            self.unchanged_in(ks, in_ks.map(|(_, key)| key), since, log)?;
        }
        Ok(())
    }

    /// [`DbInner::unchanged_since`] for keys of keyspace `ks`.
    fn unchanged_in<'k>(
        &self,
        ks: KeyspaceId,
        keys: impl Iterator<Item = &'k Vec<u8>>,
        since: SeqNo,
        log: &LogState,
    ) -> Result<()> {
        let tree = match ks.is_default() {
            true => Some(Arc::clone(&self.default)),
            false => lock(&self.state).trees.get(&ks).cloned(),
        };
        let (Some(tree), Some(active)) = (tree, log.mems.get(ks)) else {
            return Err(Error::invalid(format!("keyspace {} was dropped", ks.0)));
        };
        let sv = tree.super_version.load();
        // The active memtable (the log's: a switch replaces it under this lock), then the
        // frozen ones, newest first: every write of the keyspace from `sv.start_seq` on.
        let mems = || std::iter::once(active).chain(&sv.imm);
        if sv.start_seq.0 > since.0 + 1 {
            return Err(Error::Conflict(
                "the transaction began before the oldest memtable: it cannot tell whether \
                 its keys changed since"
                    .into(),
            ));
        }
        let range_dels: Vec<_> = mems().filter_map(|mem| mem.range_dels()).collect();
        for key in keys {
            let newest = mems().find_map(|mem| mem.newest_seq(key));
            let range_deleted = range_dels
                .iter()
                .any(|set| set.covering(key, SeqNo::MAX).is_some_and(|t| t > since));
            if range_deleted || newest.is_some_and(|seq| seq > since) {
                return Err(Error::Conflict(format!(
                    "key {:?} was written after the transaction began",
                    String::from_utf8_lossy(key)
                )));
            }
        }
        Ok(())
    }
}

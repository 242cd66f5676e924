//! The write hook of an index (`IndexHook`), attached to the database: it makes writers
//! wait for room in the queue (`pending.rs`), refuses what cannot be indexed (`spec.rs`)
//! and queues every committed change in commit order (core.rs has the locks and the
//! workers).

use std::any::Any;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::core::IndexCore;
use super::layout::index_dir;
use super::pending::{Change, Payload, Queue};
use super::spec::Spec;
use super::value::value_hash;
use shale::error::Result;
use shale::WriteHook;
use shale::{BatchEntry, WriteBatch};
use shale::{SeqNo, ValueKind};

/// The hook an index attaches to its database (see the module documentation).
pub(super) struct IndexHook {
    pub spec: Spec,
    pub queue: Arc<Queue>,
    /// Set once the open has reconciled the index.
    pub core: OnceLock<Arc<IndexCore>>,
}

impl IndexHook {
    /// Whether `entry` writes a key of the index: its prefix in its keyspace.
    fn covers(&self, entry: &BatchEntry<'_>) -> bool {
        entry.keyspace == self.spec.keyspace && self.spec.covers(entry.key)
    }

    /// The index's changes in `batch`, numbered from `first`.
    fn changes(&self, batch: &WriteBatch, first: SeqNo) -> Vec<Change> {
        let mut out = Vec::new();
        for (i, entry) in batch.iter().enumerate() {
            let seq = first.0 + i as u64;
            if entry.kind == ValueKind::RangeDelete {
                if entry.keyspace == self.spec.keyspace
                    && self.spec.meets_range(entry.key, entry.value)
                {
                    out.push(Change {
                        key: entry.key.to_vec(),
                        seq,
                        hash: 0,
                        payload: Payload::DeleteRange {
                            end: entry.value.to_vec(),
                        },
                    });
                }
                continue;
            }
            if !self.covers(&entry) {
                continue;
            }
            let (hash, payload) = match entry.kind {
                ValueKind::Put => match self.spec.payload(entry.key, entry.value) {
                    Ok(payload) => (value_hash(entry.value), payload),
                    // `check` refused every such batch; should one get here, the index must
                    // not keep the key's old vector.
                    Err(_) => (0, Payload::Delete),
                },
                ValueKind::Delete | ValueKind::RangeDelete => (0, Payload::Delete),
            };
            out.push(Change {
                key: entry.key.to_vec(),
                seq,
                hash,
                payload,
            });
        }
        out
    }
}

impl WriteHook for IndexHook {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn keyspaces(&self) -> &[shale::KeyspaceId] {
        std::slice::from_ref(&self.spec.keyspace)
    }

    fn admit(&self, batch: &WriteBatch) -> Result<()> {
        let bytes: usize = batch
            .iter()
            .filter(|e| self.covers(e))
            .map(|e| e.key.len() + e.value.len())
            .sum();
        if bytes == 0 {
            return Ok(());
        }
        self.queue.make_room(bytes)
    }

    fn check(&self, batch: &WriteBatch) -> Result<()> {
        for entry in batch.iter().filter(|e| e.keyspace == self.spec.keyspace) {
            if entry.kind == ValueKind::Put && self.spec.covers(entry.key) {
                self.spec.payload(entry.key, entry.value)?;
            }
        }
        Ok(())
    }

    fn committed(&self, batch: &WriteBatch, _derived: &WriteBatch, first: SeqNo) {
        let changes = self.changes(batch, first);
        if changes.is_empty() {
            return;
        }
        self.queue.lock().push(changes);
        self.queue.cv.notify_all();
    }

    fn checkpoint(&self, db_dir: &Path) -> Result<()> {
        match self.core.get() {
            Some(core) => core.copy_into(&index_dir(db_dir, &self.spec.name)),
            None => Ok(()),
        }
    }

    fn close(&self) -> Result<()> {
        match self.core.get() {
            Some(core) => core.close(),
            None => Ok(()),
        }
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

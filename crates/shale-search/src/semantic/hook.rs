//! The write hook of an index: what a value under its prefix may be (`Spec`), the queue of
//! changes waiting for the workers (`Queue`, bounded in bytes), and the hook attached to the
//! database (`IndexHook`), which refuses what cannot be indexed and queues every committed
//! change in commit order (core.rs has the locks and the workers).

use std::any::Any;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::core::IndexCore;
use super::pending::{Change, Payload, Pending};
use super::value::{decode_vector_value, value_hash};
use crate::sync::lock;
use crate::vector::Metric;
use shale::error::{Error, Result};
use shale::WriteHook;
use shale::{BatchEntry, WriteBatch};
use shale::{SeqNo, ValueKind};

/// What a value under an index's prefix may be, and the checks the hook makes.
#[derive(Debug, Clone)]
pub(super) struct Spec {
    pub name: String,
    /// The keyspace of the keys it covers.
    pub keyspace: shale::KeyspaceId,
    pub prefix: Vec<u8>,
    pub dim: usize,
    pub metric: Metric,
    pub has_embedder: bool,
}

impl Spec {
    /// What `value` under key `key` becomes in the index, or why it cannot be indexed.
    pub(super) fn payload(&self, key: &[u8], value: &[u8]) -> Result<Payload> {
        match decode_vector_value(value) {
            Some(Ok(v)) => match self.metric.check(&v.vector, self.dim, "its vector") {
                Ok(()) => Ok(Payload::Vector(v.vector)),
                Err(Error::InvalidArgument(why)) => {
                    Err(self.refuse(key, &format!("a vector value: {why}")))
                }
                Err(e) => Err(e),
            },
            Some(Err(why)) => Err(self.refuse(
                key,
                &format!("neither UTF-8 text nor a well-formed vector value ({why})"),
            )),
            None => match std::str::from_utf8(value) {
                Ok(text) if self.has_embedder => Ok(Payload::Text(text.to_owned())),
                Ok(_) => Err(self.refuse(
                    key,
                    "text, and the index has no embedder (put vectors with put_vector)",
                )),
                Err(e) => Err(self.refuse(
                    key,
                    &format!(
                        "neither UTF-8 text (invalid byte at {}) nor a vector value",
                        e.valid_up_to()
                    ),
                )),
            },
        }
    }

    fn refuse(&self, key: &[u8], why: &str) -> Error {
        Error::invalid(format!(
            "the value of key {:?} is {why}, and the key is in index {:?} (prefix {:?}); \
             nothing was written",
            String::from_utf8_lossy(key),
            self.name,
            String::from_utf8_lossy(&self.prefix)
        ))
    }

    /// A vector the index can hold: its dimension, finite, and (cosine) a direction.
    pub(super) fn check_vector(&self, v: &[f32]) -> Result<()> {
        self.metric
            .check(v, self.dim, "the vector")
            .map_err(|e| match e {
                Error::InvalidArgument(why) => {
                    Error::InvalidArgument(format!("{why} (index {:?})", self.name))
                }
                e => e,
            })
    }

    pub(super) fn covers(&self, key: &[u8]) -> bool {
        key.starts_with(&self.prefix)
    }

    /// Whether some key of `[start, end)` starts with the prefix.
    fn meets_range(&self, start: &[u8], end: &[u8]) -> bool {
        let below_prefix_end = match shale::prefix_successor(&self.prefix) {
            Some(prefix_end) => start < prefix_end.as_slice(),
            None => true,
        };
        below_prefix_end && end > self.prefix.as_slice() && start < end
    }
}

/// The pending changes and the condition variable everyone waits on.
pub(super) struct Queue {
    pub pending: Mutex<Pending>,
    /// Signalled when changes are queued or applied, on failure and at shutdown.
    pub cv: Condvar,
    /// The bound on queued bytes ([`IndexOptions::queue_bytes`]).
    pub bound: usize,
}

impl Queue {
    pub(super) fn lock(&self) -> MutexGuard<'_, Pending> {
        lock(&self.pending)
    }

    /// Wait until the queue has room for `bytes` more: nothing below half the bound; a
    /// delay in proportion to how far past half it is (at the rate the workers drain);
    /// a wait for the workers at the bound. Counted in the stall statistics.
    fn make_room(&self, bytes: usize) -> Result<()> {
        let soft = self.bound / 2;
        let started = Instant::now();
        let mut waited = false;
        let mut p = self.lock();
        loop {
            if let Some(why) = &p.failure {
                return Err(Error::Index(why.clone()));
            }
            if p.shutting_down || p.queued_bytes <= soft {
                break;
            }
            waited = true;
            if p.queued_bytes >= self.bound {
                p = self.cv.wait(p).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            // Slowed down: the time the workers take to drain this write's bytes, scaled
            // up as the queue nears the bound.
            let pressure = (p.queued_bytes - soft) as f64 / (self.bound - soft).max(1) as f64;
            let secs = bytes as f64 / p.drain_bytes_per_sec.max(1.0) * pressure
                / (1.0 - pressure).max(0.05);
            let deadline = Instant::now() + Duration::from_secs_f64(secs.min(1.0));
            while Instant::now() < deadline && !p.shutting_down && p.failure.is_none() {
                let left = deadline.saturating_duration_since(Instant::now());
                p = self
                    .cv
                    .wait_timeout(p, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            break;
        }
        if waited {
            p.stalls += 1;
            p.stall_micros += started.elapsed().as_micros() as u64;
        }
        Ok(())
    }
}

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
            // `check` refused range deletes that reach the prefix.
            if entry.kind == ValueKind::RangeDelete || !self.covers(&entry) {
                continue;
            }
            let seq = first.0 + i as u64;
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
            if entry.kind == ValueKind::RangeDelete && self.spec.meets_range(entry.key, entry.value)
            {
                return Err(Error::invalid(format!(
                    "delete_range over keys of index {:?} is not supported: delete them one \
                     by one",
                    self.spec.name
                )));
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
            Some(core) => core.copy_into(&super::index_dir(db_dir, &self.spec.name)),
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

//! The queue between a database's writes and an index's workers: changes in commit order,
//! numbered by tickets; the tickets applied so far (read-your-writes for searches); the
//! **horizon**, the least sequence number a change still to be applied has (see
//! `keyed_graph.rs` for why the key map needs it); and the bytes queued, which
//! [`super::VectorIndexOptions::queue_bytes`] bounds.
//!
//! Thread safety: `Pending` lives in the mutex of the index's [`Queue`], next to the
//! condition variable that workers, searches and writers waiting for room share.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::sync::lock;
use shale::error::{Error, Result};

/// What a change does to its key.
#[derive(Debug)]
pub(crate) enum Payload {
    /// The key holds this text now: embed it.
    Text(String),
    /// The key holds a vector value with this vector now.
    Vector(Vec<f32>),
    /// The key holds nothing the index covers any more (deleted, or a value outside it).
    Delete,
    /// Every key from the change's key (inclusive) to `end` (exclusive) is deleted.
    DeleteRange { end: Vec<u8> },
}

/// A write the index has yet to apply.
#[derive(Debug)]
pub(crate) struct Change {
    pub key: Vec<u8>,
    pub seq: u64,
    /// The hash of the value (`value.rs`); 0 for a delete.
    pub hash: u64,
    pub payload: Payload,
}

impl Change {
    /// The bytes the change holds in the queue, as the bound counts them.
    pub fn bytes(&self) -> usize {
        let payload = match &self.payload {
            Payload::Text(t) => t.len(),
            Payload::Vector(v) => 4 * v.len(),
            Payload::Delete => 0,
            Payload::DeleteRange { end } => end.len(),
        };
        self.key.len() + payload
    }
}

/// The queue of changes, numbered by tickets in the order they were queued (which is the
/// order of their sequence numbers: writes queue under the database's log lock).
#[derive(Default)]
pub(super) struct Pending {
    pub(super) queue: VecDeque<(u64, Change)>,
    /// The ticket the next change gets; tickets start at 1.
    pub(super) next_ticket: u64,
    /// Batches taken by workers and not yet applied: first ticket -> the least sequence
    /// number of its changes.
    pub(super) in_flight: BTreeMap<u64, u64>,
    /// Every ticket up to this one is applied.
    pub(super) applied_through: u64,
    pub(super) shutting_down: bool,
    /// The first failure of a worker (the embedder's); searches and writes report it.
    pub(super) failure: Option<String>,
    /// Bytes of the queued changes (`Change::bytes`), in flight ones not counted.
    pub(super) queued_bytes: usize,
    /// Writers that waited for room, and the microseconds they waited.
    pub(super) stalls: u64,
    pub(super) stall_micros: u64,
    /// Bytes per second the workers drained, a moving average, for the writers' slowdown.
    pub(super) drain_bytes_per_sec: f64,
}

impl Pending {
    pub(super) fn new() -> Pending {
        Pending {
            next_ticket: 1,
            drain_bytes_per_sec: 1e6,
            ..Pending::default()
        }
    }

    /// Queue `changes` (in the order given, which must be the order of their sequence
    /// numbers and after every change queued before).
    pub(super) fn push(&mut self, changes: impl IntoIterator<Item = Change>) {
        for change in changes {
            self.queued_bytes += change.bytes();
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            self.queue.push_back((ticket, change));
        }
    }

    /// Queue `changes`, all older than every change queued so far, in front of them: what
    /// an open derived from the data as of the attach of its hook, while the hook queued
    /// later writes.
    pub(super) fn push_front(&mut self, changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        let n = changes.len() as u64;
        // Renumber: the new changes take tickets 1..=n, the queued ones move up by n.
        for (ticket, _) in &mut self.queue {
            *ticket += n;
        }
        for (i, change) in changes.into_iter().enumerate().rev() {
            self.queued_bytes += change.bytes();
            self.queue.push_front((1 + i as u64, change));
        }
        self.next_ticket += n;
    }

    /// Take up to `n` changes from the front for a worker; `None` if the queue is empty.
    pub(super) fn take(&mut self, n: usize) -> Option<(u64, Vec<Change>)> {
        let n = self.queue.len().min(n);
        if n == 0 {
            return None;
        }
        let taken: Vec<(u64, Change)> = self.queue.drain(..n).collect();
        let first = taken.first().map_or(0, |(t, _)| *t);
        let min_seq = taken.iter().map(|(_, c)| c.seq).min().unwrap_or(u64::MAX);
        let bytes: usize = taken.iter().map(|(_, c)| c.bytes()).sum();
        self.queued_bytes = self.queued_bytes.saturating_sub(bytes);
        self.in_flight.insert(first, min_seq);
        Some((first, taken.into_iter().map(|(_, c)| c).collect()))
    }

    /// A worker finished the batch that starts at ticket `first`: every ticket below the
    /// oldest one queued or in flight is applied.
    pub(super) fn finish(&mut self, first: u64) {
        self.in_flight.remove(&first);
        let oldest_waiting = self.queue.front().map(|(t, _)| *t);
        let oldest_running = self.in_flight.keys().next().copied();
        self.applied_through = match (oldest_waiting, oldest_running) {
            (None, None) => self.next_ticket.saturating_sub(1),
            (Some(a), None) | (None, Some(a)) => a - 1,
            (Some(a), Some(b)) => a.min(b) - 1,
        };
    }

    /// Every change still to be applied, queued or in flight, has a sequence number at
    /// least this (`u64::MAX` when none is outstanding).
    pub(super) fn horizon(&self) -> u64 {
        let queued = self.queue.front().map_or(u64::MAX, |(_, c)| c.seq);
        let running = self.in_flight.values().copied().min().unwrap_or(u64::MAX);
        queued.min(running)
    }

    /// The last ticket issued.
    pub(super) fn last_ticket(&self) -> u64 {
        self.next_ticket.saturating_sub(1)
    }
}

/// The pending changes and the condition variable everyone waits on.
pub(super) struct Queue {
    pub pending: Mutex<Pending>,
    /// Signalled when changes are queued or applied, on failure and at shutdown.
    pub cv: Condvar,
    /// The bound on queued bytes ([`super::VectorIndexOptions::queue_bytes`]).
    pub bound: usize,
}

impl Queue {
    pub(super) fn lock(&self) -> MutexGuard<'_, Pending> {
        lock(&self.pending)
    }

    /// Wait until the queue has room for `bytes` more: nothing below half the bound; a
    /// delay in proportion to how far past half it is (at the rate the workers drain);
    /// a wait for the workers at the bound. Counted in the stall statistics.
    pub(super) fn make_room(&self, bytes: usize) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(seq: u64) -> Change {
        Change {
            key: b"k".to_vec(),
            seq,
            hash: 0,
            payload: Payload::Delete,
        }
    }

    #[test]
    fn the_horizon_and_applied_through_follow_the_oldest_outstanding_change() {
        let mut p = Pending::new();
        assert_eq!(p.horizon(), u64::MAX);
        p.push([delete(10), delete(11), delete(12)]);
        assert_eq!((p.horizon(), p.queued_bytes), (10, 3));
        let (a, _) = p.take(2).unwrap();
        let (b, _) = p.take(2).unwrap();
        assert_eq!((a, b), (1, 3));
        assert_eq!(p.horizon(), 10, "the first batch is still in flight");
        p.finish(b);
        assert_eq!(p.applied_through, 0, "ticket 1 is not applied yet");
        assert_eq!(p.horizon(), 10);
        p.finish(a);
        assert_eq!((p.applied_through, p.horizon()), (3, u64::MAX));
        assert!(p.take(1).is_none());
        assert_eq!(p.queued_bytes, 0);
    }
}

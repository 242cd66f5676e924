//! The queue between writers and the embed workers of the semantic index: changes
//! numbered by tickets, the tickets applied so far (read-your-writes for searches), and the
//! **horizon**, the least sequence number a change still to be applied can have (see the
//! module comment of `semantic/mod.rs` for why the key map needs it).
//!
//! Thread safety: `Pending` lives in the index's `pending` mutex; a [`Registration`] takes
//! that mutex itself, so it must not be created or dropped while it is held.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use crate::sync::lock;

/// A write the index has yet to apply.
#[derive(Debug)]
pub(crate) struct Change {
    pub key: Vec<u8>,
    pub seq: u64,
    /// The new text, or `None` for a delete.
    pub text: Option<String>,
}

/// The queue of changes, numbered by tickets in the order they were queued.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) queue: VecDeque<(u64, Change)>,
    /// The ticket the next change gets; tickets start at 1.
    pub(super) next_ticket: u64,
    /// Ticket ranges taken by workers and not yet applied: first -> last.
    pub(super) in_flight: BTreeMap<u64, u64>,
    /// Every ticket up to this one is applied.
    pub(super) applied_through: u64,
    pub(super) shutting_down: bool,
    /// The first embedding failure; searches report it.
    pub(super) failure: Option<String>,
    /// A multiset of lower bounds of the sequence numbers of changes not yet applied: one
    /// per writer, held from before its write until its changes are applied (see
    /// [`Registration`]), and one for the texts an open queued for embedding. Its least
    /// element is the **horizon**: no change older than it can still reach the index. (So
    /// a long re-embedding after an open, or a large backlog, keeps every delete applied
    /// meanwhile until it is through.)
    lower_bounds: BTreeMap<u64, usize>,
    /// The lower bound of each queued write, by the last ticket of its changes: released
    /// once `applied_through` reaches that ticket.
    bound_by_ticket: BTreeMap<u64, u64>,
}

impl Pending {
    pub(super) fn new() -> Pending {
        Pending {
            next_ticket: 1,
            ..Pending::default()
        }
    }

    /// After a worker took or finished a batch: every ticket below the oldest one queued
    /// or in flight is applied; writers whose changes all are let go of their bounds.
    pub(super) fn recompute_applied(&mut self) {
        let oldest_waiting = self.queue.front().map(|(t, _)| *t);
        let oldest_running = self.in_flight.keys().next().copied();
        self.applied_through = match (oldest_waiting, oldest_running) {
            (None, None) => self.next_ticket.saturating_sub(1),
            (Some(a), None) | (None, Some(a)) => a - 1,
            (Some(a), Some(b)) => a.min(b) - 1,
        };
        while let Some((&last, &lower)) = self.bound_by_ticket.first_key_value() {
            if last > self.applied_through {
                break;
            }
            self.bound_by_ticket.pop_first();
            self.release(lower);
        }
    }

    fn hold(&mut self, lower: u64) {
        *self.lower_bounds.entry(lower).or_default() += 1;
    }

    fn release(&mut self, lower: u64) {
        if let Some(n) = self.lower_bounds.get_mut(&lower) {
            *n -= 1;
            if *n == 0 {
                self.lower_bounds.remove(&lower);
            }
        }
    }

    /// Queue `changes` (in order) under the lower bound a [`Registration`] held.
    fn push(&mut self, changes: Vec<Change>, lower: u64) {
        if changes.is_empty() {
            self.release(lower);
            return;
        }
        for change in changes {
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            self.queue.push_back((ticket, change));
        }
        self.bound_by_ticket.insert(self.next_ticket - 1, lower);
    }

    /// Every change still to be applied, queued or not yet, has a sequence number at
    /// least this (`u64::MAX` when none is outstanding).
    pub(super) fn horizon(&self) -> u64 {
        self.lower_bounds.keys().next().copied().unwrap_or(u64::MAX)
    }
}

/// A writer's claim, taken before its write, that the changes it will queue have sequence
/// numbers of at least `lower`. While it (or the changes it queued) is outstanding, the
/// index keeps what it knows about deleted keys from `lower` on, so that none of those
/// changes, applied late, can revive a key deleted after it. Dropped without queueing
/// (the write failed), it lets go.
pub(crate) struct Registration<'a> {
    pending: &'a Mutex<Pending>,
    lower: u64,
    queued: bool,
}

impl<'a> Registration<'a> {
    pub(super) fn new(pending: &'a Mutex<Pending>, lower: u64) -> Registration<'a> {
        lock(pending).hold(lower);
        Registration {
            pending,
            lower,
            queued: false,
        }
    }

    /// Queue the write's `changes` (in order); the bound stays held until they are applied.
    pub(super) fn queue(mut self, changes: Vec<Change>) {
        self.queued = true;
        lock(self.pending).push(changes, self.lower);
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if !self.queued {
            lock(self.pending).release(self.lower);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(seq: u64) -> Change {
        Change {
            key: b"k".to_vec(),
            seq,
            text: None,
        }
    }

    /// A worker takes the oldest queued change and applies it.
    fn apply_one(p: &mut Pending) {
        p.queue.pop_front();
        p.recompute_applied();
    }

    #[test]
    fn the_horizon_holds_until_a_writers_changes_are_applied() {
        let mut p = Pending::new();
        assert_eq!(p.horizon(), u64::MAX);
        p.hold(10); // writer A registers, then writer B
        p.hold(12);
        p.push(vec![delete(13), delete(14)], 12); // B queues tickets 1 and 2
        assert_eq!(p.horizon(), 10, "A may still write sequence number 10");
        p.push(Vec::new(), 10); // A's write queued nothing
        assert_eq!(p.horizon(), 12);
        apply_one(&mut p);
        assert_eq!(p.horizon(), 12, "B's ticket 2 is still queued");
        apply_one(&mut p);
        assert_eq!(p.horizon(), u64::MAX);
    }
}

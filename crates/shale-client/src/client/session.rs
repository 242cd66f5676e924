//! The client's sessions (docs/replication.md, "Exactly-once writes"), one per group (a
//! session is a group's: its id is an index in the group's log): which session writes go
//! in, and the numbers of the writes in it. The client opens a group's session at its
//! first write there, numbers each write, and sends every try of a write with the same
//! number and the lowest number it still awaits.
//!
//! Thread safety: a `Session` is `Send + Sync`; concurrent writes each take their own
//! number, and one opening at a time runs (the others wait for its id).

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::pb;

/// The client's sessions, by group.
#[derive(Default)]
pub(super) struct Sessions {
    by_group: Mutex<HashMap<u64, Arc<Session>>>,
}

impl Sessions {
    /// The session of `group`'s writes.
    pub(super) fn of(&self, group: u64) -> Arc<Session> {
        let mut by_group = self.by_group.lock().unwrap_or_else(|e| e.into_inner());
        by_group.entry(group).or_default().clone()
    }
}

/// A client's session: its id, once opened, and its writes' numbers.
#[derive(Default)]
pub(super) struct Session {
    /// The session's id; `None` until opened, and again after the cluster closed it.
    id: tokio::sync::Mutex<Option<u64>>,
    numbers: Mutex<Numbers>,
}

/// The numbers of the writes in the session: the last one given, and those awaiting an
/// answer.
#[derive(Default)]
struct Numbers {
    last: u64,
    awaited: BTreeSet<u64>,
}

impl Session {
    fn numbers(&self) -> MutexGuard<'_, Numbers> {
        self.numbers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session's id, opened now by `open` if there is none.
    ///
    /// # Errors
    /// What `open` fails with.
    pub(super) async fn id<F, Fut, E>(&self, open: F) -> Result<u64, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<u64, E>>,
    {
        let mut id = self.id.lock().await;
        if let Some(id) = *id {
            return Ok(id);
        }
        let opened = open().await?;
        *id = Some(opened);
        Ok(opened)
    }

    /// Forget `session`, which the cluster closed, unless another was opened since.
    pub(super) async fn closed(&self, session: u64) {
        let mut id = self.id.lock().await;
        if *id == Some(session) {
            *id = None;
        }
    }

    /// A new write's number, awaited until [`Session::answered`].
    pub(super) fn number(&self) -> u64 {
        let mut n = self.numbers();
        n.last += 1;
        let seq = n.last;
        n.awaited.insert(seq);
        seq
    }

    /// The write numbered `seq` has its answer (or failed for good).
    pub(super) fn answered(&self, seq: u64) {
        self.numbers().awaited.remove(&seq);
    }

    /// Where a try of the write numbered `seq` goes in `session`, with the lowest number
    /// still awaited.
    pub(super) fn at(&self, session: u64, seq: u64) -> pb::SessionSeq {
        let lowest_awaited = self.numbers().awaited.first().copied().unwrap_or(seq);
        pb::SessionSeq {
            session,
            seq,
            lowest_awaited,
        }
    }
}

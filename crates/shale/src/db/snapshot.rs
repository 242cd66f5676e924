//! Snapshots: a pinned sequence number, registered so compaction keeps what it needs.
//!
//! The registry is a sorted multiset of pinned sequence numbers behind its own small mutex;
//! taking a snapshot is an atomic load (the visible sequence number) plus an insert there.
//! Compaction reads the registry once per job.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::lock;
use crate::key::SeqNo;

/// Pinned sequence numbers and how many snapshots pin each.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    pinned: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    pub fn pin(self: &Arc<Self>, seq: SeqNo) -> Snapshot {
        *lock(&self.pinned).entry(seq).or_insert(0) += 1;
        Snapshot {
            seq,
            list: Arc::clone(self),
        }
    }

    /// Every pinned sequence number, ascending.
    pub fn pinned(&self) -> Vec<SeqNo> {
        lock(&self.pinned).keys().copied().collect()
    }

    fn unpin(&self, seq: SeqNo) {
        let mut pinned = lock(&self.pinned);
        if let Some(count) = pinned.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                pinned.remove(&seq);
            }
        }
    }
}

/// A consistent point-in-time view: reads through it see exactly the writes acknowledged
/// before it was taken, whatever flushes and compactions happen later. Released on drop.
#[derive(Debug)]
pub struct Snapshot {
    seq: SeqNo,
    list: Arc<SnapshotList>,
}

impl Snapshot {
    /// The sequence number this snapshot reads at.
    pub fn seq(&self) -> SeqNo {
        self.seq
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.list.unpin(self.seq);
    }
}

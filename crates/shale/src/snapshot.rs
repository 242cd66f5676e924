//! Snapshots: a pinned sequence number, registered so compaction keeps what it needs.
//!
//! The registry is a sorted multiset of pinned sequence numbers behind its own small mutex;
//! taking a snapshot is an atomic load (the visible sequence number) and an insert, both
//! under that mutex.
//! Compaction reads the registry once per job.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::key::SeqNo;
use crate::sync::lock;

/// Pinned sequence numbers and how many snapshots pin each.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    pinned: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// Pin the sequence number `current` returns, read under the registry's lock: a
    /// compaction that lists the pinned numbers either sees this one or ran its listing
    /// before it was read, when every entry it compacts was already at or below it.
    /// (Read first and pinned after, a compaction could list the pins in between and
    /// drop the version this snapshot needs.)
    pub fn pin_current(self: &Arc<Self>, current: impl FnOnce() -> SeqNo) -> Snapshot {
        let mut pinned = lock(&self.pinned);
        let seq = current();
        *pinned.entry(seq).or_insert(0) += 1;
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

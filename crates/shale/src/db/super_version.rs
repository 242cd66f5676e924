//! The `SuperVersion`: everything a reader needs (active memtable, frozen memtables, live
//! SSTables), bundled so that one pointer load gives a consistent view.
//!
//! Readers clone the `Arc` out of the cell; a flush or memtable switch stores a new one.
//! Old super versions (and the memtables and files they pin) are freed when their last
//! reader drops them.

use std::sync::{Arc, Mutex};

use crate::memtable::MemTable;
use crate::version::Version;

/// A consistent view of the whole tree.
pub(crate) struct SuperVersion {
    pub mem: Arc<MemTable>,
    /// Frozen memtables, newest first.
    pub imm: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
}

/// Holds the current super version. The critical section is a pointer copy and a
/// reference-count increment; it never grows with the size of the tree.
pub(crate) struct SuperVersionCell {
    current: Mutex<Arc<SuperVersion>>,
}

impl SuperVersionCell {
    pub fn new(sv: Arc<SuperVersion>) -> Self {
        SuperVersionCell {
            current: Mutex::new(sv),
        }
    }

    pub fn load(&self) -> Arc<SuperVersion> {
        Arc::clone(&super::lock(&self.current))
    }

    pub fn store(&self, sv: Arc<SuperVersion>) {
        let old = std::mem::replace(&mut *super::lock(&self.current), sv);
        // Drop the old one outside the lock: it may free a whole memtable.
        drop(old);
    }
}

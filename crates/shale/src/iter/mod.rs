//! Iteration over internal keys.
//!
//! Every sorted source (a memtable, a data block, an SSTable, a level, the merge of all of
//! them) implements [`InternalIterator`]. Keys are encoded internal keys (see `key.rs`) and
//! are visited in [`crate::key::compare_internal`] order. Errors surface from the movement
//! that hit them; after an error the iterator is invalid.

use crate::error::Result;

/// A cursor over entries sorted by internal key.
pub trait InternalIterator {
    /// True if the cursor is on an entry.
    fn valid(&self) -> bool;
    /// Move to the first entry.
    fn seek_to_first(&mut self) -> Result<()>;
    /// Move to the last entry.
    fn seek_to_last(&mut self) -> Result<()>;
    /// Move to the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Move to the next entry. Requires `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Move to the previous entry. Requires `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
}

mod db_iter;
mod merge;

pub use db_iter::DbIter;
pub use merge::{MergingIter, VecIter};

impl<T: InternalIterator + ?Sized> InternalIterator for Box<T> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
}

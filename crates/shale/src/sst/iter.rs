//! [`TableIter`]: a two-level iterator over an SSTable. The first level walks the index
//! block (one entry per data block, keyed by the block's last key); the second walks the
//! data block the index entry points at, read through `Table::read_block`.
//!
//! ```text
//! index:  [k9 -> blk0] [k20 -> blk1] [k31 -> blk2]
//!            |            |
//! data:   blk0: k1..k9   blk1: k10..k20 ...
//! ```
//!
//! Thread safety: one iterator belongs to one thread; many may share the `Arc<Table>`.
//! Invariant: when `data` is `Some`, it iterates the block named by `index`'s current
//! entry (`data_handle`). After an error the iterator is invalid until the next seek.

use std::sync::Arc;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::sst::block::BlockIter;
use crate::sst::format::BlockHandle;
use crate::sst::reader::Table;

/// Iterates every entry of one table in internal-key order.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: Option<BlockHandle>,
    fill_cache: bool,
}

impl TableIter {
    pub(crate) fn new(table: Arc<Table>, fill_cache: bool) -> Self {
        let index = table.index.iter();
        TableIter {
            table,
            index,
            data: None,
            data_handle: None,
            fill_cache,
        }
    }

    /// Point `data` at the block of the current index entry (reusing it if unchanged).
    fn init_data_block(&mut self) -> Result<()> {
        if !self.index.valid() {
            self.data = None;
            self.data_handle = None;
            return Ok(());
        }
        let handle = self.table.decode_handle(self.index.value())?;
        if self.data.is_some() && self.data_handle == Some(handle) {
            return Ok(());
        }
        let block = self.table.read_block(handle, self.fill_cache)?;
        self.data = Some(block.iter());
        self.data_handle = Some(handle);
        Ok(())
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    /// Past the end of a data block: move on to the first entry of the next non-empty one.
    fn skip_empty_blocks_forward(&mut self) -> Result<()> {
        while !self.data_valid() {
            if !self.index.valid() {
                self.data = None;
                return Ok(());
            }
            self.index.next()?;
            self.init_data_block()?;
            if let Some(d) = &mut self.data {
                d.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Before the start of a data block: move back to the last entry of the previous one.
    fn skip_empty_blocks_backward(&mut self) -> Result<()> {
        while !self.data_valid() {
            if !self.index.valid() {
                self.data = None;
                return Ok(());
            }
            self.index.prev()?;
            self.init_data_block()?;
            if let Some(d) = &mut self.data {
                d.seek_to_last()?;
            }
        }
        Ok(())
    }

    /// Leave the iterator invalid if `r` is an error, so a failed move cannot be mistaken
    /// for a position.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.data = None;
            self.data_handle = None;
        }
        r
    }

    fn do_seek(&mut self, target: Option<&[u8]>, last: bool) -> Result<()> {
        match (target, last) {
            (Some(t), _) => self.table.seek_index(&mut self.index, t)?,
            (None, false) => self.index.seek_to_first()?,
            (None, true) => self.index.seek_to_last()?,
        }
        self.init_data_block()?;
        if let Some(d) = &mut self.data {
            match (target, last) {
                (Some(t), _) => d.seek(t)?,
                (None, false) => d.seek_to_first()?,
                (None, true) => d.seek_to_last()?,
            }
        }
        if last {
            self.skip_empty_blocks_backward()
        } else {
            self.skip_empty_blocks_forward()
        }
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = self.do_seek(None, false);
        self.guard(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = self.do_seek(None, true);
        self.guard(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.do_seek(Some(target), false);
        self.guard(r)
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        let r = match &mut self.data {
            Some(d) => d.next().and_then(|()| self.skip_empty_blocks_forward()),
            None => Ok(()),
        };
        self.guard(r)
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        let r = match &mut self.data {
            Some(d) => d.prev().and_then(|()| self.skip_empty_blocks_backward()),
            None => Ok(()),
        };
        self.guard(r)
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map(|d| d.key()).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map(|d| d.value()).unwrap_or_default()
    }
}

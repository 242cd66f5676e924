//! [`TableIter`]: a two-level iterator over an SSTable, and [`Table::iter`], which makes one.
//! The first level walks the index block (one entry per data block, keyed by the block's
//! last key); the second walks the data block the index entry points at, read through
//! `Table::read_block`.
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

impl Table {
    /// A two-level iterator over every entry; blocks it reads go into the cache.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter::new(Arc::clone(self), true)
    }

    /// [`Table::iter`], choosing whether blocks read go into the cache (compactions and
    /// one-off scans should not evict the working set).
    pub fn iter_opt(self: &Arc<Self>, fill_cache: bool) -> TableIter {
        TableIter::new(Arc::clone(self), fill_cache)
    }
}

/// The first read-ahead of a run of sequential block reads, in bytes; each next one is
/// twice as long, up to [`READ_AHEAD_MAX`].
const READ_AHEAD_MIN: u64 = 64 << 10;
const READ_AHEAD_MAX: u64 = 1 << 20;

/// Read-ahead for an iterator that reads a table's blocks from the file in order (a scan,
/// a compaction input), RocksDB's auto-readahead: the third of three block reads in a row
/// that miss the block cache, each starting where the one before ended, asks the file for
/// the bytes ahead ([`Table::read_ahead`]), and the run asks again for the next window,
/// twice as long, before it reaches the end of what it asked for. A point read, a short
/// scan (a seek and a block or two), or a scan served by the block cache never asks: the
/// system call would cost more than it saves.
#[derive(Debug, Default)]
struct ReadAhead {
    /// Where the last block read from the file ended.
    next: u64,
    /// Block reads in a row, each where the one before ended, before the last one.
    run: u32,
    /// Bytes asked for so far: up to this offset.
    until: u64,
    /// The next window; 0 until a run starts.
    window: u64,
}

impl ReadAhead {
    /// `handle`, which missed the block cache, is about to be read from the file.
    fn on_read(&mut self, table: &Table, handle: BlockHandle) {
        let Some(end) = handle.end_with_trailer() else {
            return;
        };
        let in_run = handle.offset == self.next;
        self.next = end;
        self.run = if in_run { self.run + 1 } else { 0 };
        if self.run < 2 {
            self.window = 0;
            return;
        }
        if self.window == 0 {
            self.window = READ_AHEAD_MIN;
            self.until = handle.offset;
        }
        // Ask for the next window once less than a quarter of it is left ahead.
        if self.until.saturating_sub(end) < self.window / 4 {
            let from = self.until.max(handle.offset);
            table.read_ahead(from, self.window);
            self.until = from + self.window;
            self.window = (self.window * 2).min(READ_AHEAD_MAX);
        }
    }
}

/// Iterates every entry of one table in internal-key order.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    data_handle: Option<BlockHandle>,
    fill_cache: bool,
    read_ahead: ReadAhead,
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
            read_ahead: ReadAhead::default(),
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
        let block = match self.table.cached_block(handle) {
            Some(block) => block,
            None => {
                self.read_ahead.on_read(&self.table, handle);
                self.table.load_block(handle, self.fill_cache)?
            }
        };
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

//! `LevelIter`: iterates over the files of one level (L1 and deeper), whose key ranges do
//! not overlap and are sorted, as if they were one table. Only the file under the cursor has
//! an open table iterator (its reader comes from the table cache); moving past its end opens
//! the next one.

use std::sync::Arc;

use super::TableFile;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::sst::TableIter;

/// A concatenation of sorted, non-overlapping tables.
pub struct LevelIter {
    tables: Vec<Arc<TableFile>>,
    fill_cache: bool,
    index: usize,
    current: Option<TableIter>,
}

impl LevelIter {
    /// `tables` must be sorted by key and must not overlap. `fill_cache`: whether blocks
    /// read go into the block cache.
    pub fn new(tables: Vec<Arc<TableFile>>, fill_cache: bool) -> Self {
        LevelIter {
            tables,
            fill_cache,
            index: 0,
            current: None,
        }
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        self.current = None;
        if let Some(file) = self.tables.get(index) {
            self.current = Some(file.table()?.iter_opt(self.fill_cache));
        }
        Ok(())
    }

    /// Move forward over exhausted tables.
    fn skip_empty_forward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index + 1 >= self.tables.len() {
                self.current = None;
                return Ok(());
            }
            self.open(self.index + 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Move backward over exhausted tables.
    fn skip_empty_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index == 0 {
                self.current = None;
                return Ok(());
            }
            self.open(self.index - 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_empty_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.open(self.tables.len().saturating_sub(1))?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_empty_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        // The first table whose largest key is >= target.
        let i = self
            .tables
            .partition_point(|t| compare_internal(t.meta.largest.encoded(), target).is_lt());
        self.open(i)?;
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_empty_forward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_empty_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.skip_empty_backward()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }
}

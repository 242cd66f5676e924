//! Step 2 of a repair: survey each SSTable block by block, and read the entries of the
//! blocks that survive.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{compare_internal, parse_internal_key};
use crate::sst::{BlockHandle, Table};
use crate::verify::{table_index, Problem};

use super::report::RepairReport;

/// The readable data blocks of one SSTable.
pub(super) struct Survey {
    pub(super) table: Arc<Table>,
    blocks: Vec<BlockHandle>,
    pub(super) dropped: u64,
}

/// Open the table at `path` and check each data block: its checksum, its entries, and
/// that its keys follow the previous readable block's. `None` if the table cannot be
/// opened or its index read.
pub(super) fn survey_table(
    fs: &dyn FileSystem,
    path: &Path,
    report: &mut RepairReport,
) -> Option<Survey> {
    let opened = fs
        .open(path)
        .and_then(|file| Table::open(file, path.to_owned()))
        .map(Arc::new)
        .and_then(|table| table_index(&table).map(|index| (table, index)));
    let (table, index) = match opened {
        Ok(found) => found,
        Err(e) => {
            report.problems.push(Problem::from_error(e, path));
            return None;
        }
    };
    let mut survey = Survey {
        table,
        blocks: Vec::with_capacity(index.len()),
        dropped: 0,
    };
    let mut previous: Option<Vec<u8>> = None;
    for entry in index {
        match read_entries(&survey.table, entry.handle, previous.as_deref()) {
            Ok(entries) => {
                if let Some((last, _)) = entries.last() {
                    previous = Some(last.clone());
                    survey.blocks.push(entry.handle);
                }
            }
            Err(e) => {
                survey.dropped += 1;
                report.blocks_dropped += 1;
                report.problems.push(Problem::from_error(e, path));
            }
        }
    }
    Some(survey)
}

/// The entries of the data block at `handle`, checked: internal keys, strictly ascending,
/// all after `after`.
pub(super) fn read_entries(
    table: &Table,
    handle: BlockHandle,
    after: Option<&[u8]>,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let block = table.read_block(handle, false)?;
    let mut it = block.iter();
    it.seek_to_first()?;
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    while it.valid() {
        let key = it.key();
        let previous = entries.last().map(|(k, _)| k.as_slice()).or(after);
        let ordered = previous.is_none_or(|p| compare_internal(p, key).is_lt());
        if parse_internal_key(key).is_none() || !ordered {
            return Err(Error::corruption(
                table.path(),
                handle.offset,
                "data block holds a malformed or out-of-order key",
            ));
        }
        entries.push((key.to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(entries)
}

/// The entries of a surveyed table, block by block, front to back: a cursor for the
/// merge, which only moves forward.
pub(super) struct SalvageIter {
    table: Arc<Table>,
    blocks: std::vec::IntoIter<BlockHandle>,
    entries: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    current: Option<(Vec<u8>, Vec<u8>)>,
}

impl SalvageIter {
    pub(super) fn new(survey: Survey) -> SalvageIter {
        SalvageIter {
            table: survey.table,
            blocks: survey.blocks.into_iter(),
            entries: Vec::new().into_iter(),
            current: None,
        }
    }

    fn backwards() -> Error {
        Error::invalid("repair reads a table front to back only")
    }
}

impl InternalIterator for SalvageIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        // Called once, by the merge, before any `next`.
        self.next()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Err(Self::backwards())
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        Err(Self::backwards())
    }
    fn next(&mut self) -> Result<()> {
        loop {
            if let Some(entry) = self.entries.next() {
                self.current = Some(entry);
                return Ok(());
            }
            let Some(handle) = self.blocks.next() else {
                self.current = None;
                return Ok(());
            };
            // The survey read this block whole; a failure now is a new one, not damage
            // to skip, so it ends the repair.
            self.entries = read_entries(&self.table, handle, None)?.into_iter();
        }
    }
    fn prev(&mut self) -> Result<()> {
        Err(Self::backwards())
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(k, _)| k)
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |(_, v)| v)
    }
}

//! [`TableBuilder`]: writes one SSTable front to back (layout in `sst/format.rs`).
//!
//! Thread safety: owned by the one thread running a flush or compaction job.
//! Invariants: keys arrive in strictly increasing internal-key order; every data block
//! written has exactly one index entry whose key is the block's last key; `offset` equals
//! the bytes appended to the file. After any error the builder is unusable and the caller
//! deletes the partial file.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{parse_internal_key, InternalKey, SeqNo, ValueKind};
use crate::options::{Compression, Options, MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::range_del::RangeTombstone;
use crate::sst::block::BlockBuilder;
use crate::sst::compress::{compress, MAX_RAW_BLOCK_BYTES};
use crate::sst::filter::BloomFilterBuilder;
use crate::sst::format::{
    encode_range_dels, encode_trailer, BlockHandle, CompressionType, Footer, FORMAT_VERSION,
    FORMAT_VERSION_RANGE_DELS,
};
use crate::sst::properties::TableProperties;

/// The SSTable-shaped subset of [`Options`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// Target uncompressed size of a data block; a block is cut once it reaches this.
    pub block_size: usize,
    /// Entries between restart points (at least 1).
    pub restart_interval: usize,
    /// Bloom filter bits per user key; 0 writes no filter block.
    pub filter_bits_per_key: u32,
    /// Compression of data and index blocks.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions::from(&Options::default())
    }
}

impl From<&Options> for TableOptions {
    fn from(o: &Options) -> Self {
        TableOptions {
            block_size: o.block_size,
            restart_interval: o.block_restart_interval,
            filter_bits_per_key: o.filter_bits_per_key,
            compression: o.compression,
        }
    }
}

impl TableOptions {
    /// How a flush, a compaction or a repair writes its tables into `level`: with the
    /// level's codec ([`Options::compression_for_level`]).
    pub fn for_level(o: &Options, level: usize) -> TableOptions {
        TableOptions {
            compression: o.compression_for_level(level),
            ..TableOptions::from(o)
        }
    }
}

/// What a finished table holds: what the manifest records about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSummary {
    pub file_size: u64,
    pub entries: u64,
    pub smallest: InternalKey,
    pub largest: InternalKey,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    /// Range tombstones in the table's range-del block.
    pub range_deletions: u64,
}

/// Appends blocks with their trailers and tracks the file offset.
struct BlockWriter {
    file: Box<dyn WritableFile>,
    offset: u64,
    scratch: Vec<u8>,
}

impl BlockWriter {
    fn write(&mut self, raw: &[u8], compression: Compression) -> Result<BlockHandle> {
        let ty = compress(compression, raw, &mut self.scratch);
        let stored = if ty == CompressionType::None {
            raw
        } else {
            &self.scratch
        };
        let handle = BlockHandle::new(self.offset, stored.len() as u64);
        self.file.append(stored)?;
        self.file.append(&encode_trailer(stored, ty))?;
        self.offset = handle
            .end_with_trailer()
            .ok_or_else(|| Error::invalid("SSTable larger than 2^64 bytes"))?;
        Ok(handle)
    }
}

/// Builds one SSTable. Call [`TableBuilder::add`] in key order, then [`TableBuilder::finish`].
pub struct TableBuilder {
    writer: BlockWriter,
    path: PathBuf,
    opts: TableOptions,
    data: BlockBuilder,
    index: BlockBuilder,
    filter: Option<BloomFilterBuilder>,
    /// The previous key added, whole (the data builder's copy is reset per block).
    last_key: Vec<u8>,
    smallest: Option<InternalKey>,
    props: TableProperties,
    handle_buf: Vec<u8>,
    /// Fragments for the range-del block (see `range_del.rs`), in the order it stores.
    range_dels: Vec<RangeTombstone>,
}

impl TableBuilder {
    /// Start a table in `file` (freshly created, empty) at `path`.
    ///
    /// # Panics
    /// If `opts.restart_interval` is 0.
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, opts: TableOptions) -> Self {
        let props = TableProperties {
            entries: 0,
            deletions: 0,
            data_blocks: 0,
            data_bytes: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            smallest_seq: SeqNo::MAX,
            largest_seq: SeqNo::ZERO,
            compression: opts.compression,
            filter_bits_per_key: opts.filter_bits_per_key,
            smallest: InternalKey::default(),
            largest: InternalKey::default(),
            range_dels: None,
        };
        let offset = file.len();
        TableBuilder {
            writer: BlockWriter {
                file,
                offset,
                scratch: Vec::new(),
            },
            path,
            data: BlockBuilder::new(opts.restart_interval),
            // Index entries are few and looked up by binary search: restart at every one.
            index: BlockBuilder::new(1),
            filter: (opts.filter_bits_per_key > 0)
                .then(|| BloomFilterBuilder::new(opts.filter_bits_per_key)),
            opts,
            last_key: Vec::new(),
            smallest: None,
            props,
            handle_buf: Vec::new(),
            range_dels: Vec::new(),
        }
    }

    /// Store `tombstones` (fragments, as [`crate::range_del::RangeDels::clipped`] gives
    /// them) in the table's range-del block. The table's key range grows to cover them.
    pub fn add_range_dels(&mut self, tombstones: Vec<RangeTombstone>) {
        self.range_dels.extend(tombstones);
    }

    /// Add an entry. `ikey` is an encoded internal key greater than every key added before.
    ///
    /// # Errors
    /// `InvalidArgument` if `ikey` is not an internal key or the key or value is too large;
    /// `Io` if writing a finished block fails.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = parse_internal_key(ikey)
            .ok_or_else(|| Error::invalid("SSTable key is not an internal key"))?;
        if parsed.user_key.len() > MAX_KEY_BYTES || value.len() > MAX_VALUE_BYTES {
            return Err(Error::invalid(format!(
                "entry with a {}-byte key and a {}-byte value exceeds the limits \
                 ({MAX_KEY_BYTES}, {MAX_VALUE_BYTES})",
                parsed.user_key.len(),
                value.len()
            )));
        }
        debug_assert!(
            self.smallest.is_none() || crate::key::compare_internal(ikey, &self.last_key).is_gt(),
            "TableBuilder keys must be strictly increasing"
        );
        if let Some(filter) = &mut self.filter {
            // Versions of one key are adjacent: hash each user key once.
            let first = self.smallest.is_none();
            if first || crate::key::user_key(&self.last_key) != parsed.user_key {
                filter.add_key(parsed.user_key);
            }
        }
        if self.smallest.is_none() {
            self.smallest = Some(InternalKey::new(parsed.user_key, parsed.seq, parsed.kind));
        }
        let p = &mut self.props;
        p.entries += 1;
        p.deletions += u64::from(parsed.kind == ValueKind::Delete);
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value.len() as u64;
        p.smallest_seq = p.smallest_seq.min(parsed.seq);
        p.largest_seq = p.largest_seq.max(parsed.seq);
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);

        self.data.add(ikey, value);
        if self.data.current_size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let handle = self
            .writer
            .write(self.data.finish(), self.opts.compression)?;
        self.props.data_blocks += 1;
        self.props.data_bytes += handle.size + crate::sst::format::BLOCK_TRAILER_LEN as u64;
        self.handle_buf.clear();
        handle.encode_varint(&mut self.handle_buf);
        // The index key is the block's last key: simple, and a seek for any key <= it
        // lands in this block or an earlier one.
        self.index.add(&self.last_key, &self.handle_buf);
        self.data.reset();
        Ok(())
    }

    /// Entries added so far.
    #[cfg(test)]
    pub fn num_entries(&self) -> u64 {
        self.props.entries
    }

    /// Bytes the file would have if finished now (roughly: metadata is estimated).
    pub fn estimated_file_size(&self) -> u64 {
        let pending = self.data.current_size_estimate() + self.index.current_size_estimate();
        self.writer.offset + pending as u64
    }

    /// Write the filter, the range-del block, properties, index and footer, then sync the
    /// file.
    ///
    /// # Errors
    /// `InvalidArgument` if no entry and no range tombstone was added; `Io` if a write or
    /// the sync fails.
    pub fn finish(mut self) -> Result<TableSummary> {
        self.flush_data_block()?;
        let points = match self.smallest.take() {
            Some(smallest) => {
                let largest = InternalKey::from_encoded(self.last_key.clone())
                    .ok_or_else(|| Error::invalid("last key is not an internal key"))?;
                Some((smallest, largest))
            }
            None => None,
        };
        let (smallest, largest) = match (points, self.range_del_bounds()) {
            (Some(p), None) | (None, Some(p)) => p,
            (Some((ps, pl)), Some((rs, rl))) => (ps.min(rs), pl.max(rl)),
            (None, None) => {
                return Err(Error::invalid(format!(
                    "refusing to finish an empty SSTable {}",
                    self.path.display()
                )))
            }
        };
        let filter = match &self.filter {
            Some(f) => Some(self.writer.write(&f.finish(), Compression::None)?),
            None => None,
        };
        let mut version = FORMAT_VERSION;
        if !self.range_dels.is_empty() {
            let block = encode_range_dels(&self.range_dels);
            let handle = self.writer.write(&block, Compression::None)?;
            self.props.range_dels = Some((handle, self.range_dels.len() as u64));
            for t in &self.range_dels {
                self.props.smallest_seq = self.props.smallest_seq.min(t.seq);
                self.props.largest_seq = self.props.largest_seq.max(t.seq);
            }
            version = FORMAT_VERSION_RANGE_DELS;
        }
        self.props.smallest = smallest.clone();
        self.props.largest = largest.clone();
        let properties = self.writer.write(&self.props.encode(), Compression::None)?;
        let index_block = self.index.finish();
        let codec = index_codec(index_block.len(), self.opts.compression);
        let index = self.writer.write(index_block, codec)?;
        let footer = Footer {
            filter,
            properties,
            index,
            version,
        };
        self.writer.file.append(&footer.encode())?;
        self.writer.file.sync()?;
        Ok(TableSummary {
            file_size: self.writer.file.len(),
            entries: self.props.entries,
            smallest,
            largest,
            smallest_seq: self.props.smallest_seq,
            largest_seq: self.props.largest_seq,
            range_deletions: self.range_dels.len() as u64,
        })
    }

    /// The key range the range tombstones cover, as internal keys: from the first start
    /// (at its newest tombstone) to the exclusive end of the last, written as that end at
    /// [`SeqNo::MAX`], which sorts before every entry of the end key (see
    /// [`InternalKey::is_range_end`]).
    fn range_del_bounds(&self) -> Option<(InternalKey, InternalKey)> {
        let first = self
            .range_dels
            .iter()
            .min_by(|a, b| crate::key::compare_bytes(&a.start, &b.start).then(b.seq.cmp(&a.seq)))?;
        let last = self
            .range_dels
            .iter()
            .max_by(|a, b| crate::key::compare_bytes(&a.end, &b.end))?;
        Some((
            InternalKey::new(&first.start, first.seq, ValueKind::RangeDelete),
            InternalKey::range_end(&last.end),
        ))
    }
}

/// The codec of an index block of `raw_len` bytes. A reader refuses to decompress more than
/// [`MAX_RAW_BLOCK_BYTES`] (a bound that holds for data blocks, whose size the writer
/// caps). An index has no such cap: a large table of long keys (a flush of a 1 GiB
/// memtable of 8 KiB keys) can need more, so that index is stored uncompressed, which
/// the reader takes at the file's own size.
fn index_codec(raw_len: usize, codec: Compression) -> Compression {
    if raw_len > MAX_RAW_BLOCK_BYTES {
        Compression::None
    } else {
        codec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_too_large_to_decompress_is_stored_as_it_is() {
        assert_eq!(index_codec(4096, Compression::Lz4), Compression::Lz4);
        assert_eq!(
            index_codec(MAX_RAW_BLOCK_BYTES, Compression::Zstd(3)),
            Compression::Zstd(3)
        );
        assert_eq!(
            index_codec(MAX_RAW_BLOCK_BYTES + 1, Compression::Lz4),
            Compression::None
        );
    }
}

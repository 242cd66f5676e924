//! [`Table`]: an open SSTable. The footer, index block, filter and properties are read and
//! verified once by [`Table::open`] and kept in memory; data blocks are read on demand
//! through one choke point, `read_block`, which consults the block cache.
//!
//! Thread safety: a `Table` is immutable after open and shared (`Arc`) by any number of
//! readers; `get` and `iter` only do positional reads. Invariant: every block handed out
//! passed its checksum and decompressed to a block whose restart array is valid.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, InternalKey, SeqNo, ValueKind};
use crate::perf::Timer;
use crate::range_del::RangeDels;
use crate::sst::block::{Block, BlockBytes, BlockIter, RestartWords};
use crate::sst::compress::decompress;
use crate::sst::filter::{BloomFilter, FilterKey};
use crate::sst::format::{
    decode_range_dels, decode_trailer, BlockHandle, CompressionType, Footer, BLOCK_TRAILER_LEN,
    FOOTER_LEN, FORMAT_VERSION, FORMAT_VERSION_RANGE_DELS,
};
use crate::sst::properties::TableProperties;
use crate::sst::{BlockCache, BlockKey};
use crate::trend::Trend;

/// Positional block reads over the block area of one file.
#[derive(Debug)]
struct BlockSource {
    file: Arc<dyn RandomAccessFile>,
    path: Arc<Path>,
    /// Where the footer starts: no block may reach past it.
    metadata_end: u64,
}

impl BlockSource {
    /// Read and checksum the block at `handle` and return its decompressed bytes: for an
    /// uncompressed block of a mapped file, a view into the mapping (no copy).
    fn read_raw(&self, handle: BlockHandle) -> Result<BlockBytes> {
        let corrupt = |reason: String| Error::corruption(&*self.path, handle.offset, reason);
        let end = handle
            .end_with_trailer()
            .filter(|&end| end <= self.metadata_end)
            .ok_or_else(|| {
                corrupt(format!(
                    "block handle ({}, {}) reaches past the block area ({} bytes)",
                    handle.offset, handle.size, self.metadata_end
                ))
            })?;
        // `end - offset` cannot underflow (`end_with_trailer` added to `offset`), and the
        // length is bounded by the file's, so the buffer is never larger than the file.
        let len = usize::try_from(end - handle.offset)
            .map_err(|_| corrupt(format!("block of {} bytes", handle.size)))?;
        let read = Timer::start();
        if let Some(map) = self.file.mapped() {
            // A mapped file: verify and decompress straight from the mapping.
            let buf = usize::try_from(handle.offset)
                .ok()
                .and_then(|start| map.get(start..start.checked_add(len)?))
                .ok_or_else(|| corrupt(format!("block of {len} bytes past end of file")))?;
            let (ty, stored) = self.verify(handle, buf)?;
            read.stop(|p| &mut p.get_block_read_nanos);
            if ty == CompressionType::None {
                // In range: `stored` is a prefix of `buf`, which was checked above.
                let start = usize::try_from(handle.offset).unwrap_or(usize::MAX);
                return BlockBytes::mapped(&self.file, start, stored.len())
                    .ok_or_else(|| corrupt("block outside the mapping".into()));
            }
            return self.inflate(handle, ty, stored).map(BlockBytes::owned);
        }
        let mut buf = vec![0u8; len];
        self.file.read_exact_at(handle.offset, &mut buf)?;
        let (ty, stored) = self.verify(handle, &buf)?;
        read.stop(|p| &mut p.get_block_read_nanos);
        if ty == CompressionType::None {
            let stored_len = stored.len();
            buf.truncate(stored_len);
            return Ok(BlockBytes::owned(buf));
        }
        self.inflate(handle, ty, stored).map(BlockBytes::owned)
    }

    /// Start loading the block at `handle` (and its trailer) into the CPU's caches, if
    /// the file is mapped and the handle lies within the block area; else do nothing.
    fn prefetch(&self, handle: BlockHandle) {
        let (Some(map), Some(end)) = (self.file.mapped(), handle.end_with_trailer()) else {
            return;
        };
        let range = usize::try_from(handle.offset)
            .ok()
            .zip(usize::try_from(end).ok());
        if let Some(bytes) = range.and_then(|(start, end)| map.get(start..end)) {
            crate::prefetch::prefetch_slice(bytes);
        }
    }

    /// Check the trailer of the block in `buf` (block and trailer) and split off the block.
    fn verify<'b>(
        &self,
        handle: BlockHandle,
        buf: &'b [u8],
    ) -> Result<(CompressionType, &'b [u8])> {
        let split = buf.len().saturating_sub(BLOCK_TRAILER_LEN);
        let (stored, trailer) = buf.split_at(split);
        let ty =
            decode_trailer(stored, trailer).map_err(|e| e.in_file(&self.path, handle.offset))?;
        Ok((ty, stored))
    }

    fn inflate(&self, handle: BlockHandle, ty: CompressionType, stored: &[u8]) -> Result<Vec<u8>> {
        let inflate = Timer::start();
        let block = decompress(ty, stored);
        inflate.stop(|p| &mut p.get_decompress_nanos);
        block.map_err(|reason| Error::corruption(&*self.path, handle.offset, reason))
    }
}

thread_local! {
    /// Whether this thread's recent point reads missed the block cache.
    static CACHE_MISSES: Trend = const { Trend::new() };
}

/// A point entry found by a read: its kind, sequence number and value.
pub(crate) type PointEntry = (ValueKind, SeqNo, Vec<u8>);

/// What one data block says about a point read.
enum BlockAnswer {
    /// The newest visible entry of the key, or `None` if the table has none (the first
    /// entry at or after the target belongs to another user key).
    Done(Option<PointEntry>),
    /// Every key of the block sorts before the target: the next block decides.
    Next,
}

/// Decode an index entry's value, a block handle, of the table at `path`; a bad one is
/// reported at `offset`.
fn decode_index_value(value: &[u8], path: &Path, offset: u64) -> Result<BlockHandle> {
    BlockHandle::decode_varint(value).map_err(|e| {
        let why = format!("bad block handle in index: {}", e.reason);
        Error::corruption(path, offset, why)
    })
}

/// The value of every entry of `index`, decoded, if every entry is a restart point (so
/// entry `i` is restart `i`, the position [`RestartWords`] speaks of); else `None`.
fn block_handles(index: &Arc<Block>, path: &Path, offset: u64) -> Result<Option<Vec<BlockHandle>>> {
    if index.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let mut handles = Vec::with_capacity(index.restart_count());
    let mut it = index.iter();
    it.seek_to_first()?;
    while it.valid() {
        handles.push(decode_index_value(it.value(), path, offset)?);
        it.next()?;
    }
    Ok((handles.len() == index.restart_count()).then_some(handles))
}

/// An open, verified SSTable.
#[derive(Debug)]
pub struct Table {
    source: BlockSource,
    /// The shared block cache and this table's id in it.
    cache: Option<(Arc<BlockCache>, u64)>,
    file_size: u64,
    pub(crate) index: Arc<Block>,
    /// The index's keys in brief, to narrow every seek in it (see `RestartWords`).
    pub(super) index_words: RestartWords,
    /// The handle of every data block, in index order, when every index entry is a
    /// restart point (as in every index this engine writes). With `index_words`, a point
    /// read then finds its block without touching the index block: see `get_unfiltered`.
    block_handles: Option<Vec<BlockHandle>>,
    filter: Option<BloomFilter>,
    properties: TableProperties,
    /// The range tombstones of a version 2 table, fragmented.
    range_dels: Option<Arc<RangeDels>>,
    /// Whether the cache admitted any of this table's blocks: a table that never had one
    /// cached has none to take out when it closes. Many tables never do: with more tables
    /// than `max_open_files`, most are opened for a read or two and closed again.
    cached_any: AtomicBool,
}

/// The range tombstones of the table, checked against the count its properties give and
/// the format version its footer names.
fn read_range_dels(
    source: &BlockSource,
    properties: &TableProperties,
    footer: &Footer,
) -> Result<Option<Arc<RangeDels>>> {
    match (properties.range_dels, footer.version) {
        (None, FORMAT_VERSION) => Ok(None),
        (Some((handle, count)), FORMAT_VERSION_RANGE_DELS) => {
            let block = source.read_raw(handle)?;
            let tombstones =
                decode_range_dels(&block).map_err(|e| e.in_file(&source.path, handle.offset))?;
            if tombstones.len() as u64 != count {
                let why = format!(
                    "range-del block holds {} tombstones, properties say {count}",
                    tombstones.len()
                );
                return Err(Error::corruption(&*source.path, handle.offset, why));
            }
            Ok(Some(Arc::new(RangeDels::new(&tombstones))))
        }
        _ => {
            let why = "properties and footer disagree on the range-del block";
            Err(Error::corruption(
                &*source.path,
                footer.properties.offset,
                why,
            ))
        }
    }
}

impl Table {
    /// Open the table in `file` and verify its footer, index, filter and properties.
    ///
    /// # Errors
    /// `Corruption` naming `path` and the offset of the damage; `Io` if a read fails.
    pub fn open(file: Arc<dyn RandomAccessFile>, path: PathBuf) -> Result<Table> {
        let path: Arc<Path> = Arc::from(path);
        let file_size = file.len();
        let metadata_end = file_size.checked_sub(FOOTER_LEN as u64).ok_or_else(|| {
            Error::corruption(
                &*path,
                0,
                format!("file of {file_size} bytes is too short to be an SSTable"),
            )
        })?;
        let mut footer_bytes = [0u8; FOOTER_LEN];
        file.read_exact_at(metadata_end, &mut footer_bytes)?;
        let footer = Footer::decode(&footer_bytes).map_err(|e| e.in_file(&path, metadata_end))?;
        let source = BlockSource {
            file,
            path,
            metadata_end,
        };
        let props_bytes = source.read_raw(footer.properties)?;
        let properties = TableProperties::decode(&props_bytes)
            .map_err(|e| e.in_file(&source.path, footer.properties.offset))?;
        let range_dels = read_range_dels(&source, &properties, &footer)?;
        let filter = match footer.filter {
            Some(handle) => Some(BloomFilter::new(source.read_raw(handle)?.into_vec())),
            None => None,
        };
        // On the heap even when the file is mapped: every read of the table searches the
        // index, and a view into the mapping would be page cache, which the kernel evicts
        // under memory pressure and faults back, with read-ahead, a page at a time.
        let index_data = BlockBytes::owned(source.read_raw(footer.index)?.into_vec());
        let index = Arc::new(Block::new(
            index_data,
            Arc::clone(&source.path),
            footer.index.offset,
        )?);
        let index_words = RestartWords::new(&index)?;
        let block_handles = block_handles(&index, &source.path, source.metadata_end)?;
        Ok(Table {
            source,
            cache: None,
            file_size,
            index,
            index_words,
            block_handles,
            filter,
            properties,
            range_dels,
            cached_any: AtomicBool::new(false),
        })
    }

    /// Open the table like [`Table::open`], reading its data blocks through `cache`.
    pub fn open_cached(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        cache: Arc<BlockCache>,
    ) -> Result<Table> {
        let mut table = Table::open(file, path)?;
        let id = cache.new_table_id();
        table.cache = Some((cache, id));
        Ok(table)
    }

    /// Bytes of metadata this open table keeps in memory outside the block cache: its
    /// index block, the index words and block handles, and its bloom filter.
    pub fn pinned_bytes(&self) -> usize {
        self.index.size()
            + self.index_words.size()
            + self
                .block_handles
                .as_ref()
                .map_or(0, |h| h.capacity() * std::mem::size_of::<BlockHandle>())
            + self.filter.as_ref().map_or(0, BloomFilter::size)
    }

    /// Position `index` (an iterator over this table's index block) at the first entry
    /// whose key is `>= target`, an internal key.
    pub(crate) fn seek_index(&self, index: &mut BlockIter, target: &[u8]) -> Result<()> {
        let range = self.index_words.range(crate::key::user_key(target));
        index.seek_in(target, range)
    }

    /// The one place data blocks are read: from the cache if it holds the block, else
    /// from the file (verified and decompressed), added to the cache if `fill_cache`.
    pub(crate) fn read_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        match self.cached_block(handle) {
            Some(block) => Ok(block),
            None => self.load_block(handle, fill_cache),
        }
    }

    /// The block cache, if any, and the key of the block at `handle` in it.
    fn cache_key(&self, handle: BlockHandle) -> Option<(&BlockCache, BlockKey)> {
        let (cache, table) = self.cache.as_ref()?;
        let key = BlockKey {
            table: *table,
            offset: handle.offset,
        };
        Some((cache, key))
    }

    /// The block at `handle` if the cache holds it (counted as a hit or a miss).
    pub(crate) fn cached_block(&self, handle: BlockHandle) -> Option<Arc<Block>> {
        let (cache, key) = self.cache_key(handle)?;
        let block = cache.get(&key);
        if block.is_some() {
            crate::perf::count(|p| &mut p.block_cache_hits, 1);
        } else {
            crate::perf::count(|p| &mut p.block_cache_misses, 1);
        }
        block
    }

    /// Read the block at `handle` from the file (verified and decompressed), and offer it
    /// to the cache if `fill_cache`.
    pub(crate) fn load_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        let data = self.source.read_raw(handle)?;
        let block = Arc::new(Block::new(
            data,
            Arc::clone(&self.source.path),
            handle.offset,
        )?);
        if let (Some((cache, key)), true) = (self.cache_key(handle), fill_cache) {
            // Checked first: a store on every admitted block would bounce this line
            // between the cores of the table's readers.
            if cache.insert(key, Arc::clone(&block)) && !self.cached_any.load(Ordering::Relaxed) {
                self.cached_any.store(true, Ordering::Relaxed);
            }
        }
        Ok(block)
    }

    /// Start reading the `len` bytes of the file at `offset` into the page cache
    /// ([`RandomAccessFile::read_ahead`]).
    pub(crate) fn read_ahead(&self, offset: u64, len: u64) {
        self.source.file.read_ahead(offset, len);
    }

    /// Decode an index entry's value.
    pub(crate) fn decode_handle(&self, index_value: &[u8]) -> Result<BlockHandle> {
        decode_index_value(index_value, &self.source.path, self.source.metadata_end)
    }

    /// Start loading the bloom filter's cache lines for `key` (see
    /// `BloomFilter::prefetch`).
    pub(crate) fn prefetch_filter(&self, key: FilterKey) {
        if let Some(f) = &self.filter {
            f.prefetch(key);
        }
    }

    /// Start loading what a point read of `user_key` reads of the index first: its group
    /// of index words and their block handles.
    pub(crate) fn prefetch_index(&self, user_key: &[u8]) {
        let Some(group) = self.index_words.group_of(user_key) else {
            return;
        };
        self.index_words.prefetch(group.clone());
        if let Some(handles) = self.block_handles.as_ref().and_then(|h| h.get(group)) {
            crate::prefetch::prefetch_slice(handles);
        }
    }

    /// False only if the table certainly holds no entry for `user_key`.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_key(FilterKey::new(user_key))
    }

    /// [`Table::may_contain`] for a key already hashed.
    pub fn may_contain_key(&self, key: FilterKey) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain_key(key))
    }

    /// The newest entry for `user_key` with sequence number `<= snapshot`: its kind and
    /// value (empty for a delete), or `None` if the table has no such entry. The table's
    /// range tombstones are not consulted ([`Table::range_dels`]).
    ///
    /// # Errors
    /// `Corruption` or `Io` from reading a block.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Result<Option<(ValueKind, Vec<u8>)>> {
        self.get_opt(user_key, snapshot, true)
    }

    /// [`Table::get`], choosing whether blocks read go into the cache.
    pub fn get_opt(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        fill_cache: bool,
    ) -> Result<Option<(ValueKind, Vec<u8>)>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let found = self.get_unfiltered(user_key, snapshot, fill_cache)?;
        Ok(found.map(|(kind, _, value)| (kind, value)))
    }

    /// The table's range tombstones, fragmented; `None` for a table without any.
    pub fn range_dels(&self) -> Option<&Arc<RangeDels>> {
        self.range_dels.as_ref()
    }

    /// [`Table::get_opt`] for a caller that has already consulted the bloom filter, with
    /// the entry's sequence number. Range tombstones are not consulted.
    pub(crate) fn get_unfiltered(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        fill_cache: bool,
    ) -> Result<Option<PointEntry>> {
        // Versions newer than the snapshot sort before this key, older ones after it.
        // No sequence number exceeds `SeqNo::MAX`, so clamping changes no answer.
        let target = InternalKey::new(user_key, snapshot.min(SeqNo::MAX), ValueKind::SEEK);
        let target = target.encoded();
        // The fast way: the index words say which index entry is the first >= target, and
        // the handles array holds its value. The entries before it have user keys below
        // `user_key`; it and those after have user keys above it.
        let decided = self.index_words.restarts_before(user_key);
        if let (Some(handles), Some(first)) = (&self.block_handles, decided) {
            for &handle in handles.get(first..).unwrap_or_default() {
                if let BlockAnswer::Done(found) =
                    self.get_in_block(handle, user_key, target, fill_cache)?
                {
                    return Ok(found);
                }
            }
            return Ok(None);
        }
        let mut index = self.index.iter();
        self.seek_index(&mut index, target)?;
        while index.valid() {
            let handle = self.decode_handle(index.value())?;
            if let BlockAnswer::Done(found) =
                self.get_in_block(handle, user_key, target, fill_cache)?
            {
                return Ok(found);
            }
            index.next()?;
        }
        Ok(None)
    }

    /// Seek `target` (an internal key of `user_key`) in the data block at `handle`.
    fn get_in_block(
        &self,
        handle: BlockHandle,
        user_key: &[u8],
        target: &[u8],
        fill_cache: bool,
    ) -> Result<BlockAnswer> {
        // A get that misses the cache reads the whole block: its lines are prefetched to
        // load all at once rather than as the checksum reaches them. If this thread's
        // recent gets mostly missed, that starts before the cache is searched, so the
        // search overlaps the wait; if they mostly hit, only after a miss, so that a hit,
        // whose block is in memory already, does not pay for the bandwidth. (A hit's own
        // block is loaded by the cache, from its entry's hint.)
        let miss_likely = CACHE_MISSES.with(Trend::likely);
        if miss_likely {
            self.source.prefetch(handle);
        }
        let cached = self.cached_block(handle);
        CACHE_MISSES.with(|t| t.record(cached.is_none()));
        let block = match cached {
            Some(block) => block,
            None => {
                if !miss_likely {
                    self.source.prefetch(handle);
                }
                self.load_block(handle, fill_cache)?
            }
        };
        let mut key = Vec::with_capacity(target.len());
        let Some(value) = block.seek_entry(target, &mut key)? else {
            // The block's keys all sort before the target. With last-key index entries
            // this does not happen, but a shorter separator could cause it: go on.
            return Ok(BlockAnswer::Next);
        };
        let parsed = parse_internal_key(&key).ok_or_else(|| {
            let why = "data block key is not an internal key";
            Error::corruption(&*self.source.path, handle.offset, why)
        })?;
        if parsed.user_key != user_key {
            return Ok(BlockAnswer::Done(None));
        }
        Ok(BlockAnswer::Done(Some((
            parsed.kind,
            parsed.seq,
            value.to_vec(),
        ))))
    }

    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    pub fn path(&self) -> &Path {
        &self.source.path
    }

    pub fn smallest(&self) -> &InternalKey {
        &self.properties.smallest
    }

    pub fn largest(&self) -> &InternalKey {
        &self.properties.largest
    }
}

impl Drop for Table {
    /// Take this table's blocks out of the cache: no reader can ask for them again (a
    /// reopened table gets a new cache id), and a view into a mapping would otherwise keep
    /// a deleted file's disk space allocated until the block aged out. Nothing to do for a
    /// table the cache never admitted a block of.
    fn drop(&mut self) {
        // Exclusive here: `Arc`'s last drop orders every reader's store before it.
        if !*self.cached_any.get_mut() {
            return;
        }
        let remove = |handle: BlockHandle| {
            if let Some((cache, key)) = self.cache_key(handle) {
                cache.remove(&key);
            }
        };
        if let Some(handles) = &self.block_handles {
            handles.iter().copied().for_each(remove);
            return;
        }
        let mut index = self.index.iter();
        let mut more = index.seek_to_first().is_ok();
        while more && index.valid() {
            let Ok(handle) = BlockHandle::decode_varint(index.value()) else {
                break;
            };
            remove(handle);
            more = index.next().is_ok();
        }
    }
}

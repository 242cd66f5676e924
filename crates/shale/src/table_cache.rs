//! The table cache: open SSTable readers (a file descriptor, the index block and the bloom
//! filter each), at most `max_open_files` of them.
//!
//! Live SSTables are opened on first use and closed when the cache evicts them (CLOCK, like
//! the block cache: a table read again soon after keeps its place) or when compaction
//! deletes them. A reader that holds an `Arc<Table>` keeps that table open until it lets
//! go, so the number of open files can exceed the budget by the tables in use at once.
//! Without this cache every live file would hold a descriptor, and a tree of small files
//! would run out of them (`EMFILE`) and stop.

use std::path::PathBuf;
use std::sync::Arc;

use crate::cache::{BlockCache, ClockCache};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::purge::{self, Garbage, Purger};
use crate::sst::Table;
use crate::version::{FileId, FileMeta};

/// Open tables by file number.
pub struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    blocks: Arc<BlockCache>,
    open: ClockCache<u64, Arc<Table>>,
    /// Open files through memory mappings (`Options::mmap_reads`).
    mmap: bool,
    /// Where retired tables go to be closed and deleted off the caller's thread.
    purger: Arc<Purger>,
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("open", &self.open.usage())
            .field("capacity", &self.open.capacity())
            .finish()
    }
}

impl TableCache {
    /// A cache keeping at most about `max_open_files` tables open (rounded down to a
    /// multiple of the shard count, at least one per shard).
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        blocks: Arc<BlockCache>,
        max_open_files: usize,
        mmap: bool,
        purger: Arc<Purger>,
    ) -> TableCache {
        TableCache {
            fs,
            dir,
            blocks,
            open: ClockCache::new(max_open_files),
            mmap,
            purger,
        }
    }

    /// The reader of table `meta`, opening it if it is not open.
    ///
    /// # Errors
    /// `Io` if the file cannot be opened; `Corruption` if its length differs from the
    /// manifest's or its footer, index, filter or properties are damaged.
    pub fn get(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        if let Some(table) = self.open.get(&meta.id.0) {
            return Ok(table);
        }
        let path = self.path(meta.id);
        let file = if self.mmap {
            self.fs.open_mapped(&path)?
        } else {
            self.fs.open(&path)?
        };
        if file.len() != meta.size {
            return Err(Error::corruption(
                &path,
                file.len(),
                format!(
                    "file is {} bytes, the manifest says {}",
                    file.len(),
                    meta.size
                ),
            ));
        }
        let table = Arc::new(Table::open_cached(file, path, Arc::clone(&self.blocks))?);
        // If another reader opened it meanwhile, use theirs and let ours close.
        Ok(self.open.insert(meta.id.0, table, 1).0)
    }

    /// Table `id` is listed by no version any more: close it and delete its file on the
    /// purge thread (or here, if it is not running).
    pub fn retire(&self, id: FileId) {
        if let Some(garbage) = self.purger.defer(Garbage::Table(id)) {
            purge::dispose(garbage, self);
        }
    }

    /// Close table `id` and delete its file, now. Errors are ignored: a file left behind
    /// is removed by the next open.
    pub fn delete(&self, id: FileId) {
        self.open.remove(&id.0);
        let _ = self.fs.remove(&self.path(id));
    }

    fn path(&self, id: FileId) -> PathBuf {
        self.dir.join(format!("{:06}.sst", id.0))
    }

    /// Tables open now.
    pub fn open_count(&self) -> usize {
        self.open.usage()
    }

    /// Bytes the open tables keep outside the block cache (index blocks and filters).
    pub fn pinned_bytes(&self) -> usize {
        let mut total = 0;
        self.open.for_each(|t| total += t.pinned_bytes());
        total
    }
}

//! The table cache: open SSTable readers (a file descriptor, the index block and the bloom
//! filter each), at most `max_open_files` of them.
//!
//! The budget has two halves:
//! - **Pins.** A table opened while pins are left is held by its file's [`TablePin`] until
//!   that file leaves the tree. A get reaches it through the super version it already
//!   holds: no lock and no reference count, so reader threads share no cache line on the
//!   way to a table. Most trees (fewer than half `max_open_files` files) are all pinned.
//! - **A CLOCK cache** for the rest: a table opened once the pins are used up is cached
//!   by file number (like the block cache: a table read again soon after keeps its place)
//!   and closed when evicted. A get takes a shard's mutex and clones the `Arc` there.
//!
//! Readers that miss one table at the same time open it once: the opener holds one of
//! 16 locks striped by file number, and the others, waiting on it, then find its table.
//!
//! A file's table is closed when compaction deletes the file. A reader that holds an
//! `Arc<Table>` keeps that table open until it lets go, so the number of open files can
//! exceed the budget by the tables in use at once. Without this cache every live file
//! would hold a descriptor, and a tree of small files would run out of them (`EMFILE`)
//! and stop.

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::cache::ClockCache;
use crate::error::{Error, Result};
use crate::filename::FileId;
use crate::fs::FileSystem;
use crate::sst::BlockCache;
use crate::sst::Table;
use crate::sync::lock;
use crate::version::purge::Purger;

/// A live file's place for its table's reader, filled when the table cache has a pin to
/// give: a get finds the reader here with no lock and no reference count. Given back with
/// [`TableCache::unpin`] when the file leaves the tree.
#[derive(Debug, Default)]
pub struct TablePin(OnceLock<Arc<Table>>);

impl TablePin {
    /// The pinned reader, if the file has one.
    pub fn table(&self) -> Option<&Arc<Table>> {
        self.0.get()
    }

    /// Hold `table`. Returns the table held and whether it is `table`: if another reader
    /// pinned one first, that one is kept and `table` dropped.
    fn fill(&self, table: Arc<Table>) -> (&Arc<Table>, bool) {
        let mut ours = false;
        let pinned = self.0.get_or_init(|| {
            ours = true;
            table
        });
        (pinned, ours)
    }
}

/// A table reader lent for one read: borrowed from its file's pin, or a clone out of the
/// CLOCK cache.
pub enum TableRef<'a> {
    Pinned(&'a Arc<Table>),
    Cached(Arc<Table>),
}

impl TableRef<'_> {
    /// An owned reference: a clone of a pinned table's `Arc`, or the cached one moved out.
    pub fn into_owned(self) -> Arc<Table> {
        match self {
            TableRef::Pinned(t) => Arc::clone(t),
            TableRef::Cached(t) => t,
        }
    }
}

impl Deref for TableRef<'_> {
    type Target = Arc<Table>;

    fn deref(&self) -> &Arc<Table> {
        match self {
            TableRef::Pinned(t) => t,
            TableRef::Cached(t) => t,
        }
    }
}

/// Open tables by file number.
pub struct TableCache {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    blocks: Arc<BlockCache>,
    open: ClockCache<u64, Arc<Table>>,
    /// Tables pinned by their files now, at most `pin_budget`.
    pins: AtomicUsize,
    pin_budget: usize,
    /// What the pinned tables keep outside the block cache (`Table::pinned_bytes`).
    pinned_table_bytes: AtomicUsize,
    /// Open files through memory mappings (`Options::mmap_reads`).
    mmap: bool,
    /// Where retired tables go to be closed and deleted off the caller's thread.
    purger: Arc<Purger>,
    /// Held by the reader opening a table (by file number, striped), so that readers
    /// missing the same table at once open it once: the others wait, then find it
    /// (RocksDB's `loader_mutex_`). Without it each opened its own copy, and one of them
    /// could stay in the CLOCK cache beside the pinned one.
    loaders: [Mutex<()>; LOADERS],
}

/// Stripes of [`TableCache::loaders`].
const LOADERS: usize = 16;

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache")
            .field("cached", &self.open.usage())
            .field("capacity", &self.open.capacity())
            .field("pins", &self.pins.load(Ordering::Relaxed))
            .field("pin_budget", &self.pin_budget)
            .finish()
    }
}

impl TableCache {
    /// A cache keeping at most about `max_open_files` tables open: about half of them
    /// pinned, the rest in the CLOCK cache (rounded down to a multiple of its shard count,
    /// at least one per shard).
    pub fn new(
        fs: Arc<dyn FileSystem>,
        dir: PathBuf,
        blocks: Arc<BlockCache>,
        max_open_files: usize,
        mmap: bool,
        purger: Arc<Purger>,
    ) -> TableCache {
        let open = ClockCache::new((max_open_files / 2).max(crate::cache::SHARDS));
        TableCache {
            fs,
            dir,
            blocks,
            pin_budget: max_open_files.saturating_sub(open.capacity()),
            open,
            pins: AtomicUsize::new(0),
            pinned_table_bytes: AtomicUsize::new(0),
            mmap,
            purger,
            loaders: Default::default(),
        }
    }

    /// The reader of table `id` (`size` bytes, as the manifest says), opening it if it
    /// is not open: held by the file's `pin` if a pin is left, else cached.
    ///
    /// # Errors
    /// `Io` if the file cannot be opened; `Corruption` if its length differs from `size`
    /// or its footer, index, filter or properties are damaged.
    pub fn get<'p>(&self, id: FileId, size: u64, pin: &'p TablePin) -> Result<TableRef<'p>> {
        if let Some(table) = pin.table() {
            return Ok(TableRef::Pinned(table));
        }
        if let Some(table) = self.open.get(&id.0) {
            return Ok(TableRef::Cached(table));
        }
        let stripe = (id.0 % LOADERS as u64) as usize;
        let _loading = self.loaders.get(stripe).map(lock);
        // Another reader may have opened it while this one waited.
        if let Some(table) = pin.table() {
            return Ok(TableRef::Pinned(table));
        }
        if let Some(table) = self.open.get(&id.0) {
            return Ok(TableRef::Cached(table));
        }
        let table = self.open_table(id, size)?;
        let reserved = self
            .pins
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.pin_budget).then_some(n + 1)
            })
            .is_ok();
        if reserved {
            let bytes = table.pinned_bytes();
            let (pinned, ours) = pin.fill(table);
            if ours {
                self.pinned_table_bytes.fetch_add(bytes, Ordering::Relaxed);
            } else {
                // Another reader pinned it meanwhile: ours closed, give its pin back.
                self.pins.fetch_sub(1, Ordering::AcqRel);
            }
            return Ok(TableRef::Pinned(pinned));
        }
        // If another reader opened it meanwhile, use theirs and let ours close.
        if let Some(pinned) = pin.table() {
            return Ok(TableRef::Pinned(pinned));
        }
        Ok(TableRef::Cached(self.open.insert(id.0, table, 1).0))
    }

    /// The file of `pin` leaves the tree: close its pinned table, if any, and give the pin
    /// back.
    pub(crate) fn unpin(&self, pin: &mut TablePin) {
        if let Some(table) = pin.0.take() {
            self.pins.fetch_sub(1, Ordering::AcqRel);
            self.pinned_table_bytes
                .fetch_sub(table.pinned_bytes(), Ordering::Relaxed);
        }
    }

    fn open_table(&self, id: FileId, size: u64) -> Result<Arc<Table>> {
        let path = self.path(id);
        let file = if self.mmap {
            self.fs.open_mapped(&path)?
        } else {
            self.fs.open(&path)?
        };
        if file.len() != size {
            return Err(Error::corruption(
                &path,
                file.len(),
                format!("file is {} bytes, the manifest says {size}", file.len()),
            ));
        }
        Ok(Arc::new(Table::open_cached(
            file,
            path,
            Arc::clone(&self.blocks),
        )?))
    }

    /// Table `id` is listed by no version any more: close it and delete its file on the
    /// purge thread (or here, if it is not running).
    pub fn retire(self: &Arc<Self>, id: FileId) {
        let tables = Arc::clone(self);
        self.purger.defer(Box::new(move || tables.delete(id)));
    }

    /// Close table `id` (if the CLOCK cache holds it; a pinned table closed with its
    /// file) and delete its file, now. Errors are ignored: a file left behind is removed
    /// by the next open.
    pub fn delete(&self, id: FileId) {
        self.open.remove(&id.0);
        let _ = self.fs.remove(&self.path(id));
    }

    pub(crate) fn path(&self, id: FileId) -> PathBuf {
        crate::filename::table_path(&self.dir, id)
    }

    /// Tables open now.
    pub fn open_count(&self) -> usize {
        self.open.usage() + self.pins.load(Ordering::Acquire)
    }

    /// Bytes the open tables keep outside the block cache (index blocks and filters).
    pub fn pinned_bytes(&self) -> usize {
        let mut total = self.pinned_table_bytes.load(Ordering::Relaxed);
        self.open.for_each(|t| total += t.pinned_bytes());
        total
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::fs::MemFs;
    use crate::key::{InternalKey, SeqNo, ValueKind};
    use crate::sst::{TableBuilder, TableOptions};
    use crate::version::{FileMeta, TableFile};

    /// `n` one-entry tables in `fs` under `/db`, as files of the tree.
    fn files(fs: &Arc<MemFs>, tables: &Arc<TableCache>, n: u64) -> Vec<TableFile> {
        fs.create_dir_all(Path::new("/db")).unwrap();
        (1..=n)
            .map(|id| {
                let path = tables.path(FileId(id));
                let mut b = TableBuilder::new(
                    fs.create(&path).unwrap(),
                    path.clone(),
                    TableOptions::default(),
                );
                let key = InternalKey::new(&id.to_be_bytes(), SeqNo(id), ValueKind::Put);
                b.add(key.encoded(), b"v").unwrap();
                let summary = b.finish().unwrap();
                TableFile::new(
                    FileMeta::from_summary(
                        FileId(id),
                        crate::keyspace::KeyspaceId::DEFAULT,
                        summary,
                    ),
                    Arc::clone(tables),
                )
            })
            .collect()
    }

    /// A `MemFs` whose table opens are counted and slow, so that readers arriving
    /// together all miss.
    #[derive(Debug)]
    struct SlowOpens {
        mem: MemFs,
        opens: AtomicUsize,
    }

    impl FileSystem for SlowOpens {
        fn create(&self, path: &Path) -> Result<Box<dyn crate::fs::WritableFile>> {
            self.mem.create(path)
        }
        fn create_log(&self, path: &Path) -> Result<Box<dyn crate::fs::WritableFile>> {
            self.mem.create_log(path)
        }
        fn open(&self, path: &Path) -> Result<Arc<dyn crate::fs::RandomAccessFile>> {
            self.opens.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            self.mem.open(path)
        }
        fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
            self.mem.read_all(path)
        }
        fn rename(&self, from: &Path, to: &Path) -> Result<()> {
            self.mem.rename(from, to)
        }
        fn remove(&self, path: &Path) -> Result<()> {
            self.mem.remove(path)
        }
        fn list(&self, dir: &Path) -> Result<Vec<String>> {
            self.mem.list(dir)
        }
        fn create_dir_all(&self, dir: &Path) -> Result<()> {
            self.mem.create_dir_all(dir)
        }
        fn sync_dir(&self, dir: &Path) -> Result<()> {
            self.mem.sync_dir(dir)
        }
        fn exists(&self, path: &Path) -> bool {
            self.mem.exists(path)
        }
        fn lock(&self, path: &Path) -> Result<Box<dyn crate::fs::FileLock>> {
            self.mem.lock(path)
        }
    }

    #[test]
    fn readers_missing_one_table_together_open_it_once() {
        let mem = MemFs::new();
        let fs = Arc::new(SlowOpens {
            mem: mem.clone(),
            opens: AtomicUsize::new(0),
        });
        // 8 tables: 4 pinned, 4 in the CLOCK cache; two of each are read.
        let tables = Arc::new(TableCache::new(
            fs.clone(),
            PathBuf::from("/db"),
            Arc::new(BlockCache::new(1 << 20, 4096)),
            8,
            false,
            Arc::default(),
        ));
        let files = files(&Arc::new(mem), &tables, 8);
        let read = [&files[0], &files[1], &files[6], &files[7]];
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for f in read {
                        f.table_ref().unwrap();
                    }
                });
            }
        });
        assert_eq!(fs.opens.load(Ordering::SeqCst), read.len());
        assert_eq!(tables.open_count(), read.len(), "one copy of each");
    }

    #[test]
    fn half_the_budget_is_pinned_by_files_and_a_dropped_file_frees_its_pin() {
        let fs = Arc::new(MemFs::new());
        // 64 tables: 32 in the CLOCK cache, 32 pins.
        let tables = Arc::new(TableCache::new(
            fs.clone(),
            PathBuf::from("/db"),
            Arc::new(BlockCache::new(1 << 20, 4096)),
            64,
            false,
            Arc::default(),
        ));
        let mut files = files(&fs, &tables, 100);
        for f in &files {
            let id = f.meta.id.0.to_be_bytes();
            let got = f
                .table_ref()
                .unwrap()
                .get(&id, SeqNo(u64::MAX >> 8))
                .unwrap();
            assert_eq!(got, Some((ValueKind::Put, b"v".to_vec())));
        }
        let pinned = files.iter().filter(|f| f.pinned_table().is_some()).count();
        assert_eq!(pinned, 32, "the first 32 opened are pinned");
        assert!(files[..32].iter().all(|f| f.pinned_table().is_some()));
        assert_eq!(tables.open_count(), 64, "32 pinned and 32 cached");
        assert!(tables.pinned_bytes() > 0);

        // A pinned file leaves the tree: its pin goes to the next table opened.
        files.remove(0);
        assert_eq!(tables.open_count(), 63);
        let last = files.last().unwrap();
        if last.pinned_table().is_none() {
            tables.open.remove(&last.meta.id.0);
        }
        assert!(matches!(last.table_ref().unwrap(), TableRef::Pinned(_)));
        drop(files);
        assert_eq!(tables.pins.load(Ordering::Relaxed), 0);
        assert_eq!(tables.pinned_table_bytes.load(Ordering::Relaxed), 0);
    }
}

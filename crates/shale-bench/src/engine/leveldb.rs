//! rusty-leveldb 4 (a pure-Rust LevelDB), feature `leveldb`.
//!
//! Its `DB` is neither `Send` nor `Sync` and takes `&mut self`, so it sits in a `RefCell`
//! and only single-threaded workloads run on it. It compacts on the writing thread (no
//! background threads), has Snappy but no LZ4 (so it runs uncompressed under `lz4`), no
//! WAL-off mode, and its `sync` flag does not fsync the log.

use std::cell::RefCell;
use std::path::Path;

use rusty_leveldb::{LdbIterator, Options, WriteBatch, DB};

use super::api::{BenchResult, Durability, Engine};
use super::parity::Parity;

pub struct LevelDbEngine {
    db: RefCell<DB>,
}

impl LevelDbEngine {
    pub fn open(dir: &Path, p: &Parity) -> BenchResult<LevelDbEngine> {
        let opts = Options {
            create_if_missing: true,
            write_buffer_size: p.write_buffer_bytes,
            max_file_size: usize::try_from(p.target_file_bytes)?,
            block_cache_capacity_bytes: p.block_cache_bytes,
            block_size: p.block_bytes,
            filter_policy: std::rc::Rc::new(Box::new(rusty_leveldb::BloomPolicy::new(
                p.filter_bits_per_key,
            ))),
            compressor: 0,
            max_open_files: p.max_open_files,
            ..Options::default()
        };
        Ok(LevelDbEngine {
            db: RefCell::new(DB::open(dir, opts)?),
        })
    }
}

impl Engine for LevelDbEngine {
    fn put(&self, key: &[u8], value: &[u8], durability: Durability) -> BenchResult<()> {
        let mut b = WriteBatch::default();
        b.put(key, value);
        Ok(self
            .db
            .borrow_mut()
            .write(b, durability == Durability::Sync)?)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        Ok(self.db.borrow_mut().get(key).map(|v| v.len()))
    }

    fn delete(&self, key: &[u8], durability: Durability) -> BenchResult<()> {
        let mut b = WriteBatch::default();
        b.delete(key);
        Ok(self
            .db
            .borrow_mut()
            .write(b, durability == Durability::Sync)?)
    }

    fn write_batch(
        &self,
        ops: &[(Vec<u8>, Option<Vec<u8>>)],
        durability: Durability,
    ) -> BenchResult<()> {
        let mut b = WriteBatch::default();
        for (k, v) in ops {
            match v {
                Some(v) => b.put(k, v),
                None => b.delete(k),
            }
        }
        Ok(self
            .db
            .borrow_mut()
            .write(b, durability == Durability::Sync)?)
    }

    fn scan(&self, start: &[u8], limit: usize) -> BenchResult<usize> {
        let mut it = self.db.borrow_mut().new_iter()?;
        it.seek(start);
        let mut n = 0;
        while n < limit && it.valid() {
            if let Some((k, v)) = it.current() {
                std::hint::black_box((k, v));
            }
            n += 1;
            if !it.advance() {
                break;
            }
        }
        Ok(n)
    }

    fn wait_background(&self) -> BenchResult<()> {
        Ok(self.db.borrow_mut().flush()?)
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        Ok(self.db.borrow_mut().close()?)
    }

    fn shared(&self) -> Option<&(dyn Engine + Sync)> {
        None
    }

    /// Its sync flag flushes a user-space buffer to the OS and does not fsync, so a
    /// "sync" row would compare unlike things: only buffered writes run.
    fn supports(&self, durability: Durability) -> bool {
        durability == Durability::Buffered
    }

    fn caveats(&self) -> Vec<String> {
        vec![
            "leveldb (rusty-leveldb): no batched read; multiget = a loop of gets".into(),
            "leveldb (rusty-leveldb): no LZ4 (runs uncompressed), no WAL-off mode, sync flag does not fsync (sync rows skipped), its log sits in an 8 KiB user-space buffer (so buffered writes do not survive a process crash either), two memtables, compaction runs on the writing thread, not Send/Sync (single-threaded workloads only), wait_background only flushes the log buffer".into(),
        ]
    }
}

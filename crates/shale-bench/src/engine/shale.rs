//! Shale, through its public API only.

use std::path::Path;

use shale::{Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

use super::api::{BenchResult, Durability, Engine};
use super::parity::{CompressionChoice, FileReads, Parity};

pub struct ShaleEngine {
    db: Db,
    /// `Parity::keyspaces` keyspaces, `ks0`...
    keyspaces: Vec<shale::Keyspace>,
}

fn write_options(d: Durability) -> WriteOptions {
    match d {
        Durability::Sync => WriteOptions::sync(),
        Durability::Buffered => WriteOptions::default(),
        Durability::NoWal => WriteOptions::no_wal(),
    }
}

fn codec(choice: CompressionChoice) -> Compression {
    match choice {
        CompressionChoice::None => Compression::None,
        CompressionChoice::Lz4 => Compression::Lz4,
        CompressionChoice::Zstd => Compression::Zstd(3),
        CompressionChoice::Snappy => Compression::Snappy,
    }
}

impl ShaleEngine {
    pub fn open(dir: &Path, p: &Parity) -> BenchResult<ShaleEngine> {
        let opts = Options {
            write_buffer_size: p.write_buffer_bytes,
            max_write_buffers: p.write_buffers,
            max_file_size: p.target_file_bytes,
            block_size: p.block_bytes,
            filter_bits_per_key: p.filter_bits_per_key,
            block_restart_interval: p.restart_interval,
            compression: codec(p.compression),
            bottommost_compression: p.bottommost_compression.map(codec),
            cache_size: p.block_cache_bytes,
            background_threads: p.background_threads,
            max_bytes_for_level_base: p.level_base_bytes,
            max_open_files: p.max_open_files,
            ..Options::default()
        };
        let opts = match p.file_reads {
            FileReads::EngineDefault => opts,
            FileReads::Pread => Options {
                mmap_reads: false,
                ..opts
            },
            FileReads::Mmap => Options {
                mmap_reads: true,
                ..opts
            },
        };
        let db = Db::open(dir, opts)?;
        let keyspaces = (0..p.keyspaces)
            .map(|i| db.keyspace(&format!("ks{i}")))
            .collect::<shale::Result<Vec<_>>>()?;
        Ok(ShaleEngine { db, keyspaces })
    }
}

impl Engine for ShaleEngine {
    fn put(&self, key: &[u8], value: &[u8], durability: Durability) -> BenchResult<()> {
        if durability == Durability::Buffered {
            return Ok(self.db.put(key, value)?);
        }
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        Ok(self.db.write(batch, write_options(durability))?)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        Ok(self.db.get(key)?.map(|v| v.len()))
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> BenchResult<usize> {
        let values = self.db.multi_get(keys, &ReadOptions::default())?;
        Ok(values.iter().filter(|v| v.is_some()).count())
    }

    fn checkpoint(&self, dir: &std::path::Path) -> Option<BenchResult<()>> {
        Some(self.db.checkpoint(dir).map_err(Into::into))
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Option<BenchResult<()>> {
        Some(self.db.delete_range(start, end).map_err(Into::into))
    }

    fn snapshot_get(&self, key: &[u8]) -> Option<BenchResult<Option<usize>>> {
        let snapshot = self.db.snapshot();
        let read = self.db.get_opt(key, &ReadOptions::at(&snapshot));
        Some(read.map(|v| v.map(|v| v.len())).map_err(Into::into))
    }

    fn snapshot_create(&self) -> Option<BenchResult<()>> {
        drop(std::hint::black_box(self.db.snapshot()));
        Some(Ok(()))
    }

    fn delete(&self, key: &[u8], durability: Durability) -> BenchResult<()> {
        if durability == Durability::Buffered {
            return Ok(self.db.delete(key)?);
        }
        let mut batch = WriteBatch::new();
        batch.delete(key);
        Ok(self.db.write(batch, write_options(durability))?)
    }

    fn write_batch(
        &self,
        ops: &[(Vec<u8>, Option<Vec<u8>>)],
        durability: Durability,
    ) -> BenchResult<()> {
        let mut batch = WriteBatch::new();
        for (k, v) in ops {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            }
        }
        Ok(self.db.write(batch, write_options(durability))?)
    }

    fn write_batch_in(
        &self,
        ops: &[(usize, Vec<u8>, Vec<u8>)],
        durability: Durability,
    ) -> Option<BenchResult<()>> {
        let mut batch = WriteBatch::new();
        for (i, k, v) in ops {
            batch.put_in(self.keyspaces.get(*i)?, k, v);
        }
        Some(
            self.db
                .write(batch, write_options(durability))
                .map_err(Into::into),
        )
    }

    fn scan(&self, start: &[u8], limit: usize) -> BenchResult<usize> {
        let mut it = self.db.iter(&ReadOptions::default())?;
        it.seek(start)?;
        let mut n = 0;
        while n < limit && it.valid() {
            std::hint::black_box((it.key(), it.value()));
            n += 1;
            it.next()?;
        }
        Ok(n)
    }

    fn wait_background(&self) -> BenchResult<()> {
        self.db.flush()?;
        Ok(self.db.wait_idle()?)
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        Ok(self.db.close()?)
    }

    fn shared(&self) -> Option<&(dyn Engine + Sync)> {
        Some(self)
    }

    fn caveats(&self) -> Vec<String> {
        Vec::new()
    }
}

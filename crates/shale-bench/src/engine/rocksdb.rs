//! RocksDB through the `rocksdb` crate (bundled C++ build), feature `rocksdb`.

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, Cache, DBCompressionType, DataBlockIndexType, Options, ReadOptions,
    WaitForCompactOptions, WriteBatch, WriteOptions, DB,
};

use super::api::{BenchResult, Durability, Engine};
use super::parity::{CompressionChoice, FileReads, Parity};

pub struct RocksEngine {
    db: DB,
    /// Column families `ks0`... opened beside the default one.
    keyspaces: usize,
    /// Made once: the crate's `get_pinned` and `put` allocate options through the C API on
    /// every call, which is the adapter's cost, not RocksDB's.
    read: ReadOptions,
    sync: WriteOptions,
    buffered: WriteOptions,
    no_wal: WriteOptions,
}

fn write_options(d: Durability) -> WriteOptions {
    let mut w = WriteOptions::default();
    match d {
        Durability::Sync => w.set_sync(true),
        Durability::Buffered => {}
        Durability::NoWal => w.disable_wal(true),
    }
    w
}

impl RocksEngine {
    pub fn open(dir: &Path, p: &Parity) -> BenchResult<RocksEngine> {
        let mut table = BlockBasedOptions::default();
        if p.rocksdb_point_lookup {
            // The point-lookup advice of RocksDB's wiki ("Block Cache", "Data Block Hash
            // Index"): HyperClockCache, whose lookups take no shard mutex (an entry charge
            // of 0 lets it size its table itself), and a hash index in each data block that
            // takes a get to its restart interval without the binary search.
            table.set_block_cache(&Cache::new_hyper_clock_cache(p.block_cache_bytes, 0));
            table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
        } else {
            table.set_block_cache(&Cache::new_lru_cache(p.block_cache_bytes));
        }
        table.set_bloom_filter(f64::from(p.filter_bits_per_key), false);
        table.set_block_size(p.block_bytes);
        let mut o = Options::default();
        o.create_if_missing(true);
        o.set_block_based_table_factory(&table);
        o.set_write_buffer_size(p.write_buffer_bytes);
        o.set_max_write_buffer_number(i32::try_from(p.write_buffers)?);
        o.set_target_file_size_base(p.target_file_bytes);
        o.set_max_bytes_for_level_base(p.level_base_bytes);
        o.set_max_open_files(i32::try_from(p.max_open_files)?);
        o.set_max_background_jobs(i32::try_from(p.background_threads)?);
        o.set_allow_mmap_reads(p.file_reads == FileReads::Mmap);
        o.set_compression_type(match p.compression {
            CompressionChoice::None => DBCompressionType::None,
            CompressionChoice::Lz4 => DBCompressionType::Lz4,
            other => return Err(format!("rocksdb: {} is not built in", other.name()).into()),
        });
        // The default column family named, so that its handle is there for the batched
        // MultiGet (`multi_get`); `Parity::keyspaces` more beside it. Each one gets the
        // parity options: the crate's `open_cf` would give them RocksDB's defaults (no
        // bloom filter, its own block cache, two write buffers).
        o.create_missing_column_families(true);
        let names = (0..p.keyspaces).map(|i| format!("ks{i}"));
        let all: Vec<String> = std::iter::once(rocksdb::DEFAULT_COLUMN_FAMILY_NAME.into())
            .chain(names)
            .collect();
        let db = DB::open_cf_with_opts(&o, dir, all.iter().map(|name| (name, o.clone())))?;
        for name in &all {
            let cf = db
                .cf_handle(name)
                .ok_or_else(|| format!("rocksdb: no column family {name}"))?;
            let capacity = db.property_int_value_cf(&cf, "rocksdb.block-cache-capacity")?;
            if capacity != Some(p.block_cache_bytes as u64) {
                return Err(format!(
                    "rocksdb: column family {name} has a block cache of {capacity:?} bytes, \
                     not the parity options' {}",
                    p.block_cache_bytes
                )
                .into());
            }
        }
        Ok(RocksEngine {
            db,
            keyspaces: p.keyspaces,
            read: ReadOptions::default(),
            sync: write_options(Durability::Sync),
            buffered: write_options(Durability::Buffered),
            no_wal: write_options(Durability::NoWal),
        })
    }

    fn write_options(&self, d: Durability) -> &WriteOptions {
        match d {
            Durability::Sync => &self.sync,
            Durability::Buffered => &self.buffered,
            Durability::NoWal => &self.no_wal,
        }
    }
}

impl Engine for RocksEngine {
    fn put(&self, key: &[u8], value: &[u8], durability: Durability) -> BenchResult<()> {
        Ok(self
            .db
            .put_opt(key, value, self.write_options(durability))?)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        Ok(self.db.get_pinned_opt(key, &self.read)?.map(|v| v.len()))
    }

    /// RocksDB's batched MultiGet (`batched_multi_get_cf`), its fast path for many keys.
    fn multi_get(&self, keys: &[Vec<u8>]) -> BenchResult<usize> {
        let cf = self
            .db
            .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
            .ok_or("rocksdb: no default column family")?;
        let mut found = 0;
        for value in self
            .db
            .batched_multi_get_cf_opt(cf, keys, false, &self.read)
        {
            found += usize::from(value?.is_some());
        }
        Ok(found)
    }

    /// RocksDB's `Checkpoint::create_checkpoint` (links the SSTables; flushes the
    /// memtable first, as Shale does).
    fn checkpoint(&self, dir: &std::path::Path) -> Option<BenchResult<()>> {
        let made =
            rocksdb::checkpoint::Checkpoint::new(&self.db).and_then(|c| c.create_checkpoint(dir));
        Some(made.map_err(Into::into))
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Option<BenchResult<()>> {
        let mut b = WriteBatch::default();
        b.delete_range(start, end);
        let opts = self.write_options(Durability::Buffered);
        Some(self.db.write_opt(b, opts).map_err(Into::into))
    }

    fn snapshot_get(&self, key: &[u8]) -> Option<BenchResult<Option<usize>>> {
        let snapshot = self.db.snapshot();
        let read = snapshot.get_pinned(key);
        Some(read.map(|v| v.map(|v| v.len())).map_err(Into::into))
    }

    fn snapshot_create(&self) -> Option<BenchResult<()>> {
        drop(std::hint::black_box(self.db.snapshot()));
        Some(Ok(()))
    }

    fn delete(&self, key: &[u8], durability: Durability) -> BenchResult<()> {
        Ok(self.db.delete_opt(key, self.write_options(durability))?)
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
        Ok(self.db.write_opt(b, self.write_options(durability))?)
    }

    fn write_batch_in(
        &self,
        ops: &[(usize, Vec<u8>, Vec<u8>)],
        durability: Durability,
    ) -> Option<BenchResult<()>> {
        let handles: Vec<_> = (0..self.keyspaces)
            .map(|i| self.db.cf_handle(&format!("ks{i}")))
            .collect::<Option<_>>()?;
        let mut b = WriteBatch::default();
        for (i, k, v) in ops {
            b.put_cf(*handles.get(*i)?, k, v);
        }
        Some(
            self.db
                .write_opt(b, self.write_options(durability))
                .map_err(Into::into),
        )
    }

    fn scan(&self, start: &[u8], limit: usize) -> BenchResult<usize> {
        let mut it = self.db.raw_iterator();
        it.seek(start);
        let mut n = 0;
        while n < limit && it.valid() {
            std::hint::black_box((it.key(), it.value()));
            n += 1;
            it.next();
        }
        it.status()?;
        Ok(n)
    }

    fn wait_background(&self) -> BenchResult<()> {
        self.db.flush()?;
        let mut w = WaitForCompactOptions::default();
        w.set_flush(true);
        Ok(self.db.wait_for_compact(&w)?)
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        self.db.flush_wal(true)?;
        Ok(())
    }

    fn shared(&self) -> Option<&(dyn Engine + Sync)> {
        Some(self)
    }
}

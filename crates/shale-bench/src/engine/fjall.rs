//! fjall 3 (one keyspace), feature `fjall`.
//!
//! fjall has no way to skip its journal (WAL): `NoWal` maps to `manual_journal_persist`,
//! which keeps journal writes in fjall's user-space buffer instead of writing them to the
//! OS per write; they still reach the journal file. That difference is listed in
//! [`Engine::caveats`].

use std::path::Path;

use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
};
use fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::api::{BenchResult, Durability, Engine};
use super::parity::{CompressionChoice, Parity};

pub struct FjallEngine {
    db: Database,
    ks: Keyspace,
    /// `Parity::keyspaces` keyspaces beside `ks`, `ks0`...
    keyspaces: Vec<Keyspace>,
}

fn persist_mode(d: Durability) -> Option<PersistMode> {
    match d {
        Durability::Sync => Some(PersistMode::SyncData),
        Durability::Buffered => Some(PersistMode::Buffer),
        Durability::NoWal => None,
    }
}

impl FjallEngine {
    pub fn open(dir: &Path, p: &Parity) -> BenchResult<FjallEngine> {
        let db = Database::builder(dir)
            .cache_size(p.block_cache_bytes as u64)
            .max_cached_files(Some(p.max_open_files.max(10)))
            .worker_threads(p.background_threads)
            .manual_journal_persist(true)
            .open()?;
        let compression = match p.compression {
            CompressionChoice::None => CompressionType::None,
            CompressionChoice::Lz4 => CompressionType::Lz4,
            other => return Err(format!("fjall: {} is not built in", other.name()).into()),
        };
        let bits = p.filter_bits_per_key as f32;
        let (wb, block) = (p.write_buffer_bytes as u64, u32::try_from(p.block_bytes)?);
        let target = p.target_file_bytes;
        let options = move || {
            KeyspaceCreateOptions::default()
                .compaction_strategy(std::sync::Arc::new(
                    fjall::compaction::Leveled::default().with_table_target_size(target),
                ))
                .max_memtable_size(wb)
                .data_block_size_policy(BlockSizePolicy::all(block))
                .data_block_compression_policy(CompressionPolicy::all(compression))
                .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(bits),
                )))
        };
        let ks = db.keyspace("bench", options)?;
        let keyspaces = (0..p.keyspaces)
            .map(|i| db.keyspace(&format!("ks{i}"), options))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(FjallEngine { db, ks, keyspaces })
    }

    fn persist(&self, d: Durability) -> BenchResult<()> {
        if let Some(mode) = persist_mode(d) {
            self.db.persist(mode)?;
        }
        Ok(())
    }
}

impl Engine for FjallEngine {
    fn put(&self, key: &[u8], value: &[u8], durability: Durability) -> BenchResult<()> {
        self.ks.insert(key, value)?;
        self.persist(durability)
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        Ok(self.ks.get(key)?.map(|v| v.len()))
    }

    fn snapshot_get(&self, key: &[u8]) -> Option<BenchResult<Option<usize>>> {
        use fjall::Readable;
        let snapshot = self.db.snapshot();
        let read = snapshot.get(&self.ks, key);
        Some(read.map(|v| v.map(|v| v.len())).map_err(Into::into))
    }

    fn snapshot_create(&self) -> Option<BenchResult<()>> {
        drop(std::hint::black_box(self.db.snapshot()));
        Some(Ok(()))
    }

    fn delete(&self, key: &[u8], durability: Durability) -> BenchResult<()> {
        self.ks.remove(key)?;
        self.persist(durability)
    }

    fn write_batch(
        &self,
        ops: &[(Vec<u8>, Option<Vec<u8>>)],
        durability: Durability,
    ) -> BenchResult<()> {
        let mut b = self.db.batch().durability(persist_mode(durability));
        for (k, v) in ops {
            match v {
                Some(v) => b.insert(&self.ks, k.as_slice(), v.as_slice()),
                None => b.remove(&self.ks, k.as_slice()),
            }
        }
        Ok(b.commit()?)
    }

    fn write_batch_in(
        &self,
        ops: &[(usize, Vec<u8>, Vec<u8>)],
        durability: Durability,
    ) -> Option<BenchResult<()>> {
        let mut b = self.db.batch().durability(persist_mode(durability));
        for (i, k, v) in ops {
            b.insert(self.keyspaces.get(*i)?, k.as_slice(), v.as_slice());
        }
        Some(b.commit().map_err(Into::into))
    }

    fn scan(&self, start: &[u8], limit: usize) -> BenchResult<usize> {
        let mut n = 0;
        for guard in self.ks.range(start..).take(limit) {
            let kv = guard.into_inner()?;
            std::hint::black_box(&kv);
            n += 1;
        }
        Ok(n)
    }

    fn wait_background(&self) -> BenchResult<()> {
        self.ks.rotate_memtable_and_wait()?;
        // fjall has no "wait for compactions" call: poll its counters until they have
        // read idle for 5 polls in a row (100 ms), since a compaction that a flush just
        // made due may not have started at the first idle poll.
        let mut idle = 0;
        while idle < 5 {
            std::thread::sleep(std::time::Duration::from_millis(20));
            if self.db.active_compactions() > 0 || self.db.outstanding_flushes() > 0 {
                idle = 0;
            } else {
                idle += 1;
            }
        }
        Ok(())
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        Ok(self.db.persist(PersistMode::SyncAll)?)
    }

    fn shared(&self) -> Option<&(dyn Engine + Sync)> {
        Some(self)
    }

    fn caveats(&self) -> Vec<String> {
        vec![
            "fjall: no batched read; multiget = a loop of gets".into(),
            "fjall: no WAL-off mode; nowal = journal kept in fjall's user-space buffer (manual_journal_persist), not written per write".into(),
            "fjall: sync/buffered = insert, then Database::persist(SyncData / Buffer) (one call per write)".into(),
            "fjall: wait_background polls active_compactions/outstanding_flushes until idle for 100 ms (no wait API)".into(),
            "fjall: no limit on the number of memtables (write_buffers does not apply)".into(),
            "fjall: its L1 target is 4 x the table size (not settable), 256 MiB at the default 64 MiB tables".into(),
        ]
    }
}

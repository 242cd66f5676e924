//! redb 4 (a copy-on-write B-tree in one file), feature `redb`.
//!
//! redb is not an LSM tree, so most parity settings have no counterpart: it keeps pages
//! uncompressed, has no bloom filter, memtable or background work, and reads through its
//! own page cache (sized to the parity block cache) with `pread`. Every operation is its
//! own transaction, as an application without batching would use it: a get opens a read
//! transaction (redb's snapshot) and a put commits a write transaction. redb has no log
//! that survives a process crash without an fsync: `Buffered` and `NoWal` commit with
//! `Durability::None` (kept in redb's memory and the OS's until a later durable commit),
//! `Sync` with `Durability::Immediate`. These differences are listed in
//! [`Engine::caveats`].

use std::path::Path;

use redb::{Database, ReadableDatabase, TableDefinition};

use super::api::{BenchResult, Durability, Engine};
use super::parity::Parity;

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("bench");

pub struct RedbEngine {
    db: Database,
}

fn durability(d: Durability) -> redb::Durability {
    match d {
        Durability::Sync => redb::Durability::Immediate,
        Durability::Buffered | Durability::NoWal => redb::Durability::None,
    }
}

impl RedbEngine {
    pub fn open(dir: &Path, p: &Parity) -> BenchResult<RedbEngine> {
        let db = Database::builder()
            .set_cache_size(p.block_cache_bytes)
            .create(dir.join("bench.redb"))?;
        // Create the table, so that reads of an empty store find it.
        let tx = db.begin_write()?;
        tx.open_table(TABLE)?;
        tx.commit()?;
        Ok(RedbEngine { db })
    }

    /// Run `f` on the table inside one write transaction committed with `d`.
    fn write(
        &self,
        d: Durability,
        f: impl FnOnce(&mut redb::Table<&[u8], &[u8]>) -> Result<(), redb::StorageError>,
    ) -> BenchResult<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(durability(d))?;
        {
            let mut table = tx.open_table(TABLE)?;
            f(&mut table)?;
        }
        tx.commit()?;
        Ok(())
    }
}

impl Engine for RedbEngine {
    fn put(&self, key: &[u8], value: &[u8], d: Durability) -> BenchResult<()> {
        self.write(d, |t| t.insert(key, value).map(drop))
    }

    fn get(&self, key: &[u8]) -> BenchResult<Option<usize>> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(TABLE)?;
        Ok(table.get(key)?.map(|v| v.value().len()))
    }

    fn snapshot_get(&self, key: &[u8]) -> Option<BenchResult<Option<usize>>> {
        // A read transaction is redb's snapshot: the same thing as a get.
        Some(self.get(key))
    }

    fn snapshot_create(&self) -> Option<BenchResult<()>> {
        let tx = self.db.begin_read().map_err(Into::into);
        Some(tx.map(|tx| drop(std::hint::black_box(tx))))
    }

    fn delete(&self, key: &[u8], d: Durability) -> BenchResult<()> {
        self.write(d, |t| t.remove(key).map(drop))
    }

    fn write_batch(&self, ops: &[(Vec<u8>, Option<Vec<u8>>)], d: Durability) -> BenchResult<()> {
        self.write(d, |t| {
            for (k, v) in ops {
                match v {
                    Some(v) => drop(t.insert(k.as_slice(), v.as_slice())?),
                    None => drop(t.remove(k.as_slice())?),
                }
            }
            Ok(())
        })
    }

    fn scan(&self, start: &[u8], limit: usize) -> BenchResult<usize> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(TABLE)?;
        let mut n = 0;
        for entry in table.range(start..)?.take(limit) {
            let (k, v) = entry?;
            std::hint::black_box((k.value(), v.value()));
            n += 1;
        }
        Ok(n)
    }

    fn wait_background(&self) -> BenchResult<()> {
        // No background work. Make what was written durable, as the LSM engines' flushes
        // write their memtables out, so that reads start from the same state.
        self.write(Durability::Sync, |_| Ok(()))
    }

    fn close(self: Box<Self>) -> BenchResult<()> {
        self.write(Durability::Sync, |_| Ok(()))
    }

    fn shared(&self) -> Option<&(dyn Engine + Sync)> {
        Some(self)
    }

    fn caveats(&self) -> Vec<String> {
        vec![
            "redb: no batched read; multiget = a loop of gets".into(),
            "redb: a B-tree: no compression (pages stored raw), no bloom filter, no memtable or background work; block cache = redb's page cache (pread)".into(),
            "redb: one transaction per operation; buffered/nowal = Durability::None (lost on a crash until the next durable commit), sync = Durability::Immediate".into(),
            "redb: wait_background = an empty durable commit".into(),
        ]
    }
}

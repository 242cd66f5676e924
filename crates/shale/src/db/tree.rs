//! A keyspace's tree as readers reach it ([`Tree`]) and the files it holds
//! ([`LiveFile`]), and the set of active memtables one WAL protects ([`MemSet`]): the
//! per-keyspace parts of the database (see docs/architecture.md, "Keyspaces").

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use super::super_version::SuperVersionCell;
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sync::lock;
use crate::version::table_cache::TableCache;

/// What [`Db::live_files`](crate::Db::live_files) says about one live SSTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// The keyspace's name (`"default"` for the default keyspace).
    pub keyspace: String,
    pub level: usize,
    pub path: PathBuf,
    pub size: u64,
    /// The smallest and largest user keys in the file.
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
    /// The range of sequence numbers of its entries.
    pub smallest_seq: u64,
    pub largest_seq: u64,
}

/// One keyspace's tree as readers reach it: its super version, and the options its
/// tables are built with.
pub(crate) struct Tree {
    pub(super) id: KeyspaceId,
    pub(super) name: String,
    /// The database's options with the keyspace's own (`KeyspaceOptions`) in place;
    /// replaced when the keyspace's options change (`Db::keyspace_with`).
    opts: Mutex<Arc<Options>>,
    pub(super) super_version: SuperVersionCell,
    /// Set when the keyspace is dropped: its handles refuse every call from then on.
    pub(super) dropped: AtomicBool,
}

impl Tree {
    pub(super) fn new(
        id: KeyspaceId,
        name: String,
        opts: Options,
        super_version: SuperVersionCell,
    ) -> Tree {
        Tree {
            id,
            name,
            opts: Mutex::new(Arc::new(opts)),
            super_version,
            dropped: AtomicBool::new(false),
        }
    }

    /// The options its flushes and compactions build tables with now.
    pub(super) fn opts(&self) -> Arc<Options> {
        Arc::clone(&lock(&self.opts))
    }

    pub(super) fn set_opts(&self, opts: Options) {
        *lock(&self.opts) = Arc::new(opts);
    }
}

/// The memtables that one WAL protects: one per keyspace, the default's first, each with
/// the size at which it is frozen. They are frozen together, with the WAL, when any one of
/// them is full (RocksDB's atomic flush), so one log number covers every keyspace.
#[derive(Clone)]
pub(crate) struct MemSet(Vec<MemSlot>);

#[derive(Clone)]
pub(crate) struct MemSlot {
    pub(super) keyspace: KeyspaceId,
    pub(super) mem: Arc<MemTable>,
    pub(super) write_buffer_size: usize,
}

impl MemSet {
    pub(super) fn new(slots: Vec<MemSlot>) -> MemSet {
        MemSet(slots)
    }

    /// The memtable of keyspace `ks`, if it exists. The slots are in id order (the
    /// default's, 0, first; ids grow as keyspaces are made).
    pub(super) fn get(&self, ks: KeyspaceId) -> Option<&Arc<MemTable>> {
        let at = self.0.binary_search_by_key(&ks, |s| s.keyspace).ok()?;
        self.0.get(at).map(|s| &s.mem)
    }

    /// The default keyspace's memtable.
    pub(super) fn default_mem(&self) -> &Arc<MemTable> {
        match self.0.first() {
            Some(slot) => &slot.mem,
            None => unreachable!("a MemSet always holds the default keyspace's memtable"),
        }
    }

    /// The set with keyspace `ks`'s memtable frozen at `write_buffer_size` from now on.
    pub(super) fn with_write_buffer(&self, ks: KeyspaceId, write_buffer_size: usize) -> MemSet {
        let slots = self.0.iter().map(|s| MemSlot {
            write_buffer_size: match s.keyspace == ks {
                true => write_buffer_size,
                false => s.write_buffer_size,
            },
            ..s.clone()
        });
        MemSet(slots.collect())
    }

    pub(super) fn slots(&self) -> &[MemSlot] {
        &self.0
    }

    pub(super) fn is_empty(&self) -> bool {
        self.0.iter().all(|s| s.mem.is_empty())
    }

    /// Whether any memtable reached the size at which it is frozen.
    pub(super) fn any_full(&self) -> bool {
        self.0
            .iter()
            .any(|s| s.mem.approximate_memory_usage() >= s.write_buffer_size || s.mem.is_full())
    }

    pub(super) fn approximate_memory_usage(&self) -> usize {
        self.0
            .iter()
            .map(|s| s.mem.approximate_memory_usage())
            .sum()
    }

    /// The newest sequence number in any of them.
    pub(super) fn max_seq(&self) -> SeqNo {
        self.0
            .iter()
            .map(|s| s.mem.max_seq())
            .max()
            .unwrap_or_default()
    }
}

impl Tree {
    /// The number of files in each level of the tree's current version.
    pub(super) fn level_file_counts(&self) -> Vec<usize> {
        let sv = self.super_version.load();
        (0..crate::version::NUM_LEVELS)
            .map(|l| sv.version.files(l).len())
            .collect()
    }

    /// Every file of the tree's current version, level by level; `tables` names their
    /// paths.
    pub(super) fn live_files(&self, tables: &TableCache) -> Vec<LiveFile> {
        let sv = self.super_version.load();
        (0..crate::version::NUM_LEVELS)
            .flat_map(|level| {
                sv.version.files(level).iter().map(move |f| LiveFile {
                    keyspace: self.name.clone(),
                    level,
                    path: tables.path(f.meta.id),
                    size: f.meta.size,
                    smallest_key: f.meta.smallest.user_key().to_vec(),
                    largest_key: f.meta.largest.user_key().to_vec(),
                    smallest_seq: f.meta.smallest_seq.0,
                    largest_seq: f.meta.largest_seq.0,
                })
            })
            .collect()
    }
}

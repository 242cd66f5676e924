//! Keyspaces: creating, opening, listing and dropping them, and the [`Keyspace`] handle.
//!
//! A keyspace is a tree of its own (`Tree`: a memtable in the shared [`MemSet`], its own
//! levels in the version set, its own super version) beside the default keyspace's. Its
//! creation and its drop are manifest edits logged under the `log` lock, so no write
//! group is in flight while the set of memtables changes, and a write naming a keyspace
//! is checked against that set under the same lock (`write.rs`, `refused`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::state::{DbInner, DbState};
use super::super_version::{SuperVersion, SuperVersionCell};
use super::tree::{LiveFile, MemSet, MemSlot, Tree};
use super::{Db, DbIterator, RangeIter};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::keyspace::{check_name, KeyspaceId, DEFAULT_NAME};
use crate::memtable::MemTable;
use crate::options::KeyspaceOptions;
use crate::options::{ReadOptions, WriteOptions};
use crate::sync::lock;
use crate::version::KeyspaceDef;
use crate::version::{Level, VersionEdit, NUM_LEVELS};

/// A handle to one keyspace of an open [`Db`]: the same calls as `Db`'s, on the
/// keyspace's keys alone. Cheap to clone and to share between threads. A write across
/// keyspaces goes in one [`WriteBatch`] (`put_in`, `delete_in`) through [`Db::write`].
#[derive(Clone)]
pub struct Keyspace {
    pub(super) inner: Arc<DbInner>,
    pub(super) tree: Arc<Tree>,
}

impl From<&Keyspace> for KeyspaceId {
    fn from(ks: &Keyspace) -> KeyspaceId {
        ks.tree.id
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.tree.name)
            .field("id", &self.tree.id.0)
            .finish()
    }
}

impl Db {
    /// The keyspace `name`, created with the database's options (`KeyspaceOptions::from_db`)
    /// if it does not exist. `"default"` is the default keyspace, what [`Db::put`] and
    /// [`Db::get`] reach.
    ///
    /// # Errors
    /// `InvalidArgument` for a name of no or more than 255 bytes, or on a read-only handle
    /// when the keyspace does not exist; `Poisoned` or `Io` if the manifest edit fails.
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        if let Some(tree) = self.inner.find_tree(name) {
            return Ok(self.handle(tree));
        }
        let options = KeyspaceOptions::from_db(&self.inner.opts);
        self.keyspace_with(name, options)
    }

    /// The keyspace `name` with `options`: created if it does not exist; an existing one
    /// takes them (RocksDB's `SetOptions`): its tables from then on are built with them,
    /// the ones already written keep theirs. The options are stored with the keyspace in
    /// the manifest. The default keyspace's options are the database's (`Options`).
    ///
    /// # Errors
    /// As [`Db::keyspace`]; `InvalidOptions` for options out of their ranges;
    /// `InvalidArgument` for the default keyspace with other options than the database's.
    pub fn keyspace_with(&self, name: &str, options: KeyspaceOptions) -> Result<Keyspace> {
        if let Some(tree) = self.inner.find_tree(name) {
            if KeyspaceOptions::from_db(&tree.opts()) != options {
                if tree.id.is_default() {
                    return Err(Error::invalid(
                        "the default keyspace's options are the database's Options",
                    ));
                }
                self.inner.change_keyspace(&tree, options)?;
            }
            return Ok(self.handle(tree));
        }
        let tree = self.inner.create_keyspace(name, options)?;
        Ok(self.handle(tree))
    }

    /// The names of every keyspace, `"default"` first, then in the order they were made.
    pub fn keyspace_names(&self) -> Vec<String> {
        lock(&self.inner.state)
            .trees
            .values()
            .map(|tree| tree.name.clone())
            .collect()
    }

    /// Drop keyspace `name`: its data is gone at once (one manifest edit, whatever its
    /// size; its files are deleted once no reader uses them), and its handles refuse every
    /// call from then on.
    ///
    /// # Errors
    /// `InvalidArgument` for the default keyspace or a name that does not exist, or on a
    /// read-only handle; `Poisoned` or `Io` if the manifest edit fails.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.inner.drop_keyspace(name)
    }

    fn handle(&self, tree: Arc<Tree>) -> Keyspace {
        Keyspace {
            inner: Arc::clone(&self.inner),
            tree,
        }
    }
}

impl DbInner {
    fn find_tree(&self, name: &str) -> Option<Arc<Tree>> {
        let state = lock(&self.state);
        state.trees.values().find(|t| t.name == name).cloned()
    }

    fn create_keyspace(&self, name: &str, options: KeyspaceOptions) -> Result<Arc<Tree>> {
        check_name(name).map_err(Error::invalid)?;
        options
            .validate(&self.opts)
            .map_err(Error::InvalidOptions)?;
        self.check_writable()?;
        // The log lock first: no write group runs while the memtable set changes.
        let mut log = lock(&self.log);
        self.check_open()?;
        let mut state = lock(&self.state);
        if let Some(tree) = state.trees.values().find(|t| t.name == name) {
            // Made by another thread since `find_tree`.
            return Ok(Arc::clone(tree));
        }
        let id = state.versions.next_keyspace_id();
        let next =
            id.0.checked_add(1)
                .ok_or_else(|| Error::invalid("keyspace ids are exhausted"))?;
        let edit = VersionEdit {
            keyspaces: vec![KeyspaceDef {
                id,
                name: name.to_owned(),
                options,
            }],
            next_keyspace_id: Some(KeyspaceId(next)),
            ..VersionEdit::default()
        };
        self.log_ddl(&mut state, edit)?;
        let mut opts = options.apply_to(&self.opts);
        opts.compaction_filter = self.opts.keyspace_filter(name);
        let mem = Arc::new(MemTable::with_capacity(opts.write_buffer_size));
        let sv = SuperVersion {
            mem: Arc::clone(&mem),
            imm: Vec::new(),
            version: state.versions.version(id).unwrap_or_default(),
            // Nothing of it was written before it was made.
            start_seq: SeqNo(0),
            purger: Arc::clone(&self.purger),
        };
        let write_buffer_size = opts.write_buffer_size;
        let tree = Arc::new(Tree::new(
            id,
            name.to_owned(),
            opts,
            SuperVersionCell::new(Arc::new(sv)),
        ));
        let mut slots = log.mems.slots().to_vec();
        slots.push(MemSlot {
            keyspace: id,
            mem,
            write_buffer_size,
        });
        log.mems = MemSet::new(slots);
        state.active = log.mems.clone();
        state.trees.insert(id, Arc::clone(&tree));
        Ok(tree)
    }

    /// Log `tree`'s new options and build its tables with them from now on.
    fn change_keyspace(&self, tree: &Tree, options: KeyspaceOptions) -> Result<()> {
        options
            .validate(&self.opts)
            .map_err(Error::InvalidOptions)?;
        self.check_writable()?;
        let mut log = lock(&self.log);
        self.check_open()?;
        self.check_tree(tree)?;
        let mut state = lock(&self.state);
        let edit = VersionEdit {
            keyspaces: vec![KeyspaceDef {
                id: tree.id,
                name: tree.name.clone(),
                options,
            }],
            ..VersionEdit::default()
        };
        self.log_ddl(&mut state, edit)?;
        let mut opts = options.apply_to(&self.opts);
        opts.compaction_filter = self.opts.keyspace_filter(&tree.name);
        log.mems = log.mems.with_write_buffer(tree.id, opts.write_buffer_size);
        state.active = log.mems.clone();
        tree.set_opts(opts);
        Ok(())
    }

    fn drop_keyspace(&self, name: &str) -> Result<()> {
        if name == DEFAULT_NAME {
            return Err(Error::invalid("the default keyspace cannot be dropped"));
        }
        self.check_writable()?;
        let mut log = lock(&self.log);
        self.check_open()?;
        let mut state = lock(&self.state);
        let Some(tree) = state.trees.values().find(|t| t.name == name).cloned() else {
            return Err(Error::invalid(format!("no keyspace named {name}")));
        };
        if let Some(hook) = log.hooks.iter().find(|h| h.keyspaces().contains(&tree.id)) {
            return Err(Error::invalid(format!(
                "keyspace {name} is covered by index {:?}: close the database and \
                 remove the index first",
                hook.name()
            )));
        }
        let version = state.versions.version(tree.id).unwrap_or_default();
        let files: Vec<_> = (0..NUM_LEVELS)
            .flat_map(|level| version.files(level).iter().map(move |f| (level, f)))
            .collect();
        let edit = VersionEdit {
            dropped_keyspaces: vec![tree.id],
            deleted_files: files
                .iter()
                .map(|(level, f)| (Level(*level as u8), f.meta.id))
                .collect(),
            ..VersionEdit::default()
        };
        self.log_ddl(&mut state, edit)?;
        tree.dropped.store(true, Ordering::Release);
        // Handles may outlive the drop: their tree lets go of its memtables and files.
        tree.super_version.store(Arc::new(SuperVersion {
            mem: Arc::new(MemTable::new()),
            imm: Vec::new(),
            version: Arc::default(),
            start_seq: SeqNo::MAX,
            purger: Arc::clone(&self.purger),
        }));
        let slots = log
            .mems
            .slots()
            .iter()
            .filter(|slot| slot.keyspace != tree.id)
            .cloned()
            .collect();
        log.mems = MemSet::new(slots);
        state.active = log.mems.clone();
        state.trees.remove(&tree.id);
        state.compact_pointers.remove(&tree.id);
        drop(state);
        drop(log);
        // Deleted once the last reader (an iterator, a running compaction) lets go.
        for (_, file) in files {
            file.mark_obsolete();
        }
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Log a keyspace's creation or drop. A failed manifest write refuses writes from then
    /// on, as a failed flush does.
    fn log_ddl(&self, state: &mut DbState, edit: VersionEdit) -> Result<()> {
        if let Some(why) = &state.bg_error {
            return Err(Error::Poisoned(why.clone()));
        }
        if let Err(e) = state.log_and_apply(edit, &[]) {
            if state.bg_error.is_none() {
                state.bg_error = Some(format!("manifest write failed: {e}"));
            }
            self.publish_pressure(state);
            return Err(e);
        }
        Ok(())
    }
}

impl Keyspace {
    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.tree.name
    }

    /// The keyspace's id, as [`WriteBatch::put_in`] takes it.
    pub fn id(&self) -> KeyspaceId {
        self.tree.id
    }

    /// The options its tables are built with.
    pub fn options(&self) -> KeyspaceOptions {
        KeyspaceOptions::from_db(&self.tree.opts())
    }

    /// Set `key` to `value` in this keyspace.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self.tree.id, key, value);
        self.write(batch)
    }

    /// Remove `key` from this keyspace.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self.tree.id, key);
        self.write(batch)
    }

    /// Remove every key `k` with `start <= k < end` from this keyspace (as
    /// [`Db::delete_range`]).
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range_in(self.tree.id, start, end);
        self.write(batch)
    }

    fn write(&self, batch: WriteBatch) -> Result<()> {
        self.inner.check_tree(&self.tree)?;
        self.inner.admit(&batch)?;
        self.inner.write(batch, WriteOptions::default()).map(drop)
    }

    /// The value of `key` in this keyspace, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner
            .get(&self.tree, key.as_ref(), &ReadOptions::default())
    }

    /// The value of `key` as `opts` see it (a snapshot of the database covers every
    /// keyspace).
    pub fn get_opt(
        &self,
        key: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<Option<Vec<u8>>> {
        self.inner.get(&self.tree, key.as_ref(), opts)
    }

    /// As [`Db::multi_get`], in this keyspace.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        opts: &ReadOptions<'_>,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(&self.tree, keys, opts)
    }

    /// As [`Db::iter`], over this keyspace.
    pub fn iter(&self, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        self.inner.iter(&self.tree, opts)
    }

    /// As [`Db::range`], in this keyspace.
    pub fn range<K: AsRef<[u8]>>(&self, range: impl std::ops::RangeBounds<K>) -> Result<RangeIter> {
        self.range_opt(range, &ReadOptions::default())
    }

    /// As [`Db::range_opt`], in this keyspace.
    pub fn range_opt<K: AsRef<[u8]>>(
        &self,
        range: impl std::ops::RangeBounds<K>,
        opts: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        let (lower, upper) = super::read::to_bounds(&range);
        self.inner.range_iter(&self.tree, opts, lower, upper)
    }

    /// As [`Db::prefix`], in this keyspace.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<RangeIter> {
        self.prefix_opt(prefix, &ReadOptions::default())
    }

    /// As [`Db::prefix_opt`], in this keyspace.
    pub fn prefix_opt(
        &self,
        prefix: impl AsRef<[u8]>,
        opts: &ReadOptions<'_>,
    ) -> Result<RangeIter> {
        self.inner.prefix_iter(&self.tree, prefix.as_ref(), opts)
    }

    /// As [`Db::compact_range`], in this keyspace.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.check_writable()?;
        self.inner.check_tree(&self.tree)?;
        self.inner.compact_range(&self.tree, begin, end)
    }

    /// Number of live SSTables per level of this keyspace.
    pub fn level_file_counts(&self) -> Vec<usize> {
        self.tree.level_file_counts()
    }

    /// This keyspace's live SSTables (as [`Db::live_files`]).
    pub fn live_files(&self) -> Vec<LiveFile> {
        self.tree.live_files(&self.inner.tables)
    }
}

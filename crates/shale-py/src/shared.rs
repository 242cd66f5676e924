//! The engine's `Db` behind a Python `DB`, shared by it and everything made from it
//! (iterators, snapshots, batches, indexes), and its closing: by `close()`, by the last
//! handle's drop, or at interpreter exit (module documentation of `db.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, Weak};

use pyo3::prelude::*;

use crate::embedder::inside_embedder;
use crate::errors::{run, Failure};

/// An open database, with `semantic=True` its default index, and the indexes opened with
/// `DB.index`.
pub(crate) struct Open {
    db: Arc<shale::Db>,
    index: Option<shale_search::semantic::VectorIndex>,
    /// By name. Dropped at close, so that a Python `VectorIndex` left over keeps nothing alive.
    indexes: Mutex<HashMap<String, shale_search::semantic::VectorIndex>>,
    /// The text indexes opened with `DB.text_index`, by name, likewise.
    text_indexes: Mutex<HashMap<String, Arc<shale_search::TextIndex>>>,
}

/// The name of the index `semantic=True` opens over every key.
const DEFAULT_INDEX: &str = "default";

/// The engine's `Db`, shared by a `DB` and everything made from it.
pub(crate) struct Shared {
    db: RwLock<Option<Open>>,
    pub(crate) path: PathBuf,
    /// True if a Python compaction filter runs in its compactions.
    pub(crate) python_filter: bool,
}

/// The databases that run Python (an index with a Python embedder, or a compaction
/// filter), for [`close_for_exit`].
static PYTHON_EMBEDDERS: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Close every database that has an index with a Python embedder. Registered with
/// `atexit` by the package: at exit, before the interpreter finalizes, the workers can
/// still take the GIL and finish their batches; during finalization they could not.
pub(crate) fn close_for_exit(py: Python<'_>) {
    let dbs = std::mem::take(
        &mut *PYTHON_EMBEDDERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    for shared in dbs.iter().filter_map(Weak::upgrade) {
        // Exit goes on whatever a close reports; the data is safe in the WAL either way.
        let _ = run(py, || shared.close());
    }
}

impl Shared {
    /// Open the database at `path`; with a `model`, its default index over every key too.
    pub(crate) fn new(
        path: PathBuf,
        opts: shale::Options,
        model: Option<Arc<dyn shale_search::semantic::Embedder>>,
    ) -> Result<Shared, Failure> {
        let python_filter =
            opts.compaction_filter.is_some() || !opts.keyspace_compaction_filters.is_empty();
        let db = Arc::new(shale::Db::open(&path, opts)?);
        let index = match model {
            Some(model) => Some(shale_search::semantic::VectorIndex::open(
                &db,
                DEFAULT_INDEX,
                shale_search::semantic::VectorIndexOptions::text(model),
            )?),
            None => None,
        };
        let open = Open {
            db,
            index,
            indexes: Mutex::new(HashMap::new()),
            text_indexes: Mutex::new(HashMap::new()),
        };
        Ok(Shared {
            db: RwLock::new(Some(open)),
            path,
            python_filter,
        })
    }

    /// Close this database at interpreter exit if it runs Python (see `close_for_exit`).
    pub(crate) fn register_for_exit(self: &Arc<Self>) {
        let mut dbs = PYTHON_EMBEDDERS
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        dbs.retain(|db| db.strong_count() > 0);
        if !dbs
            .iter()
            .any(|db| std::ptr::eq(db.as_ptr(), Arc::as_ptr(self)))
        {
            dbs.push(Arc::downgrade(self));
        }
    }

    /// The open database under a read lock. Refused inside a Python embedder (see
    /// `embedder.rs`) and once `close` ran.
    fn open(&self) -> Result<RwLockReadGuard<'_, Option<Open>>, Failure> {
        if inside_embedder() {
            return Err(Failure::Engine(shale::Error::InvalidArgument(
                "an embedder must not call the database it indexes (it runs in the \
                 index's workers, which that call may wait for)"
                    .into(),
            )));
        }
        let guard = self.db.read().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            return Err(Failure::Engine(shale::Error::Closed));
        }
        Ok(guard)
    }

    /// Run `f` on the open database; `Closed` once `close` ran. Call without the GIL.
    pub(crate) fn with<T>(
        &self,
        f: impl FnOnce(&shale::Db) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        match self.open()?.as_ref() {
            Some(open) => f(&open.db),
            None => Err(Failure::Engine(shale::Error::Closed)),
        }
    }

    /// Run `f` on the default index; `InvalidArgument` without `semantic=True`.
    pub(crate) fn with_index<T>(
        &self,
        f: impl FnOnce(&shale_search::semantic::VectorIndex) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        match self.open()?.as_ref() {
            Some(Open {
                index: Some(index), ..
            }) => f(index),
            Some(_) => Err(Failure::Engine(shale::Error::InvalidArgument(
                "semantic search is off for this database (open it with semantic=True)".into(),
            ))),
            None => Err(Failure::Engine(shale::Error::Closed)),
        }
    }

    /// Run `f` on the index `name` opened with `DB.index`; `Closed` once `close` ran.
    pub(crate) fn with_named_index<T>(
        &self,
        name: &str,
        f: impl FnOnce(&shale_search::semantic::VectorIndex) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let guard = self.open()?;
        let index = guard.as_ref().and_then(|open| {
            open.indexes
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(name)
                .cloned()
        });
        match index {
            // The read lock is still held: `close` waits for `f`.
            Some(index) => f(&index),
            None => Err(Failure::Engine(shale::Error::Closed)),
        }
    }

    /// Open (or find) the index `name` with `opts` (`shale_search::semantic::VectorIndex::open`) and
    /// keep it for [`Shared::with_named_index`]. Call without the GIL.
    pub(crate) fn open_index(
        self: &Arc<Self>,
        name: &str,
        opts: shale_search::semantic::VectorIndexOptions,
        python_embedder: bool,
    ) -> Result<shale_search::semantic::VectorIndex, Failure> {
        let guard = self.open()?;
        let open = guard
            .as_ref()
            .ok_or(Failure::Engine(shale::Error::Closed))?;
        let index = shale_search::semantic::VectorIndex::open(&open.db, name, opts)?;
        open.indexes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string(), index.clone());
        if python_embedder {
            self.register_for_exit();
        }
        Ok(index)
    }

    /// Run `f` on the text index `name` opened with `DB.text_index`; `InvalidArgument` if
    /// none is open by that name, `Closed` once `close` ran.
    pub(crate) fn with_text_index<T>(
        &self,
        name: &str,
        f: impl FnOnce(&shale_search::TextIndex) -> Result<T, Failure>,
    ) -> Result<T, Failure> {
        let guard = self.open()?;
        let open = guard
            .as_ref()
            .ok_or(Failure::Engine(shale::Error::Closed))?;
        let index = open
            .text_indexes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned();
        match index {
            Some(index) => f(&index),
            None => Err(Failure::Engine(shale::Error::InvalidArgument(format!(
                "no text index {name:?} is open (DB.text_index({name:?}, ...) opens one)"
            )))),
        }
    }

    /// Open (or find) the text index `name` with `opts` and keep it for
    /// [`Shared::with_text_index`]. Call without the GIL.
    pub(crate) fn open_text_index(
        &self,
        name: &str,
        opts: shale_search::TextIndexOptions,
    ) -> Result<Arc<shale_search::TextIndex>, Failure> {
        let guard = self.open()?;
        let open = guard
            .as_ref()
            .ok_or(Failure::Engine(shale::Error::Closed))?;
        let index = Arc::new(shale_search::TextIndex::open(&open.db, name, opts)?);
        open.text_indexes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string(), Arc::clone(&index));
        Ok(index)
    }

    pub(crate) fn close(&self) -> Result<(), Failure> {
        if inside_embedder() {
            // Closing joins the index workers, this thread among them.
            return Err(Failure::Engine(shale::Error::InvalidArgument(
                "an embedder must not close the database it indexes".into(),
            )));
        }
        // The write lock is held through the engine's close, so that a second `close`
        // (or any call) in another thread returns only once the directory is released.
        let mut db = self.db.write().unwrap_or_else(PoisonError::into_inner);
        match db.take() {
            // Closing closes the indexes (their workers stop after their current batch),
            // joins the background threads and releases the lock file.
            Some(open) => {
                drop(open.index);
                drop(open.indexes);
                drop(open.text_indexes);
                Ok(open.db.close()?)
            }
            None => Ok(()),
        }
    }
}

impl Shared {
    /// True once `close` ran. Called with the GIL held: never waits for the lock. Only
    /// `close` holds it for writing, so a lock held that way means a close in progress:
    /// closed.
    pub(crate) fn closed(&self) -> bool {
        match self.db.try_read() {
            Ok(db) => db.is_none(),
            Err(std::sync::TryLockError::Poisoned(db)) => db.into_inner().is_none(),
            Err(std::sync::TryLockError::WouldBlock) => true,
        }
    }
}

impl Drop for Shared {
    /// Close what `close()` did not. Dropping the engine's `Db` joins the index workers,
    /// which may be waiting for the GIL inside a Python embedder: release it meanwhile.
    fn drop(&mut self) {
        let Some(open) = self
            .db
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return;
        };
        if inside_embedder() {
            // Dropped by the embedder itself: its worker cannot join itself, so another
            // thread closes.
            let _ = std::thread::Builder::new()
                .name("shale-close".into())
                .spawn(move || drop(open));
            return;
        }
        let mut open = Some(open);
        Python::try_attach(|py| py.detach(|| drop(open.take())));
        drop(open);
    }
}

//! Semantic search, a layer over [`Db`]: named indexes, each over the keys under one prefix,
//! that find values by meaning.
//!
//! ```text
//!   let db = Arc::new(Db::open(path, Options::default())?);
//!   let docs = VectorIndex::open(&db, "docs", VectorIndexOptions::text(model).prefix("docs/"))?;
//!   db.put("docs/1", "the cat sleeps on the warm mat")?;     // any write path
//!   docs.put_vector("docs/2", &vector, b"payload")?;          // or a vector, no model
//!   db.put("raft/meta", [0xff, 0x00])?;                       // outside the prefix: plain data
//!   let hits = docs.search("where do cats sleep", &SearchOptions::k(10))?;
//! ```
//!
//! An index follows every write of its database through a [`shale::WriteHook`], the
//! engine's one seam for derived data: the engine knows nothing of vectors. A value under
//! an index's prefix is either UTF-8 text, which the index's [`Embedder`] turns into a
//! vector, or a **vector record** ([`vector_value`]): a vector given by the user, with an
//! optional payload. Keys outside every prefix are never looked at.
//!
//! ```text
//!   Db::write ──check (log lock: refuse a value the index cannot hold)──► commit ──►
//!   committed (log lock: queue key, seq, text | vector | delete, in commit order) ──►
//!   embed workers (batches, no lock while embedding) ──► apply: key map, store, vector
//!   file, graph
//!   VectorIndex::search ── wait until every change queued before it is applied ── graph (codes)
//!   ── best candidates re-scored with their full vectors ── each hit checked against the
//!   key-value data (value hash) ──► hits
//! ```
//!
//! The key-value data is the truth. The index is derived from it and may lag: writes are
//! acknowledged before their text is embedded, so bulk loads run at the engine's speed,
//! not the model's. A search first waits until every change queued before it is applied
//! (read-your-writes), then re-reads every hit's value and drops hits whose value hash no
//! longer matches: a search never returns a key that is deleted or whose value was
//! replaced, whatever state the index is in.
//!
//! Each index lives in `indexes/<name>/` of the database's directory: its **vector store**
//! (a Shale database of its own: key → value hash, node id and the embedding, so that a
//! restart does not embed again), `MODEL` (which model made the stored vectors, and the
//! rest of the index's definition, which [`VectorIndex::open_existing`] reads back), `GRAPH`
//! (the HNSW checkpoint, written in the background) and `VECTORS` (the full vectors by node
//! id, a mapped cache). At open, the index reconciles all of them with the data in one
//! merged scan (`open.rs`). docs/format.md sections 8 to 12 give every byte.

mod checkpoint;
mod core;
mod embedder;
mod hash_embedder;
mod hook;
mod keyed_graph;
mod layout;
mod model_file;
mod open;
mod options;
mod pending;
mod search;
mod spec;
mod stats;
mod value;

use std::sync::Arc;

use shale::error::{Error, Result};
use shale::Db;

pub use embedder::Embedder;
pub use hash_embedder::HashEmbedder;
pub use model_file::{
    VectorIndexDefinition, MAX_MODEL_ID_BYTES, MODEL_FORMAT_VERSION, MODEL_MAGIC, USER_VECTORS,
};
pub use options::{SearchOptions, VectorIndexOptions};
pub use search::SearchHit;
pub use stats::{VectorIndexRecovery, VectorIndexStats};
pub use value::{
    decode_stored, decode_vector_value, encode_stored, value_hash, vector_value, VectorValue,
    VECTOR_VALUE_TAG,
};

use self::core::IndexCore;

pub use layout::index_dir;
/// The subdirectory of a database directory that holds its indexes, one directory each.
pub use shale::inspect::filename::INDEXES_DIR;

/// The longest index name (names are `[A-Za-z0-9_-]`, used as a directory name).
pub const MAX_INDEX_NAME: usize = 64;

/// A handle on a semantic index of a database. Cheap to clone; every clone is the same
/// index. The index lives until its database closes, whether or not a handle is left.
#[derive(Clone)]
pub struct VectorIndex {
    core: Arc<IndexCore>,
    db: Arc<Db>,
    /// The keyspace it covers, unless the default one.
    space: Option<shale::Keyspace>,
}

impl std::fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorIndex")
            .field("name", &self.core.name())
            .field("prefix", &String::from_utf8_lossy(self.core.prefix()))
            .finish_non_exhaustive()
    }
}

impl VectorIndex {
    /// Open the index `name` of `db`, creating it if it does not exist, and reconcile it
    /// with the data (see the module documentation). If the index is already open on this
    /// database, returns a handle to it (its options must match, bar `ef_search`).
    ///
    /// Opening an index over keys that already hold values indexes them: texts are queued
    /// for embedding (the open does not wait for them; [`VectorIndex::wait_indexed`] does).
    ///
    /// `opts` define the index ([`VectorIndexOptions::definition`]), and the directory records
    /// them. Opening an existing index with another definition changes it: vectors of the
    /// same model are reused whatever the prefix and graph (a new graph is built from them),
    /// and a new model embeds every text again. [`VectorIndex::open_existing`] opens it as it was.
    ///
    /// # Errors
    /// `InvalidOptions` for bad options or a name outside `[A-Za-z0-9_-]{1,64}`;
    /// `InvalidArgument` if the index is open with other options; `Io`; `Corruption` from
    /// the user data (damage in the index's own files only costs a rebuild).
    pub fn open(db: &Arc<Db>, name: &str, opts: VectorIndexOptions) -> Result<VectorIndex> {
        let mut problems = Vec::new();
        check_name(name, &mut problems);
        opts.validate(&mut problems);
        if !problems.is_empty() {
            return Err(Error::InvalidOptions(problems));
        }
        if let Some(core) = open_core(db, name)? {
            core.same_options(&opts)?;
            return VectorIndex::handle(db, core);
        }
        let core = IndexCore::open(db, name, opts)?;
        VectorIndex::handle(db, core)
    }

    fn handle(db: &Arc<Db>, core: Arc<IndexCore>) -> Result<VectorIndex> {
        let space = core.keyspace_name().map(|ks| db.keyspace(ks)).transpose()?;
        Ok(VectorIndex {
            core,
            db: Arc::clone(db),
            space,
        })
    }

    /// Open the index `name` of `db` as it was last opened: with the prefix, dimension,
    /// metric and graph parameters its directory records ([`VectorIndex::definition`]) and
    /// `embedder`, which must be the model that made its vectors (`None` for an index of the
    /// user's vectors). If the index is already open on this database, returns a handle to
    /// it.
    ///
    /// # Errors
    /// `InvalidArgument` if there is no such index (or its definition is unreadable), or
    /// `embedder` is not its model; as [`VectorIndex::open`].
    pub fn open_existing(
        db: &Arc<Db>,
        name: &str,
        embedder: Option<Arc<dyn Embedder>>,
    ) -> Result<VectorIndex> {
        if let Some(core) = open_core(db, name)? {
            return VectorIndex::handle(db, core);
        }
        let definition = VectorIndex::definition(db, name)?.ok_or_else(|| {
            Error::invalid(format!(
                "no index {name:?} in {} (or its MODEL file is unreadable)",
                db.path().display()
            ))
        })?;
        let opts = VectorIndexOptions::from_definition(&definition, embedder)
            .map_err(|e| Error::invalid(format!("index {name:?}: {e}")))?;
        VectorIndex::open(db, name, opts)
    }

    /// What index `name` of `db` was last opened with, from its directory; `None` if it has
    /// none, or one that does not decode.
    ///
    /// # Errors
    /// `InvalidOptions` for a bad name; `Io` if the file is there and cannot be read.
    pub fn definition(db: &Db, name: &str) -> Result<Option<VectorIndexDefinition>> {
        let mut problems = Vec::new();
        check_name(name, &mut problems);
        if !problems.is_empty() {
            return Err(Error::InvalidOptions(problems));
        }
        let fs = &db.options().fs;
        model_file::read(fs.as_ref(), &index_dir(db.path(), name))
    }

    /// The names of the indexes in `db`'s directory (open or not), sorted.
    ///
    /// # Errors
    /// `Io` from listing the directory.
    pub fn names(db: &Db) -> Result<Vec<String>> {
        let fs = &db.options().fs;
        let dir = db.path().join(INDEXES_DIR);
        if !fs.exists(&dir) {
            return Ok(Vec::new());
        }
        let mut names: Vec<String> = fs
            .list(&dir)?
            .into_iter()
            .filter(|name| {
                let mut problems = Vec::new();
                check_name(name, &mut problems);
                problems.is_empty() && fs.exists(&dir.join(name).join(model_file::MODEL_FILE))
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// The index's name.
    pub fn name(&self) -> &str {
        self.core.name()
    }

    /// The key prefix the index covers.
    pub fn prefix(&self) -> &[u8] {
        self.core.prefix()
    }

    /// The keyspace whose keys it covers; `None`: the default keyspace.
    pub fn keyspace(&self) -> Option<&shale::Keyspace> {
        self.space.as_ref()
    }

    /// The dimension of its vectors.
    pub fn dim(&self) -> usize {
        self.core.dim()
    }

    /// The metric its searches score by.
    pub fn metric(&self) -> crate::vector::Metric {
        self.core.metric()
    }

    /// The database the index covers.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// Set `key` (under the index's prefix) to the vector `vector` with `payload`: a
    /// [`vector_value`] written through the database like any other value. No model runs.
    ///
    /// # Errors
    /// `InvalidArgument` if `key` is outside the prefix or the vector has another
    /// dimension, a NaN or an infinity (or, under cosine, no direction); the write's own
    /// errors.
    pub fn put_vector(
        &self,
        key: impl AsRef<[u8]>,
        vector: &[f32],
        payload: impl AsRef<[u8]>,
    ) -> Result<()> {
        let key = key.as_ref();
        self.core.check_key(key)?;
        self.core.check_vector(vector)?;
        let value = vector_value(vector, payload.as_ref());
        match &self.space {
            Some(ks) => ks.put(key, value),
            None => self.db.put(key, value),
        }
    }

    /// Embed `text` with the index's model: the query vector of [`VectorIndex::search`].
    ///
    /// # Errors
    /// `InvalidArgument` if the index has no embedder; `Index` if the model fails.
    pub fn embed(&self, text: &str) -> Result<Vec<f32>> {
        self.core.embed_query(text)
    }

    /// Wait until every value written so far is embedded and in the index (a bulk load can
    /// call this before closing, so that the next open has nothing to embed).
    ///
    /// # Errors
    /// `Index` if the embedder failed; `Closed`.
    pub fn wait_indexed(&self) -> Result<()> {
        self.core.catch_up()
    }

    /// Values in the index, once everything written so far is applied.
    ///
    /// # Errors
    /// As [`VectorIndex::wait_indexed`].
    pub fn len(&self) -> Result<usize> {
        self.core.catch_up()?;
        Ok(self.core.live())
    }

    /// True if the index holds no value (after everything written so far is applied).
    ///
    /// # Errors
    /// As [`VectorIndex::wait_indexed`].
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// `(applied, queued)`: changes applied and queued since open, without waiting:
    /// `queued - applied` are still to be embedded and applied.
    pub fn progress(&self) -> (u64, u64) {
        self.core.progress()
    }

    /// Write the graph's checkpoint now (also done in the background and at close), so
    /// that the next open after a crash takes the graph over instead of rebuilding it.
    ///
    /// # Errors
    /// `Io`.
    pub fn checkpoint(&self) -> Result<()> {
        self.core.checkpoint()
    }

    /// How the open found the index (reused, reinserted, re-embedded).
    pub fn recovery(&self) -> VectorIndexRecovery {
        self.core.recovery()
    }

    /// Counters and sizes of the index, without waiting.
    pub fn stats(&self) -> VectorIndexStats {
        self.core.stats()
    }
}

/// The index `name` if it is open on `db`.
///
/// # Errors
/// `InvalidArgument` if a hook of that name is not an index or is still opening.
fn open_core(db: &Db, name: &str) -> Result<Option<Arc<IndexCore>>> {
    let Some(hook) = db.hook(name) else {
        return Ok(None);
    };
    let hook = hook
        .as_any()
        .downcast::<hook::IndexHook>()
        .map_err(|_| Error::invalid(format!("{name:?} is not a semantic index")))?;
    let core = hook.core.get().cloned().ok_or_else(|| {
        Error::invalid(format!("index {name:?} is being opened by another thread"))
    })?;
    Ok(Some(core))
}

/// Check an index name: `[A-Za-z0-9_-]{1,64}`.
fn check_name(name: &str, problems: &mut Vec<String>) {
    let ok = !name.is_empty()
        && name.len() <= MAX_INDEX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        problems.push(format!(
            "index name {name:?} must be 1 to {MAX_INDEX_NAME} of [A-Za-z0-9_-]"
        ));
    }
}

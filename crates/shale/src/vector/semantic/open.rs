//! Opening the semantic index: the vector store, its model file and graph checkpoint,
//! and the reconcile with the database's values (see the parent module for the rules).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, RwLock};

use super::super::checkpoint::{self, Checkpoint};
use super::super::distance::normalize;
use super::super::key_index::{Applied, Index, KeyState, Node, NodeState};
use super::super::model_file::{self, ModelRecord};
use super::super::pending::{Change, Pending};
use super::super::value::{decode_vector, encode_vector, text_hash};
use super::super::{HnswParams, NodeId};
use super::{IndexRecovery, Semantic, SemanticOptions};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::sync::lock;

impl Semantic {
    /// Open the vector store in `dir/vectors` and reconcile it with `values()`, the live
    /// `(key, value)` pairs of the database in key order; start the embed workers.
    ///
    /// The store is derived data: if it is damaged (`Corruption` from its open or its
    /// scan), its files are deleted and it is built again from `values()`, a second scan.
    pub fn open<I>(
        dir: &Path,
        db_opts: &crate::Options,
        opts: SemanticOptions,
        values: impl Fn() -> Result<I>,
        seq: u64,
    ) -> Result<Arc<Semantic>>
    where
        I: Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    {
        let store_dir = dir.join(super::super::STORE_DIR);
        let semantic = match Self::build(&store_dir, db_opts, &opts, values()?, seq) {
            Ok(semantic) => semantic,
            Err(OpenError::StoreDamaged(damage)) => {
                clear_store(db_opts.fs.as_ref(), &store_dir)?;
                let mut semantic = Self::build(&store_dir, db_opts, &opts, values()?, seq)
                    .map_err(OpenError::into_error)?;
                semantic.recovery.store_damage = Some(damage.to_string());
                semantic
            }
            Err(OpenError::Other(e)) => return Err(e),
        };
        let semantic = Arc::new(semantic);
        let mut workers = Vec::new();
        for i in 0..semantic.opts.embed_threads {
            let s = Arc::clone(&semantic);
            let spawned = std::thread::Builder::new()
                .name(format!("shale-embed-{i}"))
                .spawn(move || s.work());
            match spawned {
                Ok(handle) => workers.push(handle),
                Err(e) => {
                    // Stop the workers already running (they hold the index) first.
                    *lock(&semantic.workers) = workers;
                    let _ = semantic.close();
                    return Err(Error::io("spawn embed thread", dir, e));
                }
            }
        }
        *lock(&semantic.workers) = workers;
        Ok(semantic)
    }

    /// Open the store and reconcile it with `values` (see [`Semantic::open`]); no workers.
    fn build(
        store_dir: &Path,
        db_opts: &crate::Options,
        opts: &SemanticOptions,
        values: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        seq: u64,
    ) -> std::result::Result<Semantic, OpenError> {
        // Created whenever it is missing (search turned on for an existing database),
        // whatever the user's `create_if_missing` says.
        // A damaged WAL record costs the vectors after it, which reconcile embeds again,
        // rather than the whole store.
        let store_opts = crate::Options {
            semantic: None,
            write_buffer_size: db_opts.write_buffer_size.min(16 << 20),
            create_if_missing: true,
            error_if_exists: false,
            wal_recovery: crate::WalRecovery::PointInTime,
            ..db_opts.clone()
        };
        let store = crate::Db::open(store_dir, store_opts).map_err(OpenError::store)?;
        let fs = Arc::clone(&db_opts.fs);
        let model = ModelRecord {
            dim: u32::try_from(opts.embedder.dim()).unwrap_or(u32::MAX),
            model_id: opts.embedder.model_id(),
        };
        // A store that names another model, or none, holds vectors that cannot be reused.
        let same_model = model_file::read(fs.as_ref(), store_dir)?.as_ref() == Some(&model);
        let (index, graph_damaged) = if same_model {
            load_graph(fs.as_ref(), store_dir, opts)?
        } else {
            (Index::new(opts.embedder.dim(), opts.hnsw)?, false)
        };
        let mut semantic = Semantic {
            opts: opts.clone(),
            fs,
            dir: store_dir.to_path_buf(),
            pending: Mutex::new(Pending::new()),
            cv: Condvar::new(),
            index: RwLock::new(index),
            store,
            workers: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            recovery: IndexRecovery {
                graph_damaged,
                ..IndexRecovery::default()
            },
        };
        semantic.reconcile(values, seq, same_model)?;
        if !same_model {
            // Reconcile has deleted every stored vector, durably: only now may the file
            // name the new model. The old model's graph goes first.
            checkpoint::remove(semantic.fs.as_ref(), &semantic.dir)?;
            model_file::write(semantic.fs.as_ref(), &semantic.dir, &model)?;
        }
        Ok(semantic)
    }

    /// Merge the database's values with the stored vectors and the graph checkpoint:
    /// take over checkpointed nodes whose vector is still current, insert other current
    /// stored vectors, queue the remaining values for embedding, and delete stored vectors
    /// whose value is gone. Unless `same_model`, every stored vector is deleted instead
    /// (and the deletes flushed) and every value is queued.
    fn reconcile(
        &mut self,
        values: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        seq: u64,
        same_model: bool,
    ) -> std::result::Result<(), OpenError> {
        let mut stored = self
            .store
            .range::<&[u8]>(..)
            .map_err(OpenError::store)?
            .map(|pair| pair.map_err(OpenError::store))
            .peekable();
        let mut discarded = Vec::new();
        if !same_model {
            for pair in stored.by_ref() {
                discarded.push(pair?.0);
            }
        }
        let index = self.index.get_mut().unwrap_or_else(|e| e.into_inner());
        let dim = index.graph.dim();
        // Node ids the checkpoint holds; the ones no current value claims are tombstoned.
        let checkpointed = usize::try_from(index.graph.id_bound()).unwrap_or(usize::MAX);
        let mut claimed = vec![false; checkpointed];
        let mut claims: Vec<(u32, Vec<u8>, u64)> = Vec::new();
        let mut reinsert: Vec<(Vec<u8>, u64, Vec<f32>)> = Vec::new();
        let mut to_embed = Vec::new();
        let mut orphans = Vec::new();
        for pair in values {
            let (key, value) = pair?;
            // Stored vectors for keys before this one have no value: delete them.
            while let Some(Ok((skey, _))) = stored.peek() {
                if skey.as_slice() >= key.as_slice() {
                    break;
                }
                orphans.push(skey.clone());
                stored.next();
            }
            let Ok(text) = String::from_utf8(value) else {
                // Written before semantic search was on: not text, not indexed.
                continue;
            };
            let hash = text_hash(text.as_bytes());
            let current = match stored.peek() {
                Some(Ok((skey, svalue))) if *skey == key => {
                    // A vector with no direction cannot enter the graph: embed it again.
                    // The graph holds it at unit length (an embedder need not return
                    // unit vectors), so it is compared at unit length.
                    let found = decode_vector(svalue, dim)
                        .filter(|(h, _, _)| *h == hash)
                        .and_then(|(h, node, mut v)| normalize(&mut v).then_some((h, node, v)));
                    stored.next();
                    found
                }
                _ => None,
            };
            match current {
                Some((hash, node, vector)) => {
                    // The node holds this vector if it holds its code: the code is a
                    // function of the vector.
                    let in_graph = claimed.get(node as usize) == Some(&false)
                        && !index.graph.is_deleted(NodeId(node))
                        && index.graph.code(NodeId(node)).is_some_and(|g| {
                            index.graph.encode(&vector).is_ok_and(|c| c.as_slice() == g)
                        });
                    if in_graph {
                        if let Some(c) = claimed.get_mut(node as usize) {
                            *c = true;
                        }
                        claims.push((node, key, hash));
                    } else {
                        reinsert.push((key, hash, vector));
                    }
                }
                None => to_embed.push(Change {
                    key,
                    seq,
                    text: Some(text),
                }),
            }
        }
        for rest in stored {
            orphans.push(rest?.0);
        }
        // Checkpointed nodes keep their ids: lay out `nodes` to match, the unclaimed dead.
        index.nodes = (0..checkpointed).map(|_| Node::dead()).collect();
        for (id, claim) in claimed.iter().enumerate() {
            if !claim {
                let _ = index
                    .graph
                    .mark_deleted(NodeId(u32::try_from(id).unwrap_or(u32::MAX)));
            }
        }
        self.recovery.graph_nodes_reused = claims.len();
        for (node, key, text_hash) in claims {
            if let Some(slot) = index.nodes.get_mut(node as usize) {
                *slot = Node {
                    key: key.clone(),
                    text_hash,
                    state: NodeState::Live,
                    pending: false,
                };
                index.live += 1;
                index.keys.insert(
                    key,
                    KeyState {
                        seq,
                        node: Some(node),
                    },
                );
            }
        }
        // Current vectors the checkpoint lacks: new nodes, inserted by parallel threads.
        self.recovery.vectors_reinserted = reinsert.len();
        let mut ids = Vec::with_capacity(reinsert.len());
        let mut fix = crate::WriteBatch::new();
        for (key, hash, vector) in &reinsert {
            if let Applied::Put(id) = index.apply(key, seq, Some(*hash))? {
                ids.push(NodeId(id));
                // The stored node id changes: record the new one.
                fix.put(key, encode_vector(*hash, id, vector));
            }
        }
        let by_id: HashMap<u32, &[f32]> = ids
            .iter()
            .zip(&reinsert)
            .map(|(id, (_, _, v))| (id.0, v.as_slice()))
            .collect();
        index.graph.insert_all(
            &ids,
            |id| by_id.get(&id.0).copied(),
            self.opts.embed_threads.max(1),
        )?;
        index.inserted(ids.iter().map(|id| id.0));
        for key in orphans.iter().chain(&discarded) {
            fix.delete(key);
        }
        self.recovery.orphans_deleted = orphans.len();
        self.recovery.other_model_vectors = discarded.len();
        self.recovery.texts_to_embed = to_embed.len();
        index.free_absent();
        index.reclaim(self.opts.embed_threads.max(1))?;
        self.store.write(fix, crate::WriteOptions::default())?;
        if !discarded.is_empty() {
            // The store's writes are not synced: flush them into an SSTable, so that the
            // model file never names the new model while the old one's vectors could
            // come back.
            self.store.flush()?;
        }
        let registration = self.register(seq);
        self.enqueue(to_embed, registration);
        Ok(())
    }
}

/// Why building the index failed.
enum OpenError {
    /// The vector store is damaged: derived data, deleted and built again.
    StoreDamaged(Error),
    Other(Error),
}

impl OpenError {
    /// An error of the vector store: `Corruption`, or a file that is not there, is
    /// damage; anything else (a failing disk, no permission) is not, and fails the open.
    fn store(e: Error) -> OpenError {
        let missing = matches!(&e, Error::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound);
        if e.is_corruption() || missing {
            OpenError::StoreDamaged(e)
        } else {
            OpenError::Other(e)
        }
    }

    fn into_error(self) -> Error {
        match self {
            OpenError::StoreDamaged(e) | OpenError::Other(e) => e,
        }
    }
}

impl From<Error> for OpenError {
    fn from(e: Error) -> OpenError {
        OpenError::Other(e)
    }
}

/// Delete a damaged vector store's files, in an order that is safe to stop anywhere:
/// `MODEL` first, so that whatever survives a crash is never reused (section 10 of
/// docs/format.md); then `CURRENT`, after which an open finds the files left over without
/// a manifest to name them and calls that damage (so clears again); then the rest. Files
/// that are not the engine's stay.
fn clear_store(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    use crate::db::filename::{self, FileKind};
    model_file::remove(fs, dir)?;
    crate::fs::remove_durably(fs, dir, "CURRENT")?;
    for name in fs.list(dir)? {
        let remove = match filename::parse(&name) {
            Some(FileKind::Lock) => false,
            Some(_) => true,
            None => checkpoint::owns(&name) || model_file::owns(&name),
        };
        if remove {
            fs.remove(&dir.join(&name))?;
        }
    }
    fs.sync_dir(dir)
}

/// The graph checkpoint of `dir`, or an empty graph if there is none or it is damaged
/// (then `true`: the index is rebuilt from the stored vectors, which are the truth).
fn load_graph(fs: &dyn FileSystem, dir: &Path, opts: &SemanticOptions) -> Result<(Index, bool)> {
    let fresh = || Index::new(opts.embedder.dim(), opts.hnsw);
    // The graph's shape does not depend on the search's default `ef`.
    let same_shape = |graph: &super::super::Hnsw| {
        let built = HnswParams {
            ef_search: opts.hnsw.ef_search,
            ..*graph.params()
        };
        graph.dim() == opts.embedder.dim() && built == opts.hnsw
    };
    match checkpoint::read(fs, dir) {
        Checkpoint::Found(mut graph) if same_shape(&graph) => {
            graph.set_ef_search(opts.hnsw.ef_search)?;
            Ok((Index::with_graph(*graph), false))
        }
        // Other parameters or another model: rebuild, not an error.
        Checkpoint::Found(_) | Checkpoint::Missing => Ok((fresh()?, false)),
        Checkpoint::Damaged => Ok((fresh()?, true)),
    }
}

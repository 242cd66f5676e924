//! Opening an index: attach its hook, open its vector store, model file and graph
//! checkpoint, and reconcile them with the database's values as of the attach.
//!
//! The order is what makes it safe against concurrent writers: the hook is attached first
//! (`Db::attach` returns a snapshot of exactly the writes before it), so every later write
//! is queued by the hook while the open reads the earlier ones from the snapshot. The open
//! puts the changes it derives (texts to embed, at the snapshot's sequence number) in
//! front of whatever the hook queued meanwhile, and the workers start only when the key map
//! is laid out.
//!
//! Reconcile, one merged scan of the values under the prefix (at the snapshot) and the
//! store: a stored vector whose value hash matches the current value is reused (its
//! checkpointed node taken over if the node holds the same code, else the vector inserted
//! again: no model call); a vector value's vector is taken from the value; a text without
//! a matching vector is queued for embedding; a stored vector without a value is deleted;
//! graph nodes nobody claimed are tombstoned. Every live node's full vector is written into
//! `VECTORS` (compared first: an intact file costs reads, not writes).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Instant;

use super::checkpoint::{self, Checkpoint};
use super::core::IndexCore;
use super::hook::IndexHook;
use super::keyed_graph::{Applied, KeyState, KeyedGraph, Node, NodeState};
use super::layout::index_dir;
use super::model_file;
use super::pending::{Change, Payload, Pending, Queue};
use super::spec::Spec;
use super::stats::VectorIndexRecovery;
use super::value::{decode_stored, encode_stored, value_hash};
use super::VectorIndexOptions;
use crate::vector::{NodeId, VectorFile};
use shale::error::{Error, Result};
use shale::fs::FileSystem;
use shale::KeyspaceId;
use shale::{Db, Keyspace, ReadOptions, Snapshot, WriteHook};

/// The file of the full vectors in an index's directory.
pub(super) const VECTORS_FILE: &str = "VECTORS";

impl IndexCore {
    /// Open index `name` of `db` (see the module documentation) and start its workers.
    pub(super) fn open(
        db: &Arc<Db>,
        name: &str,
        opts: VectorIndexOptions,
    ) -> Result<Arc<IndexCore>> {
        if db.options().read_only {
            return Err(Error::invalid(format!(
                "index {name:?}: an index cannot be opened on a read-only database handle"
            )));
        }
        let started = Instant::now();
        let db_opts = db.options();
        let fs = Arc::clone(&db_opts.fs);
        let dir = index_dir(db.path(), name);
        let space = match &opts.keyspace {
            Some(ks) => Some(db.keyspace(ks)?),
            None => None,
        };
        fs.create_dir_all(&dir)?;
        let spec = Spec {
            name: name.to_owned(),
            keyspace: space.as_ref().map_or(KeyspaceId::DEFAULT, Keyspace::id),
            prefix: opts.prefix.clone(),
            dim: opts.dim,
            metric: opts.hnsw.metric,
            has_embedder: opts.embedder.is_some(),
        };
        let queue = Arc::new(Queue {
            pending: Mutex::new(Pending::new()),
            cv: Condvar::new(),
            bound: opts.queue_bytes,
        });
        let hook = Arc::new(IndexHook {
            spec: spec.clone(),
            queue: Arc::clone(&queue),
            core: OnceLock::new(),
        });
        let snapshot = db.attach(Arc::clone(&hook) as Arc<dyn WriteHook>)?;
        let built = build_reconciled(
            db,
            space.as_ref(),
            &snapshot,
            &fs,
            &dir,
            &spec,
            &opts,
            &queue,
        );
        drop(snapshot);
        let mut core = match built {
            Ok(core) => core,
            Err(e) => {
                db.detach(name);
                return Err(e);
            }
        };
        core.recovery.open_micros = started.elapsed().as_micros() as u64;
        let core = Arc::new(core);
        if hook.core.set(Arc::clone(&core)).is_err() {
            return Err(Error::invalid("the index hook was set twice"));
        }
        if let Err(e) = core.start() {
            db.detach(name);
            return Err(e);
        }
        Ok(core)
    }
}

/// Open the store and reconcile it with the values of `snapshot`; if the store is damaged
/// (`Corruption` or a missing file, at its open or in its scan), delete its files and do
/// it again from the values alone.
#[expect(clippy::too_many_arguments, reason = "build's inputs, passed through")]
fn build_reconciled(
    db: &Db,
    space: Option<&Keyspace>,
    snapshot: &Snapshot,
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    spec: &Spec,
    opts: &VectorIndexOptions,
    queue: &Arc<Queue>,
) -> Result<IndexCore> {
    match build(db, space, snapshot, fs, dir, spec, opts, queue) {
        Ok(core) => Ok(core),
        Err(OpenError::StoreDamaged(damage)) => {
            clear_store(fs.as_ref(), dir)?;
            let mut core = build(db, space, snapshot, fs, dir, spec, opts, queue)
                .map_err(OpenError::into_error)?;
            core.recovery.store_damage = Some(damage.to_string());
            Ok(core)
        }
        Err(OpenError::Other(e)) => Err(e),
    }
}

/// Open the store, the model file and the checkpoint, and reconcile with the values under
/// the prefix in `space` (`None`: the default keyspace); no workers.
#[expect(
    clippy::too_many_arguments,
    reason = "each is a distinct input of the open"
)]
fn build(
    db: &Db,
    space: Option<&Keyspace>,
    snapshot: &Snapshot,
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    spec: &Spec,
    opts: &VectorIndexOptions,
    queue: &Arc<Queue>,
) -> std::result::Result<IndexCore, OpenError> {
    let db_opts = db.options();
    // Created whatever the user's `create_if_missing` says (an index opened on an existing
    // database). A damaged WAL record costs the vectors after it, which reconcile embeds
    // again, rather than the whole store.
    let store_opts = shale::Options {
        write_buffer_size: db_opts.write_buffer_size.min(16 << 20),
        create_if_missing: true,
        error_if_exists: false,
        wal_recovery: shale::WalRecovery::PointInTime,
        ..db_opts.clone()
    };
    let store = Db::open(dir, store_opts).map_err(OpenError::store)?;
    let definition = opts.definition();
    // A store that names another model, or none, holds vectors that cannot be reused.
    let stored = model_file::read(fs.as_ref(), dir)?;
    let same_model = stored.as_ref().is_some_and(|s| s.same_model(&definition));
    let (index, graph_damaged) = if same_model {
        load_graph(fs.as_ref(), dir, opts)?
    } else {
        (
            KeyedGraph::new(spec.dim, opts.hnsw, spec.prefix.len())?,
            false,
        )
    };
    let vectors = VectorFile::open(Arc::clone(fs), &dir.join(VECTORS_FILE), spec.dim);
    let mut core = IndexCore::new(
        spec.clone(),
        opts.clone(),
        Arc::clone(fs),
        dir.to_path_buf(),
        Arc::clone(queue),
        index,
        vectors,
        store,
    );
    core.recovery = VectorIndexRecovery {
        graph_damaged,
        ..VectorIndexRecovery::default()
    };
    let at = ReadOptions::at(snapshot);
    let values = match space {
        Some(ks) => ks.prefix_opt(&spec.prefix, &at),
        None => db.prefix_opt(&spec.prefix, &at),
    }
    .map_err(OpenError::Other)?;
    reconcile(&mut core, values, snapshot.seq().0, same_model)?;
    if !same_model {
        // Reconcile has deleted every stored vector, durably: only now may the file name
        // the new model. The old model's graph goes first.
        checkpoint::remove(fs.as_ref(), dir)?;
    }
    if stored.as_ref() != Some(&definition) {
        model_file::write(fs.as_ref(), dir, &definition)?;
    }
    Ok(core)
}

/// What reconcile decided for one value.
enum Found {
    /// A stored or given vector that is current, the node the store names for it, and
    /// whether it is a text's embedding (which the store keeps) or a vector value's.
    Current {
        hash: u64,
        node: Option<u32>,
        vector: Vec<f32>,
        from_text: bool,
    },
    /// A text to embed.
    Embed(String),
}

impl Found {
    /// What becomes of a value whose payload is `payload` and hash `hash`, given what the
    /// store holds for its key (`stored`: value hash, node, embedding); `None` if nothing
    /// (a vector delete).
    fn of(
        spec: &Spec,
        payload: Payload,
        hash: u64,
        stored: Option<(u64, u32, Vec<f32>)>,
    ) -> Option<Found> {
        match payload {
            Payload::Vector(vector) => Some(Found::Current {
                hash,
                node: stored
                    .filter(|(h, _, _)| *h == hash)
                    .map(|(_, node, _)| node),
                vector,
                from_text: false,
            }),
            Payload::Text(text) => match stored {
                Some((h, node, vector))
                    if h == hash
                        && vector.len() == spec.dim
                        && spec.check_vector(&vector).is_ok() =>
                {
                    Some(Found::Current {
                        hash,
                        node: Some(node),
                        vector,
                        from_text: true,
                    })
                }
                _ => Some(Found::Embed(text)),
            },
            Payload::Delete | Payload::DeleteRange { .. } => None,
        }
    }
}

/// The values sorted by what the open does with them.
struct Sorted {
    /// By checkpointed node id: whether a current value took the node over.
    claimed: Vec<bool>,
    /// Checkpointed nodes that hold a current vector: node, key, value hash.
    claims: Vec<(u32, Vec<u8>, u64)>,
    /// Current vectors the checkpoint lacks: key, value hash, vector, whether a text's
    /// embedding.
    reinsert: Vec<(Vec<u8>, u64, Vec<f32>, bool)>,
    /// Texts to embed.
    to_embed: Vec<Change>,
    /// Stored vectors whose value is gone, or is nothing the index can hold.
    orphans: Vec<Vec<u8>>,
}

impl Sorted {
    /// Sort `values` (in key order) against `stored`, the store's vectors in key order,
    /// and the checkpointed graph of `index`; write the vectors of the nodes taken over
    /// into `vectors`.
    fn of(
        spec: &Spec,
        index: &KeyedGraph,
        vectors: &VectorFile,
        values: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
        stored: impl Iterator<Item = std::result::Result<(Vec<u8>, Vec<u8>), OpenError>>,
        seq: u64,
    ) -> std::result::Result<Sorted, OpenError> {
        // Node ids the checkpoint holds; the ones no current value claims are tombstoned.
        let checkpointed = usize::try_from(index.graph.id_bound()).unwrap_or(usize::MAX);
        let mut stored = stored.peekable();
        let mut sorted = Sorted {
            claimed: vec![false; checkpointed],
            claims: Vec::new(),
            reinsert: Vec::new(),
            to_embed: Vec::new(),
            orphans: Vec::new(),
        };
        for pair in values {
            let (key, value) = pair?;
            let entry = sorted.stored_for(&mut stored, &key);
            let Ok(payload) = spec.payload(&key, &value) else {
                // Written before the index existed, and not something it can hold: not
                // indexed (a write of it now would be refused).
                if entry.is_some() {
                    sorted.orphans.push(key);
                }
                continue;
            };
            let hash = value_hash(&value);
            let found = Found::of(spec, payload, hash, entry);
            sorted.place(found, key, hash, seq, (spec, index, vectors))?;
        }
        for rest in stored {
            sorted.orphans.push(rest?.0);
        }
        Ok(sorted)
    }

    /// The stored vector of `key`, if `stored` (in key order) holds one; the stored
    /// vectors of keys before it have no value, and become orphans.
    fn stored_for(
        &mut self,
        stored: &mut std::iter::Peekable<
            impl Iterator<Item = std::result::Result<(Vec<u8>, Vec<u8>), OpenError>>,
        >,
        key: &[u8],
    ) -> Option<(u64, u32, Vec<f32>)> {
        while let Some(Ok((skey, _))) = stored.peek() {
            if skey.as_slice() >= key {
                break;
            }
            self.orphans.push(skey.clone());
            stored.next();
        }
        match stored.peek() {
            Some(Ok((skey, svalue))) if skey.as_slice() == key => {
                let entry = decode_stored(svalue);
                stored.next();
                entry
            }
            _ => None,
        }
    }

    /// Sort the value of `key` (its hash `hash`) by what was `found` for it: a node
    /// taken over (its vector written into `VECTORS` now), a vector to insert, or a text
    /// to embed at `seq`. The last argument is the index's spec, its checkpointed graph
    /// and its `VECTORS`.
    fn place(
        &mut self,
        found: Option<Found>,
        key: Vec<u8>,
        hash: u64,
        seq: u64,
        (spec, index, vectors): (&Spec, &KeyedGraph, &VectorFile),
    ) -> std::result::Result<(), OpenError> {
        match found {
            Some(Found::Current {
                hash,
                node,
                vector,
                from_text,
            }) => match node_holding(spec, index, &self.claimed, node, &vector)? {
                // A claimed node's vector goes into `VECTORS` now, so that the open holds
                // no more than one vector at a time for the reused nodes.
                Some((node, prepared)) => {
                    if let Some(c) = self.claimed.get_mut(node as usize) {
                        *c = true;
                    }
                    vectors.write(NodeId(node), &prepared)?;
                    self.claims.push((node, key, hash));
                }
                None => self.reinsert.push((key, hash, vector, from_text)),
            },
            Some(Found::Embed(text)) => self.to_embed.push(Change {
                key,
                seq,
                hash,
                payload: Payload::Text(text),
            }),
            None => {}
        }
        Ok(())
    }
}

/// Merge the values with the stored vectors and the graph checkpoint: take over
/// checkpointed nodes whose code is still current, insert other current vectors, queue
/// the remaining texts for embedding, and delete stored vectors whose value is gone.
/// Unless `same_model`, every stored vector is deleted instead (and the deletes flushed)
/// and every text is queued.
fn reconcile(
    core: &mut IndexCore,
    values: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>>,
    seq: u64,
    same_model: bool,
) -> std::result::Result<(), OpenError> {
    let mut stored = core
        .store
        .range::<&[u8]>(..)
        .map_err(OpenError::store)?
        .map(|pair| pair.map_err(OpenError::store));
    let mut discarded = Vec::new();
    if !same_model {
        for pair in stored.by_ref() {
            discarded.push(pair?.0);
        }
    }
    let spec = core.spec.clone();
    let index = core.index.get_mut().unwrap_or_else(|e| e.into_inner());
    let sorted = Sorted::of(&spec, index, &core.vectors, values, stored, seq)?;
    core.recovery.graph_nodes_reused = sorted.claims.len();
    take_over(index, &sorted.claimed, sorted.claims, seq);
    core.recovery.vectors_reinserted = sorted.reinsert.len();
    let threads = core.opts.embed_threads.max(1);
    let mut fix = shale::WriteBatch::new();
    reinsert(
        &spec,
        index,
        &core.vectors,
        &sorted.reinsert,
        seq,
        threads,
        &mut fix,
    )?;
    for key in sorted.orphans.iter().chain(&discarded) {
        fix.delete(key);
    }
    core.recovery.orphans_deleted = sorted.orphans.len();
    core.recovery.other_model_vectors = discarded.len();
    core.recovery.texts_to_embed = sorted.to_embed.len();
    index.free_absent();
    index.reclaim(threads)?;
    core.store.write(fix, shale::WriteOptions::default())?;
    if !discarded.is_empty() {
        // The store's writes are not synced: flush them into an SSTable, so that the model
        // file never names the new model while the old one's vectors could come back.
        core.store.flush()?;
    }
    // Older than anything the hook queued since the attach: in front of it.
    core.queue.lock().push_front(sorted.to_embed);
    Ok(())
}

/// The checkpointed node `node` and `vector` prepared, if the node is unclaimed, live
/// and holds `vector`: it does if it holds its code, the code being a function of the
/// vector.
fn node_holding(
    spec: &Spec,
    index: &KeyedGraph,
    claimed: &[bool],
    node: Option<u32>,
    vector: &[f32],
) -> Result<Option<(u32, Vec<f32>)>> {
    let Some(node) = node.filter(|&node| {
        claimed.get(node as usize) == Some(&false) && !index.graph.is_deleted(NodeId(node))
    }) else {
        return Ok(None);
    };
    let prepared = spec.metric.prepare(vector, spec.dim, "vector")?;
    let holds = index
        .graph
        .encode_prepared(&prepared)
        .is_ok_and(|c| index.graph.code(NodeId(node)) == Some(c.as_slice()));
    Ok(holds.then_some((node, prepared)))
}

/// Lay the index's nodes out as the checkpoint numbered them: the claimed ones live
/// under their keys, the rest dead.
fn take_over(index: &mut KeyedGraph, claimed: &[bool], claims: Vec<(u32, Vec<u8>, u64)>, seq: u64) {
    index.reset_nodes(claimed.len());
    for (id, claim) in claimed.iter().enumerate() {
        if !claim {
            let _ = index
                .graph
                .mark_deleted(NodeId(u32::try_from(id).unwrap_or(u32::MAX)));
        }
    }
    for (node, key, value_hash) in claims {
        if (node as usize) < claimed.len() {
            index.set_node(
                node,
                Node {
                    key: key.clone(),
                    value_hash,
                    state: NodeState::Live,
                    pending: false,
                },
            );
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
}

/// Insert the current vectors the checkpoint lacks as new nodes, by `threads` threads;
/// their new node ids (and a text's embedding) go into `fix` for the store.
fn reinsert(
    spec: &Spec,
    index: &mut KeyedGraph,
    vectors: &VectorFile,
    reinsert: &[(Vec<u8>, u64, Vec<f32>, bool)],
    seq: u64,
    threads: usize,
    fix: &mut shale::WriteBatch,
) -> Result<()> {
    let mut ids = Vec::with_capacity(reinsert.len());
    for (key, hash, vector, from_text) in reinsert {
        if let Applied::Put(id) = index.apply(key, seq, Some(*hash))? {
            ids.push(NodeId(id));
            let stored: &[f32] = if *from_text { vector } else { &[] };
            fix.put(key, encode_stored(*hash, id, stored));
        }
    }
    let prepared: HashMap<u32, Vec<f32>> = ids
        .iter()
        .zip(reinsert)
        .map(|(id, (_, _, v, _))| Ok((id.0, spec.metric.prepare(v, spec.dim, "vector")?)))
        .collect::<Result<_>>()?;
    for (&id, v) in &prepared {
        vectors.write(NodeId(id), v)?;
    }
    // The vectors as given: the graph prepares them itself (see `insert_vectors`).
    let given: HashMap<u32, &[f32]> = ids
        .iter()
        .zip(reinsert)
        .map(|(id, (_, _, v, _))| (id.0, v.as_slice()))
        .collect();
    index
        .graph
        .insert_all(&ids, |id| given.get(&id.0).copied(), threads)?;
    index.inserted(ids.iter().map(|id| id.0));
    Ok(())
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
    use shale::inspect::filename::{self, FileKind};
    model_file::remove(fs, dir)?;
    shale::fs::remove_durably(fs, dir, "CURRENT")?;
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

/// The graph checkpoint of `dir`, or an empty graph if there is none, it is damaged (then
/// `true`: the index is rebuilt from the vectors, which are the truth) or it was built
/// with other parameters.
fn load_graph(
    fs: &dyn FileSystem,
    dir: &Path,
    opts: &VectorIndexOptions,
) -> Result<(KeyedGraph, bool)> {
    let prefix_len = opts.prefix.len();
    let fresh = || KeyedGraph::new(opts.dim, opts.hnsw, prefix_len);
    // The graph's shape does not depend on the search's default `ef`.
    let same_shape = |graph: &crate::vector::Hnsw| {
        let built = crate::vector::HnswParams {
            ef_search: opts.hnsw.ef_search,
            ..*graph.params()
        };
        graph.dim() == opts.dim && built == opts.hnsw
    };
    match checkpoint::read(fs, dir) {
        Checkpoint::Found(mut graph) if same_shape(&graph) => {
            graph.set_ef_search(opts.hnsw.ef_search)?;
            Ok((KeyedGraph::with_graph(*graph, prefix_len), false))
        }
        Checkpoint::Found(_) | Checkpoint::Missing => Ok((fresh()?, false)),
        Checkpoint::Damaged => Ok((fresh()?, true)),
    }
}

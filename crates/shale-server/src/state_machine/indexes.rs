//! The replicated indexes of a state machine: their models, opening them, the check of
//! a command's values, and the apply of a definition (docs/replication.md, "Vector
//! search" and "Keyword and hybrid search").

use std::sync::{Arc, OnceLock};

use shale::{Db, WriteBatch};
use shale_search::semantic::{Embedder, HashEmbedder, VectorIndex, VectorIndexOptions};
use shale_search::{TextIndex, TextIndexOptions};

use super::store::{Indexes, ReplicatedIndex, StateMachineStore};
use super::supply::{SuppliedEmbedder, Supply};
use crate::command::{Command, IndexModel, IndexSpec, Response};
use crate::error::{Error, Result};
use crate::format::{self, SM_INDEX_PREFIX};

impl StateMachineStore {
    /// Apply an index definition: refused (alike on every replica) if another index has
    /// that name or shares keys with it, or if keys under its prefix hold values already;
    /// else the index is opened and its definition goes into `batch`. Defining an index
    /// again as it is changes nothing.
    pub(super) fn define_index(
        &self,
        db: &Arc<Db>,
        batch: &mut WriteBatch,
        spec: IndexSpec,
    ) -> Result<Response> {
        if let Err(e) = spec.validate() {
            return Ok(Response::Refused(e.to_string()));
        }
        let mut indexes = self
            .shared
            .indexes
            .write()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = indexes.get(&spec.name).map(|i| &i.spec) {
            return Ok(if *existing == spec {
                Response::IndexDefined
            } else {
                Response::Refused(format!(
                    "index {:?} exists with another definition",
                    spec.name
                ))
            });
        }
        if let Some(other) = indexes.values().find(|i| i.spec.overlaps(&spec)) {
            return Ok(Response::Refused(format!(
                "index {:?} would share keys with index {:?}",
                spec.name, other.spec.name
            )));
        }
        let end = shale::prefix_successor(&spec.prefix);
        let mut under = match &end {
            Some(end) => db.range(spec.prefix.clone()..end.clone())?,
            None => db.range(spec.prefix.clone()..)?,
        };
        if under.next().transpose()?.is_some() {
            return Ok(Response::Refused(format!(
                "keys under the prefix of index {:?} hold values: define an index before \
                 writing under its prefix",
                spec.name
            )));
        }
        let index = open_index(db, spec, &self.shared.supply)?;
        batch.put(
            format::index_key(&index.spec.name),
            format::encode_index_definition(&index.spec),
        );
        indexes.insert(index.spec.name.clone(), index);
        Ok(Response::IndexDefined)
    }
}

/// The model `model` names, loaded once per process (`None` for vectors given by
/// clients).
///
/// # Errors
/// `Engine` if all-MiniLM-L6-v2 cannot be loaded (its error says how to fetch it).
pub fn embedder(model: IndexModel) -> Result<Option<Arc<dyn Embedder>>> {
    static MINILM: OnceLock<std::result::Result<Arc<dyn Embedder>, String>> = OnceLock::new();
    match model {
        IndexModel::Vectors => Ok(None),
        IndexModel::Hash => Ok(Some(Arc::new(HashEmbedder))),
        IndexModel::MiniLm => MINILM
            .get_or_init(|| {
                shale_embed::load_default()
                    .map(|loaded| loaded.embedder)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map(Some)
            .map_err(|e| Error::Raft(format!("all-MiniLM-L6-v2: {e}"))),
    }
}

/// The indexes of `spec` on `db`, opened (created if new): the vector index and, if the
/// definition has keywords, the text index of the same name. A model index embeds through
/// `supply` (`supply.rs`).
fn open_index(db: &Arc<Db>, spec: IndexSpec, supply: &Arc<Supply>) -> Result<ReplicatedIndex> {
    let dim = usize::try_from(spec.dim).unwrap_or(usize::MAX);
    let opts = match embedder(spec.model)? {
        Some(model) => VectorIndexOptions::text(Arc::new(SuppliedEmbedder {
            kind: spec.model,
            model,
            supply: Arc::clone(supply),
        })),
        None => VectorIndexOptions::vectors(dim),
    };
    let opts = opts.prefix(&spec.prefix).metric(spec.metric);
    let vectors = VectorIndex::open(db, &spec.name, opts)?;
    let keywords = match spec.keywords {
        Some(analyzer) => {
            let opts = TextIndexOptions::new()
                .prefix(&spec.prefix)
                .analyzer(analyzer);
            Some(Arc::new(TextIndex::open(db, &spec.name, opts)?))
        }
        None => None,
    };
    Ok(ReplicatedIndex {
        spec,
        vectors,
        keywords,
    })
}

/// Every index `db`'s definitions name, opened, embedding through `supply`.
pub(super) fn open_indexes(db: &Arc<Db>, supply: &Arc<Supply>) -> Result<Indexes> {
    let end = shale::prefix_successor(SM_INDEX_PREFIX).unwrap_or_default();
    let mut indexes = Indexes::new();
    for pair in db.range(SM_INDEX_PREFIX.to_vec()..end)? {
        let (_, value) = pair?;
        let index = open_index(db, format::decode_index_definition(&value)?, supply)?;
        indexes.insert(index.spec.name.clone(), index);
    }
    Ok(indexes)
}

/// `Err` with the reason if an index could not hold a value that `cmd` puts. The puts
/// are gathered only when there is an index to check them.
pub(super) fn check_indexes(indexes: &Indexes, cmd: &Command) -> std::result::Result<(), String> {
    if indexes.is_empty() {
        return Ok(());
    }
    let puts = cmd.puts();
    for index in indexes.values() {
        if let Some(hook) = index.vectors.db().hook(index.vectors.name()) {
            hook.check(&puts).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

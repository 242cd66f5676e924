//! Embed once (docs/replication.md, "Embed once"): the leader embeds the texts a command
//! puts under model indexes before it proposes the command
//! ([`StateMachineStore::carry_vectors`]), the log carries the vectors
//! ([`Command::Embedded`]), and each replica's apply hands them to its indexes through its
//! [`Supply`]. An index's workers ask their embedder
//! ([`SuppliedEmbedder`](super::supply::SuppliedEmbedder)) for the vectors
//! of the texts they index; it answers from the supply and runs the model only for a text
//! the supply does not hold.
//!
//! ```text
//!   leader:   client write ─► model ─► Embedded { write, vectors } ─► log
//!   replica:  apply ─► offer (model, text) → vector ─► Supply
//!                  └─► WriteBatch ─► index queue ─► worker ─► SuppliedEmbedder ─► Supply
//!                                                                  (miss) └─► model
//! ```
//!
//! The supply is a cache, never replicated state: a text it no longer holds (evicted, or
//! queued before a restart, whose vector was in an entry applied before it) is embedded by
//! the replica's own model and counted in [`EmbeddingCounts::by_model`]. Entries are keyed
//! by model and exact text, so any vector it answers is that model's vector for that text;
//! a text offered by entries that never apply (a refused command, a compare-and-set that
//! did not swap) stays until [`MAX_SUPPLY_BYTES`](super::MAX_SUPPLY_BYTES) evicts it,
//! oldest first.

use shale_search::semantic::decode_vector_value;

use super::indexes::embedder;
use super::store::{Indexes, StateMachineStore};
use super::supply::{EmbeddingCounts, Supply};
use crate::command::{CarriedVector, Command, IndexModel, MAX_CARRIED_VECTOR_BYTES};

/// Offer `supply` the vectors `cmd` carries for texts under model indexes (a vector whose
/// put is no such text, or whose length is not the model's, is left out: the replica's
/// model embeds that value, as it would without the vector).
pub(super) fn offer_carried(
    supply: &Supply,
    indexes: &Indexes,
    cmd: &Command,
    vectors: &[CarriedVector],
) {
    let puts = cmd.put_values();
    for carried in vectors {
        let Some(&(key, value)) = usize::try_from(carried.put).ok().and_then(|i| puts.get(i))
        else {
            continue;
        };
        if let Some((model, dim, text)) = text_under_model(indexes, key, value) {
            if dim == carried.vector.len() {
                supply.offer(model, text, &carried.vector);
            }
        }
    }
}

/// `value` as a text that a model index embeds, with the model and its dimension, if `key`
/// is under one and `value` is a text (not a vector value).
fn text_under_model<'v>(
    indexes: &Indexes,
    key: &[u8],
    value: &'v [u8],
) -> Option<(IndexModel, usize, &'v str)> {
    let index = indexes.values().find(|i| key.starts_with(&i.spec.prefix))?;
    let dim = index.spec.model.dim()?;
    if decode_vector_value(value).is_some() {
        return None;
    }
    let text = std::str::from_utf8(value).ok()?;
    Some((index.spec.model, usize::try_from(dim).ok()?, text))
}

impl StateMachineStore {
    /// `cmd` with the vectors of the texts it puts under model indexes, as this node's
    /// models make them, for the log to carry (as many as [`MAX_CARRIED_VECTOR_BYTES`]
    /// allows, in put order); `cmd` itself if it puts no such text or a model fails (each
    /// replica then embeds the texts itself, as it does any text the log carries no vector
    /// for). Runs the model: call it off the async runtime.
    pub fn carry_vectors(&self, cmd: Command) -> Command {
        if matches!(
            cmd,
            Command::DefineIndex(_) | Command::OpenSession | Command::Embedded { .. }
        ) {
            return cmd;
        }
        let vectors = self.embed_puts(&cmd);
        if vectors.is_empty() {
            return cmd;
        }
        self.shared.supply.count_proposed(vectors.len());
        Command::Embedded {
            cmd: Box::new(cmd),
            vectors,
        }
    }

    /// Whether `cmd` puts a text under a model index: what
    /// [`StateMachineStore::carry_vectors`] would embed. Cheap: no model runs.
    pub fn wants_vectors(&self, cmd: &Command) -> bool {
        let indexes = self
            .shared
            .indexes
            .read()
            .unwrap_or_else(|e| e.into_inner());
        if indexes.values().all(|i| i.spec.model.dim().is_none()) {
            return false;
        }
        cmd.put_values()
            .into_iter()
            .any(|(key, value)| text_under_model(&indexes, key, value).is_some())
    }

    /// The vectors [`StateMachineStore::carry_vectors`] carries for `cmd`, in put order.
    fn embed_puts(&self, cmd: &Command) -> Vec<CarriedVector> {
        let puts = cmd.put_values();
        let mut wanted: Vec<(u32, IndexModel, &str)> = Vec::new();
        {
            let indexes = self
                .shared
                .indexes
                .read()
                .unwrap_or_else(|e| e.into_inner());
            if indexes.is_empty() {
                return Vec::new();
            }
            let mut bytes = 0usize;
            for (i, &(key, value)) in puts.iter().enumerate() {
                let Some((model, dim, text)) = text_under_model(&indexes, key, value) else {
                    continue;
                };
                bytes += 4 * dim;
                if bytes > MAX_CARRIED_VECTOR_BYTES {
                    break;
                }
                wanted.push((u32::try_from(i).unwrap_or(u32::MAX), model, text));
            }
        }
        let mut vectors = Vec::with_capacity(wanted.len());
        for kind in [IndexModel::Hash, IndexModel::MiniLm] {
            let (puts, texts): (Vec<u32>, Vec<&str>) = wanted
                .iter()
                .filter(|(_, m, _)| *m == kind)
                .map(|&(put, _, text)| (put, text))
                .unzip();
            if texts.is_empty() {
                continue;
            }
            let made = embedder(kind).and_then(|model| {
                let model = model
                    .ok_or_else(|| crate::error::Error::Raft(format!("no model for {kind:?}")))?;
                let dim = model.dim();
                let made = model.embed(&texts)?;
                Ok((dim, made))
            });
            match made {
                Ok((dim, made)) if made.len() == texts.len() => {
                    vectors.extend(
                        puts.into_iter()
                            .zip(made)
                            .filter(|(_, v)| v.len() == dim && v.iter().all(|x| x.is_finite()))
                            .map(|(put, vector)| CarriedVector { put, vector }),
                    );
                }
                Ok((_, made)) => tracing::warn!(
                    "the {kind:?} model made {} vectors for {} texts: replicas embed them",
                    made.len(),
                    texts.len()
                ),
                Err(e) => tracing::warn!("the {kind:?} model failed, replicas embed: {e}"),
            }
        }
        vectors.sort_by_key(|v| v.put);
        vectors
    }

    /// Texts this node's vectors came from, and texts it embedded as the leader.
    pub fn embeddings(&self) -> EmbeddingCounts {
        self.shared.supply.counts()
    }
}

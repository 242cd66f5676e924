//! Embed once (docs/replication.md, "Embed once"): the leader embeds the texts a command
//! puts under model indexes before it proposes the command
//! ([`StateMachineStore::carry_vectors`]), the log carries the vectors
//! ([`Command::Embedded`]), and each replica's apply hands them to its indexes through its
//! [`Supply`]. An index's workers ask their embedder ([`SuppliedEmbedder`]) for the vectors
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
//! did not swap) stays until [`MAX_SUPPLY_BYTES`] evicts it, oldest first.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use shale_search::semantic::{decode_vector_value, Embedder};

use super::{lock, Indexes, StateMachineStore};
use crate::command::{CarriedVector, Command, IndexModel, MAX_CARRIED_VECTOR_BYTES};
use crate::state_machine::indexes::embedder;

/// Most bytes of texts and vectors a supply holds (each entry counts its text, its
/// vector's components and about a hundred bytes of bookkeeping).
pub const MAX_SUPPLY_BYTES: usize = 64 * 1024 * 1024;

/// What an entry costs beyond its text and components: its map slot, queue slot and
/// allocations' headers, roughly.
const ENTRY_OVERHEAD: usize = 96;

type Key = (IndexModel, Box<str>);

/// Carried vectors waiting for the index workers of one state machine.
pub struct Supply {
    held: Mutex<Held>,
    counts: Counters,
    /// [`MAX_SUPPLY_BYTES`], but in tests.
    limit: usize,
}

impl Default for Supply {
    fn default() -> Supply {
        Supply::with_limit(MAX_SUPPLY_BYTES)
    }
}

#[derive(Default)]
struct Held {
    vectors: HashMap<Key, Waiting>,
    /// Keys in the order they were offered, with the stamp of that offer: an entry is
    /// evicted by the queue slot of its latest offer only.
    order: VecDeque<(Key, u64)>,
    bytes: usize,
    stamp: u64,
}

struct Waiting {
    vector: Arc<[f32]>,
    /// Offers not yet taken: a text put under two keys is asked for twice.
    offers: u32,
    stamp: u64,
    bytes: usize,
}

#[derive(Default)]
struct Counters {
    from_log: AtomicU64,
    by_model: AtomicU64,
    proposed: AtomicU64,
}

/// How many texts one node's vectors came from, since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EmbeddingCounts {
    /// Texts its indexes took a vector from the log for.
    pub from_log: u64,
    /// Texts its indexes ran the model for.
    pub by_model: u64,
    /// Texts it embedded as the leader, for the log.
    pub proposed: u64,
}

impl std::fmt::Debug for Supply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = lock(&self.held);
        f.debug_struct("Supply")
            .field("texts", &held.vectors.len())
            .field("bytes", &held.bytes)
            .field("counts", &self.counts())
            .finish()
    }
}

impl Supply {
    fn with_limit(limit: usize) -> Supply {
        Supply {
            held: Mutex::default(),
            counts: Counters::default(),
            limit,
        }
    }

    pub fn counts(&self) -> EmbeddingCounts {
        EmbeddingCounts {
            from_log: self.counts.from_log.load(Ordering::Relaxed),
            by_model: self.counts.by_model.load(Ordering::Relaxed),
            proposed: self.counts.proposed.load(Ordering::Relaxed),
        }
    }

    /// Hold `vector` as `model`'s vector of `text` until an index asks for it.
    fn offer(&self, model: IndexModel, text: &str, vector: &[f32]) {
        let mut held = lock(&self.held);
        held.stamp += 1;
        let stamp = held.stamp;
        let key: Key = (model, text.into());
        let bytes = text.len() + 4 * vector.len() + ENTRY_OVERHEAD;
        match held.vectors.get_mut(&key) {
            Some(waiting) => {
                waiting.offers = waiting.offers.saturating_add(1);
                waiting.stamp = stamp;
            }
            None => {
                held.vectors.insert(
                    key.clone(),
                    Waiting {
                        vector: vector.into(),
                        offers: 1,
                        stamp,
                        bytes,
                    },
                );
                held.bytes += bytes;
            }
        }
        held.order.push_back((key, stamp));
        while held.bytes > self.limit {
            let Some((key, stamp)) = held.order.pop_front() else {
                break;
            };
            if held.vectors.get(&key).is_some_and(|w| w.stamp == stamp) {
                if let Some(w) = held.vectors.remove(&key) {
                    held.bytes -= w.bytes;
                }
            }
        }
        // Taken entries leave their queue slots behind; drop them before they outnumber
        // the entries held.
        if held.order.len() > 2 * held.vectors.len() + 1024 {
            let Held { vectors, order, .. } = &mut *held;
            order.retain(|(key, stamp)| vectors.get(key).is_some_and(|w| w.stamp == *stamp));
        }
    }

    /// `model`'s vector of `text`, if one was offered and not yet taken as often.
    fn take(&self, model: IndexModel, text: &str) -> Option<Arc<[f32]>> {
        let mut held = lock(&self.held);
        let key: Key = (model, text.into());
        let waiting = held.vectors.get_mut(&key)?;
        if waiting.offers > 1 {
            waiting.offers -= 1;
            return Some(Arc::clone(&waiting.vector));
        }
        let w = held.vectors.remove(&key)?;
        held.bytes -= w.bytes;
        Some(w.vector)
    }

    /// Offer the vectors `cmd` carries for texts under model indexes (a vector whose put
    /// is no such text, or whose length is not the model's, is left out: the replica's
    /// model embeds that value, as it would without the vector).
    pub(super) fn offer_carried(
        &self,
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
                    self.offer(model, text, &carried.vector);
                }
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

/// An index's embedder on a replica: the model, asked only for the texts whose vectors
/// the supply does not hold. Its model id and dimension are the model's, so an index
/// opened with it is the same index as one opened with the model.
pub struct SuppliedEmbedder {
    pub(super) kind: IndexModel,
    pub(super) model: Arc<dyn Embedder>,
    pub(super) supply: Arc<Supply>,
}

impl std::fmt::Debug for SuppliedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuppliedEmbedder")
            .field("kind", &self.kind)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl Embedder for SuppliedEmbedder {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn model_id(&self) -> String {
        self.model.model_id()
    }

    fn embed(&self, texts: &[&str]) -> shale::error::Result<Vec<Vec<f32>>> {
        let mut vectors: Vec<Option<Vec<f32>>> = texts
            .iter()
            .map(|t| self.supply.take(self.kind, t).map(|v| v.to_vec()))
            .collect();
        let missing: Vec<&str> = texts
            .iter()
            .zip(&vectors)
            .filter(|(_, v)| v.is_none())
            .map(|(t, _)| *t)
            .collect();
        let counts = &self.supply.counts;
        counts
            .from_log
            .fetch_add((texts.len() - missing.len()) as u64, Ordering::Relaxed);
        if !missing.is_empty() {
            let mut made = self.model.embed(&missing)?.into_iter();
            counts
                .by_model
                .fetch_add(missing.len() as u64, Ordering::Relaxed);
            for slot in vectors.iter_mut().filter(|v| v.is_none()) {
                *slot = made.next();
            }
        }
        // A model that returned too few vectors leaves `None`s: the index refuses the
        // count, as it would the model's own answer.
        Ok(vectors.into_iter().flatten().collect())
    }
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
        self.shared
            .supply
            .counts
            .proposed
            .fetch_add(vectors.len() as u64, Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: IndexModel = IndexModel::Hash;

    #[test]
    fn a_vector_is_taken_as_often_as_it_was_offered() {
        let supply = Supply::default();
        supply.offer(MODEL, "a", &[1.0, 2.0]);
        supply.offer(MODEL, "a", &[1.0, 2.0]);
        assert!(
            supply.take(IndexModel::MiniLm, "a").is_none(),
            "another model's"
        );
        assert!(supply.take(MODEL, "b").is_none());
        assert_eq!(supply.take(MODEL, "a").as_deref(), Some(&[1.0, 2.0][..]));
        assert_eq!(supply.take(MODEL, "a").as_deref(), Some(&[1.0, 2.0][..]));
        assert!(supply.take(MODEL, "a").is_none());
        let held = lock(&supply.held);
        assert_eq!((held.vectors.len(), held.bytes), (0, 0));
    }

    #[test]
    fn the_oldest_offers_go_first_past_the_limit() {
        let one = 1 + 4 * 4 + ENTRY_OVERHEAD;
        let supply = Supply::with_limit(3 * one);
        for text in ["a", "b", "c"] {
            supply.offer(MODEL, text, &[0.0; 4]);
        }
        // Offered again: "a" is now the newest.
        supply.offer(MODEL, "a", &[0.0; 4]);
        supply.offer(MODEL, "d", &[0.0; 4]);
        assert!(supply.take(MODEL, "b").is_none(), "evicted");
        for text in ["a", "c", "d"] {
            assert!(supply.take(MODEL, text).is_some(), "{text}");
        }
        let held = lock(&supply.held);
        assert!(held.bytes <= 3 * one);
    }

    #[test]
    fn taken_slots_do_not_pile_up() {
        let supply = Supply::default();
        for i in 0..10_000 {
            let text = i.to_string();
            supply.offer(MODEL, &text, &[0.0; 4]);
            assert!(supply.take(MODEL, &text).is_some());
        }
        assert!(lock(&supply.held).order.len() <= 1025);
    }
}

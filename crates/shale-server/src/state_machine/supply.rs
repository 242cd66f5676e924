//! The supply of carried vectors (embed once, `carried.rs`): the vectors the log carried,
//! held by model and text until a replicated index's workers ask their embedder
//! ([`SuppliedEmbedder`]) for them; the model runs only for a text the supply does not
//! hold. A cache, never replicated state: what it evicts (oldest first, past
//! [`MAX_SUPPLY_BYTES`]) the replica's own model embeds, counted in
//! [`EmbeddingCounts::by_model`].
//!
//! Thread safety: a `Supply` is shared by a state machine's apply and its indexes' workers;
//! its entries sit behind one mutex, its counts are atomics.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use shale_search::semantic::Embedder;

use crate::command::IndexModel;

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
        let held = self.held();
        f.debug_struct("Supply")
            .field("texts", &held.vectors.len())
            .field("bytes", &held.bytes)
            .field("counts", &self.counts())
            .finish()
    }
}

impl Supply {
    fn held(&self) -> MutexGuard<'_, Held> {
        // A panic while holding the lock leaves plain data behind: carry on with it.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with_limit(limit: usize) -> Supply {
        Supply {
            held: Mutex::default(),
            counts: Counters::default(),
            limit,
        }
    }

    /// Count `n` texts this node embedded as the leader, for the log.
    pub(super) fn count_proposed(&self, n: usize) {
        self.counts.proposed.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn counts(&self) -> EmbeddingCounts {
        EmbeddingCounts {
            from_log: self.counts.from_log.load(Ordering::Relaxed),
            by_model: self.counts.by_model.load(Ordering::Relaxed),
            proposed: self.counts.proposed.load(Ordering::Relaxed),
        }
    }

    /// Hold `vector` as `model`'s vector of `text` until an index asks for it.
    pub(super) fn offer(&self, model: IndexModel, text: &str, vector: &[f32]) {
        let mut held = self.held();
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
        let mut held = self.held();
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
        let held = supply.held();
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
        let held = supply.held();
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
        assert!(supply.held().order.len() <= 1025);
    }
}

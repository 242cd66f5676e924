//! The in-memory inverted index a text index searches: a posting list per term, the
//! document table, and the exact index-wide statistics.
//!
//! It is a function of the index's document records (`format.rs`): built from them at
//! open, then changed by exactly the records each committed write derives, in commit
//! order, so it always equals what the records say. Nothing here is persisted.
//!
//! ```text
//!   dict:  term ──► TermId                    terms[TermId]: df, ids[], tfs[], bounds
//!   by_key: key ──► DocId (live documents)    lens[DocId], prefixes[DocId], docs[DocId]: key, terms
//! ```
//!
//! Invariants:
//! 1. A document gets the next `DocId` when it is put, so every posting list is sorted by
//!    `DocId`; an overwrite is a removal and a put under a new id.
//! 2. A removed document's postings stay in their lists, masked by its emptied `docs` slot
//!    and a length of 0, until `compact` renumbers the live documents (when the dead outnumber the live).
//! 3. `df`, `live` and `total_len` count live documents only: they are the exact BM25
//!    statistics of the current state, whatever the lists still hold.
//! 4. A term's `max_tf` and `min_len` bound every live posting of it, and `blocks[i]` bound
//!    postings `64 i .. 64 (i + 1)` (they may be loose after removals, never tight-and-wrong):
//!    the pruning in `query/` relies on it.
//! 5. A term's first [`BEST`] postings and its `best` (up to [`BEST`] of the later ones
//!    with the largest weights by the default BM25, with the average length when each was
//!    put) are its *best postings*: a hint that gives a query a starting k-th score, never
//!    trusted as complete or current. They may name removed documents, and a document put
//!    later with a larger weight may be missing once `best` is full; `compact` chooses
//!    them afresh.
//!
//! Thread safety: none inside; the index behind a `RwLock` in `mod.rs`. Writers hold the
//! write lock from the database's commit (`hook.rs`), searches the read lock.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use super::bm25::Bm25;
use super::format::DocView;
use super::short::ShortBytes;
use super::term_hash::TermHashing;

/// A document's number in the posting lists.
pub type DocId = u32;

/// What the index knows of one term.
#[derive(Debug, Default)]
pub struct Term {
    /// Live documents holding the term.
    pub df: u32,
    /// Postings, by ascending `DocId` (dead ones included, see invariant 2).
    pub ids: Vec<DocId>,
    pub tfs: Vec<u32>,
    /// Bounds on the term's live postings (invariant 4).
    pub max_tf: u32,
    pub min_len: u32,
    /// Bounds on each block of [`BLOCK`] postings (invariant 4).
    pub blocks: Vec<BlockBound>,
    /// The weight a posting needs to enter a full `best` (0 until it is full), so that a
    /// posting that does not enter is turned away without reading `best`.
    best_floor: f32,
    /// Up to [`BEST`] postings after the first [`BEST`] with the largest weights
    /// (invariant 5), once there are more than [`BEST`].
    best: Option<Box<BestList>>,
}

/// A posting among a term's best.
#[derive(Debug, Clone, Copy, Default)]
struct Best {
    id: DocId,
    tf: u32,
    /// The posting's weight by the default BM25 with an idf of 1, as it was put.
    impact: f32,
}

/// The best of a term's postings after its first [`BEST`]: `items[..len]`, largest
/// `impact` first.
#[derive(Debug, Default)]
struct BestList {
    len: usize,
    items: [Best; BEST],
}

impl BestList {
    fn items(&self) -> &[Best] {
        self.items.get(..self.len).unwrap_or(&[])
    }

    /// Insert `b` in its place, dropping the least if full.
    fn insert(&mut self, b: Best) {
        let at = self.items().partition_point(|x| x.impact >= b.impact);
        let len = (self.len + 1).min(BEST);
        if let Some(moved) = self.items.get_mut(at..len) {
            moved.rotate_right(1);
            if let Some(slot) = moved.first_mut() {
                *slot = b;
                self.len = len;
            }
        }
    }

    /// The least weight, once full.
    fn floor(&self) -> Option<f32> {
        (self.len == BEST).then(|| self.items().last().map_or(0.0, |b| b.impact))
    }
}

/// A document's length normalisation under the default BM25, `k1 (1 - b + b len /
/// avg_len)`: its weight for a term it holds `tf` times is `idf tf (k1 + 1) / (tf + norm)`.
fn default_norm(len: u32, avg_len: f64) -> f32 {
    let Bm25 { k1, b } = Bm25::default();
    (k1 * (1.0 - b + b * f64::from(len) / avg_len)) as f32
}

/// Postings a term keeps as its best: enough for the top 10, the usual query, with a
/// few of them removed.
pub const BEST: usize = 16;

/// Postings per block of a term's bounds.
pub const BLOCK: usize = 64;

/// The largest frequency, the shortest document and the smallest key prefix among a
/// block's postings (hits that tie on score are ordered by key, so a block whose keys all
/// come after the k-th hit's cannot win a tie).
#[derive(Debug, Clone, Copy)]
pub struct BlockBound {
    pub max_tf: u32,
    pub min_len: u32,
    /// [`key_prefix`] of the block's smallest key.
    pub min_key: u64,
}

/// A key's first eight bytes, big-endian, zero-padded: `key_prefix(a) < key_prefix(b)`
/// implies `a < b`.
pub fn key_prefix(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    for (to, from) in b.iter_mut().zip(key) {
        *to = *from;
    }
    u64::from_be_bytes(b)
}

impl Term {
    /// Append a posting of a document whose key is `key` and whose [`default_norm`] is
    /// `norm`, keeping the bounds and the best.
    fn push(&mut self, id: DocId, tf: u32, len: u32, key: &[u8], norm: f32) {
        let prefix = key_prefix(key);
        if self.ids.len().is_multiple_of(BLOCK) {
            self.blocks.push(BlockBound {
                max_tf: tf,
                min_len: len,
                min_key: prefix,
            });
        } else if let Some(b) = self.blocks.last_mut() {
            b.max_tf = b.max_tf.max(tf);
            b.min_len = b.min_len.min(len);
            b.min_key = b.min_key.min(prefix);
        }
        self.ids.push(id);
        self.tfs.push(tf);
        self.max_tf = self.max_tf.max(tf);
        self.min_len = self.min_len.min(len);
        if self.ids.len() > BEST {
            self.offer_best(id, tf, norm);
        }
    }

    /// Keep a posting after the first [`BEST`] in `best` if it weighs more than the least
    /// there.
    fn offer_best(&mut self, id: DocId, tf: u32, norm: f32) {
        let k1 = Bm25::default().k1 as f32;
        let tf_f = tf as f32;
        // impact <= best_floor, without dividing.
        if tf_f * (k1 + 1.0) <= self.best_floor * (tf_f + norm) {
            return;
        }
        let impact = tf_f * (k1 + 1.0) / (tf_f + norm);
        let list = self.best.get_or_insert_with(Box::default);
        list.insert(Best { id, tf, impact });
        if let Some(floor) = list.floor() {
            self.best_floor = floor;
        }
    }

    /// The term's best postings (invariant 5), as (document, frequency), unordered: at
    /// most `2 BEST`.
    pub fn best_postings(&self) -> impl Iterator<Item = (DocId, u32)> + '_ {
        let first = self.ids.iter().zip(&self.tfs).take(BEST);
        let rest = self.best.as_deref().map_or(&[][..], BestList::items);
        first
            .map(|(&id, &tf)| (id, tf))
            .chain(rest.iter().map(|b| (b.id, b.tf)))
    }

    fn clear(&mut self) {
        self.ids = Vec::new();
        self.tfs = Vec::new();
        self.blocks = Vec::new();
        self.best = None;
        self.best_floor = 0.0;
        self.max_tf = 0;
        self.min_len = u32::MAX;
    }
}

/// A live document.
#[derive(Debug)]
struct Doc {
    key: Box<[u8]>,
    /// Its distinct terms, to update `df` when it goes.
    terms: Box<[u32]>,
}

#[derive(Debug, Default)]
pub struct Inverted {
    dict: HashMap<ShortBytes, u32, TermHashing>,
    terms: Vec<Term>,
    /// By `DocId`: `Some` while live.
    docs: Vec<Option<Doc>>,
    /// By `DocId`: the document's length in tokens (0 once dead).
    lens: Vec<u32>,
    /// By `DocId`: [`key_prefix`] of the document's key, so that ranking hits that tie on
    /// score rarely reads a key.
    prefixes: Vec<u64>,
    by_key: BTreeMap<Box<[u8]>, DocId>,
    live: u32,
    total_len: u64,
    /// Removed documents whose postings are still in the lists.
    dead: usize,
}

/// The key of document `id` in `docs`, if live.
fn key_in(docs: &[Option<Doc>], id: DocId) -> Option<&[u8]> {
    docs.get(id as usize)?.as_ref().map(|d| &*d.key)
}

/// A removed document's postings are dropped once the dead outnumber the live and this.
const COMPACT_MIN_DEAD: usize = 4096;

impl Inverted {
    /// Number of live documents (BM25's N).
    pub fn docs(&self) -> u32 {
        self.live
    }

    /// Sum of the live documents' lengths.
    pub fn total_len(&self) -> u64 {
        self.total_len
    }

    /// Distinct terms of the live documents.
    pub fn distinct_terms(&self) -> usize {
        self.terms.iter().filter(|t| t.df > 0).count()
    }

    pub fn term(&self, text: &str) -> Option<&Term> {
        self.dict
            .get(text.as_bytes())
            .and_then(|&id| self.terms.get(id as usize))
            .filter(|t| t.df > 0)
    }

    #[cfg(test)]
    pub fn is_live(&self, id: DocId) -> bool {
        self.docs.get(id as usize).is_some_and(Option::is_some)
    }

    pub fn len_of(&self, id: DocId) -> u32 {
        self.lens.get(id as usize).copied().unwrap_or(0)
    }

    pub fn key_of(&self, id: DocId) -> Option<&[u8]> {
        key_in(&self.docs, id)
    }

    /// [`key_prefix`] of document `id`'s key.
    pub fn prefix_of(&self, id: DocId) -> u64 {
        self.prefixes.get(id as usize).copied().unwrap_or(0)
    }

    /// Make `record` document `key`'s content (replacing what it held).
    pub fn put(&mut self, key: &[u8], record: &DocView<'_>) {
        self.remove(key);
        let Ok(id) = DocId::try_from(self.docs.len()) else {
            // Four billion ids without a compaction: renumber first.
            self.compact();
            return self.put(key, record);
        };
        let mut term_ids = Vec::with_capacity(record.terms.len());
        let avg_len = (self.total_len + u64::from(record.length)) as f64 / f64::from(self.live + 1);
        let norm = default_norm(record.length, avg_len);
        for (text, tf) in &record.terms {
            let tid = self.term_id(text);
            term_ids.push(tid);
            if let Some(t) = self.terms.get_mut(tid as usize) {
                if t.df == 0 {
                    t.clear();
                }
                t.df += 1;
                t.push(id, *tf, record.length, key, norm);
            }
        }
        self.docs.push(Some(Doc {
            key: key.into(),
            terms: term_ids.into(),
        }));
        self.lens.push(record.length);
        self.prefixes.push(key_prefix(key));
        self.by_key.insert(key.into(), id);
        self.live += 1;
        self.total_len += u64::from(record.length);
    }

    /// Remove document `key`, if live.
    pub fn remove(&mut self, key: &[u8]) {
        let Some(id) = self.by_key.remove(key) else {
            return;
        };
        let Some(doc) = self.docs.get_mut(id as usize).and_then(Option::take) else {
            return;
        };
        for &tid in doc.terms.iter() {
            if let Some(t) = self.terms.get_mut(tid as usize) {
                t.df -= 1;
                if t.df == 0 {
                    // Nothing live is left: free the list now.
                    t.clear();
                }
            }
        }
        if let Some(len) = self.lens.get_mut(id as usize) {
            self.total_len -= u64::from(*len);
            *len = 0;
        }
        self.live -= 1;
        self.dead += 1;
        if self.dead >= COMPACT_MIN_DEAD && self.dead > self.live as usize {
            self.compact();
        }
    }

    /// Remove every live document with a key in `[start, end)` (`end` `None`: no end).
    pub fn remove_range(&mut self, start: &[u8], end: Option<&[u8]>) {
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        let keys: Vec<Box<[u8]>> = self
            .by_key
            .range::<[u8], _>((Bound::Included(start), upper))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.remove(&key);
        }
    }

    fn term_id(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.dict.get(text.as_bytes()) {
            return id;
        }
        let id = u32::try_from(self.terms.len()).unwrap_or(u32::MAX);
        self.dict.insert(text.as_bytes().into(), id);
        let mut term = Term::default();
        term.clear();
        self.terms.push(term);
        id
    }

    /// Renumber the live documents densely, in their order, and drop dead postings and
    /// the terms no live document holds.
    fn compact(&mut self) {
        let mut new_id = vec![DocId::MAX; self.docs.len()];
        let mut docs = Vec::with_capacity(self.live as usize);
        let mut lens = Vec::with_capacity(self.live as usize);
        let mut prefixes = Vec::with_capacity(self.live as usize);
        for (old, doc) in self.docs.drain(..).enumerate() {
            if let Some(doc) = doc {
                if let Some(slot) = new_id.get_mut(old) {
                    *slot = docs.len() as DocId;
                }
                lens.push(self.lens.get(old).copied().unwrap_or(0));
                prefixes.push(key_prefix(&doc.key));
                docs.push(Some(doc));
            }
        }
        let avg_len = self.total_len as f64 / f64::from(self.live.max(1));
        for t in &mut self.terms {
            let old = std::mem::take(t);
            t.clear();
            t.df = old.df;
            for (&id, &tf) in old.ids.iter().zip(&old.tfs) {
                if let Some(&to) = new_id.get(id as usize).filter(|&&to| to != DocId::MAX) {
                    let key = key_in(&docs, to).unwrap_or(&[]);
                    let len = lens.get(to as usize).copied().unwrap_or(0);
                    t.push(to, tf, len, key, default_norm(len, avg_len));
                }
            }
        }
        for id in self.by_key.values_mut() {
            *id = new_id.get(*id as usize).copied().unwrap_or(DocId::MAX);
        }
        self.docs = docs;
        self.lens = lens;
        self.prefixes = prefixes;
        self.dead = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::analyzer::Analyzer;

    fn rec(text: &str) -> crate::text::format::DocRecord {
        crate::text::format::DocRecord::analyze(Analyzer::Simple, text, 0)
    }

    #[test]
    fn statistics_count_live_documents_only() {
        let mut ix = Inverted::default();
        ix.put(b"a", &rec("red fox red").view());
        ix.put(b"b", &rec("blue fox").view());
        assert_eq!((ix.docs(), ix.total_len()), (2, 5));
        assert_eq!(ix.term("fox").map(|t| t.df), Some(2));
        ix.put(b"a", &rec("green").view());
        assert_eq!((ix.docs(), ix.total_len()), (2, 3));
        assert_eq!(ix.term("fox").map(|t| t.df), Some(1));
        assert!(ix.term("red").is_none());
        ix.remove_range(b"a", Some(b"c"));
        assert_eq!((ix.docs(), ix.total_len(), ix.distinct_terms()), (0, 0, 0));
    }

    #[test]
    fn compaction_renumbers_in_order_and_keeps_every_live_posting() {
        let mut ix = Inverted::default();
        for i in 0..3 * COMPACT_MIN_DEAD {
            ix.put(
                format!("k{:06}", i % 100).as_bytes(),
                &rec(&format!("w{} common", i % 7)).view(),
            );
        }
        assert!(ix.dead < COMPACT_MIN_DEAD + 100, "compacted along the way");
        let common = ix.term("common").expect("live");
        assert_eq!(common.df, 100);
        let live: Vec<_> = common.ids.iter().filter(|&&id| ix.is_live(id)).collect();
        assert_eq!(live.len(), 100);
        assert!(common.ids.windows(2).all(|w| w[0] < w[1]));
        for (key, &id) in &ix.by_key {
            assert_eq!(ix.key_of(id), Some(&**key));
        }
    }
}

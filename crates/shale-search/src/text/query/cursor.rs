//! A query's view of one posting list (a cursor), and the window of partial scores the
//! essential lists are gathered into (see the parent module).

use super::scoring::Scoring;
use crate::text::inverted::{DocId, Term, BLOCK};

/// A position in one term's posting list.
pub(super) struct Cursor<'a> {
    /// The term's place in the query.
    pub(super) qi: usize,
    pub(super) term: &'a Term,
    idf: f64,
    /// The most the term can add to a score.
    pub(super) bound: f64,
    pub(super) at: usize,
    /// Where the current window's postings start (`at` is past them).
    pub(super) window_start: usize,
    /// The block whose bound `block_bound` holds (`usize::MAX`: none yet).
    block: usize,
    block_bound: f64,
    /// Weights by (tf - 1, length) below [`CACHED_TF`] and [`CACHED_LEN`]; NaN until
    /// computed. Most postings of a long list share a few such pairs.
    cache: Vec<f64>,
}

/// Frequencies and lengths whose weights a cursor caches.
const CACHED_TF: usize = 4;
const CACHED_LEN: usize = 128;

impl<'a> Cursor<'a> {
    pub(super) fn new(qi: usize, term: &'a Term, idf: f64, bound: f64) -> Cursor<'a> {
        Cursor {
            qi,
            term,
            idf,
            bound,
            at: 0,
            window_start: 0,
            block: usize::MAX,
            block_bound: 0.0,
            cache: vec![f64::NAN; CACHED_TF * CACHED_LEN],
        }
    }
}

impl Cursor<'_> {
    pub(super) fn doc(&self) -> Option<DocId> {
        self.term.ids.get(self.at).copied()
    }

    /// The bound on the weight of any posting in the current block.
    pub(super) fn block_bound(&mut self, s: &Scoring<'_>) -> f64 {
        let block = self.at / BLOCK;
        if block != self.block {
            self.block = block;
            self.block_bound = match self.term.blocks.get(block) {
                Some(b) => s.bm25.weight(self.idf, b.max_tf, b.min_len, s.avg_len),
                None => self.bound,
            };
        }
        self.block_bound
    }

    /// The prefix of the smallest key in the current block.
    pub(super) fn block_min_key(&self) -> u64 {
        self.term
            .blocks
            .get(self.at / BLOCK)
            .map_or(0, |b| b.min_key)
    }

    /// The last document of the current block.
    pub(super) fn block_last(&self) -> DocId {
        let end = (self.at / BLOCK + 1) * BLOCK;
        let ids = &self.term.ids;
        ids.get(end.min(ids.len()).saturating_sub(1))
            .copied()
            .unwrap_or(DocId::MAX)
    }

    /// The weight at the current posting, of document `doc`.
    pub(super) fn weight(&mut self, s: &Scoring<'_>, doc: DocId) -> f64 {
        self.weight_at(s, self.at, s.ix.len_of(doc))
    }

    /// The weight of posting `at`, whose document has `len` tokens: from the cache for
    /// small frequencies and lengths (the same computation, done once per pair), else
    /// computed.
    pub(super) fn weight_at(&mut self, s: &Scoring<'_>, at: usize, len: u32) -> f64 {
        let tf = self.term.tfs.get(at).copied().unwrap_or(0);
        let slot = (tf as usize)
            .checked_sub(1)
            .filter(|&t| t < CACHED_TF && (len as usize) < CACHED_LEN)
            .map(|t| t * CACHED_LEN + len as usize);
        if let Some(w) = slot.and_then(|i| self.cache.get(i)).filter(|w| !w.is_nan()) {
            return *w;
        }
        let w = s.bm25.weight(self.idf, tf, len, s.avg_len);
        if let Some(c) = slot.and_then(|i| self.cache.get_mut(i)) {
            *c = w;
        }
        w
    }

    /// Move to the first posting at or after `doc` (galloping, then binary search).
    pub(super) fn seek(&mut self, doc: DocId) {
        let ids = &self.term.ids;
        if ids.get(self.at).is_none_or(|&d| d >= doc) {
            return;
        }
        let mut step = 1;
        let mut lo = self.at;
        let mut hi = lo + step;
        while ids.get(hi).is_some_and(|&d| d < doc) {
            lo = hi;
            step *= 2;
            hi = lo + step;
        }
        let hi = hi.min(ids.len());
        let window = ids.get(lo..hi).unwrap_or(&[]);
        self.at = lo + window.partition_point(|&d| d < doc);
    }
}

/// The end (exclusive) of the window that starts at `base`, the essential cursors' first
/// document: at most [`WINDOW`] documents, and no further than any essential cursor's
/// current block, so that a window's postings of each term lie in one block.
pub(super) fn window_end(essentials: &[Cursor<'_>], base: DocId) -> DocId {
    essentials
        .iter()
        .filter(|c| c.doc().is_some())
        .map(|c| c.block_last().saturating_add(1))
        .fold(base.saturating_add(WINDOW), DocId::min)
        .max(base.saturating_add(1))
}

/// The most documents one window spans.
const WINDOW: DocId = 4096;

/// The essential terms' partial scores over one window of documents `[base, end)`,
/// gathered term by term.
#[derive(Default)]
pub(super) struct Window {
    base: DocId,
    pub(super) end: DocId,
    /// By `doc - base`: the sum of the weights added so far (valid where `seen` is set).
    partial: Vec<f64>,
    /// Bit `doc - base`: some term added a weight.
    seen: Vec<u64>,
}

impl Window {
    pub(super) fn start(&mut self, base: DocId, end: DocId) {
        let span = (end - base) as usize;
        if self.partial.len() < span {
            self.partial.resize(span, 0.0);
            self.seen.resize(span.div_ceil(64), 0);
        }
        self.base = base;
        self.end = end;
    }

    pub(super) fn add(&mut self, doc: DocId, w: f64) {
        let slot = (doc - self.base) as usize;
        let (Some(bits), Some(p)) = (self.seen.get_mut(slot / 64), self.partial.get_mut(slot))
        else {
            return;
        };
        let bit = 1u64 << (slot % 64);
        if *bits & bit == 0 {
            *bits |= bit;
            *p = w;
        } else {
            *p += w;
        }
    }

    /// The documents some term added to, ascending, with their partial scores; the window
    /// is left empty.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = (DocId, f64)> + '_ {
        let base = self.base;
        let words = ((self.end - base) as usize).div_ceil(64);
        let partial = &self.partial;
        self.seen
            .iter_mut()
            .take(words)
            .enumerate()
            .flat_map(move |(w, bits)| {
                let mut b = std::mem::take(bits);
                std::iter::from_fn(move || {
                    (b != 0).then(|| {
                        let slot = w * 64 + b.trailing_zeros() as usize;
                        b &= b - 1;
                        let p = partial.get(slot).copied().unwrap_or(0.0);
                        (base + slot as DocId, p)
                    })
                })
            })
    }
}

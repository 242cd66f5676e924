//! What one query scores with ([`Scoring`]: the index, BM25's parameters, the average
//! document length and the query's terms with their idf) and what it scores ([`Scored`]).
//! The searches over it are in the parent module.

use crate::text::bm25::Bm25;
use crate::text::inverted::{DocId, Inverted, Term};

/// A scored document.
#[derive(Debug, Clone, Copy)]
pub struct Scored {
    pub id: DocId,
    pub score: f64,
}

/// The statistics every weight of one query is computed with.
pub struct Scoring<'a> {
    pub ix: &'a Inverted,
    pub bm25: Bm25,
    pub avg_len: f64,
    /// The query's distinct terms that the index holds, in query order, with their idf.
    pub terms: Vec<(&'a Term, f64)>,
    /// Only documents with keys in `[lower, upper)`.
    pub lower: &'a [u8],
    pub upper: Option<&'a [u8]>,
}

impl<'a> Scoring<'a> {
    /// The scoring of `terms` (distinct, in query order) over `ix`; `None` if the index is
    /// empty.
    pub fn new(ix: &'a Inverted, bm25: Bm25, terms: &[String]) -> Option<Scoring<'a>> {
        let n = ix.docs();
        if n == 0 {
            return None;
        }
        let avg_len = ix.total_len() as f64 / f64::from(n);
        let terms = terms
            .iter()
            .filter_map(|t| ix.term(t))
            .map(|t| (t, Bm25::idf(n, t.df)))
            .collect();
        Some(Scoring {
            ix,
            bm25,
            avg_len,
            terms,
            lower: &[],
            upper: None,
        })
    }

    pub(super) fn admits(&self, id: DocId) -> bool {
        // A document in a posting list has at least one token: a length of 0 is a removed
        // one's (`Inverted::remove`).
        if self.ix.len_of(id) == 0 {
            return false;
        }
        if self.lower.is_empty() && self.upper.is_none() {
            return true;
        }
        self.ix
            .key_of(id)
            .is_some_and(|k| k >= self.lower && self.upper.is_none_or(|u| k < u))
    }

    /// The score of `id` from its weights, indexed by query term (`None`: not held).
    pub(super) fn total(weights: &[Option<f64>]) -> f64 {
        weights.iter().flatten().sum()
    }

    pub(super) fn bound(&self, term: &Term, idf: f64) -> f64 {
        self.bm25
            .weight(idf, term.max_tf, term.min_len, self.avg_len)
    }
}

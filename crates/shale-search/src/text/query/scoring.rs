//! What one query scores with ([`Scoring`]: the index, BM25's parameters, the average
//! document length and the query's terms with their idf) and what it scores ([`Scored`]).
//! The searches over it are in the parent module.

use shale::{Error, Result};

use crate::text::bm25::{Bm25, CorpusStats};
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
    /// The scoring of `terms` (distinct, in query order) over `ix`, with `corpus`'s
    /// statistics if given, else the index's own; `None` if the index is empty.
    ///
    /// # Errors
    /// `InvalidOptions` if `corpus` counts fewer documents or tokens than `ix` holds.
    pub fn new(
        ix: &'a Inverted,
        bm25: Bm25,
        terms: &[String],
        corpus: Option<&CorpusStats>,
    ) -> Result<Option<Scoring<'a>>> {
        if ix.docs() == 0 {
            return Ok(None);
        }
        let (n, tokens) = match corpus {
            None => (u64::from(ix.docs()), ix.total_len()),
            Some(c) if c.docs < u64::from(ix.docs()) || c.tokens < ix.total_len() => {
                return Err(Error::InvalidOptions(vec![format!(
                    "corpus statistics of {} documents and {} tokens, where this index \
                     alone holds {} and {}",
                    c.docs,
                    c.tokens,
                    ix.docs(),
                    ix.total_len()
                )]))
            }
            Some(c) => (c.docs, c.tokens),
        };
        let avg_len = tokens as f64 / n as f64;
        let df = |text: &String, term: &Term| {
            let here = u64::from(term.df);
            corpus
                .and_then(|c| c.df.get(text))
                .map_or(here, |&all| all.max(here))
        };
        let terms = terms
            .iter()
            .filter_map(|t| ix.term(t).map(|term| (term, Bm25::idf(n, df(t, term)))))
            .collect();
        Ok(Some(Scoring {
            ix,
            bm25,
            avg_len,
            terms,
            lower: &[],
            upper: None,
        }))
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

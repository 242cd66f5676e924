//! Searching an index: by text or by vector, one query or many, every hit checked against
//! the key-value data before it is returned.

use super::core::Candidate;
use super::value::{value_hash, vector_value_payload};
use super::{SearchOptions, VectorIndex};
use crate::vector::hnsw::MAX_EF;
use shale::error::{Error, Result};

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub key: Vec<u8>,
    /// How close the value is to the query: higher is closer (see
    /// [`crate::vector::Metric`]; cosine similarity by default), computed from the full
    /// vectors.
    pub score: f32,
    /// The value's document: the text of a text value, the payload of a vector value.
    pub document: Vec<u8>,
}

impl SearchHit {
    /// The document as text, if it is UTF-8 (always, for a text value).
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.document).ok()
    }
}

impl VectorIndex {
    /// The values nearest in meaning to `text` (embedded by the index's model) among the
    /// keys `opts` admits, best first.
    ///
    /// Sees every write acknowledged before the call (it waits for their embedding), and
    /// never returns a key that is deleted or whose value was replaced.
    ///
    /// # Errors
    /// `InvalidArgument` if the index has no embedder or an option is out of range;
    /// `Index` if the model fails; `Closed`.
    pub fn search(&self, text: &str, opts: &SearchOptions) -> Result<Vec<SearchHit>> {
        let vector = self.core.embed_query(text)?;
        self.search_vector(&vector, opts)
    }

    /// The values nearest to `vector` (of the index's dimension) among the keys `opts`
    /// admits, best first; the guarantees of [`VectorIndex::search`].
    ///
    /// # Errors
    /// `InvalidArgument` for a vector of another dimension or with a NaN or infinity, or an
    /// option out of range; `Index` if the index failed; `Closed`.
    pub fn search_vector(&self, vector: &[f32], opts: &SearchOptions) -> Result<Vec<SearchHit>> {
        check(opts)?;
        self.core.catch_up()?;
        self.search_applied(vector, opts)
    }

    /// [`VectorIndex::search_vector`] for each of `queries`, on up to `threads` threads (at least
    /// one): results in the order of the queries.
    ///
    /// # Errors
    /// The first error of any query.
    pub fn search_batch(
        &self,
        queries: &[&[f32]],
        opts: &SearchOptions,
        threads: usize,
    ) -> Result<Vec<Vec<SearchHit>>> {
        check(opts)?;
        self.core.catch_up()?;
        let threads = threads.clamp(1, queries.len().max(1));
        if threads == 1 {
            return queries
                .iter()
                .map(|q| self.search_applied(q, opts))
                .collect();
        }
        let per = queries.len().div_ceil(threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = queries
                .chunks(per)
                .map(|part| {
                    scope.spawn(move || {
                        part.iter()
                            .map(|q| self.search_applied(q, opts))
                            .collect::<Result<Vec<_>>>()
                    })
                })
                .collect();
            let mut out = Vec::with_capacity(queries.len());
            for handle in handles {
                let part = handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                out.extend(part);
            }
            Ok(out)
        })
    }

    /// Search what is applied now (the caller caught up), asking the index for more
    /// candidates while some drop out at the check against the data.
    fn search_applied(&self, vector: &[f32], opts: &SearchOptions) -> Result<Vec<SearchHit>> {
        let k = opts.k;
        let mut fetch = k;
        loop {
            let candidates = self.core.candidates(vector, fetch, opts)?;
            let exhausted = candidates.len() < fetch;
            let hits = self.verify(candidates, k)?;
            if hits.len() >= k || exhausted || fetch >= MAX_EF {
                return Ok(hits);
            }
            // Some candidates changed under us: ask for more.
            fetch = fetch.saturating_mul(2).min(MAX_EF);
        }
    }

    /// Keep the candidates whose current value still is the one the index holds.
    fn verify(&self, candidates: Vec<Candidate>, k: usize) -> Result<Vec<SearchHit>> {
        let mut hits = Vec::with_capacity(k.min(candidates.len()));
        for c in candidates {
            if hits.len() == k {
                break;
            }
            let value = match &self.space {
                Some(ks) => ks.get(&c.key)?,
                None => self.db.get(&c.key)?,
            };
            let Some(value) = value else {
                continue;
            };
            if value_hash(&value) != c.hash {
                continue;
            }
            let document = match vector_value_payload(&value) {
                Some(Ok(payload)) => payload.to_vec(),
                Some(Err(_)) => continue,
                None => value,
            };
            hits.push(SearchHit {
                key: c.key,
                score: c.score,
                document,
            });
        }
        Ok(hits)
    }
}

/// Refuse options out of range.
fn check(opts: &SearchOptions) -> Result<()> {
    for (name, n) in [
        ("k", Some(opts.k)),
        ("ef", opts.ef),
        ("rerank", opts.rerank),
    ] {
        if n.is_some_and(|n| n > MAX_EF) {
            return Err(Error::invalid(format!(
                "search {name} = {} exceeds the limit of {MAX_EF}",
                n.unwrap_or_default()
            )));
        }
    }
    Ok(())
}

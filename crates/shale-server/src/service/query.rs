//! A `Search` request: its options checked before the read barrier, then the search by
//! meaning, keywords or both on one replicated index (docs/replication.md).

use tonic::Status;

use shale_search::hybrid::{self, Fusion, HybridOptions};
use shale_search::semantic::SearchOptions;
use shale_search::{KeywordOptions, Match};

use crate::pb;
use crate::state_machine::ReplicatedIndex;
use crate::status::engine;

/// The most hits one search returns.
pub const MAX_SEARCH_HITS: u32 = 10_000;
/// The longest search text: the model reads its first 256 tokens (about 1 KiB of English),
/// and each of a keyword query's terms costs a posting list's walk.
pub const MAX_SEARCH_TEXT_BYTES: usize = 16 * 1024;

/// The hits a search returns (`k`) and the hits a hybrid search takes from each of its
/// two searches (`window`, by default twice `k` and at least 20), each 1 to
/// [`MAX_SEARCH_HITS`].
fn hits(r: &pb::SearchRequest) -> Result<(usize, usize), Status> {
    if r.k == 0 || r.k > MAX_SEARCH_HITS {
        return Err(Status::invalid_argument(format!(
            "k = {}: 1 to {MAX_SEARCH_HITS}",
            r.k
        )));
    }
    let k = r.k as usize;
    let window = match r.window {
        Some(w) if w == 0 || w > MAX_SEARCH_HITS => {
            return Err(Status::invalid_argument(format!(
                "window = {w}: 1 to {MAX_SEARCH_HITS}"
            )))
        }
        Some(w) => w as usize,
        None => (2 * k).max(20).min(MAX_SEARCH_HITS as usize),
    };
    Ok((k, window))
}

/// A search text of at most [`MAX_SEARCH_TEXT_BYTES`], there unless the search is by
/// meaning only.
fn check_text(r: &pb::SearchRequest, mode: pb::SearchMode) -> Result<(), Status> {
    if let Some(text) = r
        .text
        .as_deref()
        .filter(|t| t.len() > MAX_SEARCH_TEXT_BYTES)
    {
        return Err(Status::invalid_argument(format!(
            "a search text of {} bytes: at most {MAX_SEARCH_TEXT_BYTES}",
            text.len()
        )));
    }
    if mode != pb::SearchMode::Meaning && r.text.is_none() {
        return Err(Status::invalid_argument(
            "a keyword or hybrid search needs its keywords in `text`",
        ));
    }
    Ok(())
}

/// A `Search` request's options, checked before the read barrier.
pub(super) struct Query {
    mode: pb::SearchMode,
    vector: SearchOptions,
    keywords: KeywordOptions,
    hybrid: HybridOptions,
}

impl Query {
    pub(super) fn parse(r: &pb::SearchRequest) -> Result<Query, Status> {
        let invalid = |what: &str, v: i32| Status::invalid_argument(format!("{what} {v}"));
        let (k, window) = hits(r)?;
        let mode = pb::SearchMode::try_from(r.mode).map_err(|_| invalid("mode", r.mode))?;
        let matching = match pb::TermMatch::try_from(r.r#match) {
            Ok(pb::TermMatch::Any) => Match::Any,
            Ok(pb::TermMatch::All) => Match::All,
            Ok(pb::TermMatch::Phrase) => Match::Phrase,
            Err(_) => return Err(invalid("match", r.r#match)),
        };
        let fusion = match pb::Fusion::try_from(r.fusion) {
            Ok(pb::Fusion::Rrf) => Fusion::default(),
            Ok(pb::Fusion::MinMax) => Fusion::MinMax,
            Err(_) => return Err(invalid("fusion", r.fusion)),
        };
        check_text(r, mode)?;
        let vector = SearchOptions {
            ef: r.ef.map(|ef| ef as usize),
            exact: r.exact,
            lower_bound: r.from.clone(),
            upper_bound: r.to.clone(),
            ..SearchOptions::k(k)
        };
        let keywords = KeywordOptions {
            lower_bound: r.from.clone(),
            upper_bound: r.to.clone(),
            highlight: true,
            ..KeywordOptions::k(k).mode(matching)
        };
        let mut hybrid = HybridOptions::k(k).fusion(fusion).windows(window, window);
        hybrid.keyword = KeywordOptions {
            k: window,
            ..keywords.clone()
        };
        hybrid.vector = SearchOptions {
            k: window,
            ..vector.clone()
        };
        Ok(Query {
            mode,
            vector,
            keywords,
            hybrid,
        })
    }

    /// The hits of `r` on `index` (blocking: it may wait for the index).
    pub(super) fn run(
        self,
        index: &ReplicatedIndex,
        r: pb::SearchRequest,
    ) -> Result<Vec<pb::SearchHit>, Status> {
        let keywords = || {
            index.keywords.as_ref().ok_or_else(|| {
                Status::failed_precondition(format!(
                    "index {:?} has no keyword index: define it with an analyzer",
                    r.index
                ))
            })
        };
        let by_text = r.text.is_some();
        let text = r.text.unwrap_or_default();
        let hits = match self.mode {
            pb::SearchMode::Meaning => match by_text {
                true => index.vectors.search(&text, &self.vector),
                false => index.vectors.search_vector(&r.vector, &self.vector),
            }
            .map(|hits| {
                hits.into_iter()
                    .map(|h| pb::SearchHit {
                        key: h.key,
                        score: h.score,
                        payload: h.document,
                    })
                    .collect()
            }),
            pb::SearchMode::Keywords => keywords()?.search(&text, &self.keywords).map(|hits| {
                hits.into_iter()
                    .map(|h| pb::SearchHit {
                        key: h.key,
                        score: h.score as f32,
                        payload: h.text.unwrap_or_default().into_bytes(),
                    })
                    .collect()
            }),
            pb::SearchMode::Hybrid => {
                let vector = (!r.vector.is_empty()).then_some(r.vector.as_slice());
                hybrid::search(keywords()?, &index.vectors, &text, vector, &self.hybrid).map(
                    |hits| {
                        hits.into_iter()
                            .map(|h| pb::SearchHit {
                                key: h.key,
                                score: h.score as f32,
                                payload: h.document.unwrap_or_default(),
                            })
                            .collect()
                    },
                )
            }
        };
        hits.map_err(|e| match e {
            shale::Error::InvalidArgument(msg) => Status::invalid_argument(msg),
            shale::Error::InvalidOptions(problems) => Status::invalid_argument(problems.join("; ")),
            e => engine(e),
        })
    }
}

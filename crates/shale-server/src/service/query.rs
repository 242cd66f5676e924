//! A `Search` request: its options checked before the read barrier, then the search by
//! meaning, keywords or both on one replicated index (docs/replication.md).

use tonic::Status;

use std::collections::HashMap;

use shale_search::hybrid::{self, Fusion, HybridOptions, Ranking, Windows};
use shale_search::semantic::SearchOptions;
use shale_search::{CorpusStats, KeywordOptions, Match, TextIndex};

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

    pub(super) fn mode(&self) -> pb::SearchMode {
        self.mode
    }

    /// The statistics the keyword side scores with, if not the index's own.
    pub(super) fn corpus(&self) -> Option<&CorpusStats> {
        self.keywords.corpus.as_ref()
    }

    /// Score the keyword side with `corpus`: the sums over every shard of the index.
    pub(super) fn with_corpus(mut self, corpus: CorpusStats) -> Query {
        self.keywords.corpus = Some(corpus.clone());
        self.hybrid.keyword.corpus = Some(corpus);
        self
    }

    /// The hits of `r` on `index` (blocking: it may wait for the index).
    pub(super) fn run(
        self,
        index: &ReplicatedIndex,
        r: pb::SearchRequest,
    ) -> Result<Vec<pb::SearchHit>, Status> {
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
            pb::SearchMode::Keywords => keyword_index(index, &r.index)?
                .search(&text, &self.keywords)
                .map(|hits| {
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
                let words = keyword_index(index, &r.index)?;
                hybrid::search(words, &index.vectors, &text, vector, &self.hybrid).map(|hits| {
                    hits.into_iter()
                        .map(|h| pb::SearchHit {
                            key: h.key,
                            score: h.score as f32,
                            payload: h.document.unwrap_or_default(),
                        })
                        .collect()
                })
            }
        };
        hits.map_err(search_status)
    }

    /// This shard's part of `r` on `index`: its rankings, unfused, with their documents
    /// (blocking, as [`Query::run`]).
    pub(super) fn part(
        self,
        index: &ReplicatedIndex,
        r: pb::SearchRequest,
    ) -> Result<pb::SearchShardResponse, Status> {
        let by_text = r.text.is_some();
        let text = r.text.unwrap_or_default();
        let windows = match self.mode {
            pb::SearchMode::Meaning => match by_text {
                true => index.vectors.search(&text, &self.vector),
                false => index.vectors.search_vector(&r.vector, &self.vector),
            }
            .map(|hits| {
                let mut w = Windows::default();
                for h in hits {
                    w.vector.push((h.key.clone(), f64::from(h.score)));
                    w.documents.insert(h.key, h.document);
                }
                w
            }),
            pb::SearchMode::Keywords => keyword_index(index, &r.index)?
                .search(&text, &self.keywords)
                .map(|hits| {
                    let mut w = Windows::default();
                    for h in hits {
                        w.keyword.push((h.key.clone(), h.score));
                        w.documents
                            .insert(h.key, h.text.unwrap_or_default().into_bytes());
                    }
                    w
                }),
            pb::SearchMode::Hybrid => {
                let vector = (!r.vector.is_empty()).then_some(r.vector.as_slice());
                let words = keyword_index(index, &r.index)?;
                hybrid::windows(words, &index.vectors, &text, vector, &self.hybrid)
            }
        };
        let w = windows.map_err(search_status)?;
        let ranking = |r: Ranking| {
            r.into_iter()
                .map(|(key, score)| pb::ShardHit { key, score })
                .collect()
        };
        Ok(pb::SearchShardResponse {
            keyword: ranking(w.keyword),
            vector: ranking(w.vector),
            documents: w
                .documents
                .into_iter()
                .map(|(key, value)| pb::Pair { key, value })
                .collect(),
        })
    }

    /// The hits of every shard's part, merged (and fused) as one index over them all
    /// would rank them.
    pub(super) fn merge(&self, parts: Vec<pb::SearchShardResponse>) -> Vec<pb::SearchHit> {
        let mut documents = HashMap::new();
        let (mut keyword, mut vector) = (Vec::new(), Vec::new());
        for part in parts {
            let ranking = |hits: Vec<pb::ShardHit>| -> Ranking {
                hits.into_iter().map(|h| (h.key, h.score)).collect()
            };
            keyword.push(ranking(part.keyword));
            vector.push(ranking(part.vector));
            documents.extend(part.documents.into_iter().map(|p| (p.key, p.value)));
        }
        let ranked: Vec<(Vec<u8>, f64)> = match self.mode {
            pb::SearchMode::Meaning => hybrid::merge(vector, self.vector.k),
            pb::SearchMode::Keywords => hybrid::merge(keyword, self.keywords.k),
            pb::SearchMode::Hybrid => {
                let h = &self.hybrid;
                hybrid::fuse(
                    &hybrid::merge(keyword, h.keyword_window),
                    &hybrid::merge(vector, h.vector_window),
                    h.fusion,
                    (h.keyword_weight, h.vector_weight),
                    h.k,
                )
                .into_iter()
                .map(|hit| (hit.key, hit.score))
                .collect()
            }
        };
        ranked
            .into_iter()
            .map(|(key, score)| pb::SearchHit {
                payload: documents.remove(&key).unwrap_or_default(),
                key,
                score: score as f32,
            })
            .collect()
    }
}

/// The keyword index of `index` (named `name`).
fn keyword_index<'i>(index: &'i ReplicatedIndex, name: &str) -> Result<&'i TextIndex, Status> {
    index.keywords.as_deref().ok_or_else(|| {
        Status::failed_precondition(format!(
            "index {name:?} has no keyword index: define it with an analyzer"
        ))
    })
}

fn search_status(e: shale::Error) -> Status {
    match e {
        shale::Error::InvalidArgument(msg) => Status::invalid_argument(msg),
        shale::Error::InvalidOptions(problems) => Status::invalid_argument(problems.join("; ")),
        e => engine(e),
    }
}

/// This shard's statistics of `text` on `index`'s keyword side.
pub(super) fn corpus_of(
    index: &ReplicatedIndex,
    name: &str,
    text: &str,
) -> Result<pb::CorpusStats, Status> {
    let stats = keyword_index(index, name)?
        .corpus_stats(text)
        .map_err(search_status)?;
    Ok(pb::CorpusStats {
        docs: stats.docs,
        tokens: stats.tokens,
        df: stats.df.into_iter().collect(),
    })
}

/// The sum of every shard's statistics.
pub(super) fn corpus_sum(parts: impl IntoIterator<Item = pb::CorpusStats>) -> CorpusStats {
    let mut all = CorpusStats::default();
    for p in parts {
        all.add(&CorpusStats {
            docs: p.docs,
            tokens: p.tokens,
            df: p.df.into_iter().collect(),
        });
    }
    all
}

/// Statistics as they travel to a shard.
pub(super) fn corpus_to_pb(c: &CorpusStats) -> pb::CorpusStats {
    pb::CorpusStats {
        docs: c.docs,
        tokens: c.tokens,
        df: c.df.iter().map(|(t, n)| (t.clone(), *n)).collect(),
    }
}

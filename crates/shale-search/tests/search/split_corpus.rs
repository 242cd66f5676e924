//! A corpus split over several indexes, as the shards of a key space split it, searched
//! part by part and merged: keyword scores with the summed [`CorpusStats`], each
//! retriever's windows merged, the fusion run once. The hits, scores and documents must be
//! those of one index over every document, bit for bit.

use std::sync::Arc;

use shale::{Db, Options};
use shale_rng::SplitMix64;
use shale_search::hybrid::{self, Fusion, HybridHit, Ranking};
use shale_search::semantic::{HashEmbedder, VectorIndex, VectorIndexOptions};
use shale_search::{
    CorpusStats, HybridOptions, KeywordOptions, Match, TextIndex, TextIndexOptions,
};

const WORDS: &[&str] = &[
    "porter", "stemmer", "disk", "full", "enospc", "space", "cat", "dog", "sea", "quartz", "river",
    "stone", "light", "winter",
];

const QUERIES: &[&str] = &[
    "porter disk",
    "sea",
    "cat dog river",
    "full space stone",
    "quartz",
];

/// One database with a text and a vector index over `doc/`.
struct Part {
    _dir: tempfile::TempDir,
    words: TextIndex,
    vectors: VectorIndex,
}

impl Part {
    fn new() -> Part {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Arc::new(Db::open(dir.path(), Options::default()).expect("open"));
        let vectors = VectorIndex::open(
            &db,
            "docs",
            VectorIndexOptions::text(Arc::new(HashEmbedder)).prefix("doc/"),
        )
        .expect("vector index");
        let words = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("doc/"))
            .expect("text index");
        Part {
            _dir: dir,
            words,
            vectors,
        }
    }
}

/// 300 documents in one index, and the same split at `doc/100` and `doc/200`.
fn whole_and_parts() -> (Part, Vec<Part>) {
    let whole = Part::new();
    let parts: Vec<Part> = (0..3).map(|_| Part::new()).collect();
    let mut rng = SplitMix64::new(0x5eed);
    for i in 0..300 {
        let n = 1 + rng.below(9) as usize;
        let text: Vec<&str> = (0..n)
            .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
            .collect();
        let key = format!("doc/{i:03}");
        let text = text.join(" ");
        whole.words.db().put(&key, &text).expect("put");
        parts[i / 100].words.db().put(&key, &text).expect("put");
    }
    (whole, parts)
}

fn corpus(parts: &[Part], query: &str) -> CorpusStats {
    let mut all = CorpusStats::default();
    for p in parts {
        all.add(&p.words.corpus_stats(query).expect("stats"));
    }
    all
}

fn keyword_hits(ix: &TextIndex, query: &str, opts: &KeywordOptions) -> Ranking {
    ix.search(query, opts)
        .expect("search")
        .into_iter()
        .map(|h| (h.key, h.score))
        .collect()
}

/// The hybrid hits of `parts` merged and fused at a root.
fn fused(parts: &[Part], query: &str, opts: &HybridOptions, stats: bool) -> Vec<HybridHit> {
    let mut part_opts = opts.clone();
    if stats {
        part_opts.keyword.corpus = Some(corpus(parts, query));
    }
    let windows: Vec<hybrid::Windows> = parts
        .iter()
        .map(|p| hybrid::windows(&p.words, &p.vectors, query, None, &part_opts).expect("windows"))
        .collect();
    let keyword = hybrid::merge(
        windows.iter().map(|w| w.keyword.clone()),
        opts.keyword_window,
    );
    let vector = hybrid::merge(windows.iter().map(|w| w.vector.clone()), opts.vector_window);
    let mut hits = hybrid::fuse(
        &keyword,
        &vector,
        opts.fusion,
        (opts.keyword_weight, opts.vector_weight),
        opts.k,
    );
    for hit in &mut hits {
        hit.document = windows
            .iter()
            .find_map(|w| w.documents.get(&hit.key).cloned());
    }
    hits
}

#[test]
fn keyword_hits_merged_over_parts_are_one_index_s_bit_for_bit() {
    let (whole, parts) = whole_and_parts();
    for query in QUERIES {
        for mode in [Match::Any, Match::All] {
            let opts = KeywordOptions::k(25).mode(mode);
            let want = keyword_hits(&whole.words, query, &opts);
            let all = opts.clone().corpus(corpus(&parts, query));
            let got = hybrid::merge(
                parts.iter().map(|p| keyword_hits(&p.words, query, &all)),
                25,
            );
            assert!(!want.is_empty(), "{query:?} finds something");
            assert_eq!(got, want, "{query:?} {mode:?}");
        }
    }
}

#[test]
fn hybrid_hits_merged_over_parts_are_one_index_s_bit_for_bit() {
    let (whole, parts) = whole_and_parts();
    for query in QUERIES {
        for fusion in [Fusion::default(), Fusion::MinMax] {
            let mut opts = HybridOptions::k(10).fusion(fusion);
            opts.vector = opts.vector.exact();
            let want =
                hybrid::search(&whole.words, &whole.vectors, query, None, &opts).expect("search");
            assert_eq!(
                fused(&parts, query, &opts, true),
                want,
                "{query:?} {fusion:?}"
            );
        }
    }
}

#[test]
fn without_the_summed_statistics_the_merge_differs() {
    // Negative control: each part scoring with its own statistics gives other scores, so
    // the equality above is owed to the sums.
    let (whole, parts) = whole_and_parts();
    let differs = QUERIES.iter().any(|query| {
        let mut opts = HybridOptions::k(10).fusion(Fusion::MinMax);
        opts.vector = opts.vector.exact();
        let want =
            hybrid::search(&whole.words, &whole.vectors, query, None, &opts).expect("search");
        fused(&parts, query, &opts, false) != want
    });
    assert!(differs);
}

#[test]
fn corpus_statistics_smaller_than_the_index_are_refused() {
    let (whole, _) = whole_and_parts();
    let small = CorpusStats {
        docs: 2,
        ..CorpusStats::default()
    };
    assert!(matches!(
        whole
            .words
            .search("sea", &KeywordOptions::k(5).corpus(small)),
        Err(shale::Error::InvalidOptions(_))
    ));
}

//! Search over a key space split into shards: the node a search reaches asks each shard's
//! leader for its part and merges them. The same documents in one group and in three
//! must give the same exact hits, scores and payloads by meaning, by keywords and fused,
//! and graph searches of the same recall.

use crate::common;

use std::collections::BTreeSet;

use common::{group_leaders, Cluster, Timings};
use shale_client::Client;
use shale_rng::SplitMix64;
use shale_server::pb::{
    Analyzer, DefineIndexRequest, Fusion, Metric, Model, SearchHit, SearchMode, SearchRequest,
    TermMatch,
};

const DOCS: usize = 600;

const WORDS: &[&str] = &[
    "porter", "stemmer", "disk", "full", "space", "cat", "dog", "sea", "quartz", "river", "stone",
    "light", "winter", "apple", "orchard", "harbour", "lantern", "copper", "meadow", "signal",
];

const QUERIES: &[&str] = &[
    "porter disk",
    "sea",
    "cat dog river",
    "full space stone",
    "quartz lantern",
    "winter apple orchard",
    "copper signal meadow harbour",
    "light",
];

/// The documents, `d/000` to `d/599`: a few words each, drawn with a fixed seed.
fn documents() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = SplitMix64::new(0x5a4d);
    (0..DOCS)
        .map(|i| {
            let n = 1 + rng.below(8) as usize;
            let words: Vec<&str> = (0..n)
                .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
                .collect();
            (
                format!("d/{i:03}").into_bytes(),
                words.join(" ").into_bytes(),
            )
        })
        .collect()
}

/// Every search the test compares, each by its description.
fn searches() -> Vec<(String, SearchRequest)> {
    let mut out = Vec::new();
    for q in QUERIES {
        let base = SearchRequest {
            index: "docs".into(),
            text: Some((*q).into()),
            k: 10,
            exact: true,
            ..Default::default()
        };
        out.push((format!("{q:?} by meaning"), base.clone()));
        for (name, m) in [("any", TermMatch::Any), ("all", TermMatch::All)] {
            let r = SearchRequest {
                mode: SearchMode::Keywords.into(),
                r#match: m.into(),
                ..base.clone()
            };
            out.push((format!("{q:?} by keywords, {name}"), r));
        }
        for (name, f) in [("rrf", Fusion::Rrf), ("min-max", Fusion::MinMax)] {
            let r = SearchRequest {
                mode: SearchMode::Hybrid.into(),
                fusion: f.into(),
                ..base.clone()
            };
            out.push((format!("{q:?} hybrid, {name}"), r));
        }
        let ranged = SearchRequest {
            mode: SearchMode::Hybrid.into(),
            from: Some(b"d/150".to_vec()),
            to: Some(b"d/450".to_vec()),
            ..base.clone()
        };
        out.push((format!("{q:?} hybrid over d/150..d/450"), ranged));
    }
    out
}

/// What a cluster answers: every search's hits, then each query's graph search recall@10
/// against its exact search.
struct Answers {
    hits: Vec<(String, Vec<SearchHit>)>,
    recall: f64,
}

async fn answers(timings: Timings, groups: &[u64]) -> Answers {
    let cluster = Cluster::start(3, timings).await;
    group_leaders(&cluster, groups).await;
    let client = Client::new(cluster.endpoints(), None).expect("client");
    client
        .define_index_with(DefineIndexRequest {
            name: "docs".into(),
            prefix: b"d/".to_vec(),
            dim: 128,
            metric: Metric::Cosine.into(),
            model: Model::Hash.into(),
            keywords: Analyzer::English.into(),
        })
        .await
        .expect("define the index in every group");
    for (key, value) in documents() {
        client.put(&key, &value).await.expect("put");
    }
    let mut hits = Vec::new();
    for (what, r) in searches() {
        let found = client.search_with(r).await.expect("search");
        assert!(!found.is_empty(), "{what} finds something");
        hits.push((what, found));
    }
    let mut found = 0;
    for q in QUERIES {
        let r = SearchRequest {
            index: "docs".into(),
            text: Some((*q).into()),
            k: 10,
            ef: Some(16),
            ..Default::default()
        };
        let exact = SearchRequest {
            exact: true,
            ..r.clone()
        };
        let keys = |hits: Vec<SearchHit>| -> BTreeSet<Vec<u8>> {
            hits.into_iter().map(|h| h.key).collect()
        };
        let graph = keys(client.search_with(r).await.expect("graph search"));
        let truth = keys(client.search_with(exact).await.expect("exact search"));
        found += graph.intersection(&truth).count();
    }
    cluster.stop_all().await;
    Answers {
        hits,
        recall: found as f64 / (10 * QUERIES.len()) as f64,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_search_over_three_shards_answers_as_one_group_does() {
    let one = answers(common::timings(), &[1]).await;
    let split = Timings {
        splits: vec![b"d/2".to_vec(), b"d/4".to_vec()],
        ..common::timings()
    };
    let three = answers(split, &[1, 2, 3]).await;
    for ((what, want), (_, got)) in one.hits.iter().zip(&three.hits) {
        assert_eq!(got, want, "{what}");
    }
    // Each shard's part of a hybrid or keyword search is in the answer: hits from every
    // shard (keys below d/2, d/2 to d/4, and above).
    let shards_hit: BTreeSet<u8> = three
        .hits
        .iter()
        .flat_map(|(_, hits)| hits.iter().map(|h| h.key[2]))
        .collect();
    assert!(shards_hit.contains(&b'0') && shards_hit.contains(&b'3') && shards_hit.contains(&b'5'));
    eprintln!(
        "graph recall@10 at ef 16: one group {}, three {}",
        one.recall, three.recall
    );
    assert!(
        (one.recall - three.recall).abs() <= 0.01 || three.recall >= one.recall,
        "graph recall@10: one group {}, three {}",
        one.recall,
        three.recall
    );
}

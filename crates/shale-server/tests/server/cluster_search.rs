//! Vector search over the replicated server: an index defined through the log on every
//! replica, values checked against it before they are proposed, exact and graph searches
//! at the leader, the same answers after a failover, and the index carried to a replica
//! that catches up by snapshot (its definition travels in the snapshot; the graph is
//! rebuilt from the vectors in the data).

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::Cluster;
use shale_client::{Client, ClientError};
use shale_search::semantic::{vector_value, SearchOptions};
use shale_server::pb::{
    Analyzer, DefineIndexRequest, Metric, Model, SearchMode, SearchRequest, TermMatch,
};

const DIM: usize = 4;

/// A deterministic vector per id, spread over the space.
fn vector(i: u32) -> Vec<f32> {
    let mut x = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..DIM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2000) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// The `k` ids nearest to `q` by squared distance, by brute force.
fn nearest(q: &[f32], n: u32, k: usize) -> Vec<String> {
    let mut all: Vec<(f32, u32)> = (0..n)
        .map(|i| {
            let d: f32 = vector(i)
                .iter()
                .zip(q)
                .map(|(a, b)| (a - b) * (a - b))
                .sum();
            (d, i)
        })
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    all.iter()
        .take(k)
        .map(|(_, i)| format!("d/{i:04}"))
        .collect()
}

/// The exact top 10 of index `docs` for `q`.
async fn exact_top10(client: &Client, q: &[f32]) -> Vec<shale_server::pb::SearchHit> {
    client
        .search_with(SearchRequest {
            index: "docs".into(),
            vector: q.to_vec(),
            k: 10,
            exact: true,
            ..Default::default()
        })
        .await
        .expect("exact search")
}

fn keys(hits: &[shale_server::pb::SearchHit]) -> Vec<String> {
    hits.iter()
        .map(|h| String::from_utf8_lossy(&h.key).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_index_answers_searches_on_every_leader() {
    let mut t = common::timings();
    t.snapshot_every_entries = 30;
    t.log_entries_kept_after_snapshot = 5;
    let mut cluster = Cluster::start(3, t).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(15));

    client
        .define_index("docs", b"d/", DIM as u32, Metric::L2)
        .await
        .expect("define");
    client
        .define_index("docs", b"d/", DIM as u32, Metric::L2)
        .await
        .expect("defining it again as it is succeeds");
    let refused = |r: Result<u64, ClientError>| matches!(r, Err(ClientError::Refused(_)));
    assert!(refused(
        client.define_index("docs", b"d/", 8, Metric::L2).await
    ));
    assert!(refused(
        client.define_index("other", b"d/x", 8, Metric::L2).await
    ));
    assert!(refused(
        client.define_index("bad name", b"e/", 8, Metric::L2).await
    ));

    const N: u32 = 300;
    for i in 0..N {
        let value = vector_value(&vector(i), format!("doc {i}").as_bytes());
        client
            .put(format!("d/{i:04}").as_bytes(), &value)
            .await
            .expect("put a vector");
    }
    // Refused before proposing: text, or a vector of another dimension, under the prefix.
    assert!(refused(client.put(b"d/text", b"not a vector").await));
    assert!(refused(
        client
            .put(b"d/short", &vector_value(&[1.0, 2.0], b""))
            .await
    ));
    client
        .put(b"plain", b"outside every index")
        .await
        .expect("plain put");
    client.delete(b"d/0007").await.expect("delete a vector");

    let q = vector(42);
    let exact = exact_top10(&client, &q).await;
    let want: Vec<String> = nearest(&q, N, 11)
        .into_iter()
        .filter(|k| k != "d/0007")
        .take(10)
        .collect();
    assert_eq!(keys(&exact), want);
    assert_eq!(
        exact.first().map(|h| h.payload.as_slice()),
        Some(&b"doc 42"[..])
    );
    let graph = client.search("docs", &q, 10).await.expect("graph search");
    assert_eq!(keys(&graph).first().map(String::as_str), Some("d/0042"));
    let ranged = client
        .search_with(SearchRequest {
            index: "docs".into(),
            vector: q.clone(),
            k: 5,
            exact: true,
            from: Some(b"d/0100".to_vec()),
            to: Some(b"d/0200".to_vec()),
            ..Default::default()
        })
        .await
        .expect("ranged search");
    assert!(keys(&ranged)
        .iter()
        .all(|k| k.as_str() >= "d/0100" && k.as_str() < "d/0200"));
    let missing = client.search("nope", &q, 10).await;
    assert!(missing.is_err(), "{missing:?}");

    // An index with a model and keywords: texts in, every replica embeds and analyzes
    // them, search by meaning, keywords or both.
    client
        .define_index_with(DefineIndexRequest {
            name: "notes".into(),
            prefix: b"n/".to_vec(),
            dim: 128,
            metric: Metric::Cosine.into(),
            model: Model::Hash.into(),
            keywords: Analyzer::English.into(),
        })
        .await
        .expect("define a text index");
    let notes = [
        "the cat sleeps on the warm mat",
        "stock prices fell sharply today",
        "a recipe for bread with rye flour",
    ];
    for (i, text) in notes.iter().enumerate() {
        client
            .put(format!("n/{i}").as_bytes(), text.as_bytes())
            .await
            .expect("put a text");
    }
    assert!(
        refused(client.put(b"n/bin", b"\xff\xfe").await),
        "not UTF-8"
    );
    let found = client
        .search_text("notes", "where does the cat sleep", 1)
        .await
        .expect("text search");
    assert_eq!(keys(&found), vec!["n/0"]);
    assert_eq!(
        found.first().map(|h| h.payload.as_slice()),
        Some(notes[0].as_bytes())
    );
    assert!(
        client.search_text("docs", "cat", 1).await.is_err(),
        "no model"
    );
    check_keywords(&client, &notes).await;

    // A failover: the new leader's index gives the same exact answer.
    let leader = cluster.leader(Duration::from_secs(10)).await;
    cluster.stop(leader).await;
    assert_eq!(
        keys(&exact_top10(&client, &q).await),
        want,
        "after the failover"
    );
    let found = client
        .search_text("notes", "rye bread", 1)
        .await
        .expect("text search after the failover");
    assert_eq!(keys(&found), vec!["n/2"]);
    let found = client
        .search_keywords("notes", "cats", 10)
        .await
        .expect("keyword search after the failover");
    assert_eq!(keys(&found), vec!["n/0"]);

    // A new replica, caught up by snapshot, holds the index with every vector.
    let leader = cluster.leader(Duration::from_secs(10)).await;
    cluster.wait_purged(leader, 10).await;
    let fresh: u64 = 4;
    let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
    cluster.add_node(leader, fresh, any).await;
    let metrics = cluster.server(fresh).raft().metrics().borrow().clone();
    assert!(
        metrics.snapshot.is_some(),
        "the fresh node installed a snapshot"
    );
    let notes_index = cluster
        .server(fresh)
        .state_machine()
        .index("notes")
        .expect("the keyword index came with the snapshot");
    let keywords = notes_index.keywords.expect("defined with keywords");
    let found = tokio::task::spawn_blocking(move || {
        keywords.search("warm mat", &shale_search::KeywordOptions::k(10))
    })
    .await
    .expect("task")
    .expect("keyword search on the fresh node");
    let found: Vec<&[u8]> = found.iter().map(|h| h.key.as_slice()).collect();
    assert_eq!(found, vec![&b"n/0"[..]]);
    let index = cluster
        .server(fresh)
        .state_machine()
        .index("docs")
        .expect("the index came with the snapshot")
        .vectors;
    let opts = SearchOptions {
        exact: true,
        ..SearchOptions::k(10)
    };
    let local = tokio::task::spawn_blocking(move || index.search_vector(&q, &opts))
        .await
        .expect("task")
        .expect("search on the fresh node");
    let local: Vec<String> = local
        .iter()
        .map(|h| String::from_utf8_lossy(&h.key).into_owned())
        .collect();
    assert_eq!(local, want);
    cluster.stop_all().await;
}

/// Keyword and hybrid searches on `notes` (holding `notes`, in order, under `n/0`...):
/// every hit current at the acknowledged writes before it.
async fn check_keywords(client: &Client, notes: &[&str]) {
    let found = client
        .search_keywords("notes", "sleeping cats", 10)
        .await
        .expect("keyword search");
    assert_eq!(keys(&found), vec!["n/0"], "stemmed: sleeping, cats");
    assert_eq!(
        found.first().map(|h| h.payload.as_slice()),
        Some(notes[0].as_bytes())
    );
    let hybrid = client
        .search_hybrid("notes", "rye bread", 3)
        .await
        .expect("hybrid search");
    assert_eq!(keys(&hybrid).first().map(String::as_str), Some("n/2"));
    assert!(hybrid.iter().all(|h| !h.payload.is_empty()), "{hybrid:?}");
    // A delete and an overwrite are gone from both at acknowledgement.
    client.delete(b"n/1").await.expect("delete");
    assert!(client
        .search_keywords("notes", "stock prices", 10)
        .await
        .expect("keyword search")
        .is_empty());
    client
        .put(b"n/1", b"the dog sleeps by the door")
        .await
        .expect("overwrite");
    let found = client
        .search_keywords("notes", "sleeps", 10)
        .await
        .expect("keyword search");
    assert_eq!(keys(&found).len(), 2);
    let hybrid = client
        .search_hybrid("notes", "stock prices fell", 3)
        .await
        .expect("hybrid search");
    assert!(
        hybrid.iter().all(|h| h.payload != notes[1].as_bytes()),
        "a replaced text came back: {hybrid:?}"
    );
    let phrase = client
        .search_with(SearchRequest {
            index: "notes".into(),
            text: Some("warm mat".into()),
            k: 10,
            mode: SearchMode::Keywords.into(),
            r#match: TermMatch::Phrase.into(),
            ..Default::default()
        })
        .await
        .expect("phrase search");
    assert_eq!(keys(&phrase), vec!["n/0"]);
    let no_keywords = client.search_keywords("docs", "cat", 1).await;
    assert!(no_keywords.is_err(), "docs has no keyword index");
    let longest = "cat ".repeat(shale_server::service::MAX_SEARCH_TEXT_BYTES / 4);
    client
        .search_keywords("notes", &longest, 1)
        .await
        .expect("a search text at the limit");
    let err = client
        .search_keywords("notes", &format!("{longest}s"), 1)
        .await
        .expect_err("a search text past the limit");
    assert!(matches!(err, ClientError::Refused(_)), "{err}");
}

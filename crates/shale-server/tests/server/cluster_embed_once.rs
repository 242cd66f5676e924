//! Embed once: the leader embeds each text written under a model index, the log carries
//! the vector, and no replica runs the model for it; every replica indexes the same
//! vectors. Negative control: with `embed_once` off, every replica runs the model for
//! every text, which the checks of the first test would refuse.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::Cluster;
use shale_client::Client;
use shale_search::semantic::SearchOptions;
use shale_server::command::IndexModel;
use shale_server::pb::{DefineIndexRequest, Metric, Model};
use shale_server::state_machine::{embedder, EmbeddingCounts};
use shale_server::NodeId;

fn text(i: u32) -> String {
    format!(
        "note {i} about {} in the {} season, filed under {}",
        ["rivers", "granite", "violins", "tides", "lichen"][i as usize % 5],
        ["dry", "wet", "cold"][i as usize % 3],
        i % 7
    )
}

/// What a node counted before it was restarted (its counts start again at zero).
type Before = BTreeMap<NodeId, EmbeddingCounts>;

/// Write texts under `n/` of a model index: one by one, in one batch, and by a
/// compare-and-set; with `pause`, a follower is stopped for the batch and started again
/// after it (it applies the batch's entry when it catches up). Returns the count of texts
/// written and what the restarted node counted before it stopped.
async fn write_texts(cluster: &mut Cluster, model: Model, dim: u32, pause: bool) -> (u64, Before) {
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(30));
    client
        .define_index_with(DefineIndexRequest {
            name: "notes".into(),
            prefix: b"n/".to_vec(),
            dim,
            metric: Metric::Cosine.into(),
            model: model.into(),
            ..Default::default()
        })
        .await
        .expect("define the index");
    for i in 0..20 {
        client
            .put(format!("n/{i:03}").as_bytes(), text(i).as_bytes())
            .await
            .expect("put a text");
    }
    let leader = cluster.leader(Duration::from_secs(10)).await;
    let follower = *cluster
        .addrs
        .keys()
        .find(|id| **id != leader)
        .expect("a follower");
    let mut before = Before::new();
    if pause {
        // Its texts so far indexed, so that none waits for its model after the restart.
        cluster.wait_indexed_everywhere("notes").await;
        before.insert(
            follower,
            cluster.server(follower).state_machine().embeddings(),
        );
        cluster.stop(follower).await;
    }
    let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = (20..50)
        .map(|i| (format!("n/{i:03}").into_bytes(), Some(text(i).into_bytes())))
        .collect();
    client.batch(&ops).await.expect("a batch of texts");
    if pause {
        cluster.restart(follower).await;
    }
    let swapped = client
        .compare_and_set(b"n/050", None, Some(text(50).as_bytes()))
        .await
        .expect("compare-and-set");
    assert!(swapped.swapped);
    // Outside the index: no vector is made or carried for it.
    client.put(b"plain", b"no index here").await.expect("put");
    (51, before)
}

/// Each node's counts, with what it counted before a restart.
fn counts(cluster: &Cluster, before: &Before) -> Vec<(NodeId, EmbeddingCounts)> {
    cluster
        .addrs
        .keys()
        .map(|id| {
            let now = cluster.server(*id).state_machine().embeddings();
            let then = before.get(id).copied().unwrap_or_default();
            let sum = EmbeddingCounts {
                from_log: now.from_log + then.from_log,
                by_model: now.by_model + then.by_model,
                proposed: now.proposed + then.proposed,
            };
            (*id, sum)
        })
        .collect()
}

/// Every key of the index with the bits of its exact score for `query`, on node `id`, in
/// key order.
fn exact_scores(cluster: &Cluster, id: NodeId, query: &str) -> Vec<(Vec<u8>, u32)> {
    let index = cluster
        .server(id)
        .state_machine()
        .index("notes")
        .expect("the index");
    let hits = index
        .vectors
        .search(query, &SearchOptions::k(100).exact())
        .expect("exact search");
    // By key: hits of equal score may come in another order on another replica.
    let mut scores: Vec<(Vec<u8>, u32)> = hits
        .into_iter()
        .map(|h| (h.key, h.score.to_bits()))
        .collect();
    scores.sort();
    scores
}

/// The checks of embed once: no replica ran the model for a text, every replica took
/// every text's vector from the log, the leader embedded each text once, and the replicas
/// index bit-identical vectors. `Err` says which failed.
fn embedded_once(cluster: &Cluster, texts: u64, before: &Before) -> Result<(), String> {
    let counts = counts(cluster, before);
    for (id, c) in &counts {
        if c.by_model != 0 || c.from_log != texts {
            return Err(format!(
                "node {id} of {counts:?}: not every vector from the log"
            ));
        }
    }
    let proposed: u64 = counts.iter().map(|(_, c)| c.proposed).sum();
    if proposed != texts {
        return Err(format!(
            "{proposed} texts embedded for the log, not {texts}"
        ));
    }
    for query in ["granite in the cold season", "violins"] {
        let first = exact_scores(cluster, 1, query);
        if first.len() as u64 != texts {
            return Err(format!("node 1 found {} of {texts} texts", first.len()));
        }
        for id in cluster.addrs.keys() {
            if exact_scores(cluster, *id, query) != first {
                return Err(format!("node {id} holds other vectors than node 1"));
            }
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leader_embeds_each_text_once_for_every_replica() {
    let mut cluster = Cluster::start(3, common::timings()).await;
    let dim = IndexModel::Hash.dim().expect("a model");
    let (texts, before) = write_texts(&mut cluster, Model::Hash, dim, true).await;
    cluster.wait_indexed_everywhere("notes").await;
    embedded_once(&cluster, texts, &before).expect("embedded once");
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_embed_once_every_replica_runs_the_model() {
    let mut t = common::timings();
    t.embed_once = false;
    let mut cluster = Cluster::start(3, t).await;
    let dim = IndexModel::Hash.dim().expect("a model");
    let (texts, before) = write_texts(&mut cluster, Model::Hash, dim, false).await;
    cluster.wait_indexed_everywhere("notes").await;
    for (id, c) in counts(&cluster, &before) {
        assert_eq!(c.by_model, texts, "node {id}");
        assert_eq!((c.from_log, c.proposed), (0, 0), "node {id}");
    }
    assert!(
        embedded_once(&cluster, texts, &before).is_err(),
        "the check must fail when replicas embed"
    );
    cluster.stop_all().await;
}

/// The same with all-MiniLM-L6-v2, whose vectors are where replicas embedding on their
/// own could differ (batches of other texts): skipped without the model, except in CI.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn minilm_vectors_are_made_once_and_identical_everywhere() {
    if let Err(e) = embedder(IndexModel::MiniLm) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs this test with the model: {e}"
        );
        eprintln!("skipped: {e} (run scripts/fetch-model.sh)");
        return;
    }
    let mut cluster = Cluster::start(3, common::timings()).await;
    let dim = IndexModel::MiniLm.dim().expect("a model");
    let (texts, before) = write_texts(&mut cluster, Model::Minilm, dim, true).await;
    cluster.wait_indexed_everywhere("notes").await;
    embedded_once(&cluster, texts, &before).expect("embedded once");
    cluster.stop_all().await;
}

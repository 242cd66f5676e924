//! A shard split while clients write: every replica applies the split and starts the
//! child group, both halves keep every acknowledged write, each half's replicas agree,
//! searches over the halves answer as the whole did, and a restarted node finds the child
//! on its disk.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{applied, group_leaders, pairs, writers, Cluster, Pairs};
use shale_client::Client;
use shale_server::pb::{DefineIndexRequest, Metric, Model};
use shale_server::GroupId;

const NOTES: u32 = 60;

/// Wait until every node holds group `group` and has applied what its leader has.
async fn settled(cluster: &Cluster, group: GroupId) {
    let leader = group_leaders(cluster, &[group]).await[0];
    let target = applied(cluster, leader, group);
    let start = Instant::now();
    while cluster
        .servers
        .keys()
        .any(|&n| applied(cluster, n, group) < target)
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "group {group} applies"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The keys and scores of a meaning, a keyword and a hybrid search of `notes`.
async fn searched(client: &Client) -> Vec<Vec<(Vec<u8>, String)>> {
    let hits = [
        client.search_text("notes", "harbour colour", 100).await,
        client.search_keywords("notes", "harbour colour", 100).await,
        client.search_hybrid("notes", "harbour colour", 100).await,
    ];
    hits.into_iter()
        .map(|h| {
            h.expect("search")
                .into_iter()
                .map(|h| (h.key, format!("{:.5}", h.score)))
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shard_splits_while_writes_flow() {
    let mut cluster = Cluster::start(3, common::timings()).await;
    group_leaders(&cluster, &[1]).await;
    let client = Client::new(cluster.endpoints(), None).expect("client");
    let client = Arc::new(client.with_deadline(Duration::from_secs(20)));
    client
        .define_index_with(DefineIndexRequest {
            name: "notes".into(),
            prefix: b"n/".to_vec(),
            dim: 128,
            metric: Metric::Cosine.into(),
            model: Model::Hash.into(),
            keywords: shale_server::pb::Analyzer::English.into(),
        })
        .await
        .expect("define the index");
    for i in 0..NOTES {
        let text = format!("note {i} on the harbour, colour {}", i % 7);
        client
            .put(format!("n/{i:02}").as_bytes(), text.as_bytes())
            .await
            .expect("put a note");
    }
    let before = searched(&client).await;
    assert_eq!(before[1].len(), NOTES as usize, "every note matches");

    let stop = Arc::new(AtomicBool::new(false));
    let tasks = writers(&client, &stop, ["b", "x"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Split inside the index's prefix: each half holds some notes.
    let split = client.split(1, b"n/30", 2).await.expect("split");
    let (kept, child) = (split.kept.expect("kept"), split.child.expect("child"));
    assert_eq!(
        (kept.group, kept.end.as_deref(), kept.version),
        (1, Some(&b"n/30"[..]), 1)
    );
    assert_eq!(
        (child.group, child.start.as_slice(), child.end),
        (2, &b"n/30"[..], None)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Pairs::new();
    for task in tasks {
        acked.extend(task.await.expect("writer"));
    }
    let (low, high) = acked
        .keys()
        .partition::<Vec<_>, _>(|k| k.as_slice() < &b"n/30"[..]);
    assert!(
        low.len() > 20 && high.len() > 20,
        "{} and {}",
        low.len(),
        high.len()
    );

    // Every acknowledged write reads back, through the group that serves it now.
    for (key, value) in &acked {
        assert_eq!(client.get(key).await.expect("get").as_ref(), Some(value));
    }
    // Each group's replicas hold the same pairs, each only its half.
    for group in [1, 2] {
        settled(&cluster, group).await;
        let held = pairs(&cluster, 1, group);
        for n in [2, 3] {
            assert_eq!(pairs(&cluster, n, group), held, "group {group}, node {n}");
        }
        let inside = |k: &Vec<u8>| (group == 1) == (k.as_slice() < &b"n/30"[..]);
        assert!(held.keys().all(inside), "group {group} holds only its half");
        for (k, v) in acked.iter().filter(|(k, _)| inside(k)) {
            assert_eq!(held.get(k), Some(v), "group {group}");
        }
    }
    // Searches over the two halves answer as the whole did.
    assert_eq!(searched(&client).await, before);

    // A node started again finds the child on its disk.
    cluster.stop(3).await;
    cluster.restart(3).await;
    assert_eq!(cluster.server(3).groups().ids(), vec![1, 2]);
    for group in [1, 2] {
        settled(&cluster, group).await;
        assert_eq!(pairs(&cluster, 3, group), pairs(&cluster, 1, group));
    }
    cluster.stop_all().await;
}

//! A replica of one shard's group moved to a new node while clients write: the new node
//! catches up (by snapshot: the log has moved on), the leadership leaves the old one, one
//! membership change replaces it, and no acknowledged write is lost.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{applied, group_leaders, pairs, split_in_three, writers, Cluster, Pairs};
use shale_client::Client;
use shale_server::{GroupId, NodeId};

const GROUPS: [GroupId; 3] = [1, 2, 3];

/// The leader of `group` that the nodes `voters` agree on (within 10 s).
async fn leader_among(cluster: &Cluster, group: GroupId, voters: &BTreeSet<NodeId>) -> NodeId {
    let start = Instant::now();
    loop {
        let seen: BTreeSet<Option<NodeId>> = voters
            .iter()
            .map(|&n| {
                let g = cluster.server(n).groups().get(group).expect("group");
                let leader = g.raft.metrics().borrow().current_leader;
                leader
            })
            .collect();
        if let [Some(leader)] = seen.iter().collect::<Vec<_>>()[..] {
            return *leader;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_moves_to_a_new_node_while_writes_flow() {
    let mut t = split_in_three();
    t.snapshot_every_entries = 40;
    t.log_entries_kept_after_snapshot = 5;
    let mut cluster = Cluster::start(3, t).await;
    let leaders = group_leaders(&cluster, &GROUPS).await;
    let addr = cluster
        .start_node(4, "127.0.0.1:0".parse().expect("addr"))
        .await;
    let client = Arc::new(Client::new(cluster.endpoints(), None).expect("client"));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = writers(&client, &stop, ["i", "b"]);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Group 2's leader is the replica that moves: its leadership goes first.
    let from = leaders[1];
    // The learner holds the leader's whole log when it is added (the move adds it again,
    // as a move made again after a failure does).
    let before = applied(&cluster, from, 2);
    client
        .add_learner_in(2, 4, &addr.to_string())
        .await
        .expect("add the learner");
    let now = leader_among(&cluster, 2, &[1, 2, 3].into()).await;
    let leader = cluster.server(now).groups().get(2).expect("group").raft;
    let matched = leader
        .metrics()
        .borrow()
        .replication
        .as_ref()
        .and_then(|r| r.get(&4).copied().flatten());
    assert!(
        matched.is_some_and(|m| m.index >= before),
        "node 4 holds group 2's log to {matched:?}, the leader had applied {before} before"
    );
    let moved = client
        .move_replica(2, from, 4, &addr.to_string())
        .await
        .expect("move");
    let want: BTreeSet<NodeId> = [1, 2, 3, 4].into_iter().filter(|&n| n != from).collect();
    assert_eq!(moved.voters.iter().copied().collect::<BTreeSet<_>>(), want);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Pairs::new();
    for task in tasks {
        acked.extend(task.await.expect("writer"));
    }
    assert!(acked.len() > 100, "{} writes acknowledged", acked.len());

    // Every acknowledged write is read back through the moved group.
    for (key, value) in &acked {
        assert_eq!(client.get(key).await.expect("get").as_ref(), Some(value));
    }
    // Group 2's voters hold the same pairs, node 4 among them, and the writes of group 2
    // acknowledged are all there.
    let leader = leader_among(&cluster, 2, &want).await;
    assert_ne!(leader, from, "the leadership left the moved replica");
    let target = applied(&cluster, leader, 2);
    let start = Instant::now();
    while want.iter().any(|&n| applied(&cluster, n, 2) < target) {
        assert!(start.elapsed() < Duration::from_secs(10), "voters catch up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held = pairs(&cluster, 4, 2);
    for &n in &want {
        assert_eq!(pairs(&cluster, n, 2), held, "node {n} and node 4 agree");
    }
    let group2: Pairs = acked
        .into_iter()
        .filter(|(k, _)| k.starts_with(b"i/"))
        .collect();
    assert!(group2.iter().all(|(k, v)| held.get(k) == Some(v)));
    // The log had moved on: node 4 was caught up by a snapshot of group 2.
    let installed = cluster.server(4).groups().get(2).expect("group").sm;
    assert!(installed.snapshot_writes().count() >= 1);
    // Node 4 took part in group 2 only.
    assert!(pairs(&cluster, 4, 1).is_empty() && pairs(&cluster, 4, 3).is_empty());
    cluster.stop_all().await;
}

/// A learner whose snapshot streams far slower than the leader builds snapshots (one every
/// 40 entries; the stream paced to 64 KiB/s) catches up after one install: the leader
/// keeps the log after the snapshot it sent until the learner's install ends
/// (`retention.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_learner_slower_than_the_leaders_snapshots_catches_up() {
    let mut t = common::timings();
    t.snapshot_every_entries = 40;
    t.log_entries_kept_after_snapshot = 5;
    t.limits.snapshot_send_bytes_per_sec = 64 << 10;
    let mut cluster = Cluster::start(3, t).await;
    group_leaders(&cluster, &[1]).await;
    // A deadline past the catch-up's (the learner is added by one call).
    let client = Client::new(cluster.endpoints(), None).expect("client");
    let client = Arc::new(client.with_deadline(Duration::from_secs(60)));
    // About 400 KiB to stream: some 6 s at the paced rate.
    for i in 0..50u32 {
        let value = vec![u8::try_from(i).expect("small"); 8 << 10];
        client
            .put(format!("big/{i:02}").as_bytes(), &value)
            .await
            .expect("put");
    }
    let addr = cluster
        .start_node(4, "127.0.0.1:0".parse().expect("addr"))
        .await;
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = writers(&client, &stop, ["i", "b"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let snapshot_at = |cluster: &Cluster| {
        let raft = cluster.server(1).groups().get(1).expect("group").raft;
        let snapshot = raft.metrics().borrow().snapshot;
        snapshot.map_or(0, |l| l.index)
    };
    // The leader's log is purged behind its snapshots: node 4 needs a snapshot.
    let start = Instant::now();
    while [1, 2, 3].iter().any(|&n| {
        let raft = cluster.server(n).groups().get(1).expect("group").raft;
        let purged = raft.metrics().borrow().purged;
        purged.is_none()
    }) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the logs are purged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = snapshot_at(&cluster);
    let started = Instant::now();
    client
        .add_learner_in(1, 4, &addr.to_string())
        .await
        .expect("the learner catches up within the deadline");
    let took = started.elapsed();
    let moved_on = snapshot_at(&cluster) - first;
    stop.store(true, Ordering::Relaxed);
    let mut acked = Pairs::new();
    for task in tasks {
        acked.extend(task.await.expect("writer"));
    }
    let installed = cluster.server(4).groups().get(1).expect("group").sm;
    let installs = installed.snapshot_writes().count();
    // One snapshot is enough: the log after it was kept for node 4 (without that, each
    // install ends behind the purged log and another snapshot follows).
    assert!(
        installs == 1 && moved_on >= 200,
        "node 4 installed {installs} snapshots in {took:?}, node 1's moved on {moved_on}"
    );
    // Node 4 holds every acknowledged write once it applied the leader's log.
    let leader = leader_among(&cluster, 1, &[1, 2, 3].into()).await;
    let target = applied(&cluster, leader, 1);
    let start = Instant::now();
    while applied(&cluster, 4, 1) < target {
        assert!(start.elapsed() < Duration::from_secs(10), "node 4 applies");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held = pairs(&cluster, 4, 1);
    assert_eq!(held, pairs(&cluster, leader, 1));
    assert!(acked.iter().all(|(k, v)| held.get(k) == Some(v)));
    cluster.stop_all().await;
}

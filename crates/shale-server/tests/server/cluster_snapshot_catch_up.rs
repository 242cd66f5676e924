//! A replica wiped and caught up by a snapshot: the leader has built snapshots and purged
//! its log, so a replica with an empty directory can only be brought up to date by a
//! streamed snapshot, which carries the index's vectors and graph too: the replica embeds
//! none of its texts again.
//!
//! The wiped replica rejoins under a new id: a replica that lost its disk also lost its
//! vote, and Raft is only safe if it never votes twice in a term under the same id
//! (docs/replication.md, "Replacing a replica").

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::Cluster;
use shale_client::Client;
use shale_server::pb::{DefineIndexRequest, Metric, Model};

/// Texts in the index `notes` (word hashing, so every replica embeds them).
const NOTES: u32 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wiped_replica_is_caught_up_by_a_snapshot() {
    let mut t = common::timings();
    t.snapshot_every_entries = 20;
    t.log_entries_kept_after_snapshot = 5;
    let mut cluster = Cluster::start(3, t).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(15));
    client
        .define_index_with(DefineIndexRequest {
            name: "notes".into(),
            prefix: b"n/".to_vec(),
            dim: 128,
            metric: Metric::Cosine.into(),
            model: Model::Hash.into(),
            ..Default::default()
        })
        .await
        .expect("define the index");
    for i in 0..NOTES {
        let text = format!("note {i} on topic {} and colour {}", i % 7, i % 5);
        client
            .put(format!("n/{i:03}").as_bytes(), text.as_bytes())
            .await
            .expect("put a text");
    }
    // Every replica has applied and embedded the texts before the snapshots below are
    // built (a write needs only one follower: the other may still be behind).
    cluster.wait_indexed_everywhere("notes").await;
    // Values of a few KiB, so the snapshot spans many frames.
    let value = |i: u32| format!("{i:06}").repeat(700).into_bytes();
    for i in 0..200u32 {
        client
            .put(format!("k{i:04}").as_bytes(), &value(i))
            .await
            .expect("put");
    }
    let leader = cluster.leader(Duration::from_secs(10)).await;
    cluster.wait_purged(leader, 10).await;

    // Wipe a follower: stop it and remove its directory.
    let victim = *cluster
        .addrs
        .keys()
        .find(|id| **id != leader)
        .expect("a follower");
    let victim_addr: SocketAddr = *cluster.addrs.get(&victim).expect("address");
    cluster.stop(victim).await;
    std::fs::remove_dir_all(cluster.data_dir(victim)).expect("wipe");

    // It comes back empty, on the same address, as node 4.
    let fresh: u64 = 4;
    cluster.addrs.remove(&victim);
    cluster.add_node(leader, fresh, victim_addr).await;
    let metrics = cluster.server(fresh).raft().metrics().borrow().clone();
    assert!(
        metrics.snapshot.is_some_and(|s| s.index > 10),
        "the fresh node installed a snapshot: {:?}",
        metrics.snapshot
    );
    // The snapshot was written into a new generation before openraft was handed it, so
    // the purge that openraft awaits in its loop as it installs the snapshot waited for
    // the switch of generations, not for the copy.
    let writes = cluster.server(fresh).state_machine().snapshot_writes();
    let waits = cluster.server(fresh).log_store().purge_waits();
    eprintln!(
        "snapshot written {} time(s) in {:?}; purges waited {} time(s), {:?}",
        writes.count(),
        writes.total(),
        waits.count(),
        waits.total()
    );
    assert!(writes.count() >= 1);
    assert!(
        waits.total() < writes.total() / 2,
        "Raft's loop waited {:?} for a snapshot written in {:?}",
        waits.total(),
        writes.total()
    );
    let db = cluster.server(fresh).state_machine().db();
    for i in 0..200u32 {
        let key = format!("k{i:04}");
        assert_eq!(
            db.get(key.as_bytes()).expect("read"),
            Some(value(i)),
            "{key} on the fresh node"
        );
    }
    drop(db);
    // The index came with the snapshot: its open took over the vectors and the graph and
    // embedded nothing.
    let index = cluster
        .server(fresh)
        .state_machine()
        .index("notes")
        .expect("the index on the fresh node")
        .vectors;
    let recovery = index.recovery();
    assert_eq!(recovery.texts_to_embed, 0, "{recovery:?}");
    assert_eq!(
        recovery.graph_nodes_reused + recovery.vectors_reinserted,
        NOTES as usize,
        "{recovery:?}"
    );
    assert!(recovery.store_damage.is_none(), "{recovery:?}");
    assert_eq!(index.len().expect("len"), NOTES as usize);
    drop(index);

    // The cluster with the new member takes writes and serves them from every node.
    client.put(b"after", b"rejoin").await.expect("put");
    for addr in cluster.endpoints() {
        let one = Client::new(vec![addr], None).expect("client");
        assert_eq!(
            one.get(b"after").await.expect("get"),
            Some(b"rejoin".to_vec())
        );
    }
    cluster.stop_all().await;
}

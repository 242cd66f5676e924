//! An online backup taken while a cluster serves, restored into a new cluster: one node
//! restored, two started empty, all three holding exactly the backup's state.

use crate::common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::Cluster;
use shale_client::{pb, Client};
use shale_server::{NodeId, Server};

/// Addresses on loopback that nothing listens on now.
fn free_addrs(n: u64) -> BTreeMap<NodeId, SocketAddr> {
    let listeners: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    (1..=n)
        .zip(&listeners)
        .map(|(id, l)| (id, l.local_addr().expect("address")))
        .collect()
}

async fn keywords(client: &Client, text: &str) -> Vec<Vec<u8>> {
    let hits = client
        .search_keywords("docs", text, 10)
        .await
        .expect("search");
    hits.into_iter().map(|h| h.key).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_backup_restores_into_a_new_cluster_with_exactly_its_state() {
    let old = Cluster::start(3, common::timings()).await;
    let client = Client::new(old.endpoints(), None).expect("client");
    client
        .define_index_with(pb::DefineIndexRequest {
            name: "docs".into(),
            prefix: b"d/".to_vec(),
            dim: 128,
            model: pb::Model::Hash.into(),
            keywords: pb::Analyzer::English.into(),
            ..Default::default()
        })
        .await
        .expect("define");
    for i in 0..300u32 {
        client
            .put(format!("k{i:04}").as_bytes(), format!("v{i}").as_bytes())
            .await
            .expect("put");
    }
    client
        .put(b"d/1", b"the disk is full: ENOSPC")
        .await
        .expect("put");
    client.delete(b"k0007").await.expect("delete");

    let dir = tempfile::tempdir().expect("tempdir");
    let backup = dir.path().join("backup.snap");
    let bytes = client.backup(&backup).await.expect("backup");
    assert_eq!(std::fs::metadata(&backup).expect("file").len(), bytes);
    // Written after the backup: not in it.
    client.put(b"after", b"the backup").await.expect("put");

    // The new cluster: node 1 restored, nodes 2 and 3 empty.
    let mut new = Cluster {
        dir: tempfile::tempdir().expect("tempdir"),
        timings: common::timings(),
        servers: BTreeMap::new(),
        addrs: free_addrs(3),
    };
    let members = new
        .addrs
        .iter()
        .map(|(id, a)| (*id, a.to_string()))
        .collect();
    let restored = shale_server::restore::restore(&new.data_dir(1), 1, members, &backup)
        .await
        .expect("restore");
    assert!(restored.pairs >= 300, "{restored:?}");
    let again = shale_server::restore::restore(&new.data_dir(1), 1, BTreeMap::new(), &backup).await;
    assert!(again.is_err(), "a directory that holds a node is refused");
    for id in 1..=3 {
        let addr = new.addrs[&id];
        let server = Server::start(new.config(id, addr)).await.expect("start");
        new.servers.insert(id, server);
    }
    new.leader(Duration::from_secs(20)).await;

    let client = Client::new(new.endpoints(), None).expect("client");
    assert_eq!(
        client.get(b"k0299").await.expect("get"),
        Some(b"v299".to_vec())
    );
    assert_eq!(client.get(b"k0007").await.expect("get"), None);
    assert_eq!(client.get(b"after").await.expect("get"), None);
    assert_eq!(keywords(&client, "ENOSPC").await, vec![b"d/1".to_vec()]);
    // The new cluster writes on, after the backup's last index.
    let index = client.put(b"new", b"cluster").await.expect("put");
    assert!(index > restored.last_log_id.index);
    client.put(b"d/2", b"ENOSPC again").await.expect("put");
    let index = client.put(b"last", b"write").await.expect("put");
    // Every replica holds the backup's state, the empty ones through the snapshot.
    for id in 1..=3 {
        new.wait_applied(id, index, Duration::from_secs(20)).await;
        let db = new.server(id).state_machine().db();
        assert_eq!(
            db.get(b"k0000").expect("get"),
            Some(b"v0".to_vec()),
            "node {id}"
        );
        assert_eq!(db.get(b"after").expect("get"), None, "node {id}");
        assert_eq!(db.get(b"new").expect("get"), Some(b"cluster".to_vec()));
    }
    assert_eq!(keywords(&client, "ENOSPC").await.len(), 2);
    new.stop_all().await;
    old.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_backup_is_refused_and_leaves_nothing_behind() {
    let old = Cluster::start(1, common::timings()).await;
    let client = Client::new(old.endpoints(), None).expect("client");
    for i in 0..50u32 {
        client
            .put(format!("k{i}").as_bytes(), b"v")
            .await
            .expect("put");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let backup = dir.path().join("backup.snap");
    client.backup(&backup).await.expect("backup");
    old.stop_all().await;

    let mut bytes = std::fs::read(&backup).expect("read");
    let middle = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(middle) {
        *b ^= 0x40;
    }
    let damaged = dir.path().join("damaged.snap");
    std::fs::write(&damaged, &bytes).expect("write");
    let target = dir.path().join("node");
    let members = BTreeMap::from([(1, "127.0.0.1:1".to_string())]);
    let err = shale_server::restore::restore(&target, 1, members.clone(), &damaged)
        .await
        .expect_err("a damaged backup");
    assert!(err.to_string().contains("corrupt"), "{err}");
    assert!(!target.join("state").exists() && !target.join("raft-log").exists());
    // The intact file restores into the same directory.
    shale_server::restore::restore(&target, 1, members, &backup)
        .await
        .expect("restore");
    assert!(Path::new(&target.join("raft-log")).exists());
}

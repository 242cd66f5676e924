//! Each data directory records whose it is: the node's id, its layout, and the cluster's
//! id, drawn at bootstrap and learned by the others from the leader's first append. A node
//! refuses to start on another node's data, and refuses Raft RPCs from another cluster.

use crate::common;

use std::time::Duration;

use common::Cluster;
use shale_client::{pb, Client};
use shale_server::network::{CLUSTER_HEADER, TARGET_HEADER};
use shale_server::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_share_one_cluster_id_and_refuse_another_clusters() {
    let mut a = Cluster::start(3, common::timings()).await;
    let client = Client::new(a.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(10));
    client.put(b"k", b"v").await.expect("put");
    let id = a
        .server(1)
        .log_store()
        .cluster_id()
        .expect("node 1 has an id");
    for node in 1..=3 {
        a.wait_applied(node, a.applied_index(1), Duration::from_secs(10))
            .await;
        assert_eq!(
            a.server(node).log_store().cluster_id(),
            Some(id),
            "node {node}"
        );
    }

    // Node 3's data, started as node 4: refused.
    a.stop(3).await;
    let listen = "127.0.0.1:0".parse().expect("address");
    let mut cfg = a.config(4, listen);
    cfg.data_dir = a.data_dir(3);
    let err = Server::start(cfg)
        .await
        .err()
        .expect("another node's data is refused");
    assert!(err.to_string().contains("belongs to node 3"), "{err}");
    a.restart(3).await;
    assert_eq!(a.server(3).log_store().cluster_id(), Some(id));

    // A second cluster: its own id, and RPCs carrying the first one's refused.
    let b = Cluster::start(1, common::timings()).await;
    let b_id = b.server(1).log_store().cluster_id().expect("an id");
    assert_ne!(b_id, id);
    let term = b.server(1).raft().metrics().borrow().current_term;
    let mut raft = b.raft_client(1).await;
    let mut req = tonic::Request::new(pb::VoteRequest {
        vote: Some(pb::Vote {
            term: term + 5,
            node_id: 2,
            committed: false,
        }),
        last_log_id: None,
    });
    req.metadata_mut()
        .insert(TARGET_HEADER, "1".parse().expect("header"));
    req.metadata_mut().insert(
        CLUSTER_HEADER,
        format!("{id:032x}").parse().expect("header"),
    );
    let refused = raft.vote(req).await.expect_err("another cluster's vote");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition, "{refused}");
    assert_eq!(
        b.server(1).raft().metrics().borrow().current_term,
        term,
        "the refused vote changed nothing"
    );
    b.stop_all().await;
    a.stop_all().await;
}

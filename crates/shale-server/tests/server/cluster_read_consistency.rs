//! Reads by the nodes' `ReadConsistency` (docs/replication.md, "Serializable reads"): a
//! follower left alone, with no quorum to confirm a leader, answers a serializable read
//! from what it has applied, and no linearizable one.

use std::time::Duration;

use shale_client::{Client, ClientError};
use shale_server::service::ReadConsistency;

use crate::common::{self, Cluster};

/// A key written through a cluster whose nodes read with `reads`, then read at a follower
/// that applied it once the other two have stopped: what that read answered.
async fn a_lone_follower_reads(reads: ReadConsistency) -> Result<Option<Vec<u8>>, ClientError> {
    let mut timings = common::timings();
    timings.read_consistency = reads;
    let mut cluster = Cluster::start(3, timings).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(10));
    let index = client.put(b"k", b"v1").await.expect("put");
    let leader = cluster.leader(Duration::from_secs(10)).await;
    let ids: Vec<_> = cluster.addrs.keys().copied().collect();
    let follower = *ids.iter().find(|&&id| id != leader).expect("a follower");
    cluster
        .wait_applied(follower, index, Duration::from_secs(10))
        .await;
    for id in ids.into_iter().filter(|&id| id != follower) {
        cluster.stop(id).await;
    }
    let addr = cluster
        .addrs
        .get(&follower)
        .expect("the follower's address");
    let lone = Client::new(vec![addr.to_string()], None)
        .expect("client")
        .with_deadline(Duration::from_secs(2));
    let read = lone.get(b"k").await;
    cluster.stop_all().await;
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_serializable_read_is_answered_without_a_quorum() {
    let read = a_lone_follower_reads(ReadConsistency::Serializable).await;
    assert_eq!(
        read.expect("a serializable read at a lone follower"),
        Some(b"v1".to_vec())
    );
}

/// The twin of the test above with the default: the same read is refused, so the
/// serializable one was answered by the follower's own state.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_linearizable_read_is_not_answered_without_a_quorum() {
    let read = a_lone_follower_reads(ReadConsistency::Linearizable).await;
    assert!(
        read.is_err(),
        "a linearizable read answered {read:?} with no quorum to confirm a leader"
    );
}

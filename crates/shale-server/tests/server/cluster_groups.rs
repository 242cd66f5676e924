//! Several Raft groups on every node, one per range of keys the key space is split at:
//! each group elects its own leader over the node's shared log database and peer
//! connections, keeps electing when a node goes, and a node refuses splits its data was
//! not made with.

use crate::common;

use common::{group_leaders, health, split_in_three, Cluster};
use shale_server::Server;
use tonic_health::pb::health_check_response::ServingStatus;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_group_elects_and_keeps_electing_when_a_node_goes() {
    let mut cluster = Cluster::start(3, split_in_three()).await;
    let groups = [1, 2, 3];
    for server in cluster.servers.values() {
        assert_eq!(server.groups().ids(), groups);
        let shards: Vec<String> = groups
            .iter()
            .map(|&g| {
                server
                    .groups()
                    .get(g)
                    .expect("group")
                    .sm
                    .shard()
                    .to_string()
            })
            .collect();
        assert_eq!(
            shards,
            [
                "[\"\", \"h\") version 1",
                "[\"h\", \"p\") version 1",
                "[\"p\", end) version 1"
            ]
        );
    }
    for g in [2, 3] {
        let dir = cluster.data_dir(1).join(format!("groups/{g}/state"));
        assert!(dir.is_dir(), "{}", dir.display());
    }
    group_leaders(&cluster, &groups).await;
    // Each group's Raft series carries its group.
    let rendered = cluster.server(1).metrics().render();
    for g in groups {
        let term = format!("shale_raft_term{{group=\"{g}\"}} ");
        assert!(rendered.contains(&term), "{term}: {rendered}");
        let sessions = format!("shale_sessions_open{{group=\"{g}\"}} ");
        assert!(rendered.contains(&sessions), "{sessions}: {rendered}");
    }

    // The node serves while each of its groups knows a leader, and stops serving when
    // one group's Raft stops, whichever group it is.
    let addr = *cluster.addrs.get(&1).expect("address");
    let kv = shale_server::health::KV_SERVICE;
    assert_eq!(health(addr, kv).await, Some(ServingStatus::Serving));
    let raft = cluster.server(1).groups().get(3).expect("group 3").raft;
    raft.shutdown().await.expect("group 3 stops on node 1");
    let start = std::time::Instant::now();
    while health(addr, "").await != Some(ServingStatus::NotServing) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "still serving"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(health(addr, kv).await, Some(ServingStatus::NotServing));
    cluster.stop(1).await;
    cluster.restart(1).await;
    let leaders = group_leaders(&cluster, &groups).await;

    // A node goes (the leader of group 2): every group has a leader among the other two.
    let gone = leaders[1];
    cluster.stop(gone).await;
    let after = group_leaders(&cluster, &groups).await;
    assert!(after.iter().all(|&l| l != gone), "{after:?}");
    cluster.restart(gone).await;
    group_leaders(&cluster, &groups).await;

    // Its data was made with three groups: started with other splits, it refuses.
    cluster.stop(gone).await;
    let mut cfg = cluster.config(gone, *cluster.addrs.get(&gone).expect("address"));
    cfg.splits = vec![b"k".to_vec()];
    let err = Server::start(cfg)
        .await
        .err()
        .expect("other splits are refused");
    assert!(
        err.to_string().contains("splits its data was made with"),
        "{err}"
    );
    cluster.stop_all().await;
}

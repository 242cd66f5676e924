//! Several Raft groups on every node, one per range of keys the key space is split at:
//! each group elects its own leader over the node's shared log database and peer
//! connections, keeps electing when a node goes, and a node refuses splits its data was
//! not made with.

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{Cluster, Timings};
use shale_server::{GroupId, NodeId, Server};

fn split_in_three() -> Timings {
    Timings {
        splits: vec![b"h".to_vec(), b"p".to_vec()],
        ..common::timings()
    }
}

/// The leader every running node agrees on for each group, waited for at most 10 s.
async fn group_leaders(cluster: &Cluster, groups: &[GroupId]) -> Vec<NodeId> {
    let start = Instant::now();
    loop {
        let seen: Vec<BTreeSet<Option<NodeId>>> = groups
            .iter()
            .map(|&g| {
                let leader_seen_by = |s: &Server| {
                    let group = s.groups().get(g).expect("every node holds every group");
                    let leader = group.raft.metrics().borrow().current_leader;
                    leader
                };
                cluster.servers.values().map(leader_seen_by).collect()
            })
            .collect();
        let agreed: Vec<NodeId> = seen
            .iter()
            .filter_map(|s| match s.iter().collect::<Vec<_>>()[..] {
                [Some(l)] if cluster.servers.contains_key(l) => Some(*l),
                _ => None,
            })
            .collect();
        if agreed.len() == groups.len() {
            return agreed;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no agreed leader for every group: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

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

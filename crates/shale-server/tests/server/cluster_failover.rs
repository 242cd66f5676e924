//! Three replicas in this process on 127.0.0.1, ephemeral ports: writes through the
//! leader, reads through every node, the leader stopped and a new one elected with no
//! acknowledged write lost, the old leader restarted and caught up; compare-and-set, scan
//! and the refusals of the client API.

use crate::common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::Cluster;
use shale_client::{Client, ClientError};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_acknowledged_write_is_lost_when_the_leader_stops() {
    let mut cluster = Cluster::start(3, common::timings()).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(15));

    for i in 0..100 {
        client.put(&key(i), &value(i)).await.expect("put");
    }
    // Reads through each node alone: a follower redirects to the leader.
    for addr in cluster.endpoints() {
        let one = Client::new(vec![addr.clone()], None).expect("client");
        for i in [0, 50, 99] {
            assert_eq!(
                one.get(&key(i)).await.expect("get"),
                Some(value(i)),
                "via {addr}"
            );
        }
    }

    let old_leader = cluster.leader(Duration::from_secs(10)).await;
    cluster.stop(old_leader).await;

    // Writes go on: the client follows the new leader once one is elected.
    for i in 100..150 {
        client
            .put(&key(i), &value(i))
            .await
            .expect("put after the leader stopped");
    }
    let new_leader = cluster.leader(Duration::from_secs(10)).await;
    assert_ne!(new_leader, old_leader);
    for i in 0..150 {
        assert_eq!(
            client.get(&key(i)).await.expect("get"),
            Some(value(i)),
            "key {i}"
        );
    }

    // The old leader comes back as a follower and catches up from the log.
    cluster.restart(old_leader).await;
    let applied = cluster.applied_index(new_leader);
    cluster
        .wait_applied(old_leader, applied, Duration::from_secs(10))
        .await;
    let db = cluster.server(old_leader).state_machine().db();
    for i in 0..150 {
        assert_eq!(
            db.get(key(i)).expect("local read"),
            Some(value(i)),
            "key {i} on the restarted node"
        );
    }
    drop(db);

    // Compare-and-set, delete, batch, scan.
    let cas = client
        .compare_and_set(&key(0), Some(&value(0)), Some(b"swapped"))
        .await
        .expect("cas");
    assert!(cas.swapped);
    let cas = client
        .compare_and_set(&key(0), Some(&value(0)), Some(b"again"))
        .await
        .expect("cas");
    assert!(!cas.swapped);
    assert_eq!(cas.current, Some(b"swapped".to_vec()));
    let cas = client
        .compare_and_set(b"fresh", None, Some(b"1"))
        .await
        .expect("cas");
    assert!(cas.swapped, "absent expected on an absent key swaps");
    client.delete(&key(1)).await.expect("delete");
    assert_eq!(client.get(&key(1)).await.expect("get"), None);
    client
        .batch(&[(key(2), None), (b"batch-a".to_vec(), Some(b"A".to_vec()))])
        .await
        .expect("batch");
    assert_eq!(client.get(&key(2)).await.expect("get"), None);
    assert_eq!(
        client.get(b"batch-a").await.expect("get"),
        Some(b"A".to_vec())
    );
    let (page, next) = client.scan(b"key", Some(b"kez"), 10).await.expect("scan");
    assert_eq!(page.len(), 10);
    assert_eq!(page.first().map(|p| p.0.clone()), Some(key(0)));
    assert_eq!(next, Some(key(12)), "keys 1 and 2 are deleted");

    // Refused before proposing: a reserved key, a key over the engine's limit.
    let err = client.put(&[0xFF, b'a'], b"x").await.unwrap_err();
    assert!(matches!(err, ClientError::Refused(_)), "{err}");
    let long = vec![b'k'; shale::options::MAX_KEY_BYTES + 1];
    let err = client.put(&long, b"x").await.unwrap_err();
    assert!(matches!(err, ClientError::Refused(_)), "{err}");

    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_admit_clients_by_role_and_never_as_replicas() {
    let mut t = common::timings();
    t.token = Some("rw-s3cret".into());
    t.read_only_token = Some("ro-s3cret".into());
    t.peer_token = Some("peer-s3cret".into());
    // The cluster elects a leader: the replicas' RPCs carry the peer token.
    let cluster = Cluster::start(3, t).await;
    let client = |token: Option<&str>| {
        Client::new(cluster.endpoints(), token.map(str::to_string))
            .expect("client")
            .with_deadline(Duration::from_secs(10))
    };
    let writer = client(Some("rw-s3cret"));
    writer
        .put(b"k", b"v")
        .await
        .expect("put with the read-write token");

    let reader = client(Some("ro-s3cret"));
    assert_eq!(reader.get(b"k").await.expect("get"), Some(b"v".to_vec()));
    assert_eq!(reader.scan(b"", None, 10).await.expect("scan").0.len(), 1);
    let denied = [
        reader.put(b"k", b"w").await.map(drop),
        reader.delete(b"k").await.map(drop),
        reader.batch(&[(b"k".to_vec(), None)]).await.map(drop),
        reader
            .compare_and_set(b"k", Some(b"v"), Some(b"w"))
            .await
            .map(drop),
        reader
            .define_index("docs", b"doc/", 8, shale_server::pb::Metric::Cosine)
            .await
            .map(drop),
        reader.remove_voters(&[3]).await.map(drop),
    ];
    for result in denied {
        let err = result.expect_err("a read-only token writes nothing");
        assert!(matches!(err, ClientError::PermissionDenied(_)), "{err}");
    }
    assert_eq!(writer.get(b"k").await.expect("get"), Some(b"v".to_vec()));

    for token in [None, Some("wrong"), Some("peer-s3cret")] {
        let err = client(token).get(b"k").await.unwrap_err();
        assert!(matches!(err, ClientError::Unauthenticated(_)), "{err}");
    }

    // A client token sends no Raft RPC.
    let mut raft = cluster.raft_client(2).await;
    for token in ["rw-s3cret", "ro-s3cret"] {
        let req = shale_server::network::with_token(
            shale_server::pb::VoteRequest::default(),
            Some(token),
        );
        let err = raft.vote(req).await.expect_err("refused");
        assert_eq!(err.code(), tonic::Code::PermissionDenied, "{err}");
    }
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_raft_request_for_another_node_is_refused() {
    let cluster = Cluster::start(3, common::timings()).await;
    let mut raft = cluster.raft_client(2).await;
    let vote = || shale_server::pb::VoteRequest {
        vote: Some(shale_server::pb::Vote {
            term: 99,
            node_id: 3,
            committed: false,
        }),
        last_log_id: None,
    };
    // Meant for node 3, sent to node 2's address: refused, and node 2 keeps its term.
    let mut req = tonic::Request::new(vote());
    req.metadata_mut().insert(
        shale_server::network::TARGET_HEADER,
        tonic::metadata::MetadataValue::from(3u64),
    );
    let err = raft.vote(req).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    let err = raft
        .vote(tonic::Request::new(vote()))
        .await
        .expect_err("no target named");
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
    let term = cluster.server(2).raft().metrics().borrow().current_term;
    assert!(
        term < 99,
        "node 2 took the term of a vote not meant for it: {term}"
    );
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_values_replicate_in_bounded_messages() {
    let cluster = Cluster::start(3, common::timings()).await;
    let client = std::sync::Arc::new(
        Client::new(cluster.endpoints(), None)
            .expect("client")
            .with_deadline(Duration::from_secs(30)),
    );
    // A value just under the command limit.
    let big = vec![7u8; shale_server::command::MAX_COMMAND_BYTES - 16];
    client
        .put(b"big", &big)
        .await
        .expect("a value of almost 1 MiB");
    // Over the command limit: refused before proposing.
    let huge = vec![
        (b"a".to_vec(), Some(vec![1u8; 600 * 1024])),
        (b"b".to_vec(), Some(vec![2u8; 600 * 1024])),
    ];
    let err = client.batch(&huge).await.unwrap_err();
    assert!(matches!(err, ClientError::Refused(_)), "{err}");
    // Many 512 KiB writes while a follower is down: when it comes back the leader sends
    // it many of them at once, and appends of more than 1 MiB are cut into smaller ones.
    // (With it up, the leader proposes concurrent writes as entries of at most 1 MiB, one
    // or two in flight, so its appends rarely carry two.)
    let mut cluster = cluster;
    let leader = cluster.leader(Duration::from_secs(10)).await;
    let lagging = cluster
        .servers
        .keys()
        .copied()
        .find(|id| *id != leader)
        .expect("a follower");
    cluster.stop(lagging).await;
    let mut tasks = Vec::new();
    for i in 0..40u32 {
        let c = std::sync::Arc::clone(&client);
        tasks.push(tokio::spawn(async move {
            c.put(format!("mib{i:02}").as_bytes(), &vec![i as u8; 512 * 1024])
                .await
        }));
    }
    for t in tasks {
        t.await.expect("task").expect("a 512 KiB put");
    }
    cluster.restart(lagging).await;
    let leader = cluster.leader(Duration::from_secs(10)).await;
    let applied = cluster.applied_index(leader);
    for id in cluster.servers.keys().copied().collect::<Vec<_>>() {
        cluster
            .wait_applied(id, applied, Duration::from_secs(20))
            .await;
        let db = cluster.server(id).state_machine().db();
        assert_eq!(
            db.get(b"big").expect("read").map(|v| v.len()),
            Some(big.len()),
            "node {id}"
        );
        for i in 0..40u32 {
            let v = db.get(format!("mib{i:02}").as_bytes()).expect("read");
            assert_eq!(
                v.as_deref().and_then(|v| v.first()).copied(),
                Some(i as u8),
                "node {id} mib{i:02}"
            );
        }
    }
    let cut = shale_server::network::APPENDS_CUT.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        cut > 0,
        "no append was large enough to be cut: the test tested nothing"
    );
    // A scan of more than 16 MiB comes back in pages (40 values of 512 KiB: 20 MiB).
    let (page, next) = client.scan(b"mib", Some(b"mic"), 0).await.expect("scan");
    assert!(
        page.len() < 40 && next.is_some(),
        "{} pairs in one page",
        page.len()
    );
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_joins_and_leaves_through_the_client() {
    let mut cluster = Cluster::start(3, common::timings()).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(20));
    for i in 0..50 {
        client.put(&key(i), &value(i)).await.expect("put");
    }
    let any_port: std::net::SocketAddr = "127.0.0.1:0".parse().expect("address");
    let fourth = shale_server::Server::start(cluster.config(4, any_port))
        .await
        .expect("start node 4");
    // Joined by a name, not an IP: the leader resolves it when it reaches node 4.
    let addr = format!("localhost:{}", fourth.addr().port());
    cluster.addrs.insert(4, fourth.addr());
    cluster.servers.insert(4, fourth);

    let err = client.add_learner(4, "local host:1").await.unwrap_err();
    assert!(matches!(err, ClientError::Refused(_)), "{err}");
    let m = client.add_learner(4, &addr).await.expect("add learner");
    assert!(m.learners.contains(&4), "{m:?}");
    let m = client.add_voters(&[4]).await.expect("add voter");
    assert_eq!(m.voters, vec![1, 2, 3, 4]);
    let applied = cluster.applied_index(cluster.leader(Duration::from_secs(10)).await);
    cluster
        .wait_applied(4, applied, Duration::from_secs(10))
        .await;
    let db = cluster.server(4).state_machine().db();
    assert_eq!(db.get(key(49)).expect("read"), Some(value(49)));
    drop(db);

    let m = client.remove_voters(&[1]).await.expect("remove voter");
    assert_eq!(m.voters, vec![2, 3, 4]);
    let err = client.add_voters(&[9]).await.unwrap_err();
    assert!(
        matches!(err, ClientError::Refused(_)),
        "node 9 is no learner: {err}"
    );
    // Removing node 1 may remove the leader: the first write can meet the election that
    // follows and time out, its outcome unknown. The put is idempotent, so it is retried a
    // bounded number of times; what must hold is that the three-voter group commits it.
    let mut tries = 0;
    loop {
        match client.put(b"after", b"change").await {
            Ok(_) => break,
            Err(ClientError::Ambiguous(why)) if tries < 3 => {
                tries += 1;
                eprintln!("put after the membership change, try {tries}: {why}");
            }
            Err(e) => panic!("put: {e}"),
        }
    }
    assert_eq!(
        client.get(b"after").await.expect("get"),
        Some(b"change".to_vec())
    );

    // The removed node stepped down (or will soon): its committed vote still names itself,
    // but it proposes nothing, so a write sent to it alone must be refused as safe to
    // retry (the client retries until its deadline), never answered as a write whose
    // outcome is unknown.
    let removed = cluster.server(1).raft().clone();
    let stepped_down = tokio::time::timeout(Duration::from_secs(10), async {
        while removed.metrics().borrow().state == openraft::ServerState::Leader {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(stepped_down.is_ok(), "node 1 still leads after its removal");
    let alone = Client::new(vec![cluster.addrs[&1].to_string()], None)
        .expect("client")
        .with_deadline(Duration::from_millis(500));
    let err = alone.put(b"to-the-removed", b"x").await.unwrap_err();
    assert!(
        matches!(err, ClientError::Timeout { .. }),
        "a removed node must refuse writes as safe to retry: {err}"
    );
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_that_moves_to_another_port_is_reached_there() {
    let mut cluster = Cluster::start(3, common::timings()).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(15));
    client.put(b"before", b"1").await.expect("put");
    let leader = cluster.leader(Duration::from_secs(10)).await;
    let ids: Vec<u64> = cluster.addrs.keys().copied().collect();
    let (mover, stayer) = match ids.iter().filter(|id| **id != leader).collect::<Vec<_>>()[..] {
        [a, b] => (*a, *b),
        _ => panic!("two followers"),
    };
    cluster.stop(mover).await;

    // Refused: another member's address, a node that is not a member.
    let taken = cluster.addrs[&leader].to_string();
    let refused = |r: Result<shale_server::pb::MembershipResponse, ClientError>| {
        matches!(r, Err(ClientError::Refused(_)))
    };
    assert!(refused(client.set_address(mover, &taken).await));
    assert!(refused(client.set_address(99, "127.0.0.1:1").await));

    // It comes back on another port, with its data; the others learn the address.
    let moved = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    cluster.addrs.insert(mover, moved);
    cluster.restart(mover).await;
    client
        .set_address(mover, &moved.to_string())
        .await
        .expect("set the address");
    let index = client.put(b"after", b"2").await.expect("put");
    cluster
        .wait_applied(mover, index, Duration::from_secs(10))
        .await;
    for id in &ids {
        let metrics = cluster.server(*id).raft().metrics().borrow().clone();
        let addr = metrics
            .membership_config
            .membership()
            .get_node(&mover)
            .map(|n| n.addr.clone());
        assert_eq!(addr, Some(moved.to_string()), "node {id}'s membership");
    }
    // The moved node counts toward a quorum at its new address: with the other follower
    // stopped, writes still commit.
    cluster.stop(stayer).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(15));
    client
        .put(b"quorum", b"3")
        .await
        .expect("a write with the mover");
    assert_eq!(
        client.get(b"after").await.expect("get"),
        Some(b"2".to_vec())
    );
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leadership_moves_to_the_voter_named_with_writes_flowing() {
    let cluster = Cluster::start(3, common::timings()).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .with_deadline(Duration::from_secs(15));
    client.put(b"before", b"1").await.expect("put");
    let first = cluster.leader(Duration::from_secs(10)).await;
    let ids: Vec<u64> = cluster.addrs.keys().copied().collect();

    // Refused: a node that is not a member. The leader itself: nothing changes.
    assert!(matches!(
        client.transfer_leader(99).await,
        Err(ClientError::Refused(_))
    ));
    let term = cluster.server(first).raft().metrics().borrow().current_term;
    assert_eq!(
        client.transfer_leader(first).await.expect("to itself"),
        term
    );

    // A writer goes on meanwhile; every write it has acknowledged must be there after.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let client = Client::new(cluster.endpoints(), None)
            .expect("client")
            .with_deadline(Duration::from_secs(15));
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            // Requests the leader refuses while it hands over are retried by the client;
            // a write that fails anyway is not acknowledged, and not checked.
            let (mut acknowledged, mut failed) = (Vec::new(), 0);
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                match client.put(&key(i), &value(i)).await {
                    Ok(_) => acknowledged.push(i),
                    Err(_) => failed += 1,
                }
            }
            (acknowledged, failed)
        })
    };
    // Each follower in turn, then back: each time the node named leads, in a later term.
    let order: Vec<u64> = ids
        .iter()
        .copied()
        .filter(|id| *id != first)
        .chain([first])
        .collect();
    let mut term = term;
    for to in order {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = std::time::Instant::now();
        let led = client.transfer_leader(to).await.expect("transfer");
        eprintln!("node {to} leads after {:?}", start.elapsed());
        assert!(led > term, "node {to} leads in term {led}, after {term}");
        term = led;
        assert_eq!(cluster.leader(Duration::from_secs(10)).await, to);
    }
    stop.store(true, Ordering::Relaxed);
    let (acknowledged, failed) = writer.await.expect("writer");
    assert!(
        acknowledged.len() > 10 && failed <= 1,
        "{} writes acknowledged, {failed} failed",
        acknowledged.len()
    );
    for i in acknowledged {
        assert_eq!(
            client.get(&key(i)).await.expect("get"),
            Some(value(i)),
            "write {i}"
        );
    }
    cluster.stop_all().await;
}

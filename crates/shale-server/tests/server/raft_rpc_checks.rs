//! Messages no leader or client would send are refused at the door, before they cost the
//! node: an append with a hole in its entries (openraft 0.9 hands an append's entries to
//! the log store unchecked, and takes the store's refusal of a hole for a fatal storage
//! error), RPCs for a group the node holds no replica of, and requests that are too long
//! or would decode into far more than their bytes.

use crate::common;

use std::time::Duration;

use common::Cluster;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use shale_client::{pb, Client};
use shale_server::network::{GROUP_HEADER, TARGET_HEADER};
use shale_server::{Server, TypeConfig};

/// A blank entry at `index`, proposed by `leader` (term, node).
fn blank(leader: (u64, u64), index: u64) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(leader.0, leader.1), index),
        payload: EntryPayload::Blank,
    }
}

fn pb_log_id(id: &LogId<u64>) -> pb::LogId {
    pb::LogId {
        term: id.leader_id.term,
        node_id: id.leader_id.node_id,
        index: id.index,
    }
}

/// The node's last log id, and a made-up leader (node 2) of the next term.
fn last_and_next_leader(server: &Server) -> (LogId<u64>, (u64, u64)) {
    let last = server.raft().data_metrics().borrow().last_log;
    let term = server.raft().metrics().borrow().current_term;
    (
        last.expect("a bootstrapped node has entries"),
        (term + 1, 2),
    )
}

/// An append from a made-up leader of the next term whose entries skip an index after
/// the node's last one.
fn append_with_a_hole(server: &Server) -> pb::AppendEntriesRequest {
    let (last, leader) = last_and_next_leader(server);
    pb::AppendEntriesRequest {
        vote: Some(pb::Vote {
            term: leader.0,
            node_id: leader.1,
            committed: true,
        }),
        prev_log_id: Some(pb_log_id(&last)),
        leader_commit: None,
        entries: [blank(leader, last.index + 1), blank(leader, last.index + 3)]
            .iter()
            .map(shale_server::format::encode_entry)
            .collect(),
    }
}

fn running(server: &Server) -> bool {
    server.raft().metrics().borrow().running_state.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_append_with_a_hole_is_refused_and_the_node_keeps_serving() {
    let cluster = Cluster::start(1, common::timings()).await;
    let server = cluster.server(1);
    let mut raft = cluster.raft_client(1).await;
    let mut req = tonic::Request::new(append_with_a_hole(server));
    req.metadata_mut()
        .insert(TARGET_HEADER, "1".parse().expect("header"));
    let refused = raft.append_entries(req).await.expect_err("refused");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(running(server), "Raft still runs");
    let client = Client::new(cluster.endpoints(), None).expect("client");
    client
        .put(b"after", b"still serving")
        .await
        .expect("a write");
    assert_eq!(
        client.get(b"after").await.expect("a read").as_deref(),
        Some(&b"still serving"[..])
    );
    cluster.stop_all().await;
}

/// A vote of a later term for node 1, naming `group` in its header (`None`: no header).
fn vote_for_group(term: u64, group: Option<&str>) -> tonic::Request<pb::VoteRequest> {
    let mut req = tonic::Request::new(pb::VoteRequest {
        vote: Some(pb::Vote {
            term,
            node_id: 2,
            committed: false,
        }),
        last_log_id: None,
    });
    req.metadata_mut()
        .insert(TARGET_HEADER, "1".parse().expect("header"));
    if let Some(group) = group {
        req.metadata_mut()
            .insert(GROUP_HEADER, group.parse().expect("header"));
    }
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raft_rpcs_for_a_group_the_node_does_not_hold_are_refused() {
    let cluster = Cluster::start(1, common::timings()).await;
    let server = cluster.server(1);
    let term = server.raft().metrics().borrow().current_term;
    let mut raft = cluster.raft_client(1).await;

    let refused = raft
        .vote(vote_for_group(term + 5, Some("7")))
        .await
        .expect_err("group 7 is not here");
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused}");
    assert!(refused.message().contains("group 7"), "{refused}");
    let refused = raft
        .vote(vote_for_group(term + 5, Some("seven")))
        .await
        .expect_err("not a group id");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused}");
    assert_eq!(
        server.raft().metrics().borrow().current_term,
        term,
        "the refused votes changed nothing"
    );

    // The node's own group, named or not (a node that predates groups names none), is
    // answered: the vote is for a later term and no log, so it is denied, but by Raft.
    for group in [Some("1"), None] {
        let answer = raft
            .vote(vote_for_group(term + 5, group))
            .await
            .expect("group 1 is here");
        assert!(!answer.into_inner().vote_granted, "{group:?}");
    }
    cluster.stop_all().await;
}

/// What the check at the door prevents, and what `Server::fatal` reports: the same append
/// given to Raft directly stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unchecked_hole_stops_raft_and_fatal_says_so() {
    let cluster = Cluster::start(1, common::timings()).await;
    let server = cluster.server(1);
    let (last, leader) = last_and_next_leader(server);
    let rpc = openraft::raft::AppendEntriesRequest::<TypeConfig> {
        vote: openraft::Vote::new_committed(leader.0, leader.1),
        prev_log_id: Some(last),
        leader_commit: None,
        entries: vec![blank(leader, last.index + 1), blank(leader, last.index + 3)],
    };
    let _ = server.raft().append_entries(rpc).await;
    let fatal = tokio::time::timeout(Duration::from_secs(10), server.fatal())
        .await
        .expect("Raft reports a fatal error within 10 s");
    assert!(!running(server), "stopped: {fatal}");
    // A stopped Raft cannot shut down cleanly: dropping the node stops serving.
    drop(cluster);
}

/// Requests that would cost far more to decode than their bytes, or that are longer than
/// any command, are refused before they are decoded, and the node goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn oversized_and_field_bomb_requests_are_refused_before_decoding() {
    let cluster = Cluster::start(1, common::timings()).await;
    let server = cluster.server(1);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr()))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut kv = pb::kv_client::KvClient::new(channel).max_encoding_message_size(usize::MAX);

    // 600,000 empty operations in 1.2 MB: tens of MB once decoded.
    let bomb = pb::BatchRequest {
        ops: vec![pb::Op::default(); 600_000],
        session: None,
    };
    let err = kv.batch(bomb).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err}");

    // Longer than any command can be.
    let long = pb::PutRequest {
        key: b"k".to_vec(),
        value: vec![0; shale_server::network::MAX_REQUEST_BYTES + 1],
        session: None,
    };
    let err = kv.put(long).await.expect_err("refused");
    assert_eq!(err.code(), tonic::Code::OutOfRange, "{err}");

    let client = Client::new(cluster.endpoints(), None).expect("client");
    client.put(b"after", b"served").await.expect("a write");
    assert_eq!(
        client.get(b"after").await.expect("a read").as_deref(),
        Some(&b"served"[..])
    );
    cluster.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_snapshot_stream_past_the_limit_is_refused_as_it_arrives() {
    let mut t = common::timings();
    t.limits.max_snapshot_bytes = 64 * 1024;
    let cluster = Cluster::start(1, t).await;
    let server = cluster.server(1);
    let raft = cluster.raft_client(1).await;
    // One frame of bytes that are no frame: within the limit it is refused for what it
    // is, past it for its size, before it is looked at.
    for (len, want) in [
        (32 * 1024, tonic::Code::InvalidArgument),
        (65 * 1024, tonic::Code::ResourceExhausted),
    ] {
        let frames = tokio_stream::iter([pb::SnapshotFrame {
            vote: Some(pb::Vote {
                term: 1,
                node_id: 2,
                committed: true,
            }),
            frame: vec![0xab; len],
        }]);
        let mut req = tonic::Request::new(frames);
        req.metadata_mut()
            .insert(TARGET_HEADER, "1".parse().expect("header"));
        let refused = raft
            .clone()
            .install_snapshot(req)
            .await
            .expect_err("refused");
        assert_eq!(refused.code(), want, "{len} bytes: {refused}");
    }
    assert!(running(server), "Raft still runs");
    cluster.stop_all().await;
}

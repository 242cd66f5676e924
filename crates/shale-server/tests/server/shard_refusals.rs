//! A node whose group serves part of the key space: writes and reads of keys outside it
//! are refused before they are proposed or read, marked safe to retry elsewhere, and
//! nothing of them is applied; keys inside are served as usual.

use crate::common;

use std::time::Duration;

use common::Cluster;
use shale::Options;
use shale_client::wire::RETRY_HEADER;
use shale_server::pb;
use shale_server::shard::Shard;
use shale_server::state_machine::StateMachineStore;
use shale_server::Server;

fn refused_safe(status: &tonic::Status) {
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status}");
    assert!(
        status.message().contains("outside this group's shard"),
        "{status}"
    );
    let retry = status
        .metadata()
        .get(RETRY_HEADER)
        .and_then(|v| v.to_str().ok());
    assert_eq!(retry, Some("safe"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_outside_the_groups_shard_are_refused_at_the_door() {
    let mut cluster = Cluster {
        dir: tempfile::tempdir().expect("tempdir"),
        timings: common::timings(),
        servers: Default::default(),
        addrs: Default::default(),
    };
    let shard = Shard {
        start: b"b".to_vec(),
        end: Some(b"m".to_vec()),
        version: 1,
    };
    let state = cluster.data_dir(1).join("state");
    let sm = StateMachineStore::open(&state, Options::default()).expect("open");
    sm.claim_shard(shard.clone()).expect("claim");
    sm.close().expect("close");
    drop(sm);
    let any_port = "127.0.0.1:0".parse().expect("address");
    let server = Server::start(cluster.config(1, any_port))
        .await
        .expect("start");
    let addr = server.addr();
    server
        .bootstrap([(1, addr.to_string())].into())
        .await
        .expect("bootstrap");
    cluster.addrs.insert(1, addr);
    cluster.servers.insert(1, server);
    cluster.leader(Duration::from_secs(10)).await;
    assert_eq!(cluster.server(1).state_machine().shard(), shard);

    let mut kv = pb::kv_client::KvClient::connect(format!("http://{addr}"))
        .await
        .expect("connect");
    let put = |key: &[u8]| pb::PutRequest {
        key: key.to_vec(),
        value: b"v".to_vec(),
        session: None,
    };
    kv.put(put(b"c")).await.expect("inside");
    let applied = cluster.applied_index(1);
    for key in [&b"a"[..], b"m", b"z"] {
        refused_safe(&kv.put(put(key)).await.expect_err("outside"));
        let get = pb::GetRequest { key: key.to_vec() };
        refused_safe(&kv.get(get).await.expect_err("outside"));
    }
    assert_eq!(cluster.applied_index(1), applied, "nothing was proposed");
    let got = kv
        .get(pb::GetRequest { key: b"c".to_vec() })
        .await
        .expect("inside");
    assert_eq!(got.into_inner().value.as_deref(), Some(&b"v"[..]));
    cluster.stop_all().await;
}

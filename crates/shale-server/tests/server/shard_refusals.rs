//! A node whose group serves part of the key space: writes and reads of keys outside it
//! are refused before they are proposed or read, marked safe to retry elsewhere, and
//! nothing of them is applied; keys inside are served as usual.

use crate::common;

use common::{Cluster, Timings};
use shale_client::wire::RETRY_HEADER;
use shale_server::pb;
use shale_server::shard::Shard;

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
    // Split at "m": clients reach group 1, which serves the keys below it.
    let timings = Timings {
        splits: vec![b"m".to_vec()],
        ..common::timings()
    };
    let cluster = Cluster::start(1, timings).await;
    let shard = Shard {
        start: Vec::new(),
        end: Some(b"m".to_vec()),
        version: 1,
    };
    assert_eq!(cluster.server(1).state_machine().shard(), shard);
    let addr = cluster.server(1).addr();
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
    for key in [&b"m"[..], b"mm", b"z"] {
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

//! Writes in a client session apply once however often they are sent: the regression test
//! of a retry that applied twice (a write retried after an error wrongly marked safe, or
//! after one that left its outcome open), and of the Rust client's use of sessions.

use crate::common;

use std::time::Duration;

use common::Cluster;
use shale_client::{pb, Client};
use tonic::transport::Channel;

type Kv = pb::kv_client::KvClient<Channel>;

async fn kv_at_leader(cluster: &Cluster) -> Kv {
    let leader = cluster.leader(Duration::from_secs(10)).await;
    let addr = cluster.server(leader).addr();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    pb::kv_client::KvClient::new(channel)
}

fn at(session: u64, seq: u64, lowest_awaited: u64) -> Option<pb::SessionSeq> {
    Some(pb::SessionSeq {
        session,
        seq,
        lowest_awaited,
    })
}

fn put(key: &[u8], value: &[u8], session: Option<pb::SessionSeq>) -> pb::PutRequest {
    pb::PutRequest {
        key: key.to_vec(),
        value: value.to_vec(),
        session,
    }
}

async fn get(kv: &mut Kv, key: &[u8]) -> Option<Vec<u8>> {
    let req = pb::GetRequest { key: key.to_vec() };
    kv.get(req).await.expect("get").into_inner().value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_sent_again_in_its_session_applies_once() {
    let cluster = Cluster::start(3, common::timings()).await;
    let mut kv = kv_at_leader(&cluster).await;
    let session = kv
        .open_session(pb::OpenSessionRequest {})
        .await
        .expect("open")
        .into_inner()
        .session;

    let first = kv.put(put(b"k", b"first", at(session, 1, 1))).await;
    let index = first.expect("put").into_inner().index;
    kv.put(put(b"k", b"other", None)).await.expect("put");
    // The same write again, as a retry sends it: answered as before, nothing applied.
    let again = kv.put(put(b"k", b"first", at(session, 1, 1))).await;
    assert_eq!(again.expect("retry").into_inner().index, index);
    assert_eq!(get(&mut kv, b"k").await.as_deref(), Some(&b"other"[..]));
    // The negative control: the same write without its session applies again.
    kv.put(put(b"k", b"first", None)).await.expect("put");
    assert_eq!(get(&mut kv, b"k").await.as_deref(), Some(&b"first"[..]));

    // A compare-and-set's retry gets the first answer, the value it found then.
    let cas = pb::CompareAndSetRequest {
        key: b"k".to_vec(),
        expected: Some(b"first".to_vec()),
        new_value: Some(b"swapped".to_vec()),
        session: at(session, 2, 2),
    };
    let answer = kv
        .compare_and_set(cas.clone())
        .await
        .expect("cas")
        .into_inner();
    assert!(answer.swapped);
    kv.put(put(b"k", b"later", None)).await.expect("put");
    let retried = kv.compare_and_set(cas).await.expect("retry").into_inner();
    assert_eq!(retried, answer);
    assert_eq!(get(&mut kv, b"k").await.as_deref(), Some(&b"later"[..]));

    // Once the client has every answer below 3, a late copy of write 1 changes nothing
    // and says that the session no longer knows it.
    kv.put(put(b"j", b"3", at(session, 3, 3)))
        .await
        .expect("put");
    let late = kv.put(put(b"k", b"first", at(session, 1, 1))).await;
    let status = late.expect_err("forgotten");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition, "{status}");
    assert!(status.metadata().get("shale-session").is_some(), "{status}");
    let unknown = kv.put(put(b"k", b"x", at(session + 1000, 1, 1))).await;
    assert!(unknown
        .expect_err("no such session")
        .metadata()
        .get("shale-session")
        .is_some());
    assert_eq!(get(&mut kv, b"k").await.as_deref(), Some(&b"later"[..]));

    // Every replica applied the same: one session, the same values.
    let index = kv
        .put(put(b"z", b"end", None))
        .await
        .expect("put")
        .into_inner()
        .index;
    for id in 1..=3 {
        cluster
            .wait_applied(id, index, Duration::from_secs(10))
            .await;
        let sm = cluster.server(id).state_machine();
        assert_eq!(sm.sessions_open(), 1, "node {id}");
        assert_eq!(
            sm.db().get(b"k").expect("get").as_deref(),
            Some(&b"later"[..])
        );
    }
    cluster.stop_all().await;
}

/// The Rust client opens one session at its first write and sends every write in it,
/// concurrent ones included; a client without sessions opens none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_client_writes_in_one_session() {
    let cluster = Cluster::start(1, common::timings()).await;
    let client = Client::new(cluster.endpoints(), None)
        .expect("client")
        .shared();
    let writers: Vec<_> = (0..16u32)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                for j in 0..8u32 {
                    let key = format!("k{i}-{j}");
                    client.put(key.as_bytes(), b"v").await.expect("put");
                }
                client
                    .compare_and_set(format!("k{i}-0").as_bytes(), Some(b"v"), Some(b"w"))
                    .await
                    .expect("cas")
            })
        })
        .collect();
    for w in writers {
        assert!(w.await.expect("writer").swapped);
    }
    let sm = cluster.server(1).state_machine();
    assert_eq!(sm.sessions_open(), 1);

    let plain = Client::new(cluster.endpoints(), None)
        .expect("client")
        .without_sessions();
    plain.put(b"p", b"v").await.expect("put");
    assert_eq!(sm.sessions_open(), 1);
    cluster.stop_all().await;
}

//! A rolling restart with writes flowing: each node of three is stopped and started again
//! in turn (the followers first, the leader last), the next one only once the restarted
//! node has caught up, while a client writes without pause. Writes must go on through
//! every step (through an election when the leader goes), and every acknowledged write
//! must be read back at the end.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Cluster;
use shale_client::{Client, ClientError};

fn key(i: u64) -> Vec<u8> {
    format!("roll{i:06}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_loses_no_acknowledged_write() {
    let mut cluster = Cluster::start(3, common::timings()).await;
    let client = Arc::new(
        Client::new(cluster.endpoints(), None)
            .expect("client")
            .with_deadline(Duration::from_secs(15)),
    );
    let acknowledged = Arc::new(Mutex::new(BTreeSet::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (client, acknowledged, stop) = (
            Arc::clone(&client),
            Arc::clone(&acknowledged),
            Arc::clone(&stop),
        );
        tokio::spawn(async move {
            let mut ambiguous = 0;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match client.put(&key(i), b"v").await {
                    Ok(_) => {
                        acknowledged.lock().expect("lock").insert(i);
                    }
                    // A leader stopped after proposing: the write may or may not apply.
                    Err(ClientError::Ambiguous(_)) => ambiguous += 1,
                    Err(e) => panic!("write {i}: {e}"),
                }
                i += 1;
            }
            ambiguous
        })
    };
    let acked = || acknowledged.lock().expect("lock").len();

    let leader = cluster.leader(Duration::from_secs(10)).await;
    let order: Vec<u64> = (1..=3).filter(|&id| id != leader).chain([leader]).collect();
    for id in order {
        let before = acked();
        cluster.stop(id).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        cluster.restart(id).await;
        // The next node goes only once this one has what the leader applied.
        let leader = cluster.leader(Duration::from_secs(10)).await;
        let applied = cluster.applied_index(leader);
        cluster
            .wait_applied(id, applied, Duration::from_secs(15))
            .await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            acked() > before,
            "no write was acknowledged while node {id} restarted"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let ambiguous = writer.await.expect("the writer");

    let acknowledged = acknowledged.lock().expect("lock").clone();
    println!(
        "{} writes acknowledged, {ambiguous} of unknown outcome",
        acknowledged.len()
    );
    for &i in &acknowledged {
        assert_eq!(
            client.get(&key(i)).await.expect("get"),
            Some(b"v".to_vec()),
            "acknowledged write {i} lost"
        );
    }
    cluster.stop_all().await;
}

//! The end of a run: the replicas settle on one applied index and are stopped, then each
//! one's state machine is opened from its directory and hashed; they must agree, and at
//! least one must have installed a snapshot.

use std::time::{Duration, Instant};

use shale_client::Client;

use crate::cluster::Cluster;

/// Resume every node, wait until the replicas settle on one applied index, and stop them;
/// that index.
pub(crate) async fn stop_cluster(cluster: &mut Cluster) -> Result<u64, String> {
    for i in 0..cluster.nodes.len() {
        cluster.signal(i, "-CONT");
    }
    let settled = settle(cluster).await;
    for i in 0..cluster.nodes.len() {
        cluster.signal(i, "-TERM");
    }
    for node in &mut cluster.nodes {
        if let Some(mut child) = node.child.take() {
            let _ = child.wait();
        }
    }
    settled
}

/// Wait until every replica reports the same applied index twice in a row.
async fn settle(cluster: &Cluster) -> Result<u64, String> {
    let probe = Client::new(cluster.endpoints(), None).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut previous = None;
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(30) {
        seen.clear();
        for node in &cluster.nodes {
            let s =
                tokio::time::timeout(Duration::from_millis(500), probe.status_of(&node.addr)).await;
            seen.push(match s {
                Ok(Ok(s)) => Some(s.applied_index),
                _ => None,
            });
        }
        let first = seen.first().copied().flatten();
        if first.is_some() && seen.iter().all(|s| *s == first) {
            if previous == first {
                return first.ok_or_else(|| "no applied index".to_string());
            }
            previous = first;
        } else {
            previous = None;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(format!(
        "the replicas did not settle on one applied index: {seen:?}"
    ))
}

/// Open each stopped replica's state machine and hash its user keys and values.
pub(crate) fn compare_replicas(cluster: &Cluster, applied: u64) -> Result<(), String> {
    let mut digests = Vec::new();
    let mut snapshot_installs = 0;
    for node in &cluster.nodes {
        let dir = cluster
            .args
            .dir
            .join(format!("node-{}", node.id))
            .join("state");
        let sm =
            shale_server::state_machine::StateMachineStore::open(&dir, shale::Options::default())
                .map_err(|e| format!("node {}: {e}", node.id))?;
        let db = sm.db();
        let mut crc = 0u32;
        let mut pairs = 0u64;
        let reserved = vec![shale_server::format::RESERVED_PREFIX];
        for pair in db.range(..reserved).map_err(|e| e.to_string())? {
            let (k, v) = pair.map_err(|e| e.to_string())?;
            let mut framed = Vec::with_capacity(k.len() + v.len() + 20);
            shale::inspect::codec::put_length_prefixed(&mut framed, &k);
            shale::inspect::codec::put_length_prefixed(&mut framed, &v);
            crc = shale::inspect::codec::crc32c_extend(crc, &framed);
            pairs += 1;
        }
        let index = sm.applied().0.map_or(0, |l| l.index);
        drop(db);
        sm.close().map_err(|e| e.to_string())?;
        // Each snapshot install makes a new state machine generation.
        let installs = std::fs::read_to_string(dir.join("SM_CURRENT"))
            .ok()
            .and_then(|g| g.trim().parse::<u64>().ok())
            .unwrap_or(0);
        eprintln!(
            "shale-chaos: node {}: applied index {index}, {pairs} pairs, crc32c {crc:08x}, \
             {installs} snapshot installs",
            node.id
        );
        digests.push((index, pairs, crc));
        snapshot_installs += installs;
    }
    if snapshot_installs == 0 {
        return Err("no replica installed a snapshot: the run never tested a catch-up".into());
    }
    let first = digests.first().copied();
    if digests.iter().any(|d| Some(*d) != first) || first.map(|d| d.0) != Some(applied) {
        return Err(format!(
            "the replicas differ at applied index {applied}: {digests:?} (index, pairs, crc32c)"
        ));
    }
    Ok(())
}

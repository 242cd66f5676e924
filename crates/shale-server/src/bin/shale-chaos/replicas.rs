//! The end of a run: the replicas of each Raft group settle on one applied index and are
//! stopped, then each one's state machine is opened from its directory and hashed; a
//! group's replicas must agree, hold no key outside the group's shard, and at least one
//! replica of some group must have installed a snapshot.

use std::time::{Duration, Instant};

use shale_client::Client;

use crate::cluster::Cluster;

/// Resume every node, wait until each group's replicas settle on one applied index, and
/// stop them; those indexes, by group.
pub(crate) async fn stop_cluster(cluster: &mut Cluster) -> Result<Vec<(u64, u64)>, String> {
    for i in 0..cluster.nodes.len() {
        cluster.signal(i, "-CONT");
    }
    let mut settled = Ok(Vec::new());
    for group in cluster.groups() {
        settled = match (settled, settle(cluster, group).await) {
            (Ok(mut all), Ok(applied)) => {
                all.push((group, applied));
                Ok(all)
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
    }
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

/// Wait until every replica of `group` reports the same applied index twice in a row.
async fn settle(cluster: &Cluster, group: u64) -> Result<u64, String> {
    let probe = Client::new(cluster.endpoints(), None).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut previous = None;
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(30) {
        seen.clear();
        for node in &cluster.nodes {
            let s = tokio::time::timeout(
                Duration::from_millis(500),
                probe.status_in(&node.addr, group),
            )
            .await;
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
        "the replicas of group {group} did not settle on one applied index: {seen:?}"
    ))
}

/// Open each stopped replica's state machines and hash their user keys and values.
pub(crate) fn compare_replicas(cluster: &Cluster, applied: &[(u64, u64)]) -> Result<(), String> {
    let mut snapshot_installs = 0;
    for &(group, index) in applied {
        snapshot_installs += compare_group(cluster, group, index)?;
    }
    if snapshot_installs == 0 {
        return Err("no replica installed a snapshot: the run never tested a catch-up".into());
    }
    Ok(())
}

/// What one replica of a group holds: its applied index, its pairs and their crc32c.
type Digest = (u64, u64, u32);

/// Compare the replicas of `group`, which settled at `applied`; the snapshot installs
/// they made.
fn compare_group(cluster: &Cluster, group: u64, applied: u64) -> Result<u64, String> {
    let mut digests = Vec::new();
    let mut snapshot_installs = 0;
    for node in &cluster.nodes {
        let data = cluster.args.dir.join(format!("node-{}", node.id));
        let dir = shale_server::group::state_dir(&data, group);
        let (digest, installs) =
            digest(&dir).map_err(|e| format!("node {} group {group}: {e}", node.id))?;
        eprintln!(
            "shale-chaos: node {} group {group}: applied index {}, {} pairs, crc32c {:08x}, \
             {installs} snapshot installs",
            node.id, digest.0, digest.1, digest.2
        );
        digests.push(digest);
        snapshot_installs += installs;
    }
    let first = digests.first().copied();
    if digests.iter().any(|d| Some(*d) != first) || first.map(|d| d.0) != Some(applied) {
        return Err(format!(
            "the replicas of group {group} differ at applied index {applied}: {digests:?} \
             (index, pairs, crc32c)"
        ));
    }
    Ok(snapshot_installs)
}

/// The digest of the state machine in `dir`, and the snapshot installs it went through.
/// A key outside the group's shard is an error.
fn digest(dir: &std::path::Path) -> Result<(Digest, u64), String> {
    let sm = shale_server::state_machine::StateMachineStore::open(dir, shale::Options::default())
        .map_err(|e| e.to_string())?;
    let shard = sm.shard();
    let db = sm.db();
    let mut crc = 0u32;
    let mut pairs = 0u64;
    let reserved = vec![shale_server::format::RESERVED_PREFIX];
    for pair in db.range(..reserved).map_err(|e| e.to_string())? {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        if !shard.contains(&k) {
            return Err(format!(
                "key {:?} is outside the shard {shard}",
                k.escape_ascii().to_string()
            ));
        }
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
    Ok(((index, pairs, crc), installs))
}

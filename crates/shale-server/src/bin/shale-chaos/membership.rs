//! The membership fault's steps: a replica removed from the cluster, then added back as
//! a learner and made a voter again, each step retried until the membership shows it.

use std::time::{Duration, Instant};

use shale_client::pb::MembershipResponse;
use shale_client::Client;

use crate::cluster::Cluster;

/// How long one membership change may take, retries included: each waits for a leader,
/// and adding the learner back waits until it has caught up (by a snapshot, usually).
const MEMBERSHIP_BOUND: Duration = Duration::from_secs(20);

/// One step of taking a replica out of the cluster and back in.
#[derive(Clone, Copy, Debug)]
enum Step {
    Remove,
    AddLearner,
    AddVoter,
}

/// Remove voter `id` (it keeps running, and the clients keep sending it requests), let
/// the other two take writes without it at least 1.5 s and until the leader has purged
/// its log past the entries `id` holds, then add it back: first as a learner, which
/// catches up by a snapshot, then as a voter. Each step is retried until the membership it
/// returns shows it done; all three are idempotent (removing a removed voter, or adding
/// a learner or voter that already is one, changes nothing).
pub(crate) async fn remove_and_readd(cluster: &Cluster, id: u64, addr: &str) -> Result<(), String> {
    let admin = Client::new(cluster.endpoints(), None)
        .map_err(|e| e.to_string())?
        .with_deadline(Duration::from_secs(5));
    let start = Instant::now();
    for step in [Step::Remove, Step::AddLearner, Step::AddVoter] {
        loop {
            let result = match step {
                Step::Remove => admin.remove_voters(&[id]).await,
                Step::AddLearner => admin.add_learner(id, addr).await,
                Step::AddVoter => admin.add_voters(&[id]).await,
            };
            let done = |m: &MembershipResponse| match step {
                Step::Remove => !m.voters.contains(&id) && !m.learners.contains(&id),
                Step::AddLearner => m.learners.contains(&id),
                Step::AddVoter => m.voters.contains(&id) && m.voters.len() == 3,
            };
            match result {
                Ok(m) if done(&m) => {
                    eprintln!(
                        "shale-chaos: {step:?} {id}: done, membership at index {}",
                        m.index
                    );
                    break;
                }
                Ok(m) => eprintln!("shale-chaos: {step:?} {id}: membership now {m:?}; again"),
                Err(e) => eprintln!("shale-chaos: {step:?} {id}: {e}; again"),
            }
            if start.elapsed() > MEMBERSHIP_BOUND {
                return Err(format!("{step:?}: not done within {MEMBERSHIP_BOUND:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if matches!(step, Step::Remove) {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            await_purged_past(&admin, cluster, addr).await?;
        }
    }
    Ok(())
}

/// How long the leader may take to purge its log past what a removed replica holds: the
/// servers snapshot every 100 entries, which the clients write in a few seconds.
const PURGE_BOUND: Duration = Duration::from_secs(20);

/// Entries a removed replica may hold beyond those it applied (appended, not yet applied).
const UNAPPLIED_MARGIN: u64 = 32;

/// Wait until the leader has purged its log past the entries that the replica at `addr`,
/// out of the cluster, holds: added back, it can only be caught up by a snapshot, which
/// the run must see (a run whose faults happened to leave the log reaching back would
/// test no catch-up by snapshot).
async fn await_purged_past(admin: &Client, cluster: &Cluster, addr: &str) -> Result<(), String> {
    let held = admin
        .status_of(addr)
        .await
        .map_err(|e| format!("the removed replica's status: {e}"))?
        .applied_index
        + UNAPPLIED_MARGIN;
    let start = Instant::now();
    let mut purged = 0;
    while start.elapsed() < PURGE_BOUND {
        for node in cluster.nodes.iter().filter(|n| n.addr != addr) {
            if let Ok(s) = admin.status_of(&node.addr).await {
                if s.leader_id == Some(s.node_id) {
                    purged = s.purged_index;
                }
            }
        }
        if purged > held {
            eprintln!(
                "shale-chaos: the leader purged its log to {purged}, past {held} \
                 (the removed replica's applied index and {UNAPPLIED_MARGIN})"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "the leader's log was purged to {purged} only, not past {held}, within {PURGE_BOUND:?}"
    ))
}

//! Leader transfer, as the Raft thesis describes it (section 3.10), over openraft 0.9,
//! which has none of its own: the leader stops taking requests, waits until the target
//! holds its whole log, stays silent for a leader lease so that no voter still refuses
//! votes for having heard from it lately, then sends the target `TimeoutNow`. The target
//! stands for election at once, with a log as long as anyone's, and wins before any other
//! voter's election timeout ends. Raft's vote rules keep this safe whatever happens: all
//! it chooses is when, and by whom, the next election is started.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use openraft::error::ForwardToLeader;
use openraft::network::RaftNetworkFactory;
use openraft::ServerState;
use tonic::Status;

use crate::network::NetworkFactory;
use crate::status::{not_leader, retry_safe};
use crate::{NodeId, Raft};

/// A transfer under way on this node, if any: while there is one, the node proposes
/// nothing and confirms no read, each of which would renew its followers' leases.
#[derive(Default)]
pub(crate) struct Handover {
    to: Mutex<Option<NodeId>>,
}

impl Handover {
    /// Refuse a request while the leadership is being handed over; nothing was proposed,
    /// so the client may retry (it finds the new leader).
    pub(crate) fn check(&self) -> Result<(), Status> {
        match *self.to.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(to) => Err(retry_safe(Status::unavailable(format!(
                "this node is handing its leadership to node {to}; nothing was proposed"
            )))),
            None => Ok(()),
        }
    }

    /// Mark a transfer to `to` begun; the guard ends it, and turns the heartbeats back on,
    /// however the transfer ends.
    fn begin<'a>(&'a self, raft: &'a Raft, to: NodeId) -> Result<Ongoing<'a>, Status> {
        let mut slot = self.to.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(other) = *slot {
            return Err(retry_safe(Status::unavailable(format!(
                "a transfer of the leadership to node {other} is under way"
            ))));
        }
        *slot = Some(to);
        Ok(Ongoing {
            handover: self,
            raft,
        })
    }
}

struct Ongoing<'a> {
    handover: &'a Handover,
    raft: &'a Raft,
}

impl Drop for Ongoing<'_> {
    fn drop(&mut self) {
        self.raft.runtime_config().heartbeat(true);
        *self.handover.to.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// How long after its last message a voter still refuses to vote (openraft's leader lease,
/// `election_timeout_max`), and a margin for a heartbeat in flight when the leader fell
/// silent.
fn lease(raft: &Raft) -> Duration {
    Duration::from_millis(raft.config().election_timeout_max) + Duration::from_millis(50)
}

/// Hand the leadership of `raft` (node `node_id`) to voter `to` within `bound`; the term
/// `to` then leads in.
pub(crate) async fn transfer(
    raft: &Raft,
    node_id: NodeId,
    peers: &NetworkFactory,
    handover: &Handover,
    to: NodeId,
    bound: Duration,
) -> Result<u64, Status> {
    let start = Instant::now();
    let (target, term) = match target(raft, node_id, to)? {
        Target::Itself(term) => return Ok(term),
        Target::Voter(node, term) => (node, term),
    };
    let _ongoing = handover.begin(raft, to)?;
    fall_silent(raft, to, term, start, bound).await?;
    let vote = raft.metrics().borrow().vote;
    let mut peer = peers.clone();
    let client = peer.new_client(to, &target).await;
    client
        .timeout_now(&vote, bound.saturating_sub(start.elapsed()))
        .await
        .map_err(|e| Status::unavailable(format!("leader transfer: {e}")))?;
    let leads = |m: &openraft::RaftMetrics<NodeId, openraft::BasicNode>| {
        m.current_leader == Some(to) && m.current_term > term
    };
    let waited = raft
        .wait(Some(bound.saturating_sub(start.elapsed())))
        .metrics(leads, "the target leads")
        .await
        .map_err(|_| late(to, bound, &format!("node {to} did not take the leadership")))?;
    tracing::info!(
        "handed the leadership to node {to} (term {}) in {:?}",
        waited.current_term,
        start.elapsed()
    );
    Ok(waited.current_term)
}

/// Whom a transfer goes to: this node, which leads in the term given, or a voter, with
/// the term this node leads in.
enum Target {
    Itself(u64),
    Voter(openraft::BasicNode, u64),
}

/// The target of a transfer to `to`, asked of node `node_id`: refused unless this node
/// leads and `to` is a voter.
fn target(raft: &Raft, node_id: NodeId, to: NodeId) -> Result<Target, Status> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    let leader_node = |id: NodeId| m.membership_config.membership().get_node(&id).cloned();
    if m.state != ServerState::Leader {
        let fwd = ForwardToLeader {
            leader_id: m.current_leader,
            leader_node: m.current_leader.and_then(leader_node),
        };
        return Err(not_leader(&fwd, false));
    }
    if to == node_id {
        return Ok(Target::Itself(m.current_term));
    }
    let membership = m.membership_config.membership();
    match membership.get_node(&to) {
        Some(node) if membership.voter_ids().any(|v| v == to) => {
            Ok(Target::Voter(node.clone(), m.current_term))
        }
        _ => Err(Status::invalid_argument(format!(
            "node {to} is not a voter"
        ))),
    }
}

/// A transfer to `to` that did not get past `what` within `bound`.
fn late(to: NodeId, bound: Duration, what: &str) -> Status {
    Status::unavailable(format!(
        "leader transfer to node {to}: {what} within {bound:?}"
    ))
}

/// Wait, within `bound` of `start`, until the leader (in `term`) is ready and silent.
/// Ready: the target holds every entry. Silent: nothing appended, so nothing sent to a
/// caught-up follower, while the heartbeats were off for a whole lease.
async fn fall_silent(
    raft: &Raft,
    to: NodeId,
    term: u64,
    start: Instant,
    bound: Duration,
) -> Result<(), Status> {
    let ready = || {
        let m = raft.metrics().borrow().clone();
        let last = m.last_log_index;
        let target_has_all = m
            .replication
            .as_ref()
            .and_then(|r| r.get(&to))
            .is_some_and(|matched| matched.map(|l| l.index) == last);
        (m.state == ServerState::Leader && m.current_term == term).then_some((last, target_has_all))
    };
    loop {
        if start.elapsed() > bound {
            return Err(late(to, bound, &format!("node {to} did not catch up")));
        }
        match ready() {
            None => return Err(late(to, bound, "this node lost its leadership")),
            Some((_, false)) => tokio::time::sleep(Duration::from_millis(10)).await,
            Some((last, true)) => {
                raft.runtime_config().heartbeat(false);
                tokio::time::sleep(lease(raft)).await;
                if ready() == Some((last, true)) {
                    return Ok(());
                }
                // A write accepted just before the transfer began was appended meanwhile.
                // Heartbeats again, and one at once: the followers' election timers must
                // not run out over two silences in a row.
                raft.runtime_config().heartbeat(true);
                raft.trigger()
                    .heartbeat()
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?;
            }
        }
    }
}

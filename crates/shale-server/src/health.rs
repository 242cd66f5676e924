//! The node's health, as the standard gRPC health service (`grpc.health.v1.Health`) tells
//! it, and the log lines for changes of role: one task follows Raft's metrics and updates
//! both.
//!
//! - The server as a whole (service name `""`) is `SERVING` while Raft runs, and
//!   `NOT_SERVING` once it stopped (a fatal error, or shutdown).
//! - [`KV_SERVICE`] is `SERVING` while Raft runs and this node knows a leader, itself or
//!   another: writes and linearizable reads can then be answered or redirected. With no
//!   leader (an election, a partition that cut this node from the quorum) it is
//!   `NOT_SERVING`.
//!
//! The health service asks for no token: it tells nothing but these statuses, and load
//! balancers and orchestrators probe it without credentials.

use std::collections::BTreeSet;

use openraft::ServerState;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::{NodeId, Raft};

/// The client service's name in the health service.
pub const KV_SERVICE: &str = "shale.v1.Kv";

/// What the log says changed.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    term: u64,
    leader: Option<NodeId>,
    state: Option<ServerState>,
    voters: BTreeSet<NodeId>,
    learners: BTreeSet<NodeId>,
}

/// Follow `raft` until it stops, keeping `reporter`'s statuses and logging changes.
pub(crate) async fn follow(raft: Raft, mut reporter: HealthReporter) {
    let mut metrics = raft.metrics();
    let mut seen = Seen::default();
    let mut kv = None;
    loop {
        let m = metrics.borrow_and_update().clone();
        match &m.running_state {
            Ok(()) => {}
            Err(openraft::error::Fatal::Stopped) => break,
            Err(fatal) => {
                tracing::error!("Raft stopped: {fatal}");
                break;
            }
        }
        let membership = m.membership_config.membership();
        let now = Seen {
            term: m.current_term,
            leader: m.current_leader,
            state: Some(m.state),
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
        };
        log_changes(&seen, &now, m.id);
        seen = now;
        let serving = seen.leader.is_some();
        if kv != Some(serving) {
            let status = if serving {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            reporter.set_service_status(KV_SERVICE, status).await;
            reporter
                .set_service_status("", ServingStatus::Serving)
                .await;
            kv = Some(serving);
        }
        if metrics.changed().await.is_err() {
            break;
        }
    }
    reporter
        .set_service_status(KV_SERVICE, ServingStatus::NotServing)
        .await;
    reporter
        .set_service_status("", ServingStatus::NotServing)
        .await;
}

fn log_changes(before: &Seen, now: &Seen, me: NodeId) {
    let term = now.term;
    if before.leader != now.leader {
        match now.leader {
            Some(l) if l == me => tracing::info!("this node is the leader (term {term})"),
            Some(l) => tracing::info!("leader: node {l} (term {term})"),
            None => tracing::info!("no leader known (term {term})"),
        }
    }
    let candidate = Some(ServerState::Candidate);
    if now.state == candidate && before.state != candidate {
        tracing::info!("this node stands for election (term {term})");
    }
    if (&before.voters, &before.learners) != (&now.voters, &now.learners) {
        tracing::info!(
            "membership: voters {:?}, learners {:?}",
            now.voters,
            now.learners
        );
    }
}

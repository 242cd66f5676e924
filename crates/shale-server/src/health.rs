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

use openraft::{BasicNode, LogId, RaftMetrics, ServerState};
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::{NodeId, Raft};

/// The client service's name in the health service.
pub const KV_SERVICE: &str = "shale.v1.Kv";

/// What the log says changed, updated in place from each metrics change (Raft's metrics
/// change at every append and apply; only the few fields below are read, and the voter
/// sets are rebuilt only when the membership's log id moves).
#[derive(Debug, Default)]
struct Seen {
    leader: Option<NodeId>,
    state: Option<ServerState>,
    /// The log id of the membership the voter sets were built from (`None` before the
    /// first metrics).
    membership: Option<Option<LogId<NodeId>>>,
    voters: BTreeSet<NodeId>,
    learners: BTreeSet<NodeId>,
}

impl Seen {
    /// Take in `m`, logging what changed.
    fn update(&mut self, m: &RaftMetrics<NodeId, BasicNode>) {
        let term = m.current_term;
        if self.leader != m.current_leader {
            match m.current_leader {
                Some(l) if l == m.id => tracing::info!("this node is the leader (term {term})"),
                Some(l) => tracing::info!("leader: node {l} (term {term})"),
                None => tracing::info!("no leader known (term {term})"),
            }
            self.leader = m.current_leader;
        }
        let candidate = Some(ServerState::Candidate);
        if m.state == ServerState::Candidate && self.state != candidate {
            tracing::info!("this node stands for election (term {term})");
        }
        self.state = Some(m.state);
        let id = *m.membership_config.log_id();
        if self.membership != Some(id) {
            let membership = m.membership_config.membership();
            let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
            let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
            if (&voters, &learners) != (&self.voters, &self.learners) {
                tracing::info!("membership: voters {voters:?}, learners {learners:?}");
                (self.voters, self.learners) = (voters, learners);
            }
            self.membership = Some(id);
        }
    }
}

/// Follow `raft` until it stops, keeping `reporter`'s statuses and logging changes.
pub(crate) async fn follow(raft: Raft, mut reporter: HealthReporter) {
    let mut metrics = raft.metrics();
    let mut seen = Seen::default();
    let mut kv = None;
    loop {
        let serving = {
            let m = metrics.borrow_and_update();
            match &m.running_state {
                Ok(()) => {}
                Err(openraft::error::Fatal::Stopped) => break,
                Err(fatal) => {
                    tracing::error!("Raft stopped: {fatal}");
                    break;
                }
            }
            seen.update(&m);
            seen.leader.is_some()
        };
        if kv != Some(serving) {
            let status = if serving {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            };
            reporter.set_service_status(KV_SERVICE, status).await;
            if kv.is_none() {
                reporter
                    .set_service_status("", ServingStatus::Serving)
                    .await;
            }
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

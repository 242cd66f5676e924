//! The node's health, as the standard gRPC health service (`grpc.health.v1.Health`) tells
//! it, and the log lines for changes of role: a task for each of the node's groups
//! follows its Raft's metrics and updates both.
//!
//! - The server as a whole (service name `""`) is `SERVING` while every group's Raft
//!   runs, and `NOT_SERVING` once one stopped (a fatal error, or shutdown).
//! - [`KV_SERVICE`] is `SERVING` while every group's Raft runs and this node knows a
//!   leader of each, itself or another: writes and linearizable reads of every shard can
//!   then be answered or redirected. With a group without a leader (an election, a
//!   partition that cut this node from the quorum) it is `NOT_SERVING`.
//!
//! Thread safety: the group tasks share the statuses behind one async mutex, held while
//! a task reports a change.
//!
//! The health service asks for no token: it tells nothing but these statuses, and load
//! balancers and orchestrators probe it without credentials.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use openraft::{BasicNode, LogId, RaftMetrics, ServerState};
use tokio::task::JoinHandle;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::group::{Group, Groups};
use crate::{GroupId, NodeId, Raft};

/// The client service's name in the health service.
pub const KV_SERVICE: &str = "shale.v1.Kv";

/// What the log says changed, updated in place from each metrics change (Raft's metrics
/// change at every append and apply; only the few fields below are read, and the voter
/// sets are rebuilt only when the membership's log id moves).
#[derive(Debug, Default)]
struct Seen {
    group: GroupId,
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
        let (term, group) = (m.current_term, self.group);
        if self.leader != m.current_leader {
            match m.current_leader {
                Some(l) if l == m.id => {
                    tracing::info!(group, "this node is the leader (term {term})");
                }
                Some(l) => tracing::info!(group, "leader: node {l} (term {term})"),
                None => tracing::info!(group, "no leader known (term {term})"),
            }
            self.leader = m.current_leader;
        }
        let candidate = Some(ServerState::Candidate);
        if m.state == ServerState::Candidate && self.state != candidate {
            tracing::info!(group, "this node stands for election (term {term})");
        }
        self.state = Some(m.state);
        let id = *m.membership_config.log_id();
        if self.membership != Some(id) {
            let membership = m.membership_config.membership();
            let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
            let learners: BTreeSet<NodeId> = membership.learner_ids().collect();
            if (&voters, &learners) != (&self.voters, &self.learners) {
                tracing::info!(
                    group,
                    "membership: voters {voters:?}, learners {learners:?}"
                );
                (self.voters, self.learners) = (voters, learners);
            }
            self.membership = Some(id);
        }
    }
}

/// What the node reports: whether each group knows a leader, and what was last reported
/// for the client service (`None` before the first report, and once a group stopped).
struct Statuses {
    reporter: HealthReporter,
    leader_known: BTreeMap<GroupId, bool>,
    kv: Option<bool>,
    stopped: bool,
}

impl Statuses {
    /// Group `group` knows a leader or not: report the client service's status if the
    /// node's changed.
    async fn group_leader(&mut self, group: GroupId, known: bool) {
        self.leader_known.insert(group, known);
        let serving = self.leader_known.values().all(|&k| k);
        if self.stopped || self.kv == Some(serving) {
            return;
        }
        let status = if serving {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.reporter.set_service_status(KV_SERVICE, status).await;
        if self.kv.is_none() {
            self.reporter
                .set_service_status("", ServingStatus::Serving)
                .await;
        }
        self.kv = Some(serving);
    }

    /// A group's Raft stopped: the node serves nothing from now on.
    async fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.reporter
            .set_service_status(KV_SERVICE, ServingStatus::NotServing)
            .await;
        self.reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
    }
}

/// The node's health, followed group by group. Cloning shares it.
#[derive(Clone)]
pub(crate) struct Health {
    statuses: Arc<tokio::sync::Mutex<Statuses>>,
}

impl Health {
    /// Follow every group of `groups` until its Raft stops, keeping `reporter`'s statuses
    /// and logging changes; the tasks.
    pub(crate) fn follow(
        groups: &Groups,
        reporter: HealthReporter,
    ) -> (Health, Vec<JoinHandle<()>>) {
        let ids = groups.ids();
        let health = Health {
            statuses: Arc::new(tokio::sync::Mutex::new(Statuses {
                reporter,
                // Every group counts from the start, so the node serves once all know a
                // leader.
                leader_known: ids.iter().map(|&id| (id, false)).collect(),
                kv: None,
                stopped: false,
            })),
        };
        let tasks = ids
            .into_iter()
            .filter_map(|id| groups.get(id))
            .map(|g| {
                let statuses = Arc::clone(&health.statuses);
                tokio::spawn(follow_group(g.id, g.raft, statuses))
            })
            .collect();
        (health, tasks)
    }

    /// Follow `group` too (one the node started later: a split's child), until its Raft
    /// stops; the node serves the client service again once it knows the group's leader.
    pub(crate) async fn add(&self, group: &Group) -> JoinHandle<()> {
        self.statuses
            .lock()
            .await
            .leader_known
            .entry(group.id)
            .or_insert(false);
        let statuses = Arc::clone(&self.statuses);
        tokio::spawn(follow_group(group.id, group.raft.clone(), statuses))
    }
}

/// Follow group `group`'s `raft` until it stops.
async fn follow_group(group: GroupId, raft: Raft, statuses: Arc<tokio::sync::Mutex<Statuses>>) {
    let mut metrics = raft.metrics();
    let mut seen = Seen {
        group,
        ..Seen::default()
    };
    let mut reported = None;
    loop {
        let known = {
            let m = metrics.borrow_and_update();
            match &m.running_state {
                Ok(()) => {}
                Err(openraft::error::Fatal::Stopped) => break,
                Err(fatal) => {
                    tracing::error!(group, "Raft stopped: {fatal}");
                    break;
                }
            }
            seen.update(&m);
            seen.leader.is_some()
        };
        if reported != Some(known) {
            statuses.lock().await.group_leader(group, known).await;
            reported = Some(known);
        }
        if metrics.changed().await.is_err() {
            break;
        }
    }
    statuses.lock().await.stop().await;
}

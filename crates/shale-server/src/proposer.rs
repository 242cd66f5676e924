//! The proposer: client writes that arrive together go into the Raft log together.
//!
//! openraft 0.9 makes one log entry of each `client_write`, and the leader's core appends
//! each entry (a synced write) before it takes the next, so 64 clients writing at once
//! would wait in line for 64 appends and 64 replication rounds. The proposer instead
//! proposes whatever commands queued up while the earlier proposals were in flight as one
//! [`Command::Batch`] entry: one append, one round trip to the followers and one apply for
//! all of them, each client answered with its own [`Applied`] response. A command that
//! arrives alone is proposed as it is, so a lone client pays nothing for this.
//!
//! ```text
//!   clients ─► queue ─► [ cmd | cmd | cmd ] ─► client_write(Batch) ─► Batch(replies) ─► clients
//!                         at most MAX_IN_FLIGHT proposals at once
//! ```
//!
//! A proposal that puts texts under a model index goes into the log with their vectors
//! when this node leads ([`StateMachineStore::carry_vectors`], docs/replication.md, "Embed
//! once"). It gives its slot back while the model runs (in a blocking task, at most
//! [`MAX_EMBEDDING`] proposals at once) and takes a slot again to be proposed, so the
//! model works on the next texts while earlier proposals are replicated.
//!
//! Invariants: a batch holds commands that each passed [`Command::validate`], at most
//! `MAX_OPS_PER_COMMAND` operations and `MAX_COMMAND_BYTES` bytes in all, so the batch
//! validates too (and applies alike on every replica). The commands of one batch are
//! independent: they apply in queue order, each answered on its own. Every caller gets
//! exactly one answer, or sees its channel closed if the node stops first.

use std::sync::Arc;

use openraft::error::{ClientWriteError, RaftError};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use crate::command::{Command, Response as Applied, MAX_COMMAND_BYTES, MAX_OPS_PER_COMMAND};
use crate::state_machine::StateMachineStore;
use crate::status::{answered, leads, not_leader, retry_safe, role, Outcome, Role};
use crate::{NodeId, Raft};

/// Proposals in flight at once: one being appended on the leader while the one before
/// it is replicated and applied. More would only make the batches smaller.
const MAX_IN_FLIGHT: usize = 2;

/// Commands waiting for a proposal, at most; a client past it waits to queue.
const MAX_QUEUED: usize = 4096;

/// Proposals whose texts the model embeds at once: two calls keep the model's threads
/// busy when one of them has few texts left.
const MAX_EMBEDDING: usize = 2;

struct Proposal {
    cmd: Command,
    reply: oneshot::Sender<Outcome>,
}

/// The queue in front of `client_write`. Cheap to clone; the batching task ends when the
/// last clone is dropped.
#[derive(Clone)]
pub(crate) struct Proposer {
    queue: mpsc::Sender<Proposal>,
}

impl Proposer {
    /// Start the batching task on the current tokio runtime; with `embedder`, a leader's
    /// proposals carry the vectors of the texts they put under model indexes.
    pub(crate) fn spawn(
        raft: Raft,
        node_id: NodeId,
        embedder: Option<StateMachineStore>,
    ) -> Proposer {
        let (queue, rx) = mpsc::channel(MAX_QUEUED);
        let to = Target {
            raft,
            node_id,
            embedder,
            slots: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            embedding: Arc::new(Semaphore::new(MAX_EMBEDDING)),
        };
        tokio::spawn(run(to, rx));
        Proposer { queue }
    }

    /// Propose `cmd` (already validated) and wait for its outcome.
    pub(crate) async fn propose(&self, cmd: Command) -> Outcome {
        let (reply, answer) = oneshot::channel();
        let stopped = || Status::unavailable("the node is stopping");
        self.queue
            .send(Proposal { cmd, reply })
            .await
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

/// Where proposals go, and what embeds their texts.
#[derive(Clone)]
struct Target {
    raft: Raft,
    node_id: NodeId,
    embedder: Option<StateMachineStore>,
    slots: Arc<Semaphore>,
    embedding: Arc<Semaphore>,
}

/// Take proposals off the queue: wait for a free slot, then close a batch of everything
/// queued meanwhile (within the limits) and propose it in a task of its own.
async fn run(to: Target, mut queue: mpsc::Receiver<Proposal>) {
    let mut carried: Option<Proposal> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => match queue.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        // The slot first: whatever queues while the proposals in flight finish joins
        // this one.
        let Ok(slot) = Arc::clone(&to.slots).acquire_owned().await else {
            return;
        };
        let (mut ops, mut bytes) = (first.cmd.ops(), first.cmd.bytes());
        let alone = !batchable(&first.cmd);
        let mut batch = vec![first];
        while let Some(next) = if alone { None } else { queue.try_recv().ok() } {
            let (o, b) = (next.cmd.ops(), next.cmd.bytes());
            if !batchable(&next.cmd)
                || ops + o > MAX_OPS_PER_COMMAND
                || bytes + b > MAX_COMMAND_BYTES
            {
                carried = Some(next);
                break;
            }
            ops += o;
            bytes += b;
            batch.push(next);
        }
        let to = to.clone();
        tokio::spawn(async move { propose_batch(&to, slot, batch).await });
    }
}

/// Whether `cmd` may share an entry: an index definition changes what the commands
/// after it may write, so it is proposed alone; a session is named by the index of the
/// entry that opens it, so that entry opens one alone; a split changes the keys the group
/// serves.
fn batchable(cmd: &Command) -> bool {
    !matches!(
        cmd,
        Command::DefineIndex(_) | Command::OpenSession | Command::Split { .. }
    )
}

/// Propose `batch` as one entry (a lone command as itself) in `slot`, with the vectors of
/// its texts if this node leads, and answer each caller.
async fn propose_batch(to: &Target, slot: OwnedSemaphorePermit, batch: Vec<Proposal>) {
    let (mut cmds, replies): (Vec<Command>, Vec<oneshot::Sender<Outcome>>) =
        batch.into_iter().map(|p| (p.cmd, p.reply)).unzip();
    let alone = cmds.len() == 1;
    let mut cmd = match cmds.pop() {
        Some(cmd) if alone => cmd,
        Some(last) => {
            cmds.push(last);
            Command::Batch(cmds)
        }
        None => return,
    };
    let mut slot = Some(slot);
    let embedder = to.embedder.as_ref().filter(|sm| sm.wants_vectors(&cmd));
    if let Some(sm) = embedder.filter(|_| leads(&to.raft, to.node_id)) {
        // The slot is free for other proposals while the model runs.
        drop(slot.take());
        let embedded = match Arc::clone(&to.embedding).acquire_owned().await {
            Ok(permit) => {
                let sm = sm.clone();
                tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    sm.carry_vectors(cmd)
                })
                .await
                .map_err(|e| format!("embedding the texts failed: {e}"))
            }
            Err(_) => Err("the node is stopping".to_string()),
        };
        cmd = match embedded {
            Ok(cmd) => cmd,
            Err(why) => {
                // Nothing was proposed.
                for reply in replies {
                    let _ = reply.send(Err(Status::unavailable(why.clone())));
                }
                return;
            }
        };
        slot = Arc::clone(&to.slots).acquire_owned().await.ok();
    }
    let outcome = submit(&to.raft, to.node_id, cmd).await;
    drop(slot);
    answer(replies, alone, outcome);
}

/// Answer the callers of a proposal with their parts of its `outcome`: a lone command's
/// outcome as it is, a batch's answer by answer.
fn answer(replies: Vec<oneshot::Sender<Outcome>>, alone: bool, outcome: Outcome) {
    if alone {
        // A caller that gave up (its request timed out) has dropped its receiver.
        if let Some(reply) = replies.into_iter().next() {
            let _ = reply.send(outcome);
        }
        return;
    }
    match outcome {
        Ok((index, Applied::Batch(answers))) if answers.len() == replies.len() => {
            for (reply, answer) in replies.into_iter().zip(answers) {
                let _ = reply.send(answered(index, answer));
            }
        }
        Ok((_, other)) => {
            let status = Status::internal(format!(
                "a batch of {} commands was answered with {other:?}",
                replies.len()
            ));
            for reply in replies {
                let _ = reply.send(Err(status.clone()));
            }
        }
        Err(status) => {
            for reply in replies {
                let _ = reply.send(Err(status.clone()));
            }
        }
    }
}

/// Propose `cmd` (validated) as one log entry and wait until it is applied here: its index
/// and response, or the error a client sees (see [`crate::service`]).
async fn submit(raft: &Raft, node_id: NodeId, cmd: Command) -> Outcome {
    // A leader that loses its leadership after proposing answers ForwardToLeader too,
    // though a later leader may still commit the entry: only a node that was not the
    // leader when the request came can say that nothing was proposed.
    let was_leader = match role(raft, node_id) {
        Role::Other => false,
        Role::Leader => true,
        Role::Leaving => {
            return Err(retry_safe(Status::unavailable(
                "this node leads but is leaving the group; nothing was proposed",
            )))
        }
    };
    match raft.client_write(Arc::new(cmd)).await {
        Ok(resp) => answered(resp.log_id.index, resp.data),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
            Err(not_leader(&f, was_leader))
        }
        Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
            Err(Status::internal(e.to_string()))
        }
        Err(RaftError::Fatal(e)) => Err(Status::unavailable(e.to_string())),
    }
}

//! Conversions between the protobuf messages ([`crate::pb`]) and openraft's types. A
//! message missing a required field is an `InvalidArgument` status, never a panic.

use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest, VoteResponse};
use openraft::{CommittedLeaderId, LogId, Vote};
use tonic::Status;

use crate::format;
use crate::pb;
use crate::{NodeId, TypeConfig};

pub fn vote_to_pb(v: &Vote<NodeId>) -> pb::Vote {
    pb::Vote {
        term: v.leader_id.term,
        node_id: v.leader_id.node_id,
        committed: v.committed,
    }
}

pub fn vote_from_pb(v: Option<pb::Vote>) -> Result<Vote<NodeId>, Status> {
    let v = v.ok_or_else(|| Status::invalid_argument("a vote is required"))?;
    let mut vote = Vote::new(v.term, v.node_id);
    vote.committed = v.committed;
    Ok(vote)
}

pub fn log_id_to_pb(id: &LogId<NodeId>) -> pb::LogId {
    pb::LogId {
        term: id.leader_id.term,
        node_id: id.leader_id.node_id,
        index: id.index,
    }
}

pub fn log_id_from_pb(id: pb::LogId) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(id.term, id.node_id), id.index)
}

pub fn append_request_to_pb(r: &AppendEntriesRequest<TypeConfig>) -> pb::AppendEntriesRequest {
    pb::AppendEntriesRequest {
        vote: Some(vote_to_pb(&r.vote)),
        prev_log_id: r.prev_log_id.as_ref().map(log_id_to_pb),
        leader_commit: r.leader_commit.as_ref().map(log_id_to_pb),
        entries: r.entries.iter().map(format::encode_entry).collect(),
    }
}

pub fn append_request_from_pb(
    r: pb::AppendEntriesRequest,
) -> Result<AppendEntriesRequest<TypeConfig>, Status> {
    let entries = r
        .entries
        .iter()
        .map(|b| format::decode_entry(b))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let prev_log_id = r.prev_log_id.map(log_id_from_pb);
    check_entries_follow(prev_log_id.as_ref(), &entries)?;
    Ok(AppendEntriesRequest {
        vote: vote_from_pb(r.vote)?,
        prev_log_id,
        leader_commit: r.leader_commit.map(log_id_from_pb),
        entries,
    })
}

/// Refuse entries that do not follow `prev` one index at a time, with leader ids that
/// never go down, as a leader's always do. openraft 0.9 does not check this; the log
/// store refuses a hole, and openraft takes that refusal for a fatal storage error, so
/// one such message would stop the receiving node's Raft.
fn check_entries_follow(
    prev: Option<&LogId<NodeId>>,
    entries: &[openraft::Entry<TypeConfig>],
) -> Result<(), Status> {
    let mut last = prev;
    for e in entries {
        let id = &e.log_id;
        let expected = last.map_or(Some(0), |l| l.index.checked_add(1));
        if Some(id.index) != expected || last.is_some_and(|l| id.leader_id < l.leader_id) {
            return Err(Status::invalid_argument(format!(
                "append entries: entry {id} does not follow {}",
                last.map_or_else(|| "the start of the log".to_string(), ToString::to_string)
            )));
        }
        last = Some(id);
    }
    Ok(())
}

pub fn append_response_to_pb(r: &AppendEntriesResponse<NodeId>) -> pb::AppendEntriesResponse {
    use pb::append_entries_response::Result as R;
    let result = match r {
        AppendEntriesResponse::Success => R::Success(pb::Empty {}),
        AppendEntriesResponse::PartialSuccess(m) => R::PartialSuccess(pb::PartialSuccess {
            matching: m.as_ref().map(log_id_to_pb),
        }),
        AppendEntriesResponse::Conflict => R::Conflict(pb::Empty {}),
        AppendEntriesResponse::HigherVote(v) => R::HigherVote(vote_to_pb(v)),
    };
    pb::AppendEntriesResponse {
        result: Some(result),
    }
}

pub fn append_response_from_pb(
    r: pb::AppendEntriesResponse,
) -> Result<AppendEntriesResponse<NodeId>, Status> {
    use pb::append_entries_response::Result as R;
    match r.result {
        Some(R::Success(_)) => Ok(AppendEntriesResponse::Success),
        Some(R::PartialSuccess(p)) => Ok(AppendEntriesResponse::PartialSuccess(
            p.matching.map(log_id_from_pb),
        )),
        Some(R::Conflict(_)) => Ok(AppendEntriesResponse::Conflict),
        Some(R::HigherVote(v)) => Ok(AppendEntriesResponse::HigherVote(vote_from_pb(Some(v))?)),
        None => Err(Status::invalid_argument(
            "an append response without a result",
        )),
    }
}

pub fn vote_request_to_pb(r: &VoteRequest<NodeId>) -> pb::VoteRequest {
    pb::VoteRequest {
        vote: Some(vote_to_pb(&r.vote)),
        last_log_id: r.last_log_id.as_ref().map(log_id_to_pb),
    }
}

pub fn vote_request_from_pb(r: pb::VoteRequest) -> Result<VoteRequest<NodeId>, Status> {
    Ok(VoteRequest::new(
        vote_from_pb(r.vote)?,
        r.last_log_id.map(log_id_from_pb),
    ))
}

pub fn vote_response_to_pb(r: &VoteResponse<NodeId>) -> pb::VoteResponse {
    pb::VoteResponse {
        vote: Some(vote_to_pb(&r.vote)),
        vote_granted: r.vote_granted,
        last_log_id: r.last_log_id.as_ref().map(log_id_to_pb),
    }
}

pub fn vote_response_from_pb(r: pb::VoteResponse) -> Result<VoteResponse<NodeId>, Status> {
    Ok(VoteResponse::new(
        vote_from_pb(r.vote)?,
        r.last_log_id.map(log_id_from_pb),
        r.vote_granted,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::EntryPayload;

    fn entry(term: u64, node: u64, index: u64) -> openraft::Entry<TypeConfig> {
        openraft::Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, node), index),
            payload: EntryPayload::Blank,
        }
    }

    #[test]
    fn entries_must_follow_one_index_at_a_time_under_leaders_that_never_go_down() {
        let prev = LogId::new(CommittedLeaderId::new(2, 1), 4);
        let ok = [entry(2, 1, 5), entry(3, 2, 6), entry(3, 2, 7)];
        assert!(check_entries_follow(Some(&prev), &ok).is_ok());
        assert!(check_entries_follow(None, &[entry(1, 1, 0), entry(1, 1, 1)]).is_ok());
        assert!(check_entries_follow(Some(&prev), &[]).is_ok());
        for bad in [
            &[entry(2, 1, 6)][..],
            &[entry(2, 1, 5), entry(2, 1, 5)],
            &[entry(2, 1, 5), entry(2, 1, 7)],
            &[entry(1, 1, 5)],
            &[entry(3, 2, 5), entry(2, 1, 6)],
        ] {
            let status = check_entries_follow(Some(&prev), bad).expect_err("refused");
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
        }
        assert!(check_entries_follow(None, &[entry(1, 1, 1)]).is_err());
        let last = LogId::new(CommittedLeaderId::new(1, 1), u64::MAX);
        assert!(check_entries_follow(Some(&last), &[entry(1, 1, 0)]).is_err());
    }
}

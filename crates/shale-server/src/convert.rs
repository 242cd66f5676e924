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
    Ok(AppendEntriesRequest {
        vote: vote_from_pb(r.vote)?,
        prev_log_id: r.prev_log_id.map(log_id_from_pb),
        leader_commit: r.leader_commit.map(log_id_from_pb),
        entries,
    })
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

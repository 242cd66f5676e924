//! Fuzz entry points for the decoders of bytes that reach a node from the network: a log
//! entry as an `AppendEntries` carries it, a gRPC message through the checked codec, and
//! a stream of snapshot frames. Whatever the bytes, a decoder returns a value or a typed
//! error, never panics; an entry decodes to one that encodes to the same entry; and a
//! message the codec lets through decodes into no more elements than fields it counted.
//! The cargo-fuzz project in `fuzz/` calls these functions, one target each;
//! `tests/server/fuzz_smoke.rs` runs them on every `cargo test` with the engine's shared driver,
//! [`shale::fuzzing::harness`].

use std::collections::BTreeMap;
use std::sync::Arc;

use openraft::{BasicNode, CommittedLeaderId, EntryPayload, LogId, Membership, StoredMembership};
use prost::Message;
use shale::fuzzing::Target;

use crate::codec::{count_fields, MAX_FIELDS};
use crate::command::CarriedVector;
use crate::format::{
    decode_entry, encode_entry, encode_frame, encode_snapshot_end, encode_snapshot_header,
    put_pair, FrameKind, SnapshotHeader,
};
use crate::snapshot::FrameSequence;
use crate::{pb, Command, Entry, Op};

/// Every target, by name: the names of the files in `fuzz/fuzz_targets/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("raft_entry", raft_entry),
    ("grpc_message", grpc_message),
    ("snapshot_frames", snapshot_frames),
];

/// Valid inputs for `target`, made by the crate's own encoders. Unknown names give none.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "raft_entry" => entries().iter().map(encode_entry).collect(),
        "grpc_message" => messages(),
        "snapshot_frames" => vec![frames()],
        _ => Vec::new(),
    }
}

/// A log entry record, as it arrives in an `AppendEntries`.
pub fn raft_entry(data: &[u8]) {
    if let Ok(entry) = decode_entry(data) {
        let again = decode_entry(&encode_entry(&entry)).expect("an encoded entry decodes");
        assert_eq!(again.log_id, entry.log_id);
        assert_eq!(encode_entry(&again), encode_entry(&entry));
    }
}

/// A gRPC message body, through the codec's field count and then prost, as every
/// service's requests and every client's responses are.
pub fn grpc_message(data: &[u8]) {
    let Ok(fields) = count_fields(data, MAX_FIELDS) else {
        return;
    };
    if fields > MAX_FIELDS {
        return;
    }
    if let Ok(m) = pb::BatchRequest::decode(data) {
        assert!(
            m.ops.len() <= fields,
            "{} ops of {fields} fields",
            m.ops.len()
        );
    }
    if let Ok(m) = pb::ScanResponse::decode(data) {
        assert!(m.pairs.len() <= fields);
    }
    if let Ok(m) = pb::SearchResponse::decode(data) {
        assert!(m.hits.len() <= fields);
    }
    if let Ok(m) = pb::AppendEntriesRequest::decode(data) {
        assert!(m.entries.len() <= fields);
        let _ = crate::convert::append_request_from_pb(m);
    }
    if let Ok(m) = pb::VoteRequest::decode(data) {
        let _ = crate::convert::vote_request_from_pb(m);
    }
    let _ = pb::SearchRequest::decode(data);
    let _ = pb::DefineIndexRequest::decode(data);
}

/// A stream of snapshot frames: the bytes cut into frames at the lengths their heads
/// claim (or at the end), each given to the receiver's check in turn.
pub fn snapshot_frames(data: &[u8]) {
    let mut seq = FrameSequence::default();
    let mut rest = data;
    while !rest.is_empty() {
        let claimed = rest
            .get(1..5)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(rest.len(), |b| u32::from_le_bytes(b) as usize);
        let len = claimed
            .saturating_add(crate::format::FRAME_HEAD_LEN + crate::format::FRAME_TAIL_LEN)
            .clamp(1, rest.len());
        let (frame, after) = rest.split_at(len);
        if seq.accept(frame).is_err() {
            return;
        }
        rest = after;
    }
}

fn entries() -> Vec<Entry> {
    let id = |index| LogId::new(CommittedLeaderId::new(3, 1), index);
    let members: BTreeMap<u64, BasicNode> = (1..=3)
        .map(|n| (n, BasicNode::new(format!("127.0.0.1:700{n}"))))
        .collect();
    let put = |k: &[u8], v: Option<&[u8]>| Op {
        key: k.to_vec(),
        value: v.map(<[u8]>::to_vec),
    };
    vec![
        Entry {
            log_id: id(1),
            payload: EntryPayload::Blank,
        },
        Entry {
            log_id: id(2),
            payload: EntryPayload::Normal(Arc::new(Command::Write(vec![
                put(b"k", Some(b"v")),
                put(b"gone", None),
            ]))),
        },
        Entry {
            log_id: id(3),
            payload: EntryPayload::Normal(Arc::new(Command::CompareAndSet {
                key: b"k".to_vec(),
                expected: Some(b"v".to_vec()),
                new_value: None,
            })),
        },
        Entry {
            log_id: id(4),
            payload: EntryPayload::Normal(Arc::new(Command::Embedded {
                cmd: Box::new(Command::Write(vec![put(b"n/1", Some(b"a text"))])),
                vectors: vec![CarriedVector {
                    put: 0,
                    vector: vec![0.25, -1.0, 0.5],
                }],
            })),
        },
        Entry {
            log_id: id(5),
            payload: EntryPayload::Membership(Membership::new(
                vec![members.keys().copied().collect()],
                members,
            )),
        },
    ]
}

fn messages() -> Vec<Vec<u8>> {
    let op = |k: &[u8]| pb::Op {
        key: k.to_vec(),
        value: Some(b"v".to_vec()),
    };
    vec![
        pb::BatchRequest {
            ops: vec![op(b"a"), op(b"b")],
            session: Some(pb::SessionSeq {
                session: 7,
                seq: 3,
                lowest_awaited: 2,
            }),
        }
        .encode_to_vec(),
        pb::AppendEntriesRequest {
            vote: Some(pb::Vote {
                term: 3,
                node_id: 1,
                committed: true,
            }),
            prev_log_id: None,
            leader_commit: None,
            entries: entries().iter().map(encode_entry).collect(),
        }
        .encode_to_vec(),
        pb::SearchRequest {
            vector: vec![0.25; 8],
            ..Default::default()
        }
        .encode_to_vec(),
    ]
}

fn frames() -> Vec<u8> {
    let header = SnapshotHeader {
        last_log_id: Some(LogId::new(CommittedLeaderId::new(3, 1), 9)),
        membership: StoredMembership::default(),
        snapshot_id: "3-1-9".to_string(),
    };
    let mut pairs = Vec::new();
    put_pair(&mut pairs, b"a", b"1");
    put_pair(&mut pairs, b"b", b"2");
    let mut out = Vec::new();
    for (kind, payload) in [
        (FrameKind::Header, encode_snapshot_header(&header)),
        (FrameKind::Pairs, pairs),
        (FrameKind::End, encode_snapshot_end(2, 3)),
    ] {
        encode_frame(kind, &payload, &mut out).expect("a small frame");
    }
    out
}

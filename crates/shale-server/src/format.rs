//! Every byte layout of the replication server, encode and decode side by side: here the
//! records of the log store (vote, log id, membership) and log entries (also their wire
//! form); in `format/` the keys of both stores (`keys.rs`), the fields records share
//! (`fields.rs`), the commands an entry carries (`commands.rs`), index definitions
//! (`indexes.rs`), sessions (`sessions.rs`), a group's shard (`shard.rs`), the node's identity (`identity.rs`) and the
//! frames of a snapshot file, also its wire form (`frames.rs`).
//! docs/format.md ("Replication") is the description; the tests decode its worked
//! examples.
//!
//! Integers inside records are fixed-width little-endian (the engine's codec); the index
//! in a log entry's *key* is big-endian so that entries sort by index. Nothing here is
//! written with serde: each record starts with a version byte and is decoded field by
//! field with every length checked.

use std::sync::Arc;

use openraft::{BasicNode, EntryPayload, LogId, StoredMembership, Vote};
use shale::inspect::codec::{self, Decoder};

mod commands;
mod fields;
mod frames;
mod identity;
mod indexes;
mod keys;
mod sessions;
mod shard;

use commands::{get_command, put_command};
pub use fields::RECORD_VERSION;
use fields::{
    decoded, finish, get_log_id, get_membership, get_opt_log_id, put_log_id, put_membership,
    put_opt_log_id, start,
};
pub use frames::{
    decode_frame, decode_frame_head, decode_index_file_chunk, decode_pairs, decode_snapshot_end,
    decode_snapshot_header, encode_frame, encode_index_file_chunk, encode_snapshot_end,
    encode_snapshot_header, put_pair, FrameKind, IndexFileChunk, SnapshotHeader, FRAME_HEAD_LEN,
    FRAME_TAIL_LEN, MAX_FRAME_PAYLOAD, MAX_INDEX_FILE_NAME, SNAPSHOT_MAGIC, TARGET_FRAME_PAYLOAD,
};
pub use identity::{decode_identity, encode_identity, Identity, DATA_LAYOUT};
pub use indexes::{decode_index_definition, encode_index_definition};
pub use keys::{
    index_key, LogKeys, GROUP_LOG_PREFIX, LAYOUT_1_LOG_RANGES, LOG_KEY_IDENTITY, RESERVED_PREFIX,
    SM_INDEX_PREFIX, SM_KEY_APPLIED, SM_KEY_MEMBERSHIP, SM_KEY_SHARD, SM_SESSION_PREFIX,
};
pub use sessions::{
    check_session_pair, decode_answer, decode_session, encode_answer, encode_session, AnswerRecord,
    SessionKey, SessionRecord,
};
pub use shard::{decode_shard, encode_shard};

use crate::error::Result;
use crate::{Entry, NodeId};

/// `vote := version:u8 term:u64 node_id:u64 committed:u8`
pub fn encode_vote(vote: &Vote<NodeId>) -> Vec<u8> {
    let mut out = Vec::with_capacity(18);
    codec::put_u8(&mut out, RECORD_VERSION);
    codec::put_u64(&mut out, vote.leader_id.term);
    codec::put_u64(&mut out, vote.leader_id.node_id);
    codec::put_u8(&mut out, u8::from(vote.committed));
    out
}

/// Inverse of [`encode_vote`].
///
/// # Errors
/// `Corruption` for bytes that are not a vote record.
pub fn decode_vote(bytes: &[u8]) -> Result<Vote<NodeId>> {
    decoded("vote", vote_record(&mut Decoder::new(bytes)))
}

fn vote_record(d: &mut Decoder<'_>) -> Result<Vote<NodeId>, codec::DecodeError> {
    start(d, "vote")?;
    let term = d.u64("vote term")?;
    let node_id = d.u64("vote node")?;
    let committed = match d.u8("vote committed")? {
        0 => false,
        1 => true,
        other => {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("committed byte {other}"),
            ))
        }
    };
    let mut vote = Vote::new(term, node_id);
    vote.committed = committed;
    finish(d, "vote", vote)
}

/// `log_id_record := version:u8 term:u64 node_id:u64 index:u64` (the last purged id, the
/// last applied id).
pub fn encode_log_id(id: &LogId<NodeId>) -> Vec<u8> {
    let mut out = Vec::with_capacity(25);
    codec::put_u8(&mut out, RECORD_VERSION);
    put_log_id(&mut out, id);
    out
}

/// Inverse of [`encode_log_id`].
///
/// # Errors
/// `Corruption` for bytes that are not a log id record.
pub fn decode_log_id(bytes: &[u8]) -> Result<LogId<NodeId>> {
    decoded("log id", log_id_record(&mut Decoder::new(bytes)))
}

fn log_id_record(d: &mut Decoder<'_>) -> Result<LogId<NodeId>, codec::DecodeError> {
    start(d, "log id")?;
    let id = get_log_id(d)?;
    finish(d, "log id", id)
}

/// `stored_membership := version:u8 opt_log_id membership`
pub fn encode_stored_membership(m: &StoredMembership<NodeId, BasicNode>) -> Vec<u8> {
    let mut out = Vec::new();
    codec::put_u8(&mut out, RECORD_VERSION);
    put_opt_log_id(&mut out, m.log_id().as_ref());
    put_membership(&mut out, m.membership());
    out
}

/// Inverse of [`encode_stored_membership`].
///
/// # Errors
/// `Corruption` for bytes that are not a stored membership record.
pub fn decode_stored_membership(bytes: &[u8]) -> Result<StoredMembership<NodeId, BasicNode>> {
    decoded(
        "membership",
        stored_membership_record(&mut Decoder::new(bytes)),
    )
}

fn stored_membership_record(
    d: &mut Decoder<'_>,
) -> Result<StoredMembership<NodeId, BasicNode>, codec::DecodeError> {
    start(d, "membership")?;
    let log_id = get_opt_log_id(d)?;
    let m = get_membership(d)?;
    finish(d, "membership", StoredMembership::new(log_id, m))
}

const PAYLOAD_BLANK: u8 = 0;
const PAYLOAD_COMMAND: u8 = 1;
const PAYLOAD_MEMBERSHIP: u8 = 2;
/// `entry := version:u8 log_id payload` (see docs/format.md, "Raft log entry").
pub fn encode_entry(entry: &Entry) -> Vec<u8> {
    // Sized up front: a batch entry holds thousands of keys and values.
    let payload = match &entry.payload {
        EntryPayload::Normal(cmd) => cmd
            .bytes()
            .saturating_add(cmd.ops().saturating_mul(8))
            .saturating_add(cmd.carried_bytes()),
        EntryPayload::Blank | EntryPayload::Membership(_) => 64,
    };
    let mut out = Vec::with_capacity(payload.saturating_add(32));
    codec::put_u8(&mut out, RECORD_VERSION);
    put_log_id(&mut out, &entry.log_id);
    match &entry.payload {
        EntryPayload::Blank => codec::put_u8(&mut out, PAYLOAD_BLANK),
        EntryPayload::Normal(cmd) => {
            codec::put_u8(&mut out, PAYLOAD_COMMAND);
            put_command(&mut out, cmd);
        }
        EntryPayload::Membership(m) => {
            codec::put_u8(&mut out, PAYLOAD_MEMBERSHIP);
            put_membership(&mut out, m);
        }
    }
    out
}

/// The log id of an encoded entry, without decoding its payload.
///
/// # Errors
/// `Corruption` for bytes that do not start like a log entry record.
pub fn decode_entry_log_id(bytes: &[u8]) -> Result<LogId<NodeId>> {
    let mut d = Decoder::new(bytes);
    decoded(
        "log entry",
        start(&mut d, "log entry").and_then(|()| get_log_id(&mut d)),
    )
}

/// Inverse of [`encode_entry`].
///
/// # Errors
/// `Corruption` for bytes that are not a log entry record.
pub fn decode_entry(bytes: &[u8]) -> Result<Entry> {
    decoded("log entry", entry_record(&mut Decoder::new(bytes)))
}

fn entry_record(d: &mut Decoder<'_>) -> Result<Entry, codec::DecodeError> {
    start(d, "log entry")?;
    let log_id = get_log_id(d)?;
    let payload = match d.u8("payload kind")? {
        PAYLOAD_BLANK => EntryPayload::Blank,
        PAYLOAD_COMMAND => EntryPayload::Normal(Arc::new(get_command(d)?)),
        PAYLOAD_MEMBERSHIP => EntryPayload::Membership(get_membership(d)?),
        other => {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("payload kind {other}"),
            ))
        }
    };
    finish(d, "log entry", Entry { log_id, payload })
}

#[cfg(test)]
mod tests;

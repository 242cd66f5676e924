//! Every byte layout of the replication server, encode and decode side by side: the keys
//! and records of the log store, the state machine's reserved keys, log entries (also
//! their wire form), and (`format/frames.rs`) the frames of a snapshot file (also its
//! wire form).
//! docs/format.md ("Replication") is the description; the tests decode its worked
//! examples.
//!
//! Integers inside records are fixed-width little-endian (the engine's codec); the index
//! in a log entry's *key* is big-endian so that entries sort by index. Nothing here is
//! written with serde: each record starts with a version byte and is decoded field by
//! field with every length checked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use openraft::{
    BasicNode, CommittedLeaderId, EntryPayload, LogId, Membership, StoredMembership, Vote,
};
use shale::inspect::codec::{self, Decoder};

mod commands;
mod frames;
mod identity;
mod sessions;

use commands::{get_command, put_command};
pub use frames::{
    decode_frame, decode_frame_head, decode_index_file_chunk, decode_pairs, decode_snapshot_end,
    decode_snapshot_header, encode_frame, encode_index_file_chunk, encode_snapshot_end,
    encode_snapshot_header, put_pair, FrameKind, IndexFileChunk, SnapshotHeader, FRAME_HEAD_LEN,
    FRAME_TAIL_LEN, MAX_FRAME_PAYLOAD, MAX_INDEX_FILE_NAME, SNAPSHOT_MAGIC, TARGET_FRAME_PAYLOAD,
};
pub use identity::{decode_identity, encode_identity, Identity, DATA_LAYOUT};
pub use sessions::{
    check_session_pair, decode_answer, decode_session, encode_answer, encode_session, AnswerRecord,
    SessionKey, SessionRecord,
};

use crate::command::{IndexModel, IndexSpec};
use crate::error::{Error, Result};
use crate::{Entry, NodeId};
use shale_search::vector::Metric;
use shale_search::Analyzer;

/// The version byte that starts every record below.
pub const RECORD_VERSION: u8 = 1;

// ---- log store keys ------------------------------------------------------------------

/// The log store key of the vote.
pub const LOG_KEY_VOTE: &[u8] = &[0x01];
/// The log store key of the last purged log id.
pub const LOG_KEY_LAST_PURGED: &[u8] = &[0x02];
/// The log store key of the node's identity ([`Identity`]).
pub const LOG_KEY_IDENTITY: &[u8] = &[0x03];
/// First byte of every log entry key.
pub const LOG_ENTRY_PREFIX: u8 = 0x10;

/// The key of the log entry at `index`: the prefix, then the index big-endian.
pub fn log_entry_key(index: u64) -> [u8; 9] {
    let mut key = [LOG_ENTRY_PREFIX; 9];
    for (dst, src) in key.iter_mut().skip(1).zip(index.to_be_bytes()) {
        *dst = src;
    }
    key
}

/// The index in a log entry key.
///
/// # Errors
/// `Corruption` if `key` is not a log entry key.
pub fn log_entry_index(key: &[u8]) -> Result<u64> {
    match key.split_first() {
        Some((&LOG_ENTRY_PREFIX, rest)) => {
            let bytes: [u8; 8] = rest.try_into().map_err(|_| {
                Error::corruption("log entry key", format!("{} bytes, not 9", key.len()))
            })?;
            Ok(u64::from_be_bytes(bytes))
        }
        _ => Err(Error::corruption("log entry key", "wrong prefix")),
    }
}

// ---- state machine keys --------------------------------------------------------------

/// First byte of the state machine's own keys; user keys may not start with it.
pub const RESERVED_PREFIX: u8 = 0xFF;
/// The state machine key of the last applied log id.
pub const SM_KEY_APPLIED: &[u8] = &[RESERVED_PREFIX, b'a'];
/// The state machine key of the last applied membership.
pub const SM_KEY_MEMBERSHIP: &[u8] = &[RESERVED_PREFIX, b'm'];
/// The prefix of the state machine keys of the index definitions: `0xFF 'x' ‖ name`.
pub const SM_INDEX_PREFIX: &[u8] = &[RESERVED_PREFIX, b'x'];
/// The prefix of the state machine keys of the client sessions ([`SessionKey`]).
pub const SM_SESSION_PREFIX: &[u8] = &[RESERVED_PREFIX, b's'];

/// The state machine key of index `name`'s definition.
pub fn index_key(name: &str) -> Vec<u8> {
    [SM_INDEX_PREFIX, name.as_bytes()].concat()
}

// ---- records -------------------------------------------------------------------------

fn put_log_id(out: &mut Vec<u8>, id: &LogId<NodeId>) {
    codec::put_u64(out, id.leader_id.term);
    codec::put_u64(out, id.leader_id.node_id);
    codec::put_u64(out, id.index);
}

fn get_log_id(d: &mut Decoder<'_>) -> Result<LogId<NodeId>, codec::DecodeError> {
    let term = d.u64("log id term")?;
    let node_id = d.u64("log id node")?;
    let index = d.u64("log id index")?;
    Ok(LogId::new(CommittedLeaderId::new(term, node_id), index))
}

fn put_opt_log_id(out: &mut Vec<u8>, id: Option<&LogId<NodeId>>) {
    match id {
        None => codec::put_u8(out, 0),
        Some(id) => {
            codec::put_u8(out, 1);
            put_log_id(out, id);
        }
    }
}

fn get_opt_log_id(d: &mut Decoder<'_>) -> Result<Option<LogId<NodeId>>, codec::DecodeError> {
    match d.u8("log id presence")? {
        0 => Ok(None),
        1 => get_log_id(d).map(Some),
        other => Err(codec::DecodeError::new(
            d.position(),
            format!("presence byte {other}"),
        )),
    }
}

fn put_opt_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => codec::put_u8(out, 0),
        Some(b) => {
            codec::put_u8(out, 1);
            codec::put_length_prefixed(out, b);
        }
    }
}

fn get_opt_bytes(d: &mut Decoder<'_>, what: &str) -> Result<Option<Vec<u8>>, codec::DecodeError> {
    match d.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(d.length_prefixed(what)?.to_vec())),
        other => Err(codec::DecodeError::new(
            d.position(),
            format!("{what}: presence byte {other}"),
        )),
    }
}

fn start(d: &mut Decoder<'_>, what: &str) -> Result<(), codec::DecodeError> {
    match d.u8(what)? {
        RECORD_VERSION => Ok(()),
        v => Err(codec::DecodeError::new(
            0,
            format!("{what}: unknown version {v}"),
        )),
    }
}

fn finish<T>(d: &Decoder<'_>, what: &str, value: T) -> Result<T, codec::DecodeError> {
    if d.is_empty() {
        Ok(value)
    } else {
        Err(codec::DecodeError::new(
            d.position(),
            format!("{what}: trailing bytes"),
        ))
    }
}

fn decoded<T>(what: &str, r: Result<T, codec::DecodeError>) -> Result<T> {
    r.map_err(|e| Error::corruption(what, format!("at offset {}: {}", e.offset, e.reason)))
}

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

fn put_membership(out: &mut Vec<u8>, m: &Membership<NodeId, BasicNode>) {
    let configs = m.get_joint_config();
    codec::put_varint(out, configs.len() as u64);
    for config in configs {
        codec::put_varint(out, config.len() as u64);
        for id in config {
            codec::put_u64(out, *id);
        }
    }
    let nodes: Vec<(&NodeId, &BasicNode)> = m.nodes().collect();
    codec::put_varint(out, nodes.len() as u64);
    for (id, node) in nodes {
        codec::put_u64(out, *id);
        codec::put_length_prefixed(out, node.addr.as_bytes());
    }
}

fn get_membership(
    d: &mut Decoder<'_>,
) -> Result<Membership<NodeId, BasicNode>, codec::DecodeError> {
    let n_configs = d.varint("membership configs")?;
    let mut configs = Vec::new();
    for _ in 0..n_configs {
        let n_voters = d.varint("membership voters")?;
        let mut voters = BTreeSet::new();
        for _ in 0..n_voters {
            voters.insert(d.u64("voter id")?);
        }
        configs.push(voters);
    }
    let n_nodes = d.varint("membership nodes")?;
    let mut nodes = BTreeMap::new();
    for _ in 0..n_nodes {
        let id = d.u64("node id")?;
        let addr = d.length_prefixed("node address")?;
        let addr = std::str::from_utf8(addr)
            .map_err(|_| codec::DecodeError::new(d.position(), "node address is not UTF-8"))?;
        nodes.insert(id, BasicNode::new(addr));
    }
    Ok(Membership::new(configs, nodes))
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
const METRIC_COSINE: u8 = 0;
const METRIC_DOT: u8 = 1;
const METRIC_L2: u8 = 2;
const MODEL_VECTORS: u8 = 0;
const MODEL_HASH: u8 = 1;
const MODEL_MINILM: u8 = 2;
/// The version of an index definition record whose spec has keywords.
const DEFINITION_VERSION_KEYWORDS: u8 = 2;
const KEYWORDS_SIMPLE: u8 = 1;
const KEYWORDS_ENGLISH: u8 = 2;
const KEYWORDS_CJK: u8 = 3;

/// `spec := name:varbytes prefix:varbytes dim:varint metric:u8 model:u8 [keywords:u8]`:
/// `keywords` (the analyzer of the index's keyword index) is there when the record says so,
/// by its command kind (5, not 4) or its version (2, not 1), so a spec without one has the
/// bytes it had before keyword indexes, and a cut one is never read as another.
fn put_index_spec(out: &mut Vec<u8>, spec: &IndexSpec) {
    codec::put_length_prefixed(out, spec.name.as_bytes());
    codec::put_length_prefixed(out, &spec.prefix);
    codec::put_varint(out, u64::from(spec.dim));
    codec::put_u8(
        out,
        match spec.metric {
            Metric::Cosine => METRIC_COSINE,
            Metric::Dot => METRIC_DOT,
            Metric::L2 => METRIC_L2,
        },
    );
    codec::put_u8(
        out,
        match spec.model {
            IndexModel::Vectors => MODEL_VECTORS,
            IndexModel::Hash => MODEL_HASH,
            IndexModel::MiniLm => MODEL_MINILM,
        },
    );
    if let Some(analyzer) = spec.keywords {
        codec::put_u8(
            out,
            match analyzer {
                Analyzer::Simple => KEYWORDS_SIMPLE,
                Analyzer::English => KEYWORDS_ENGLISH,
                Analyzer::Cjk => KEYWORDS_CJK,
            },
        );
    }
}

/// A spec, with its `keywords` byte when `with_keywords`.
fn get_index_spec(
    d: &mut Decoder<'_>,
    with_keywords: bool,
) -> Result<IndexSpec, codec::DecodeError> {
    let name = d.length_prefixed("index name")?;
    let name = std::str::from_utf8(name)
        .map_err(|_| codec::DecodeError::new(d.position(), "index name is not UTF-8"))?
        .to_owned();
    let prefix = d.length_prefixed("index prefix")?.to_vec();
    let dim = d.varint_u32("index dimension")?;
    let metric = match d.u8("metric")? {
        METRIC_COSINE => Metric::Cosine,
        METRIC_DOT => Metric::Dot,
        METRIC_L2 => Metric::L2,
        other => {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("metric {other}"),
            ))
        }
    };
    let model = match d.u8("model")? {
        MODEL_VECTORS => IndexModel::Vectors,
        MODEL_HASH => IndexModel::Hash,
        MODEL_MINILM => IndexModel::MiniLm,
        other => {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("model {other}"),
            ))
        }
    };
    let keywords = match with_keywords {
        false => None,
        true => match d.u8("keywords")? {
            KEYWORDS_SIMPLE => Some(Analyzer::Simple),
            KEYWORDS_ENGLISH => Some(Analyzer::English),
            KEYWORDS_CJK => Some(Analyzer::Cjk),
            other => {
                return Err(codec::DecodeError::new(
                    d.position(),
                    format!("keyword analyzer {other}"),
                ))
            }
        },
    };
    Ok(IndexSpec {
        name,
        prefix,
        dim,
        metric,
        model,
        keywords,
    })
}

/// `index_definition := version:u8 spec`, the value of [`index_key`]: version 1 for a spec
/// without keywords, 2 for one with.
pub fn encode_index_definition(spec: &IndexSpec) -> Vec<u8> {
    let mut out = Vec::new();
    let version = match spec.keywords {
        Some(_) => DEFINITION_VERSION_KEYWORDS,
        None => RECORD_VERSION,
    };
    codec::put_u8(&mut out, version);
    put_index_spec(&mut out, spec);
    out
}

/// Inverse of [`encode_index_definition`].
///
/// # Errors
/// `Corruption` for bytes that are not an index definition.
pub fn decode_index_definition(bytes: &[u8]) -> Result<IndexSpec> {
    let mut d = Decoder::new(bytes);
    let spec = match d.u8("index definition") {
        Ok(RECORD_VERSION) => get_index_spec(&mut d, false),
        Ok(DEFINITION_VERSION_KEYWORDS) => get_index_spec(&mut d, true),
        Ok(v) => Err(codec::DecodeError::new(
            0,
            format!("index definition: unknown version {v}"),
        )),
        Err(e) => Err(e),
    };
    decoded(
        "index definition",
        spec.and_then(|spec| finish(&d, "index definition", spec)),
    )
}

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

//! The fields records share: the version byte that starts a record, log ids, memberships,
//! optional bytes; and the checks that start and finish every decoding.

use std::collections::{BTreeMap, BTreeSet};

use openraft::{BasicNode, CommittedLeaderId, LogId, Membership};
use shale::inspect::codec::{self, Decoder};

use crate::error::{Error, Result};
use crate::NodeId;

/// The version byte that starts every record (an index definition with keywords has its
/// own, `DEFINITION_VERSION_KEYWORDS`).
pub const RECORD_VERSION: u8 = 1;

pub(super) fn put_log_id(out: &mut Vec<u8>, id: &LogId<NodeId>) {
    codec::put_u64(out, id.leader_id.term);
    codec::put_u64(out, id.leader_id.node_id);
    codec::put_u64(out, id.index);
}

pub(super) fn get_log_id(d: &mut Decoder<'_>) -> Result<LogId<NodeId>, codec::DecodeError> {
    let term = d.u64("log id term")?;
    let node_id = d.u64("log id node")?;
    let index = d.u64("log id index")?;
    Ok(LogId::new(CommittedLeaderId::new(term, node_id), index))
}

pub(super) fn put_opt_log_id(out: &mut Vec<u8>, id: Option<&LogId<NodeId>>) {
    match id {
        None => codec::put_u8(out, 0),
        Some(id) => {
            codec::put_u8(out, 1);
            put_log_id(out, id);
        }
    }
}

pub(super) fn get_opt_log_id(
    d: &mut Decoder<'_>,
) -> Result<Option<LogId<NodeId>>, codec::DecodeError> {
    match d.u8("log id presence")? {
        0 => Ok(None),
        1 => get_log_id(d).map(Some),
        other => Err(codec::DecodeError::new(
            d.position(),
            format!("presence byte {other}"),
        )),
    }
}

pub(super) fn put_opt_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => codec::put_u8(out, 0),
        Some(b) => {
            codec::put_u8(out, 1);
            codec::put_length_prefixed(out, b);
        }
    }
}

pub(super) fn get_opt_bytes(
    d: &mut Decoder<'_>,
    what: &str,
) -> Result<Option<Vec<u8>>, codec::DecodeError> {
    match d.u8(what)? {
        0 => Ok(None),
        1 => Ok(Some(d.length_prefixed(what)?.to_vec())),
        other => Err(codec::DecodeError::new(
            d.position(),
            format!("{what}: presence byte {other}"),
        )),
    }
}

pub(super) fn start(d: &mut Decoder<'_>, what: &str) -> Result<(), codec::DecodeError> {
    match d.u8(what)? {
        RECORD_VERSION => Ok(()),
        v => Err(codec::DecodeError::new(
            0,
            format!("{what}: unknown version {v}"),
        )),
    }
}

pub(super) fn finish<T>(d: &Decoder<'_>, what: &str, value: T) -> Result<T, codec::DecodeError> {
    if d.is_empty() {
        Ok(value)
    } else {
        Err(codec::DecodeError::new(
            d.position(),
            format!("{what}: trailing bytes"),
        ))
    }
}

pub(super) fn decoded<T>(what: &str, r: Result<T, codec::DecodeError>) -> Result<T> {
    r.map_err(|e| Error::corruption(what, format!("at offset {}: {}", e.offset, e.reason)))
}

pub(super) fn put_membership(out: &mut Vec<u8>, m: &Membership<NodeId, BasicNode>) {
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

pub(super) fn get_membership(
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

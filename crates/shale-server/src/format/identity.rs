//! The identity record of a node's data directory (docs/format.md 13.1, log store key
//! `03`): which layout it was written in, which node and which cluster it belongs to.

use shale::inspect::codec::{self, Decoder};

use super::fields::{decoded, finish, start, RECORD_VERSION};
use crate::error::Result;
use crate::NodeId;

/// The layout of a node's data directory that this build writes; raised when a change
/// leaves directories that an older build could not read. Layout 2 keeps each Raft group's
/// log under the group's prefix ([`super::LogKeys`]); layout 1 held one group's log at the
/// top of the key space, and a node moves it under group 1 when it first opens it.
pub const DATA_LAYOUT: u32 = 2;

/// Who a data directory belongs to: written when a node first opens it, checked at every
/// start, so that a node never runs on another node's or another cluster's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The layout the directory was written in ([`DATA_LAYOUT`] when written).
    pub layout: u32,
    pub node_id: NodeId,
    /// The cluster's id: drawn when the cluster is bootstrapped, learned from the leader's
    /// first append or snapshot by a node that joins. `None` until then.
    pub cluster: Option<u128>,
}

/// `identity := version:u8 layout:u32 node_id:u64 (0x00 | 0x01 cluster:u128)`
pub fn encode_identity(id: &Identity) -> Vec<u8> {
    let mut out = Vec::with_capacity(30);
    codec::put_u8(&mut out, RECORD_VERSION);
    codec::put_u32(&mut out, id.layout);
    codec::put_u64(&mut out, id.node_id);
    match id.cluster {
        None => codec::put_u8(&mut out, 0),
        Some(cluster) => {
            codec::put_u8(&mut out, 1);
            out.extend_from_slice(&cluster.to_le_bytes());
        }
    }
    out
}

/// Inverse of [`encode_identity`].
///
/// # Errors
/// `Corruption` for bytes that are not an identity record.
pub fn decode_identity(bytes: &[u8]) -> Result<Identity> {
    decoded("identity", identity_record(&mut Decoder::new(bytes)))
}

fn identity_record(d: &mut Decoder<'_>) -> Result<Identity, codec::DecodeError> {
    start(d, "identity")?;
    let layout = d.u32("identity layout")?;
    let node_id = d.u64("identity node")?;
    let cluster = match d.u8("identity cluster")? {
        0 => None,
        1 => {
            let raw = d.bytes(16, "identity cluster id")?;
            let mut id = [0u8; 16];
            id.copy_from_slice(raw);
            Some(u128::from_le_bytes(id))
        }
        other => {
            return Err(codec::DecodeError::new(
                d.position(),
                format!("identity cluster: presence byte {other}"),
            ))
        }
    };
    finish(
        d,
        "identity",
        Identity {
            layout,
            node_id,
            cluster,
        },
    )
}

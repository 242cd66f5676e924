//! The shard record of a group's state machine (docs/format.md 13.3, key `ff 72`): the
//! range of keys the group serves and its version.

use shale::inspect::codec::{self, Decoder};

use super::fields::{decoded, finish, get_opt_bytes, put_opt_bytes, start, RECORD_VERSION};
use crate::error::Result;
use crate::shard::Shard;

/// `shard := version:u8 range_version:u64 start:varbytes end:opt_bytes`
pub fn encode_shard(s: &Shard) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + s.start.len());
    codec::put_u8(&mut out, RECORD_VERSION);
    codec::put_u64(&mut out, s.version);
    codec::put_length_prefixed(&mut out, &s.start);
    put_opt_bytes(&mut out, s.end.as_deref());
    out
}

/// Inverse of [`encode_shard`]; a range that ends at or before its start is refused.
///
/// # Errors
/// `Corruption` for bytes that are not a shard record.
pub fn decode_shard(bytes: &[u8]) -> Result<Shard> {
    decoded("shard", shard_record(&mut Decoder::new(bytes)))
}

fn shard_record(d: &mut Decoder<'_>) -> Result<Shard, codec::DecodeError> {
    start(d, "shard")?;
    let version = d.u64("shard version")?;
    let first = d.length_prefixed("shard start")?.to_vec();
    let end = get_opt_bytes(d, "shard end")?;
    if end.as_ref().is_some_and(|end| *end <= first) {
        return Err(codec::DecodeError::new(
            d.position(),
            "shard: the range ends at or before its start",
        ));
    }
    finish(
        d,
        "shard",
        Shard {
            start: first,
            end,
            version,
        },
    )
}

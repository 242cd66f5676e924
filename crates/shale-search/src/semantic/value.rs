//! The two value formats of the semantic layer (docs/format.md sections 8 and 11), encode
//! and decode side by side, and the hash that ties an indexed vector to the value it came
//! from.
//!
//! ```text
//!   vector_value := 0xff version:u8 dim:u32 component:f32{dim} payload:u8*    (a user value)
//!   stored       := value_hash:u64 node:u32 dim:u32 component:f32{dim}      (the store's)
//! ```
//!
//! A **vector value** is what [`super::VectorIndex::put_vector`] writes under an indexed key: a
//! vector given by the user and an opaque payload. It starts with `0xff`, a byte that never
//! starts UTF-8 text, so a value under an index's prefix is one or the other and nothing
//! else. The **stored** value is the vector store's entry for an indexed key: the hash of
//! the value the vector came from, the graph node that holds it, and the embedding of a
//! text (`dim` 0 for a vector value, whose vector is the value itself).

use xxhash_rust::xxh3::xxh3_64;

use shale::inspect::codec::{self, Decoder};

/// The first byte of every vector value.
pub const VECTOR_VALUE_TAG: u8 = 0xff;

/// The layout of the vector value that follows the tag; a new layout takes a new number.
const VECTOR_VALUE_VERSION: u8 = 1;

/// A vector value, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorValue<'a> {
    pub vector: Vec<f32>,
    pub payload: &'a [u8],
}

/// The value [`super::VectorIndex::put_vector`] writes: `vector` and `payload` as a vector value.
/// Write it with any write path (a `WriteBatch` too) under an index's prefix.
pub fn vector_value(vector: &[f32], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + 4 * vector.len() + payload.len());
    out.push(VECTOR_VALUE_TAG);
    out.push(VECTOR_VALUE_VERSION);
    codec::put_u32(&mut out, u32::try_from(vector.len()).unwrap_or(u32::MAX));
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// `bytes` as a vector value: `None` if it is not one (it does not start with the tag),
/// `Some(Err(why))` if it starts like one but is malformed.
pub fn decode_vector_value(bytes: &[u8]) -> Option<Result<VectorValue<'_>, String>> {
    if bytes.first() != Some(&VECTOR_VALUE_TAG) {
        return None;
    }
    Some(decode_tagged(bytes))
}

fn decode_tagged(bytes: &[u8]) -> Result<VectorValue<'_>, String> {
    let (components, payload) = split_tagged(bytes)?;
    Ok(VectorValue {
        vector: codec::get_f32s(components),
        payload,
    })
}

/// The payload of a vector value, its vector left undecoded: `None` if `bytes` is not a
/// vector value, `Some(Err(why))` if it starts like one but is malformed.
pub(crate) fn vector_value_payload(bytes: &[u8]) -> Option<Result<&[u8], String>> {
    if bytes.first() != Some(&VECTOR_VALUE_TAG) {
        return None;
    }
    Some(split_tagged(bytes).map(|(_, payload)| payload))
}

/// A vector value's component bytes and its payload.
fn split_tagged(bytes: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let mut d = Decoder::new(bytes);
    let _tag = d.u8("tag").map_err(|e| e.reason)?;
    let version = d.u8("version").map_err(|e| e.reason)?;
    if version != VECTOR_VALUE_VERSION {
        return Err(format!("vector value version {version} is unknown"));
    }
    let dim = d.u32("dimension").map_err(|e| e.reason)? as usize;
    let components = d
        .bytes(dim.saturating_mul(4), "components")
        .map_err(|_| format!("a vector value of {dim} components is cut short"))?;
    Ok((components, d.remaining()))
}

/// The store's value for a key: `value_hash`, `node`, and the embedding `vector` of a text
/// (empty for a vector value).
pub fn encode_stored(value_hash: u64, node: u32, vector: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 4 * vector.len());
    codec::put_u64(&mut out, value_hash);
    codec::put_u32(&mut out, node);
    codec::put_u32(&mut out, u32::try_from(vector.len()).unwrap_or(u32::MAX));
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// `(value_hash, node, vector)` of a stored value, or `None` if it is malformed (the value
/// is then indexed again). `vector` is empty for a vector value's entry.
pub fn decode_stored(bytes: &[u8]) -> Option<(u64, u32, Vec<f32>)> {
    let mut d = Decoder::new(bytes);
    let hash = d.u64("value hash").ok()?;
    let node = d.u32("node").ok()?;
    let n = d.u32("dimension").ok()? as usize;
    if d.remaining().len() != n.checked_mul(4)? {
        return None;
    }
    Some((hash, node, codec::get_f32s(d.remaining())))
}

/// The hash that ties an indexed vector to the value it came from: xxh3-64 of the value's
/// bytes (of a text, its UTF-8).
pub fn value_hash(value: &[u8]) -> u64 {
    xxh3_64(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_values_round_trip_and_reject_bad_lengths() {
        let v = [0.5f32, -0.25, 1.0];
        let bytes = encode_stored(42, 7, &v);
        assert_eq!(decode_stored(&bytes), Some((42, 7, v.to_vec())));
        assert_eq!(decode_stored(&bytes[..bytes.len() - 1]), None);
        let empty = encode_stored(1, 2, &[]);
        assert_eq!(decode_stored(&empty), Some((1, 2, Vec::new())));
    }

    #[test]
    fn vector_values_round_trip_and_text_is_not_one() {
        let bytes = vector_value(&[1.5, -2.0], b"payload");
        let back = decode_vector_value(&bytes).unwrap().unwrap();
        assert_eq!(back.vector, [1.5, -2.0]);
        assert_eq!(back.payload, b"payload");
        assert_eq!(vector_value_payload(&bytes), Some(Ok(&b"payload"[..])));
        assert!(decode_vector_value(b"plain text").is_none());
        assert!(vector_value_payload(b"plain text").is_none());
        assert!(decode_vector_value(b"").is_none());
        let short = &bytes[..8];
        assert!(decode_vector_value(short).unwrap().is_err());
        assert!(vector_value_payload(short).unwrap().is_err());
        let mut other = bytes.clone();
        other[1] = 2;
        assert!(decode_vector_value(&other).unwrap().is_err());
        // A tag byte is never the start of UTF-8 text.
        assert!(std::str::from_utf8(&bytes).is_err());
    }
}

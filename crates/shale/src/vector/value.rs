//! The vector store's value for a key (docs/format.md, section 8) and the text hash that
//! ties a stored vector to the text it was embedded from.

use xxhash_rust::xxh3::xxh3_64;

/// The value the vector store keeps for a key: `text_hash:u64 node:u32 dim:u32
/// f32[dim]`, little-endian (docs/format.md, section 8).
pub fn encode_vector(text_hash: u64, node: u32, vector: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 4 * vector.len());
    out.extend_from_slice(&text_hash.to_le_bytes());
    out.extend_from_slice(&node.to_le_bytes());
    out.extend_from_slice(
        &u32::try_from(vector.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    for x in vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// `(text_hash, node, vector)` of a store value, or `None` if it is malformed or of
/// another dimension (then the text is simply embedded again).
pub fn decode_vector(bytes: &[u8], dim: usize) -> Option<(u64, u32, Vec<f32>)> {
    let mut d = crate::codec::Decoder::new(bytes);
    let hash = d.u64("text hash").ok()?;
    let node = d.u32("node").ok()?;
    let n = d.u32("dimension").ok()? as usize;
    if n != dim || d.remaining().len() != 4 * n {
        return None;
    }
    let vector = d
        .remaining()
        .chunks_exact(4)
        .map(|c| c.try_into().ok().map(f32::from_le_bytes))
        .collect::<Option<Vec<f32>>>()?;
    Some((hash, node, vector))
}

/// The hash that ties a stored vector to the text it was embedded from: xxh3-64.
pub fn text_hash(text: &[u8]) -> u64 {
    xxh3_64(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_reject_other_dimensions() {
        let v = [0.5f32, -0.25, 1.0];
        let bytes = encode_vector(42, 7, &v);
        assert_eq!(decode_vector(&bytes, 3), Some((42, 7, v.to_vec())));
        assert_eq!(decode_vector(&bytes, 4), None);
        assert_eq!(decode_vector(&bytes[..bytes.len() - 1], 3), None);
    }
}

//! The byte layout of a log fragment, encoded and decoded side by side.
//!
//! ```text
//! fragment := crc:u32  length:u16  type:u8  payload[length]
//! crc      := mask(crc32c(type ++ payload))
//! ```
//! A block's last bytes, when fewer than `HEADER_LEN` remain, are zero padding.

use crate::codec;

/// Size of a log block; fragments never cross a block boundary.
pub const BLOCK_SIZE: usize = 32 * 1024;
/// Size of a fragment header.
pub const HEADER_LEN: usize = 7;

/// The kind of a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordType {
    /// Reserved: zero bytes, as left by preallocation. Never written.
    Zero = 0,
    /// A whole logical record.
    Full = 1,
    /// The first fragment of a logical record.
    First = 2,
    /// A fragment strictly inside a logical record.
    Middle = 3,
    /// The last fragment of a logical record.
    Last = 4,
    /// Only as a WAL's first fragment: which WAL came before it and how long that one
    /// was when this one began ([`Predecessor`]). Not a record of its own.
    Predecessor = 5,
}

impl RecordType {
    pub fn from_u8(v: u8) -> Option<RecordType> {
        match v {
            0 => Some(RecordType::Zero),
            1 => Some(RecordType::Full),
            2 => Some(RecordType::First),
            3 => Some(RecordType::Middle),
            4 => Some(RecordType::Last),
            5 => Some(RecordType::Predecessor),
            _ => None,
        }
    }
}

/// The payload of a [`RecordType::Predecessor`] fragment: the WAL this one follows and the
/// length it had when this one was created, so that recovery can tell whether the
/// earlier WAL lost bytes that this one's records come after.
///
/// ```text
/// predecessor := wal:u64 length:u64      (little-endian)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predecessor {
    /// File number of the previous WAL.
    pub wal: u64,
    /// Its length in bytes, which is where its last record ends.
    pub length: u64,
}

impl Predecessor {
    pub const ENCODED_LEN: usize = 16;

    pub fn encode(&self) -> [u8; Self::ENCODED_LEN] {
        let mut out = [0; Self::ENCODED_LEN];
        out[..8].copy_from_slice(&self.wal.to_le_bytes());
        out[8..].copy_from_slice(&self.length.to_le_bytes());
        out
    }

    /// `None` unless `payload` is exactly one encoded predecessor.
    pub fn decode(payload: &[u8]) -> Option<Predecessor> {
        let (wal, length) = payload.split_first_chunk::<8>()?;
        let length: [u8; 8] = length.try_into().ok()?;
        Some(Predecessor {
            wal: u64::from_le_bytes(*wal),
            length: u64::from_le_bytes(length),
        })
    }
}

/// The checksum stored in a fragment header.
pub fn fragment_crc(kind: RecordType, payload: &[u8]) -> u32 {
    codec::mask_crc(codec::crc32c_extend(codec::crc32c(&[kind as u8]), payload))
}

/// Encode a fragment header.
pub fn encode_header(kind: RecordType, len: u16, crc: u32) -> [u8; HEADER_LEN] {
    let [c0, c1, c2, c3] = crc.to_le_bytes();
    let [l0, l1] = len.to_le_bytes();
    [c0, c1, c2, c3, l0, l1, kind as u8]
}

/// A fragment found in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fragment<'a> {
    pub kind: RecordType,
    pub payload: &'a [u8],
}

/// Why a fragment at some offset is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FragmentError {
    /// All-zero header: preallocated space or padding; nothing was written here.
    Zero,
    /// The header or payload is cut short by the end of the file.
    Truncated,
    /// The bytes are present but wrong.
    Bad(&'static str),
}

/// Decode the fragment that starts at `block[0]`, where `block` holds the rest of the
/// current block (and no more).
pub fn decode_fragment(block: &[u8]) -> Result<Fragment<'_>, FragmentError> {
    let Some(&[c0, c1, c2, c3, l0, l1, kind]) = block.get(..HEADER_LEN) else {
        return Err(FragmentError::Truncated);
    };
    if [c0, c1, c2, c3, l0, l1, kind] == [0; HEADER_LEN] {
        return Err(FragmentError::Zero);
    }
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    let len = usize::from(u16::from_le_bytes([l0, l1]));
    let kind = match RecordType::from_u8(kind) {
        Some(RecordType::Zero) | None => return Err(FragmentError::Bad("unknown fragment type")),
        Some(kind) => kind,
    };
    let payload = block
        .get(HEADER_LEN..HEADER_LEN + len)
        .ok_or(FragmentError::Truncated)?;
    if fragment_crc(kind, payload) != crc {
        return Err(FragmentError::Bad("fragment checksum mismatch"));
    }
    Ok(Fragment { kind, payload })
}

/// For a fragment whose payload runs past the end of the file (`block` holds the header and
/// every byte after it): whether its checksum matches a shorter payload that is present.
///
/// That tells a damaged length from a torn write. A write cut short by a crash never wrote
/// the payload its checksum covers, so no prefix of what is there matches (short of a
/// 1-in-2^32 collision per candidate length). A completed fragment whose length field was
/// damaged later (the checksum does not cover the length) still has its whole payload
/// right after the header, and its checksum matches at the true length.
pub fn checksum_matches_shorter_payload(block: &[u8]) -> bool {
    let Some((&[c0, c1, c2, c3, _, _, kind], payload)) = block.split_first_chunk::<HEADER_LEN>()
    else {
        return false;
    };
    let stored = u32::from_le_bytes([c0, c1, c2, c3]);
    let mut crc = codec::crc32c(&[kind]);
    if codec::mask_crc(crc) == stored {
        return true;
    }
    payload.iter().any(|&b| {
        crc = codec::crc32c_extend(crc, &[b]);
        codec::mask_crc(crc) == stored
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_flips() {
        let payload = b"hello log";
        let crc = fragment_crc(RecordType::Full, payload);
        let mut buf = encode_header(RecordType::Full, payload.len() as u16, crc).to_vec();
        buf.extend_from_slice(payload);
        let f = decode_fragment(&buf).unwrap();
        assert_eq!(f.kind, RecordType::Full);
        assert_eq!(f.payload, payload);
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                assert!(decode_fragment(&bad).is_err(), "flip byte {i} bit {bit}");
            }
        }
        for cut in 0..buf.len() {
            assert_eq!(decode_fragment(&buf[..cut]), Err(FragmentError::Truncated));
        }
        assert_eq!(decode_fragment(&[0u8; 32]), Err(FragmentError::Zero));
    }

    #[test]
    fn a_damaged_length_is_told_from_a_torn_payload() {
        let payload: Vec<u8> = (0..300u32).map(|i| (i * 7 % 256) as u8).collect();
        let crc = fragment_crc(RecordType::Full, &payload);
        let mut whole = encode_header(RecordType::Full, payload.len() as u16, crc).to_vec();
        whole.extend_from_slice(&payload);
        // Torn: the payload was never all written, at any cut.
        for cut in HEADER_LEN..whole.len() {
            assert!(
                !checksum_matches_shorter_payload(&whole[..cut]),
                "cut {cut}"
            );
        }
        // Damaged: the length claims more than the file holds, the payload is all there.
        let mut longer = whole.clone();
        longer[4..6].copy_from_slice(&1000u16.to_le_bytes());
        longer.extend_from_slice(b"next fragment bytes");
        assert_eq!(decode_fragment(&longer), Err(FragmentError::Truncated));
        assert!(checksum_matches_shorter_payload(&longer));
    }
}

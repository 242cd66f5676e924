//! The frames of a snapshot file, also its wire form: a header frame with the snapshot's
//! metadata, frames of key-value pairs, frames of the indexes' files, and an end frame with
//! the counts, each frame
//! `kind (1) ++ length (u32) ++ payload ++ CRC32C (u32)` (docs/format.md, "Replication").

use openraft::{BasicNode, LogId, StoredMembership};
use shale::inspect::codec::{self, Decoder};

use super::fields::{
    decoded, finish, get_membership, get_opt_log_id, put_membership, put_opt_log_id, start,
    RECORD_VERSION,
};
use crate::error::{Error, Result};
use crate::NodeId;

/// The kinds of snapshot frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// The first frame: the snapshot's metadata.
    Header = 1,
    /// Key-value pairs of the state machine, in key order.
    Pairs = 2,
    /// The last frame: counts that prove nothing was lost.
    End = 3,
    /// A piece of a file of an index's directory (its vectors and graph), so that a
    /// replica installing the snapshot embeds nothing again.
    IndexFile = 4,
}

impl FrameKind {
    fn from_u8(b: u8) -> Option<FrameKind> {
        match b {
            1 => Some(FrameKind::Header),
            2 => Some(FrameKind::Pairs),
            3 => Some(FrameKind::End),
            4 => Some(FrameKind::IndexFile),
            _ => None,
        }
    }
}

/// Bytes before a frame's payload: kind and length.
pub const FRAME_HEAD_LEN: usize = 5;
/// Bytes after a frame's payload: the checksum.
pub const FRAME_TAIL_LEN: usize = 4;
/// The largest payload a frame may declare: one pair at the engine's limits, plus room.
pub const MAX_FRAME_PAYLOAD: usize =
    shale::options::MAX_KEY_BYTES + shale::options::MAX_VALUE_BYTES + 64;
/// The payload size at which a pairs frame is closed: frames stay small so the sender and
/// the receiver hold only a few at a time.
pub const TARGET_FRAME_PAYLOAD: usize = 64 * 1024;
/// The magic that opens a header frame's payload.
pub const SNAPSHOT_MAGIC: &[u8; 8] = b"SHALESNP";

/// `frame := kind:u8 len:u32 payload[len] crc:u32`, the checksum being the masked CRC32C
/// of kind, len and payload.
pub fn encode_frame(kind: FrameKind, payload: &[u8], out: &mut Vec<u8>) -> Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|_| payload.len() <= MAX_FRAME_PAYLOAD)
        .ok_or_else(|| {
            Error::InvalidArgument(format!("snapshot frame of {} bytes", payload.len()))
        })?;
    let start = out.len();
    codec::put_u8(out, kind as u8);
    codec::put_u32(out, len);
    out.extend_from_slice(payload);
    let crc = out.get(start..).map(codec::crc32c).unwrap_or(0);
    codec::put_u32(out, codec::mask_crc(crc));
    Ok(())
}

/// The kind and payload length of a frame from its first [`FRAME_HEAD_LEN`] bytes.
///
/// # Errors
/// `Corruption` for an unknown kind or a length over [`MAX_FRAME_PAYLOAD`].
pub fn decode_frame_head(head: &[u8; FRAME_HEAD_LEN], what: &str) -> Result<(FrameKind, usize)> {
    let [kind, l0, l1, l2, l3] = *head;
    let kind = FrameKind::from_u8(kind)
        .ok_or_else(|| Error::corruption(what, format!("frame kind {kind}")))?;
    let len = u32::from_le_bytes([l0, l1, l2, l3]);
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= MAX_FRAME_PAYLOAD)
        .ok_or_else(|| Error::corruption(what, format!("frame length {len} over the limit")))?;
    Ok((kind, len))
}

/// Check a whole frame (head, payload, checksum) and return its kind and payload.
///
/// # Errors
/// `Corruption` for a short frame, trailing bytes or a checksum mismatch.
pub fn decode_frame<'a>(frame: &'a [u8], what: &str) -> Result<(FrameKind, &'a [u8])> {
    let head: &[u8; FRAME_HEAD_LEN] = frame
        .get(..FRAME_HEAD_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or_else(|| Error::corruption(what, "frame shorter than its head"))?;
    let (kind, len) = decode_frame_head(head, what)?;
    let body_end = FRAME_HEAD_LEN + len;
    if frame.len() != body_end + FRAME_TAIL_LEN {
        return Err(Error::corruption(
            what,
            format!("frame of {} bytes declares a payload of {len}", frame.len()),
        ));
    }
    let (body, tail) = frame.split_at(body_end);
    let stored = codec::get_u32(tail).ok_or_else(|| Error::corruption(what, "no checksum"))?;
    if codec::unmask_crc(stored) != codec::crc32c(body) {
        return Err(Error::corruption(what, "frame checksum mismatch"));
    }
    let payload = body
        .get(FRAME_HEAD_LEN..)
        .ok_or_else(|| Error::corruption(what, "no payload"))?;
    Ok((kind, payload))
}

/// What a header frame says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotHeader {
    pub last_log_id: Option<LogId<NodeId>>,
    pub membership: StoredMembership<NodeId, BasicNode>,
    pub snapshot_id: String,
}

/// `header := magic:8 version:u8 opt_log_id stored_membership_body snapshot_id:varbytes`
pub fn encode_snapshot_header(h: &SnapshotHeader) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(SNAPSHOT_MAGIC);
    codec::put_u8(&mut out, RECORD_VERSION);
    put_opt_log_id(&mut out, h.last_log_id.as_ref());
    put_opt_log_id(&mut out, h.membership.log_id().as_ref());
    put_membership(&mut out, h.membership.membership());
    codec::put_length_prefixed(&mut out, h.snapshot_id.as_bytes());
    out
}

/// Inverse of [`encode_snapshot_header`].
///
/// # Errors
/// `Corruption` for a payload that is not a snapshot header.
pub fn decode_snapshot_header(payload: &[u8]) -> Result<SnapshotHeader> {
    decoded(
        "snapshot header",
        snapshot_header(&mut Decoder::new(payload)),
    )
}

fn snapshot_header(d: &mut Decoder<'_>) -> Result<SnapshotHeader, codec::DecodeError> {
    if d.bytes(SNAPSHOT_MAGIC.len(), "magic")? != SNAPSHOT_MAGIC {
        return Err(codec::DecodeError::new(0, "not a Shale snapshot (magic)"));
    }
    start(d, "snapshot header")?;
    let last_log_id = get_opt_log_id(d)?;
    let membership_log_id = get_opt_log_id(d)?;
    let membership = get_membership(d)?;
    let id = d.length_prefixed("snapshot id")?;
    let snapshot_id = String::from_utf8(id.to_vec())
        .map_err(|_| codec::DecodeError::new(d.position(), "snapshot id is not UTF-8"))?;
    let header = SnapshotHeader {
        last_log_id,
        membership: StoredMembership::new(membership_log_id, membership),
        snapshot_id,
    };
    finish(d, "snapshot header", header)
}

/// Append one pair to a pairs payload: `key:varbytes value:varbytes`.
pub fn put_pair(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    codec::put_length_prefixed(out, key);
    codec::put_length_prefixed(out, value);
}

/// The pairs of a pairs payload, in order.
///
/// # Errors
/// `Corruption` for a payload that does not decode, holds no pair, or is out of order.
pub fn decode_pairs(payload: &[u8]) -> Result<Vec<(&[u8], &[u8])>> {
    let mut d = Decoder::new(payload);
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
    while !d.is_empty() {
        let key = decoded("snapshot pairs", d.length_prefixed("key"))?;
        let value = decoded("snapshot pairs", d.length_prefixed("value"))?;
        if pairs.last().is_some_and(|(prev, _)| *prev >= key) {
            return Err(Error::corruption("snapshot pairs", "keys out of order"));
        }
        pairs.push((key, value));
    }
    if pairs.is_empty() {
        return Err(Error::corruption("snapshot pairs", "an empty pairs frame"));
    }
    Ok(pairs)
}

/// `end := pairs:u64 frames:u64` (frames before this one, header included).
pub fn encode_snapshot_end(pairs: u64, frames: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    codec::put_u64(&mut out, pairs);
    codec::put_u64(&mut out, frames);
    out
}

/// Inverse of [`encode_snapshot_end`].
///
/// # Errors
/// `Corruption` for a payload that is not an end frame.
pub fn decode_snapshot_end(payload: &[u8]) -> Result<(u64, u64)> {
    decoded("snapshot end", snapshot_end(&mut Decoder::new(payload)))
}

fn snapshot_end(d: &mut Decoder<'_>) -> Result<(u64, u64), codec::DecodeError> {
    let pairs = d.u64("pair count")?;
    let frames = d.u64("frame count")?;
    finish(d, "snapshot end", (pairs, frames))
}

/// The longest file name an index file frame may carry.
pub const MAX_INDEX_FILE_NAME: usize = 255;

/// One piece of a file of an index's directory: `bytes` at `offset` of `index`'s `file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexFileChunk<'a> {
    pub index: &'a str,
    pub file: &'a str,
    pub offset: u64,
    pub bytes: &'a [u8],
}

/// `index_file := index:varbytes file:varbytes offset:u64 bytes:rest`
pub fn encode_index_file_chunk(chunk: &IndexFileChunk<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunk.bytes.len() + chunk.file.len() + 32);
    codec::put_length_prefixed(&mut out, chunk.index.as_bytes());
    codec::put_length_prefixed(&mut out, chunk.file.as_bytes());
    codec::put_u64(&mut out, chunk.offset);
    out.extend_from_slice(chunk.bytes);
    out
}

/// Inverse of [`encode_index_file_chunk`]. The names are checked, since the installing
/// replica makes a path of them: the index's as an index name (`[A-Za-z0-9_-]`, at most
/// `shale_search::semantic::MAX_INDEX_NAME` bytes), the file's as one plain file name.
///
/// # Errors
/// `Corruption` for a payload that does not decode or a name that is not allowed.
pub fn decode_index_file_chunk(payload: &[u8]) -> Result<IndexFileChunk<'_>> {
    decoded(
        "snapshot index file",
        index_file_chunk(&mut Decoder::new(payload)),
    )
}

fn index_file_chunk<'a>(d: &mut Decoder<'a>) -> Result<IndexFileChunk<'a>, codec::DecodeError> {
    let utf8 = |d: &Decoder<'_>, bytes: &'a [u8], what: &str| {
        std::str::from_utf8(bytes)
            .map_err(|_| codec::DecodeError::new(d.position(), format!("{what} is not UTF-8")))
    };
    let index = d.length_prefixed("index name")?;
    let index = utf8(d, index, "index name")?;
    let index_ok = !index.is_empty()
        && index.len() <= shale_search::semantic::MAX_INDEX_NAME
        && index
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !index_ok {
        return Err(codec::DecodeError::new(
            d.position(),
            format!("{index:?} is not an index name"),
        ));
    }
    let file = d.length_prefixed("file name")?;
    let file = utf8(d, file, "file name")?;
    let file_ok = !file.is_empty()
        && file.len() <= MAX_INDEX_FILE_NAME
        && file != "."
        && file != ".."
        && !file.contains(['/', '\\', '\0']);
    if !file_ok {
        return Err(codec::DecodeError::new(
            d.position(),
            format!("{file:?} is not a plain file name"),
        ));
    }
    let offset = d.u64("offset")?;
    let bytes = d.remaining();
    Ok(IndexFileChunk {
        index,
        file,
        offset,
        bytes,
    })
}

//! The fixed pieces of the SSTable format, encode and decode side by side: block handles,
//! the 5-byte block trailer, and the 64-byte footer. The properties record lives in
//! `properties.rs`, the bloom filter encoding in `filter.rs`, the block entry format in
//! `block/`.
//!
//! ```text
//! file         = data_block* filter_block? range_del_block? properties_block index_block
//!                footer
//! *_block      = bytes[size] trailer              (a BlockHandle names offset and size)
//! trailer      = compression_type:u8 masked_crc32c:u32     (5 bytes)
//! footer       = filter:handle64 properties:handle64 index:handle64
//!                format_version:u32 masked_crc32c:u32 magic:u64  (64 bytes)
//! handle64     = offset:u64 size:u64              (fixed width, in the footer)
//! handle       = offset:varint size:varint        (in index block values)
//! ```
//!
//! A table with range tombstones is format version 2: its range-del block (below) is named
//! by the properties record, and it may hold no data block at all. Every other table is
//! version 1, as before range deletes existed.
//!
//! ```text
//! range_del_block = count:varint (start:varbytes end:varbytes seq:varint){count}
//! ```
//!
//! The tombstones are fragments (`range_del.rs`): in key order, newest first within one
//! range, `start < end`. The block is never compressed.
//!
//! All integers are little-endian. The trailer's CRC covers the block bytes *and* the type
//! byte, so a flipped type byte cannot make a reader decompress raw bytes. The footer's CRC
//! covers its first 52 bytes; the magic is checked first so that "not an SSTable at all" and
//! "a damaged SSTable" give different messages.
//!
//! Thread safety: plain values and pure functions. Invariant: `size` in a handle never
//! includes the trailer.

use crate::codec::{self, DecodeError, Decoder};
use crate::key::SeqNo;
use crate::range_del::RangeTombstone;

/// Bytes after every block: compression type and masked CRC32C.
pub const BLOCK_TRAILER_LEN: usize = 5;
/// Fixed length of the footer at the end of every SSTable.
pub const FOOTER_LEN: usize = 64;
/// The format version of a table without range tombstones. Never reuse a retired number.
pub const FORMAT_VERSION: u32 = 1;
/// The format version of a table with a range-del block.
pub const FORMAT_VERSION_RANGE_DELS: u32 = 2;
/// "SHALESST" read as a big-endian u64; stored little-endian like every other integer.
pub const TABLE_MAGIC: u64 = 0x5348_414c_4553_5354;

/// How a block's bytes are stored. The numbers are on disk: never renumber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CompressionType {
    None = 0,
    Lz4 = 1,
    Zstd = 2,
    Snappy = 3,
}

impl CompressionType {
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Lz4),
            2 => Some(CompressionType::Zstd),
            3 => Some(CompressionType::Snappy),
            _ => None,
        }
    }
}

/// Where a block lives in its file. `size` excludes the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    pub offset: u64,
    pub size: u64,
}

impl BlockHandle {
    /// Longest varint encoding: two 10-byte varints.
    pub const MAX_VARINT_LEN: usize = 2 * codec::MAX_VARINT_LEN;
    /// Width of the fixed encoding used in the footer.
    pub const FIXED_LEN: usize = 16;

    pub fn new(offset: u64, size: u64) -> Self {
        BlockHandle { offset, size }
    }

    /// Offset one past the block's trailer, or `None` on overflow (only corrupt handles).
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }

    /// Append the varint form (used as index block values).
    pub fn encode_varint(&self, dst: &mut Vec<u8>) {
        codec::put_varint(dst, self.offset);
        codec::put_varint(dst, self.size);
    }

    /// Decode a varint handle that must span all of `src`.
    pub fn decode_varint(src: &[u8]) -> Result<Self, DecodeError> {
        let mut d = Decoder::new(src);
        let offset = d.varint("block handle offset")?;
        let size = d.varint("block handle size")?;
        if !d.is_empty() {
            return Err(DecodeError::new(
                d.position(),
                "trailing bytes after block handle",
            ));
        }
        Ok(BlockHandle { offset, size })
    }

    /// Append the fixed 16-byte form (used in the footer).
    pub fn encode_fixed(&self, dst: &mut Vec<u8>) {
        codec::put_u64(dst, self.offset);
        codec::put_u64(dst, self.size);
    }

    fn decode_fixed(d: &mut Decoder<'_>, what: &str) -> Result<Self, DecodeError> {
        Ok(BlockHandle {
            offset: d.u64(what)?,
            size: d.u64(what)?,
        })
    }
}

/// The trailer for `block` stored as `ty`.
pub fn encode_trailer(block: &[u8], ty: CompressionType) -> [u8; BLOCK_TRAILER_LEN] {
    let type_byte = ty as u8;
    let crc = codec::mask_crc(codec::crc32c_extend(codec::crc32c(block), &[type_byte]));
    let c = crc.to_le_bytes();
    [type_byte, c[0], c[1], c[2], c[3]]
}

/// Check `trailer` against `block` and return how the block is stored.
/// Error offsets are relative to the start of the trailer.
pub fn decode_trailer(block: &[u8], trailer: &[u8]) -> Result<CompressionType, DecodeError> {
    // The block's CRC first: it reads the block front to back, so the trailer right after
    // it is in the CPU's cache when it is read. Read first, the trailer of a block that no
    // cache holds is a memory miss of its own, before the CRC's.
    let block_crc = codec::crc32c(block);
    let mut d = Decoder::new(trailer);
    let type_byte = d.u8("block trailer")?;
    let stored = d.u32("block trailer")?;
    let actual = codec::mask_crc(codec::crc32c_extend(block_crc, &[type_byte]));
    if stored != actual {
        return Err(DecodeError::new(
            0,
            format!("block checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    // Checked after the CRC: an unknown type under a good CRC is a newer writer, not rot.
    CompressionType::from_u8(type_byte)
        .ok_or_else(|| DecodeError::new(0, format!("unknown block compression type {type_byte}")))
}

/// The range-del block holding `tombstones` (fragments, in the order described above).
pub fn encode_range_dels(tombstones: &[RangeTombstone]) -> Vec<u8> {
    let mut out = Vec::new();
    codec::put_varint(&mut out, tombstones.len() as u64);
    for t in tombstones {
        codec::put_length_prefixed(&mut out, &t.start);
        codec::put_length_prefixed(&mut out, &t.end);
        codec::put_varint(&mut out, t.seq.0);
    }
    out
}

/// Decode a whole range-del block. Error offsets are relative to `src`.
pub fn decode_range_dels(src: &[u8]) -> Result<Vec<RangeTombstone>, DecodeError> {
    let mut d = Decoder::new(src);
    let count = d.varint("range tombstone count")?;
    let mut out = Vec::new();
    for _ in 0..count {
        let at = d.position();
        let start = d.length_prefixed("range start")?.to_vec();
        let end = d.length_prefixed("range end")?.to_vec();
        let seq = SeqNo(d.varint("range sequence")?);
        if start >= end || seq > SeqNo::MAX {
            return Err(DecodeError::new(
                at,
                "empty range tombstone or sequence out of range",
            ));
        }
        out.push(RangeTombstone { start, end, seq });
    }
    if !d.is_empty() {
        return Err(DecodeError::new(
            d.position(),
            "trailing bytes after range tombstones",
        ));
    }
    Ok(out)
}

/// The footer: where the metadata blocks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The bloom filter block; `None` when the table was written without a filter
    /// (stored as offset 0, size 0; a real filter block is never empty).
    pub filter: Option<BlockHandle>,
    pub properties: BlockHandle,
    pub index: BlockHandle,
    /// [`FORMAT_VERSION`] or [`FORMAT_VERSION_RANGE_DELS`].
    pub version: u32,
}

impl Footer {
    /// The 64 footer bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.filter.unwrap_or_default().encode_fixed(&mut out);
        self.properties.encode_fixed(&mut out);
        self.index.encode_fixed(&mut out);
        codec::put_u32(&mut out, self.version);
        let crc = codec::mask_crc(codec::crc32c(&out));
        codec::put_u32(&mut out, crc);
        codec::put_u64(&mut out, TABLE_MAGIC);
        debug_assert_eq!(out.len(), FOOTER_LEN);
        out
    }

    /// Decode exactly [`FOOTER_LEN`] bytes. Error offsets are relative to the footer start.
    pub fn decode(src: &[u8]) -> Result<Footer, DecodeError> {
        if src.len() != FOOTER_LEN {
            return Err(DecodeError::new(
                0,
                format!("footer is {} bytes, expected {FOOTER_LEN}", src.len()),
            ));
        }
        let covered = src.get(..52).unwrap_or_default();
        let mut d = Decoder::new(src);
        let filter = BlockHandle::decode_fixed(&mut d, "filter handle")?;
        let properties = BlockHandle::decode_fixed(&mut d, "properties handle")?;
        let index = BlockHandle::decode_fixed(&mut d, "index handle")?;
        let version = d.u32("format version")?;
        let stored_crc = d.u32("footer checksum")?;
        let magic = d.u64("magic")?;
        if magic != TABLE_MAGIC {
            return Err(DecodeError::new(
                56,
                format!("bad magic {magic:#018x}: not a Shale SSTable"),
            ));
        }
        let actual_crc = codec::mask_crc(codec::crc32c(covered));
        if stored_crc != actual_crc {
            return Err(DecodeError::new(
                52,
                format!("footer checksum mismatch: stored {stored_crc:#010x}, computed {actual_crc:#010x}"),
            ));
        }
        if version != FORMAT_VERSION && version != FORMAT_VERSION_RANGE_DELS {
            return Err(DecodeError::new(
                48,
                format!("unsupported SSTable format version {version}"),
            ));
        }
        let filter = (filter.size != 0).then_some(filter);
        Ok(Footer {
            filter,
            properties,
            index,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_varint_round_trip_and_rejects_trailing_bytes() {
        for h in [
            BlockHandle::new(0, 0),
            BlockHandle::new(1, 4096),
            BlockHandle::new(u64::MAX, u64::MAX),
        ] {
            let mut buf = Vec::new();
            h.encode_varint(&mut buf);
            assert!(buf.len() <= BlockHandle::MAX_VARINT_LEN);
            assert_eq!(BlockHandle::decode_varint(&buf).unwrap(), h);
            buf.push(0);
            assert!(BlockHandle::decode_varint(&buf).is_err());
            buf.truncate(buf.len() - 2);
            assert!(BlockHandle::decode_varint(&buf).is_err());
        }
        assert_eq!(BlockHandle::new(u64::MAX, 0).end_with_trailer(), None);
    }

    #[test]
    fn trailer_round_trip_and_detects_flips() {
        let block = b"some block bytes";
        for ty in [
            CompressionType::None,
            CompressionType::Lz4,
            CompressionType::Zstd,
            CompressionType::Snappy,
        ] {
            let t = encode_trailer(block, ty);
            assert_eq!(decode_trailer(block, &t).unwrap(), ty);
            for i in 0..t.len() {
                let mut bad = t;
                bad[i] ^= 0x01;
                assert!(decode_trailer(block, &bad).is_err(), "flip at {i}");
            }
            let mut bad_block = block.to_vec();
            bad_block[3] ^= 0x80;
            assert!(decode_trailer(&bad_block, &t).is_err());
        }
        assert!(decode_trailer(block, &[0, 1, 2]).is_err());
    }

    #[test]
    fn footer_round_trip_and_flipped_bytes() {
        let f = Footer {
            filter: Some(BlockHandle::new(1000, 200)),
            properties: BlockHandle::new(1205, 90),
            index: BlockHandle::new(1300, 64),
            version: FORMAT_VERSION,
        };
        let bytes = f.encode();
        assert_eq!(bytes.len(), FOOTER_LEN);
        assert_eq!(Footer::decode(&bytes).unwrap(), f);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(Footer::decode(&bad).is_err(), "flip at {i}");
        }
        let no_filter = Footer { filter: None, ..f };
        assert_eq!(Footer::decode(&no_filter.encode()).unwrap(), no_filter);
        assert!(Footer::decode(&bytes[1..]).is_err());
    }

    #[test]
    fn footer_worked_example() {
        // The layout, byte by byte, with made-up handles (the real worked example of
        // docs/format.md is checked by tests/engine/format_examples/).
        let f = Footer {
            filter: None,
            properties: BlockHandle::new(0x10, 0x20),
            index: BlockHandle::new(0x35, 0x08),
            version: FORMAT_VERSION,
        };
        let b = f.encode();
        assert_eq!(&b[0..16], &[0u8; 16]);
        assert_eq!(&b[16..24], &0x10u64.to_le_bytes());
        assert_eq!(&b[24..32], &0x20u64.to_le_bytes());
        assert_eq!(&b[32..40], &0x35u64.to_le_bytes());
        assert_eq!(&b[40..48], &0x08u64.to_le_bytes());
        assert_eq!(&b[48..52], &[1, 0, 0, 0]);
        assert_eq!(&b[56..64], b"TSSELAHS");
    }
}

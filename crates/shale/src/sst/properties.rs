//! The properties block: what a table holds, read once at open and kept in memory.
//!
//! ```text
//! offset width  field
//!  0      8     entries            u64  number of entries (puts and deletes)
//!  8      8     deletions          u64  entries of kind Delete
//! 16      8     data_blocks        u64
//! 24      8     data_bytes         u64  bytes of data blocks on disk, trailers included
//! 32      8     raw_key_bytes      u64  sum of internal key lengths before compression
//! 40      8     raw_value_bytes    u64
//! 48      8     smallest_seq       u64
//! 56      8     largest_seq        u64
//! 64      1     compression        u8   0 none, 1 lz4, 2 zstd, 3 snappy (the option used)
//! 65      4     compression_level  i32  zstd level, 0 otherwise
//! 69      4     filter_bits_per_key u32 0 when the table has no filter
//! 73      var   smallest           varint length ++ internal key
//! ..      var   largest            varint length ++ internal key
//! ..      16    range_dels         handle64  (format version 2 only) the range-del block
//! ..      8     range_deletions    u64       (format version 2 only) tombstones in it
//! ```
//!
//! The record must be consumed exactly: trailing bytes are corruption (a later version bumps
//! the footer's format version instead of appending silently). The reader checks that the
//! two range-del fields are present exactly when the footer says version 2. It is stored as a block with
//! a trailer, never compressed. Thread safety: plain values.

use crate::codec::{self, DecodeError, Decoder};
use crate::key::{InternalKey, SeqNo};
use crate::options::Compression;
use crate::sst::format::BlockHandle;

/// Facts about one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProperties {
    pub entries: u64,
    pub deletions: u64,
    pub data_blocks: u64,
    pub data_bytes: u64,
    pub raw_key_bytes: u64,
    pub raw_value_bytes: u64,
    pub smallest_seq: SeqNo,
    pub largest_seq: SeqNo,
    pub compression: Compression,
    pub filter_bits_per_key: u32,
    pub smallest: InternalKey,
    pub largest: InternalKey,
    /// The range-del block and its number of tombstones, in a version 2 table.
    pub range_dels: Option<(BlockHandle, u64)>,
}

impl TableProperties {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(96 + self.smallest.encoded().len() * 2);
        for v in [
            self.entries,
            self.deletions,
            self.data_blocks,
            self.data_bytes,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.smallest_seq.0,
            self.largest_seq.0,
        ] {
            codec::put_u64(&mut out, v);
        }
        let (ty, level) = match self.compression {
            Compression::None => (0, 0),
            Compression::Lz4 => (1, 0),
            Compression::Zstd(level) => (2, level),
            Compression::Snappy => (3, 0),
        };
        codec::put_u8(&mut out, ty);
        codec::put_u32(&mut out, level.cast_unsigned());
        codec::put_u32(&mut out, self.filter_bits_per_key);
        codec::put_length_prefixed(&mut out, self.smallest.encoded());
        codec::put_length_prefixed(&mut out, self.largest.encoded());
        if let Some((handle, count)) = self.range_dels {
            handle.encode_fixed(&mut out);
            codec::put_u64(&mut out, count);
        }
        out
    }

    /// Decode a whole properties record. Error offsets are relative to `src`.
    pub fn decode(src: &[u8]) -> Result<Self, DecodeError> {
        let mut d = Decoder::new(src);
        let entries = d.u64("entries")?;
        let deletions = d.u64("deletions")?;
        let data_blocks = d.u64("data_blocks")?;
        let data_bytes = d.u64("data_bytes")?;
        let raw_key_bytes = d.u64("raw_key_bytes")?;
        let raw_value_bytes = d.u64("raw_value_bytes")?;
        let smallest_seq = SeqNo(d.u64("smallest_seq")?);
        let largest_seq = SeqNo(d.u64("largest_seq")?);
        let ty_at = d.position();
        let ty = d.u8("compression")?;
        let level = d.u32("compression level")?.cast_signed();
        let compression = match ty {
            0 => Compression::None,
            1 => Compression::Lz4,
            2 => Compression::Zstd(level),
            3 => Compression::Snappy,
            _ => return Err(DecodeError::new(ty_at, format!("unknown compression {ty}"))),
        };
        let filter_bits_per_key = d.u32("filter_bits_per_key")?;
        let mut key = |what: &str| {
            let at = d.position();
            let bytes = d.length_prefixed(what)?;
            InternalKey::from_encoded(bytes.to_vec())
                .ok_or_else(|| DecodeError::new(at, format!("{what} is not an internal key")))
        };
        let smallest = key("smallest key")?;
        let largest = key("largest key")?;
        let range_dels = if d.is_empty() {
            None
        } else {
            let handle = BlockHandle::new(d.u64("range-del offset")?, d.u64("range-del size")?);
            Some((handle, d.u64("range deletions")?))
        };
        if !d.is_empty() {
            return Err(DecodeError::new(
                d.position(),
                "trailing bytes after properties",
            ));
        }
        if smallest > largest || smallest_seq > largest_seq || deletions > entries {
            return Err(DecodeError::new(0, "properties contradict themselves"));
        }
        Ok(TableProperties {
            entries,
            deletions,
            data_blocks,
            data_bytes,
            raw_key_bytes,
            raw_value_bytes,
            smallest_seq,
            largest_seq,
            compression,
            filter_bits_per_key,
            smallest,
            largest,
            range_dels,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::ValueKind;

    fn sample(compression: Compression) -> TableProperties {
        TableProperties {
            entries: 10,
            deletions: 2,
            data_blocks: 3,
            data_bytes: 4000,
            raw_key_bytes: 200,
            raw_value_bytes: 3000,
            smallest_seq: SeqNo(5),
            largest_seq: SeqNo(99),
            compression,
            filter_bits_per_key: 10,
            smallest: InternalKey::new(b"apple", SeqNo(7), ValueKind::Put),
            largest: InternalKey::new(b"pear", SeqNo(5), ValueKind::Delete),
            range_dels: None,
        }
    }

    #[test]
    fn round_trip_every_compression() {
        for c in [
            Compression::None,
            Compression::Lz4,
            Compression::Zstd(-5),
            Compression::Zstd(19),
            Compression::Snappy,
        ] {
            let p = sample(c);
            let bytes = p.encode();
            assert_eq!(TableProperties::decode(&bytes).unwrap(), p);
        }
    }

    #[test]
    fn layout_and_bad_input() {
        let bytes = sample(Compression::Zstd(3)).encode();
        assert_eq!(&bytes[0..8], &10u64.to_le_bytes());
        assert_eq!(bytes[64], 2);
        assert_eq!(&bytes[65..69], &3u32.to_le_bytes());
        assert_eq!(&bytes[69..73], &10u32.to_le_bytes());
        assert_eq!(bytes[73], 13, "length of the smallest key: 5 + 8");
        for n in 0..bytes.len() {
            assert!(
                TableProperties::decode(&bytes[..n]).is_err(),
                "truncated to {n}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(TableProperties::decode(&long).is_err());
        let mut bad = bytes;
        bad[64] = 9;
        assert!(TableProperties::decode(&bad).is_err());
    }
}

//! A keyspace as the manifest records it (`KeyspaceDef`, edit tag 7, docs/format.md
//! section 5): its id, name and the options its tables are built with.

use crate::codec::{self, DecodeError, Decoder};
use crate::keyspace::{check_name, KeyspaceId};
use crate::options::{Compression, KeyspaceOptions};

/// A keyspace as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyspaceDef {
    pub id: KeyspaceId,
    pub name: String,
    pub options: KeyspaceOptions,
}

const CODEC_NONE: u8 = 0;
const CODEC_LZ4: u8 = 1;
const CODEC_ZSTD: u8 = 2;
const CODEC_SNAPPY: u8 = 3;

impl KeyspaceDef {
    /// ```text
    /// keyspace := id:varint name:varbytes write_buffer_size:varint block_size:varint
    ///             filter_bits_per_key:varint codec:u8 zstd_level:u32
    /// ```
    /// `codec` is 0 none, 1 LZ4, 2 zstd, 3 Snappy; `zstd_level` (two's complement) is 0
    /// unless zstd.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        codec::put_varint(dst, u64::from(self.id.0));
        codec::put_length_prefixed(dst, self.name.as_bytes());
        let o = &self.options;
        codec::put_varint(dst, o.write_buffer_size as u64);
        codec::put_varint(dst, o.block_size as u64);
        codec::put_varint(dst, u64::from(o.filter_bits_per_key));
        let (tag, level) = match o.compression {
            Compression::None => (CODEC_NONE, 0),
            Compression::Lz4 => (CODEC_LZ4, 0),
            Compression::Zstd(level) => (CODEC_ZSTD, level),
            Compression::Snappy => (CODEC_SNAPPY, 0),
        };
        codec::put_u8(dst, tag);
        codec::put_u32(dst, level as u32);
    }

    pub fn decode(d: &mut Decoder<'_>) -> Result<KeyspaceDef, DecodeError> {
        let at = d.position();
        let id = KeyspaceId(d.varint_u32("keyspace id")?);
        let name = std::str::from_utf8(d.length_prefixed("keyspace name")?)
            .map_err(|_| DecodeError::new(at, "keyspace name is not UTF-8"))?
            .to_owned();
        if id.is_default() || check_name(&name).is_err() {
            return Err(DecodeError::new(
                at,
                format!("keyspace {} has an invalid id or name", id.0),
            ));
        }
        let write_buffer_size = d.varint_usize("keyspace write buffer size")?;
        let block_size = d.varint_usize("keyspace block size")?;
        let filter_bits_per_key = d.varint_u32("keyspace filter bits")?;
        let codec_at = d.position();
        let tag = d.u8("keyspace codec")?;
        let level = d.u32("keyspace zstd level")? as i32;
        let compression = match tag {
            CODEC_NONE => Compression::None,
            CODEC_LZ4 => Compression::Lz4,
            CODEC_ZSTD => Compression::Zstd(level),
            CODEC_SNAPPY => Compression::Snappy,
            other => return Err(DecodeError::new(codec_at, format!("unknown codec {other}"))),
        };
        Ok(KeyspaceDef {
            id,
            name,
            options: KeyspaceOptions {
                write_buffer_size,
                block_size,
                filter_bits_per_key,
                compression,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> KeyspaceDef {
        KeyspaceDef {
            id: KeyspaceId(3),
            name: "raft-log".into(),
            options: KeyspaceOptions {
                write_buffer_size: 1 << 20,
                block_size: 16 << 10,
                filter_bits_per_key: 0,
                compression: Compression::Zstd(3),
            },
        }
    }

    #[test]
    fn a_definition_round_trips() {
        let mut buf = Vec::new();
        sample().encode(&mut buf);
        let mut d = Decoder::new(&buf);
        assert_eq!(KeyspaceDef::decode(&mut d).unwrap(), sample());
        assert!(d.is_empty());
    }

    #[test]
    fn every_truncation_and_a_bad_codec_are_errors() {
        let mut buf = Vec::new();
        sample().encode(&mut buf);
        for len in 0..buf.len() {
            assert!(KeyspaceDef::decode(&mut Decoder::new(&buf[..len])).is_err());
        }
        let codec_at = buf.len() - 5;
        buf[codec_at] = 9;
        let e = KeyspaceDef::decode(&mut Decoder::new(&buf)).unwrap_err();
        assert!(e.reason.contains("codec"), "{e:?}");
    }
}

//! Keyspaces: named key spaces of one database, each its own tree (memtable, SSTables,
//! levels) with its own options, sharing the WAL, the sequence numbers, the block cache
//! and the background threads (RocksDB's column families, fjall's partitions).
//!
//! This module holds what the formats need: the id that WAL entries and manifest
//! records carry, a keyspace's persisted definition and its encoding (manifest tag 7,
//! docs/format.md). The trees themselves live in `db/`.

use crate::codec::{self, DecodeError, Decoder};
use crate::options::{Compression, Options};

/// A keyspace's number: assigned once, never reused after a drop (so a WAL entry of a
/// dropped keyspace can never land in a later one). The default keyspace is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct KeyspaceId(pub u32);

impl KeyspaceId {
    /// The keyspace every database has, holding what `Db::put` and `Db::get` reach.
    pub const DEFAULT: KeyspaceId = KeyspaceId(0);

    pub fn is_default(self) -> bool {
        self == KeyspaceId::DEFAULT
    }
}

/// The name of the default keyspace.
pub const DEFAULT_NAME: &str = "default";

/// Longest keyspace name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// The options a keyspace keeps for its own tree. They are stored in the manifest with
/// the keyspace, so a reopened database builds its tables as before; the other
/// [`Options`] (cache, threads, level sizes, triggers) are the database's.
///
/// The default keyspace takes these from the database's `Options`; `compression_per_level`
/// and `bottommost_compression` apply to it alone, and a named keyspace uses its one
/// codec at every level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyspaceOptions {
    /// Size at which its memtable is frozen (as `Options::write_buffer_size`).
    pub write_buffer_size: usize,
    /// Uncompressed size of a data block (as `Options::block_size`).
    pub block_size: usize,
    /// Bloom filter bits per key, 0 for none (as `Options::filter_bits_per_key`).
    pub filter_bits_per_key: u32,
    /// Block codec at every level.
    pub compression: Compression,
}

impl KeyspaceOptions {
    /// The database's settings of these options.
    pub fn from_db(opts: &Options) -> KeyspaceOptions {
        KeyspaceOptions {
            write_buffer_size: opts.write_buffer_size,
            block_size: opts.block_size,
            filter_bits_per_key: opts.filter_bits_per_key,
            compression: opts.compression,
        }
    }

    /// `db` with these options in place of its own: what the keyspace's flushes and
    /// compactions build tables with.
    pub fn apply_to(&self, db: &Options) -> Options {
        let mut opts = db.clone();
        opts.write_buffer_size = self.write_buffer_size;
        opts.block_size = self.block_size;
        opts.filter_bits_per_key = self.filter_bits_per_key;
        opts.compression = self.compression;
        opts.compression_per_level = Vec::new();
        opts.bottommost_compression = None;
        opts
    }

    /// Every problem with these options, as `Options::validate` words them.
    pub fn validate(&self, db: &Options) -> Result<(), Vec<String>> {
        self.apply_to(db).validate()
    }
}

/// A keyspace as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyspaceDef {
    pub id: KeyspaceId,
    pub name: String,
    pub options: KeyspaceOptions,
}

/// Check a name a user gave: 1 to 255 bytes of UTF-8, not the default's.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a keyspace name has 1 to {MAX_NAME_BYTES} bytes, not {}",
            name.len()
        ));
    }
    if name == DEFAULT_NAME {
        return Err(format!("\"{DEFAULT_NAME}\" is the default keyspace's name"));
    }
    Ok(())
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

    #[test]
    fn names_are_checked() {
        assert!(check_name("users").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(DEFAULT_NAME).is_err());
        assert!(check_name(&"x".repeat(MAX_NAME_BYTES + 1)).is_err());
    }
}

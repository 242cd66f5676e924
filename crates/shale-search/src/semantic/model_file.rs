//! The model file: which embedder made the vectors of a vector store, and the rest of the
//! index's definition (prefix, metric, graph parameters), kept in `MODEL` in the store's
//! directory (format: docs/format.md section 10).
//!
//! Open reuses a stored vector when the hash of its text still matches, so the store must
//! also say which model made it: two models of one dimension give vectors of the same shape
//! in different spaces, and an index that mixed them would rank by noise. Open compares
//! the embedder's [`Embedder::model_id`] and dimension with this file. On any difference,
//! or when the file is missing or damaged, every stored vector is deleted, durably, and the
//! graph checkpoint removed, before the file is replaced; so at every point a crash can
//! stop, the vectors in the store all come from the model the file names (or the file
//! names none and the next open starts over). The prefix and the graph parameters are
//! what [`super::VectorIndex::open_existing`] opens the index with again; a change of them alone
//! reuses every vector.
//!
//! ```text
//! model_file := magic:u64 version:u32 dim:u32 model_id:varbytes prefix:varbytes
//!               [keyspace:varbytes]
//!               metric:u8 m:u32 m_max:u32 m_max0:u32 ef_construction:u32 ef_search:u32
//!               ml:f64 seed:u64 masked_crc32c(preceding):u32
//! ```
//!
//! `keyspace` (version 3) names the keyspace the index covers; an index of the default
//! keyspace writes version 2, without it.
//!
//! [`Embedder::model_id`]: super::Embedder::model_id

use std::path::Path;

use crate::vector::{HnswParams, Metric};
use shale::error::Result;
use shale::fs::{self, FileSystem};
use shale::inspect::codec::{self, DecodeError, Decoder};

/// "SHALEMOD" read as a big-endian u64; on disk (little-endian) the bytes are `DOMELAHS`.
pub const MODEL_MAGIC: u64 = 0x5348_414c_454d_4f44;

/// Version 2 is the layout above without `keyspace`; version 3 has it; version 1
/// (dimension and model id only) is retired, and a file of it is treated as missing. A new
/// layout takes a new number; numbers are never reused.
pub const MODEL_FORMAT_VERSION: u32 = 2;

/// The version of a model file that names a keyspace.
pub const MODEL_FORMAT_VERSION_KEYSPACE: u32 = 3;

/// The longest [`Embedder::model_id`](super::Embedder::model_id), in bytes.
pub const MAX_MODEL_ID_BYTES: usize = 4096;

/// The longest prefix an index definition records, in bytes (the engine's key limit).
const MAX_PREFIX_BYTES: usize = shale::options::MAX_KEY_BYTES;

/// The model id of an index without embedder: its vectors are the user's.
pub const USER_VECTORS: &str = "user vectors";

pub(super) const MODEL_FILE: &str = "MODEL";
const MODEL_TEMP: &str = "MODEL.tmp";

/// What an index is: the model its vectors come from and what it covers and builds.
/// Written at every open whose options differ from the file; read back by
/// [`super::VectorIndex::definition`].
#[derive(Debug, Clone, PartialEq)]
pub struct VectorIndexDefinition {
    /// The dimension of the vectors.
    pub dim: usize,
    /// The embedder's [`Embedder::model_id`](super::Embedder::model_id), or `user vectors`
    /// for an index without embedder.
    pub model_id: String,
    /// The keys the index covers.
    pub prefix: Vec<u8>,
    /// The keyspace they are in; `None`: the default keyspace.
    pub keyspace: Option<String>,
    /// The graph's parameters and the metric.
    pub hnsw: HnswParams,
}

impl VectorIndexDefinition {
    /// True if the vectors of an index defined by `other` can be reused by this one: the
    /// same model and dimension, whatever the prefix and graph.
    pub fn same_model(&self, other: &VectorIndexDefinition) -> bool {
        self.dim == other.dim && self.model_id == other.model_id
    }

    /// The file's bytes.
    ///
    /// # Errors
    /// `InvalidArgument` if a number does not fit its field (the options' limits keep them
    /// within).
    pub fn encode(&self) -> Result<Vec<u8>> {
        let field = |v: usize, what: &str| {
            u32::try_from(v).map_err(|_| {
                shale::Error::invalid(format!("{what} = {v} does not fit the model file"))
            })
        };
        let p = &self.hnsw;
        let mut out = Vec::with_capacity(80 + self.model_id.len() + self.prefix.len());
        codec::put_u64(&mut out, MODEL_MAGIC);
        let version = match self.keyspace {
            Some(_) => MODEL_FORMAT_VERSION_KEYSPACE,
            None => MODEL_FORMAT_VERSION,
        };
        codec::put_u32(&mut out, version);
        codec::put_u32(&mut out, field(self.dim, "dim")?);
        codec::put_length_prefixed(&mut out, self.model_id.as_bytes());
        codec::put_length_prefixed(&mut out, &self.prefix);
        if let Some(keyspace) = &self.keyspace {
            codec::put_length_prefixed(&mut out, keyspace.as_bytes());
        }
        codec::put_u8(&mut out, p.metric.tag());
        codec::put_u32(&mut out, field(p.m, "m")?);
        codec::put_u32(&mut out, field(p.m_max, "m_max")?);
        codec::put_u32(&mut out, field(p.m_max0, "m_max0")?);
        codec::put_u32(&mut out, field(p.ef_construction, "ef_construction")?);
        codec::put_u32(&mut out, field(p.ef_search, "ef_search")?);
        codec::put_u64(&mut out, p.ml.to_bits());
        codec::put_u64(&mut out, p.seed);
        let crc = codec::mask_crc(codec::crc32c(&out));
        codec::put_u32(&mut out, crc);
        Ok(out)
    }

    /// Parse a whole file.
    ///
    /// # Errors
    /// A [`DecodeError`] at the offset of the first field that is wrong: the magic, the
    /// version, a length past the end or over its limit, an unknown metric, the checksum,
    /// an id that is not UTF-8, or bytes after the checksum. The graph parameters' ranges
    /// are the open's to check ([`HnswParams::validate`]).
    pub fn decode(bytes: &[u8]) -> std::result::Result<VectorIndexDefinition, DecodeError> {
        let mut d = Decoder::new(bytes);
        if d.u64("magic")? != MODEL_MAGIC {
            return Err(DecodeError::new(0, "not a model file (bad magic)"));
        }
        let version = d.u32("version")?;
        if version != MODEL_FORMAT_VERSION && version != MODEL_FORMAT_VERSION_KEYSPACE {
            return Err(DecodeError::new(8, format!("unknown version {version}")));
        }
        let dim = to_usize(d.u32("dim")?);
        let id_at = d.position();
        let id = bounded(&mut d, 1, MAX_MODEL_ID_BYTES, "model id")?;
        let prefix = bounded(&mut d, 0, MAX_PREFIX_BYTES, "prefix")?.to_vec();
        let keyspace_at = d.position();
        let keyspace = match version {
            MODEL_FORMAT_VERSION_KEYSPACE => {
                let name = bounded(
                    &mut d,
                    1,
                    shale::inspect::keyspace::MAX_NAME_BYTES,
                    "keyspace",
                )?;
                Some(
                    String::from_utf8(name.to_vec())
                        .map_err(|_| DecodeError::new(keyspace_at, "keyspace is not UTF-8"))?,
                )
            }
            _ => None,
        };
        let at = d.position();
        let tag = d.u8("metric")?;
        let metric = Metric::from_tag(tag)
            .ok_or_else(|| DecodeError::new(at, format!("unknown metric {tag}")))?;
        let hnsw = HnswParams {
            m: to_usize(d.u32("m")?),
            m_max: to_usize(d.u32("m_max")?),
            m_max0: to_usize(d.u32("m_max0")?),
            ef_construction: to_usize(d.u32("ef_construction")?),
            ef_search: to_usize(d.u32("ef_search")?),
            ml: f64::from_bits(d.u64("ml")?),
            seed: d.u64("seed")?,
            metric,
        };
        let covered = d.position();
        let stored = d.u32("checksum")?;
        let actual = codec::mask_crc(codec::crc32c(bytes.get(..covered).unwrap_or_default()));
        if stored != actual {
            return Err(DecodeError::new(covered, "checksum mismatch"));
        }
        if !d.is_empty() {
            return Err(DecodeError::new(d.position(), "bytes after the checksum"));
        }
        let model_id = String::from_utf8(id.to_vec())
            .map_err(|_| DecodeError::new(id_at, "model id is not UTF-8"))?;
        Ok(VectorIndexDefinition {
            dim,
            model_id,
            prefix,
            keyspace,
            hnsw,
        })
    }
}

fn to_usize(v: u32) -> usize {
    // Lossless on every platform Shale builds for (usize is at least 32 bits).
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// A length-prefixed field of `min..=max` bytes, its length checked before it is read.
fn bounded<'a>(
    d: &mut Decoder<'a>,
    min: usize,
    max: usize,
    what: &str,
) -> std::result::Result<&'a [u8], DecodeError> {
    let len = d.varint(&format!("{what} length"))?;
    let at = d.position();
    let n = usize::try_from(len)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| DecodeError::new(at, format!("{what} of {len} bytes")))?;
    d.bytes(n, what)
}

/// The definition in `dir`; `None` when there is no file or it does not decode (either
/// way the store's vectors cannot be trusted to come from any particular model).
///
/// # Errors
/// `Io` if the file is there but cannot be read: not a reason to discard the store.
pub(super) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<VectorIndexDefinition>> {
    let path = dir.join(MODEL_FILE);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = fs.read_all(&path)?;
    Ok(VectorIndexDefinition::decode(&bytes).ok())
}

/// Replace the definition in `dir` (atomically: a crash leaves the old file or the new
/// one).
///
/// # Errors
/// `Io` from any step; the old file is then still in place.
pub(super) fn write(
    fs: &dyn FileSystem,
    dir: &Path,
    definition: &VectorIndexDefinition,
) -> Result<()> {
    let bytes = definition.encode()?;
    fs::replace_file(fs, dir, MODEL_FILE, MODEL_TEMP, |file| file.append(&bytes))
}

/// True if `name` is one of this module's files.
pub(super) fn owns(name: &str) -> bool {
    name == MODEL_FILE || name == MODEL_TEMP
}

/// Delete the definition of `dir`, if any, durably (the store's vectors are then never reused).
///
/// # Errors
/// `Io` from the delete or the directory sync.
pub(super) fn remove(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs::remove_durably(fs, dir, MODEL_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VectorIndexDefinition {
        VectorIndexDefinition {
            dim: 2,
            model_id: "toy-v1".into(),
            prefix: b"docs/".to_vec(),
            keyspace: None,
            hnsw: HnswParams::with_m(4),
        }
    }

    #[test]
    fn a_keyspace_is_written_as_version_3_and_none_as_version_2() {
        let v2 = sample().encode().unwrap();
        assert_eq!(v2[8..12], MODEL_FORMAT_VERSION.to_le_bytes());
        let in_keyspace = VectorIndexDefinition {
            keyspace: Some("notes".into()),
            ..sample()
        };
        let v3 = in_keyspace.encode().unwrap();
        assert_eq!(v3[8..12], MODEL_FORMAT_VERSION_KEYSPACE.to_le_bytes());
        assert_eq!(v3.len(), v2.len() + 6);
        assert_eq!(VectorIndexDefinition::decode(&v3), Ok(in_keyspace));
        for i in 0..v3.len() {
            let mut bad = v3.clone();
            bad[i] ^= 0x10;
            assert!(VectorIndexDefinition::decode(&bad).is_err(), "byte {i}");
        }
    }

    #[test]
    fn round_trip() {
        let bytes = sample().encode().unwrap();
        assert_eq!(VectorIndexDefinition::decode(&bytes), Ok(sample()));
        let everything = VectorIndexDefinition {
            prefix: Vec::new(),
            hnsw: HnswParams {
                metric: Metric::L2,
                ..HnswParams::with_m(32)
            },
            ..sample()
        };
        let bytes = everything.encode().unwrap();
        assert_eq!(VectorIndexDefinition::decode(&bytes), Ok(everything));
    }

    #[test]
    fn every_damaged_byte_and_every_cut_is_refused() {
        let bytes = sample().encode().unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(VectorIndexDefinition::decode(&bad).is_err(), "byte {i}");
            assert!(
                VectorIndexDefinition::decode(&bytes[..i]).is_err(),
                "cut at {i}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(
            VectorIndexDefinition::decode(&long).is_err(),
            "trailing byte"
        );
    }

    #[test]
    fn an_empty_id_is_refused() {
        let empty = VectorIndexDefinition {
            model_id: String::new(),
            ..sample()
        };
        assert!(VectorIndexDefinition::decode(&empty.encode().unwrap()).is_err());
    }

    #[test]
    fn an_overlong_id_is_refused_before_it_is_read() {
        let mut bytes = Vec::new();
        codec::put_u64(&mut bytes, MODEL_MAGIC);
        codec::put_u32(&mut bytes, MODEL_FORMAT_VERSION);
        codec::put_u32(&mut bytes, 2);
        codec::put_varint(&mut bytes, u64::MAX);
        let err = VectorIndexDefinition::decode(&bytes).unwrap_err();
        assert!(err.reason.contains("model id of"), "{err:?}");
    }

    #[test]
    fn a_version_1_file_is_refused() {
        let mut bytes = sample().encode().unwrap();
        bytes[8] = 1;
        let err = VectorIndexDefinition::decode(&bytes).unwrap_err();
        assert!(err.reason.contains("unknown version 1"), "{err:?}");
    }
}

//! The model file: which embedder made the vectors of a vector store, kept in `MODEL` in the
//! store's directory (format: docs/format.md section 10).
//!
//! Open reuses a stored vector when the hash of its text still matches, so the store must
//! also say which model made it: two models of one dimension give vectors of the same shape
//! in different spaces, and an index that mixed them would rank by noise. Open compares
//! the embedder's [`Embedder::model_id`] and dimension with this file. On any difference,
//! or when the file is missing or damaged, every stored vector is deleted, durably, and the
//! graph checkpoint removed, before the file is replaced; so at every point a crash can
//! stop, the vectors in the store all come from the model the file names (or the file
//! names none and the next open starts over).
//!
//! ```text
//! model_file := magic:u64 version:u32 dim:u32 model_id:varbytes masked_crc32c(preceding):u32
//! ```
//!
//! [`Embedder::model_id`]: super::Embedder::model_id

use std::path::Path;

use crate::codec::{self, DecodeError, Decoder};
use crate::error::Result;
use crate::fs::{self, FileSystem};

/// "SHALEMOD" read as a big-endian u64; on disk (little-endian) the bytes are `DOMELAHS`.
pub const MODEL_MAGIC: u64 = 0x5348_414c_454d_4f44;

/// Version 1 is the layout above. A new layout takes a new number; numbers are never reused.
pub const MODEL_FORMAT_VERSION: u32 = 1;

/// The longest [`Embedder::model_id`](super::Embedder::model_id), in bytes.
pub const MAX_MODEL_ID_BYTES: usize = 4096;

const MODEL_FILE: &str = "MODEL";
const MODEL_TEMP: &str = "MODEL.tmp";

/// The model a vector store's vectors come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRecord {
    pub dim: u32,
    pub model_id: String,
}

impl ModelRecord {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.model_id.len());
        codec::put_u64(&mut out, MODEL_MAGIC);
        codec::put_u32(&mut out, MODEL_FORMAT_VERSION);
        codec::put_u32(&mut out, self.dim);
        codec::put_length_prefixed(&mut out, self.model_id.as_bytes());
        let crc = codec::mask_crc(codec::crc32c(&out));
        codec::put_u32(&mut out, crc);
        out
    }

    /// Parse a whole file.
    ///
    /// # Errors
    /// A [`DecodeError`] at the offset of the first field that is wrong: the magic, the
    /// version, a length past the end, the checksum, an id that is not UTF-8 or too long,
    /// or bytes after the checksum.
    pub fn decode(bytes: &[u8]) -> std::result::Result<ModelRecord, DecodeError> {
        let mut d = Decoder::new(bytes);
        if d.u64("magic")? != MODEL_MAGIC {
            return Err(DecodeError::new(0, "not a model file (bad magic)"));
        }
        let version = d.u32("version")?;
        if version != MODEL_FORMAT_VERSION {
            return Err(DecodeError::new(8, format!("unknown version {version}")));
        }
        let dim = d.u32("dim")?;
        let len = d.varint("model id length")?;
        let at = d.position();
        let id = usize::try_from(len)
            .ok()
            .filter(|&n| (1..=MAX_MODEL_ID_BYTES).contains(&n))
            .ok_or_else(|| DecodeError::new(at, format!("model id of {len} bytes")))?;
        let id = d.bytes(id, "model id")?;
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
            .map_err(|_| DecodeError::new(at, "model id is not UTF-8"))?;
        Ok(ModelRecord { dim, model_id })
    }
}

/// The record in `dir`; `None` when there is no file or it does not decode (either way
/// the store's vectors cannot be trusted to come from any particular model).
///
/// # Errors
/// `Io` if the file is there but cannot be read: not a reason to discard the store.
pub(super) fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<ModelRecord>> {
    let path = dir.join(MODEL_FILE);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = fs.read_all(&path)?;
    Ok(ModelRecord::decode(&bytes).ok())
}

/// Replace the record in `dir` (atomically: a crash leaves the old file or the new one).
///
/// # Errors
/// `Io` from any step; the old file is then still in place.
pub(super) fn write(fs: &dyn FileSystem, dir: &Path, record: &ModelRecord) -> Result<()> {
    let bytes = record.encode();
    fs::replace_file(fs, dir, MODEL_FILE, MODEL_TEMP, |file| file.append(&bytes))
}

/// True if `name` is one of this module's files.
pub(super) fn owns(name: &str) -> bool {
    name == MODEL_FILE || name == MODEL_TEMP
}

/// Delete the record of `dir`, if any, durably (the store's vectors are then never reused).
///
/// # Errors
/// `Io` from the delete or the directory sync.
pub(super) fn remove(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs::remove_durably(fs, dir, MODEL_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ModelRecord {
        ModelRecord {
            dim: 2,
            model_id: "toy-v1".into(),
        }
    }

    #[test]
    fn round_trip() {
        let bytes = sample().encode();
        assert_eq!(ModelRecord::decode(&bytes), Ok(sample()));
    }

    #[test]
    fn every_damaged_byte_and_every_cut_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(ModelRecord::decode(&bad).is_err(), "byte {i}");
            assert!(ModelRecord::decode(&bytes[..i]).is_err(), "cut at {i}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(ModelRecord::decode(&long).is_err(), "trailing byte");
    }

    #[test]
    fn an_empty_id_is_refused() {
        let empty = ModelRecord {
            dim: 2,
            model_id: String::new(),
        };
        assert!(ModelRecord::decode(&empty.encode()).is_err());
    }

    #[test]
    fn an_overlong_id_is_refused_before_it_is_read() {
        let mut bytes = Vec::new();
        codec::put_u64(&mut bytes, MODEL_MAGIC);
        codec::put_u32(&mut bytes, MODEL_FORMAT_VERSION);
        codec::put_u32(&mut bytes, 2);
        codec::put_varint(&mut bytes, u64::MAX);
        let err = ModelRecord::decode(&bytes).unwrap_err();
        assert!(err.reason.contains("model id of"), "{err:?}");
    }
}

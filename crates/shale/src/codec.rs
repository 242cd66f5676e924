//! The only place that packs bytes: little-endian fixed-width integers, LEB128 varints,
//! length-prefixed slices and the CRC32C checksum.
//!
//! Encoders append to a `Vec<u8>`. Decoding goes through [`Decoder`], a cursor that checks
//! every length against the bytes that are really there and returns [`DecodeError`] (with the
//! offset where decoding stopped) instead of panicking. Callers that know which file the bytes
//! came from turn a `DecodeError` into [`Error::Corruption`] with [`DecodeError::in_file`].

use std::path::Path;

use crate::error::Error;

/// Bytes that do not decode. `offset` is relative to the start of the decoded buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Offset inside the buffer where the problem was found.
    pub offset: usize,
    /// What was wrong.
    pub reason: String,
}

impl DecodeError {
    pub fn new(offset: usize, reason: impl Into<String>) -> Self {
        DecodeError {
            offset,
            reason: reason.into(),
        }
    }

    /// Attach the file and the file offset at which the decoded buffer started.
    pub fn in_file(self, file: &Path, buffer_offset: u64) -> Error {
        let offset = buffer_offset.saturating_add(self.offset as u64);
        Error::corruption(file, offset, self.reason)
    }
}

/// Maximum encoded length of a u64 varint.
pub const MAX_VARINT_LEN: usize = 10;

pub fn put_u8(dst: &mut Vec<u8>, v: u8) {
    dst.push(v);
}

pub fn put_u16(dst: &mut Vec<u8>, v: u16) {
    dst.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

pub fn put_u64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Append `v` as an unsigned LEB128 varint (7 bits a byte, low bits first).
pub fn put_varint(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Length in bytes of `v` encoded as a varint.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Append `bytes` prefixed with its length as a varint.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Read a little-endian u32 from the first four bytes of `src`, if there are four.
pub fn get_u32(src: &[u8]) -> Option<u32> {
    let bytes: [u8; 4] = src.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// The little-endian f32s of `src`, four bytes each (a last partial one is left out), in
/// one allocation of the exact size.
pub fn get_f32s(src: &[u8]) -> Vec<f32> {
    let mut out = Vec::with_capacity(src.len() / 4);
    out.extend(src.chunks_exact(4).filter_map(get_u32).map(f32::from_bits));
    out
}

/// Read a little-endian u64 from the first eight bytes of `src`, if there are eight.
pub fn get_u64(src: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = src.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// CRC32C (Castagnoli) of `data`, hardware-accelerated where the CPU has it.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC32C of the concatenation of `first` and `rest`, without copying.
pub fn crc32c_extend(crc: u32, rest: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, rest)
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// Checksums stored next to the data they cover are masked (rotated and offset, as LevelDB
/// does) so that the CRC of a string that itself contains embedded CRCs stays well distributed.
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// A bounds-checked reading cursor over a byte slice.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Offset of the next byte to be read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn err(&self, reason: impl Into<String>) -> DecodeError {
        DecodeError::new(self.pos, reason)
    }

    /// Take the next `n` bytes.
    pub fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| {
                self.err(format!(
                    "{what}: need {n} bytes, {} left",
                    self.buf.len().saturating_sub(self.pos)
                ))
            })?;
        let out = self.buf.get(self.pos..end).ok_or_else(|| self.err(what))?;
        self.pos = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        let b = self.bytes(N, what)?;
        b.try_into().map_err(|_| self.err(what))
    }

    pub fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// An unsigned LEB128 varint of at most 10 bytes that fits in a u64.
    pub fn varint(&mut self, what: &str) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut result: u64 = 0;
        for i in 0..MAX_VARINT_LEN {
            let Some(&byte) = self.buf.get(self.pos) else {
                self.pos = start;
                return Err(self.err(format!("{what}: truncated varint")));
            };
            self.pos += 1;
            let low = u64::from(byte & 0x7f);
            if i == MAX_VARINT_LEN - 1 && byte > 1 {
                self.pos = start;
                return Err(self.err(format!("{what}: varint overflows u64")));
            }
            result |= low << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(result);
            }
        }
        self.pos = start;
        Err(self.err(format!("{what}: varint longer than 10 bytes")))
    }

    /// A varint that must fit in a u32.
    pub fn varint_u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        let start = self.pos;
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| DecodeError::new(start, format!("{what}: {v} exceeds u32")))
    }

    /// A varint used as an in-memory length.
    pub fn varint_usize(&mut self, what: &str) -> Result<usize, DecodeError> {
        let start = self.pos;
        let v = self.varint(what)?;
        usize::try_from(v)
            .map_err(|_| DecodeError::new(start, format!("{what}: {v} exceeds usize")))
    }

    /// A varint length followed by that many bytes.
    pub fn length_prefixed(&mut self, what: &str) -> Result<&'a [u8], DecodeError> {
        let n = self.varint_usize(what)?;
        self.bytes(n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_and_lengths() {
        let values = [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ];
        let mut buf = Vec::new();
        for &v in &values {
            let before = buf.len();
            put_varint(&mut buf, v);
            assert_eq!(buf.len() - before, varint_len(v));
        }
        let mut d = Decoder::new(&buf);
        for &v in &values {
            assert_eq!(d.varint("v").unwrap(), v);
        }
        assert!(d.is_empty());
    }

    #[test]
    fn varint_rejects_truncation_and_overflow() {
        let mut d = Decoder::new(&[0x80, 0x80]);
        assert!(d.varint("v").is_err());
        assert_eq!(d.position(), 0, "a failed read does not move the cursor");
        let eleven = [0xffu8; 11];
        assert!(Decoder::new(&eleven).varint("v").is_err());
        let mut too_big = vec![0xffu8; 9];
        too_big.push(0x02);
        assert!(Decoder::new(&too_big).varint("v").is_err());
    }

    #[test]
    fn fixed_ints_are_little_endian() {
        let mut buf = Vec::new();
        put_u16(&mut buf, 0x0102);
        put_u32(&mut buf, 0x0304_0506);
        put_u64(&mut buf, 0x0708_090a_0b0c_0d0e);
        assert_eq!(
            buf,
            [2, 1, 6, 5, 4, 3, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 9, 8, 7]
        );
        let mut d = Decoder::new(&buf);
        assert_eq!(d.u16("a").unwrap(), 0x0102);
        assert_eq!(d.u32("b").unwrap(), 0x0304_0506);
        assert_eq!(d.u64("c").unwrap(), 0x0708_090a_0b0c_0d0e);
        assert!(d.u8("d").is_err());
    }

    #[test]
    fn length_prefixed_checks_bounds() {
        let mut buf = Vec::new();
        put_length_prefixed(&mut buf, b"hello");
        assert_eq!(Decoder::new(&buf).length_prefixed("s").unwrap(), b"hello");
        buf.pop();
        assert!(Decoder::new(&buf).length_prefixed("s").is_err());
    }

    #[test]
    fn crc_mask_round_trip() {
        // The CRC32C check value from RFC 3720 ("123456789").
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        let c = crc32c(b"shale");
        assert_ne!(mask_crc(c), c);
        assert_eq!(unmask_crc(mask_crc(c)), c);
        assert_eq!(crc32c_extend(crc32c(b"sha"), b"le"), c);
    }
}

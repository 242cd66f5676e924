//! Block compression and decompression.
//!
//! Stored forms (the type byte is in the block trailer, see `format.rs`):
//!
//! ```text
//! none   = raw bytes
//! lz4    = raw_len:varint lz4_block(raw)        (LZ4 block format, no frame; the `lz4` crate)
//! zstd   = raw_len:varint zstd_frame(raw)       (zstd::bulk)
//! snappy = snappy_raw(raw)                      (snap::raw; carries its own length)
//! ```
//!
//! A block is stored compressed only if that saves more than `floor(len / 8)` bytes: below that the
//! CPU spent decompressing on every read costs more than the disk saved.
//!
//! Decompression runs only on bytes whose CRC matched, but must still never panic and never
//! allocate more than [`MAX_RAW_BLOCK_BYTES`], because a CRC can collide and a newer or buggy
//! writer can lie. Thread safety: pure functions.

use crate::codec::{self, Decoder};
use crate::options::{Compression, MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::sst::block::take_buffer;
use crate::sst::format::CompressionType;

/// The largest uncompressed block a reader accepts: one maximal entry (a block holds at least
/// one) plus the largest configurable block size.
pub const MAX_RAW_BLOCK_BYTES: usize = MAX_VALUE_BYTES + MAX_KEY_BYTES + (8 << 20);

/// LZ4 cannot expand more than ~255x; a claimed length beyond that is a lie.
const LZ4_MAX_RATIO: usize = 255;

/// Compress `raw` per `compression` into `out` (cleared first). Returns the type actually
/// used; on [`CompressionType::None`] `out` is left empty and the caller stores `raw`.
pub fn compress(compression: Compression, raw: &[u8], out: &mut Vec<u8>) -> CompressionType {
    out.clear();
    let ty = match compression {
        Compression::None => return CompressionType::None,
        Compression::Lz4 => {
            codec::put_varint(out, raw.len() as u64);
            let header = out.len();
            let written = lz4::block::compress_bound(raw.len()).and_then(|bound| {
                out.resize(header + bound, 0);
                let body = out.get_mut(header..).unwrap_or_default();
                lz4::block::compress_to_buffer(raw, None, false, body)
            });
            match written {
                Ok(n) => out.truncate(header + n),
                // Too large for LZ4 (over 2 GB): store the block raw.
                Err(_) => {
                    out.clear();
                    return CompressionType::None;
                }
            }
            CompressionType::Lz4
        }
        Compression::Zstd(level) => {
            codec::put_varint(out, raw.len() as u64);
            match zstd::bulk::compress(raw, level) {
                Ok(c) => out.extend_from_slice(&c),
                // A compressor failure only costs compression: store the block raw.
                Err(_) => {
                    out.clear();
                    return CompressionType::None;
                }
            }
            CompressionType::Zstd
        }
        Compression::Snappy => match snap::raw::Encoder::new().compress_vec(raw) {
            Ok(c) => {
                *out = c;
                CompressionType::Snappy
            }
            Err(_) => return CompressionType::None,
        },
    };
    if out.len() >= raw.len() - raw.len() / 8 {
        out.clear();
        return CompressionType::None;
    }
    ty
}

/// Undo [`compress`]. The error is a reason for a corruption report.
pub fn decompress(ty: CompressionType, stored: &[u8]) -> Result<Vec<u8>, String> {
    match ty {
        CompressionType::None => Ok(stored.to_vec()),
        CompressionType::Lz4 => {
            let (raw_len, body) = length_prefix(stored)?;
            if raw_len > body.len().saturating_mul(LZ4_MAX_RATIO).saturating_add(16) {
                return Err(format!(
                    "lz4 block claims {raw_len} bytes from {} compressed bytes",
                    body.len()
                ));
            }
            let mut out = take_buffer(raw_len);
            let room = out
                .spare_capacity_mut()
                .get_mut(..raw_len)
                .ok_or("lz4 output buffer too small")?;
            let n = lz4_decompress(body, room)
                .ok_or("lz4 decompression failed: input invalid or too long")?;
            // SAFETY: `lz4_decompress` initialised the first `n` bytes of the spare capacity.
            unsafe { out.set_len(n) };
            check_len(out, raw_len, "lz4")
        }
        CompressionType::Zstd => {
            let (raw_len, body) = length_prefix(stored)?;
            let out = zstd::bulk::decompress(body, raw_len)
                .map_err(|e| format!("zstd decompression failed: {e}"))?;
            check_len(out, raw_len, "zstd")
        }
        CompressionType::Snappy => {
            let raw_len = snap::raw::decompress_len(stored)
                .map_err(|e| format!("snappy header unreadable: {e}"))?;
            check_cap(raw_len)?;
            let mut out = take_buffer(raw_len);
            out.resize(raw_len, 0);
            let n = snap::raw::Decoder::new()
                .decompress(stored, &mut out)
                .map_err(|e| format!("snappy decompression failed: {e}"))?;
            out.truncate(n);
            check_len(out, raw_len, "snappy")
        }
    }
}

/// Decompress the LZ4 block `src` into `dst`, returning how many bytes it wrote (the
/// first `n` of `dst`, now initialised), or `None` if `src` is not a valid block whose
/// output fits.
///
/// The reference decoder (the C library), called directly rather than through
/// `lz4::block::decompress_to_buffer`, so that the output buffer need not be zero-filled
/// first: that memset was 4% of a random get. `LZ4_decompress_safe` never writes past
/// `dst`'s end, and reads `dst` only where it has already written (a match's source must
/// lie within the output so far, or the block is rejected).
fn lz4_decompress(src: &[u8], dst: &mut [std::mem::MaybeUninit<u8>]) -> Option<usize> {
    let src_len = i32::try_from(src.len()).ok()?;
    let dst_len = i32::try_from(dst.len()).ok()?;
    // SAFETY: both pointers are valid for the lengths passed, which fit an `i32`; the C
    // decoder stays within them (see above) and keeps no pointer after returning.
    let n = unsafe {
        lz4::liblz4::LZ4_decompress_safe(
            src.as_ptr().cast(),
            dst.as_mut_ptr().cast(),
            src_len,
            dst_len,
        )
    };
    usize::try_from(n).ok()
}

fn length_prefix(stored: &[u8]) -> Result<(usize, &[u8]), String> {
    let mut d = Decoder::new(stored);
    let raw_len = d
        .varint_usize("uncompressed length")
        .map_err(|e| e.reason)?;
    check_cap(raw_len)?;
    Ok((raw_len, d.remaining()))
}

fn check_cap(raw_len: usize) -> Result<(), String> {
    if raw_len > MAX_RAW_BLOCK_BYTES {
        return Err(format!(
            "uncompressed block length {raw_len} exceeds the limit {MAX_RAW_BLOCK_BYTES}"
        ));
    }
    Ok(())
}

fn check_len(out: Vec<u8>, raw_len: usize, what: &str) -> Result<Vec<u8>, String> {
    if out.len() != raw_len {
        return Err(format!(
            "{what} block decompressed to {} bytes, expected {raw_len}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 4] = [
        Compression::None,
        Compression::Lz4,
        Compression::Zstd(3),
        Compression::Snappy,
    ];

    #[test]
    fn round_trip_compressible_and_incompressible() {
        let compressible: Vec<u8> = b"abcabcabc-shale-".repeat(200);
        let mut x = 0x1234_5678_9abc_def0u64;
        let random: Vec<u8> = (0..3000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut out = Vec::new();
        for c in ALL {
            let ty = compress(c, &compressible, &mut out);
            if c != Compression::None {
                assert_ne!(ty, CompressionType::None, "{c:?}");
                assert!(out.len() < compressible.len());
            }
            let stored = if ty == CompressionType::None {
                &compressible[..]
            } else {
                &out[..]
            };
            assert_eq!(decompress(ty, stored).unwrap(), compressible);
            assert_eq!(compress(c, &random, &mut out), CompressionType::None);
            assert!(out.is_empty());
        }
    }

    #[test]
    fn garbage_never_panics() {
        let raw: Vec<u8> = b"0123456789".repeat(100);
        let mut out = Vec::new();
        for c in ALL {
            let ty = compress(c, &raw, &mut out);
            for i in 0..out.len() {
                for bit in [0x01u8, 0x80] {
                    let mut bad = out.clone();
                    bad[i] ^= bit;
                    if let Ok(v) = decompress(ty, &bad) {
                        assert!(v.len() <= MAX_RAW_BLOCK_BYTES);
                    }
                }
            }
            for n in 0..out.len() {
                let _ = decompress(ty, &out[..n]);
            }
        }
        let mut huge = Vec::new();
        codec::put_varint(&mut huge, u64::MAX);
        assert!(decompress(CompressionType::Lz4, &huge).is_err());
        assert!(decompress(CompressionType::Zstd, &huge).is_err());
        assert!(decompress(CompressionType::Snappy, &[0xff; 12]).is_err());
    }
}

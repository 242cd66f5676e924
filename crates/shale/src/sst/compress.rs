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
//! writer can lie. Nor may a short block claiming a long output cost that output's memory: a
//! claimed length is checked against the most the codec can expand the bytes given (LZ4, Snappy)
//! or against the frame's own content size (zstd) before any buffer is allocated. (A zstd frame
//! that records no content size, which Shale never writes, gets a buffer of the claimed length
//! reserved, within `MAX_RAW_BLOCK_BYTES`; its pages are touched only as output fills them.)
//!
//! Thread safety: free functions callable from any thread. zstd keeps one compression and one
//! decompression context per thread that uses it (about 90 KiB each at level 3 for 4 KiB
//! blocks, more at high levels and for large blocks; reusing them made zstd random gets 1.28x
//! faster, see bench-results/LOG.md, "zstd contexts kept per thread"); a thread that never touches a zstd block
//! allocates neither.

use std::cell::RefCell;

use crate::codec::{self, Decoder};
use crate::options::{Compression, MAX_KEY_BYTES, MAX_VALUE_BYTES};
use crate::sst::block::take_buffer;
use crate::sst::format::CompressionType;

/// The largest uncompressed block a reader accepts: one maximal entry (a block holds at least
/// one) plus the largest configurable block size.
pub const MAX_RAW_BLOCK_BYTES: usize = MAX_VALUE_BYTES + MAX_KEY_BYTES + (8 << 20);

/// LZ4 cannot expand more than ~255x; a claimed length beyond that is a lie.
const LZ4_MAX_RATIO: usize = 255;

/// Snappy's densest element is a 3-byte copy of 64 bytes, so no Snappy stream expands more
/// than 21.3x (64/3); a claimed length beyond 22x is a lie.
const SNAPPY_MAX_RATIO: usize = 22;

thread_local! {
    /// This thread's zstd contexts, made on first use (see the module comment).
    static ZSTD: RefCell<ZstdContexts> = const { RefCell::new(ZstdContexts { compress: None, decompress: None }) };
}

struct ZstdContexts {
    /// With the level it was last set to.
    compress: Option<(zstd::bulk::Compressor<'static>, i32)>,
    decompress: Option<zstd::bulk::Decompressor<'static>>,
}

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
            let header = out.len();
            out.resize(header + zstd::zstd_safe::compress_bound(raw.len()), 0);
            let body = out.get_mut(header..).unwrap_or_default();
            match zstd_compress(raw, level, body) {
                Some(n) => out.truncate(header + n),
                // A compressor failure only costs compression: store the block raw.
                None => {
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
            // Every frame this engine writes records its content size; one that records
            // another is corrupt, and one that records none is accepted for any length.
            match zstd::zstd_safe::get_frame_content_size(body) {
                Ok(None) => {}
                Ok(Some(n)) if n == raw_len as u64 => {}
                Ok(Some(n)) => {
                    return Err(format!(
                        "zstd block claims {raw_len} bytes, its frame holds {n}"
                    ))
                }
                Err(_) => return Err("zstd frame header unreadable".into()),
            }
            let mut out = take_buffer(raw_len);
            zstd_decompress(body, &mut out)?;
            check_len(out, raw_len, "zstd")
        }
        CompressionType::Snappy => {
            let raw_len = snap::raw::decompress_len(stored)
                .map_err(|e| format!("snappy header unreadable: {e}"))?;
            check_cap(raw_len)?;
            if raw_len > stored.len().saturating_mul(SNAPPY_MAX_RATIO) {
                return Err(format!(
                    "snappy block claims {raw_len} bytes from {} compressed bytes",
                    stored.len()
                ));
            }
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

/// Compress `raw` at `level` into `dst`; the bytes written, or `None` if zstd failed (a
/// level it rejects, or `dst` too small). Uses this thread's context, or a fresh one while
/// that is unavailable (in use further up this thread's stack, or gone at thread exit).
fn zstd_compress(raw: &[u8], level: i32, dst: &mut [u8]) -> Option<usize> {
    let once = |cctx: &mut zstd::bulk::Compressor<'static>, dst: &mut [u8]| {
        cctx.compress_to_buffer(raw, dst).ok()
    };
    let cached = ZSTD
        .try_with(|cell| {
            let mut contexts = cell.try_borrow_mut().ok()?;
            let slot = &mut contexts.compress;
            let (cctx, at) = match slot {
                Some(c) => c,
                None => slot.insert((zstd::bulk::Compressor::new(level).ok()?, level)),
            };
            let ok = *at == level || cctx.set_compression_level(level).is_ok();
            *at = level;
            let written = if ok { once(cctx, dst) } else { None };
            if written.is_none() {
                // A context's state after a failure is not worth reasoning about: drop it.
                *slot = None;
            }
            Some(written)
        })
        .ok()
        .flatten();
    match cached {
        Some(written) => written,
        None => once(&mut zstd::bulk::Compressor::new(level).ok()?, dst),
    }
}

/// Decompress the zstd frame `src` into `out`, which must be empty: zstd writes from its
/// start up to its capacity (no zero fill) and sets its length. Output that would exceed
/// the capacity is an error. Uses this thread's context, or a fresh one while that is
/// unavailable.
fn zstd_decompress(src: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    debug_assert!(out.is_empty());
    let failed = |e: std::io::Error| format!("zstd decompression failed: {e}");
    let once = |dctx: &mut zstd::bulk::Decompressor<'static>, out: &mut Vec<u8>| {
        dctx.decompress_to_buffer(src, out)
            .map(drop)
            .map_err(failed)
    };
    let cached = ZSTD
        .try_with(|cell| {
            let mut contexts = cell.try_borrow_mut().ok()?;
            let slot = &mut contexts.decompress;
            let dctx = match slot {
                Some(d) => d,
                None => slot.insert(zstd::bulk::Decompressor::new().ok()?),
            };
            Some(once(dctx, &mut *out))
        })
        .ok()
        .flatten();
    match cached {
        Some(result) => result,
        None => once(&mut zstd::bulk::Decompressor::new().map_err(failed)?, out),
    }
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
    fn zstd_context_follows_the_level() {
        let raw: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut out = Vec::new();
        let mut blocks = Vec::new();
        for level in [1, 19, 1, -5, 3] {
            assert_eq!(
                compress(Compression::Zstd(level), &raw, &mut out),
                CompressionType::Zstd
            );
            assert_eq!(decompress(CompressionType::Zstd, &out).unwrap(), raw);
            blocks.push(out.clone());
        }
        // The same level gives the same bytes after other levels ran on this context, and
        // the levels are really applied (19 compresses this input smaller than 1).
        assert_eq!(blocks[0], blocks[2]);
        assert!(blocks[1].len() < blocks[0].len());
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
        // A short block that claims a long output is refused before any buffer for it is
        // allocated (the reason names the claim, not a decoder's failure).
        let claim = MAX_RAW_BLOCK_BYTES - 1;
        let mut lying = Vec::new();
        codec::put_varint(&mut lying, claim as u64);
        lying.extend_from_slice(&[0u8; 64]);
        for ty in [CompressionType::Lz4, CompressionType::Snappy] {
            let err = decompress(ty, &lying).unwrap_err();
            assert!(
                err.contains(&format!("claims {claim} bytes")),
                "{ty:?}: {err}"
            );
        }
        // A zstd frame whose content size disagrees with the block's length prefix.
        let raw = b"shale ".repeat(100);
        let ty = compress(Compression::Zstd(3), &raw, &mut out);
        assert_eq!(ty, CompressionType::Zstd);
        let prefix = codec::varint_len(raw.len() as u64);
        let mut wrong = Vec::new();
        codec::put_varint(&mut wrong, claim as u64);
        wrong.extend_from_slice(&out[prefix..]);
        let err = decompress(ty, &wrong).unwrap_err();
        assert!(
            err.contains(&format!("claims {claim} bytes")),
            "zstd: {err}"
        );
        assert!(decompress(CompressionType::Lz4, &huge).is_err());
        assert!(decompress(CompressionType::Zstd, &huge).is_err());
        assert!(decompress(CompressionType::Snappy, &[0xff; 12]).is_err());
    }
}

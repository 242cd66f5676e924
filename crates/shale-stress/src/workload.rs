//! What the stress workload writes: keys, values derived from (key, write id), the
//! database options (tiny buffers so that flushes and compactions never stop), and a
//! deterministic bag-of-words embedder for the semantic index.

use std::sync::Arc;

use shale::Db;
use shale::Options;
pub use shale_rng::SplitMix64 as Rng;
use shale_search::semantic::{HashEmbedder, VectorIndex, VectorIndexOptions};

/// The key of index `i`.
pub fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// The index of a key written by [`key`].
pub fn key_index(key: &[u8]) -> Option<u32> {
    let digits = key.strip_prefix(b"k")?;
    if digits.len() != 5 {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

const WORDS: [&str; 32] = [
    "river", "stone", "cloud", "lamp", "garden", "window", "train", "violin", "desert", "harbor",
    "pepper", "candle", "mirror", "ladder", "forest", "comet", "anchor", "bridge", "copper",
    "dune", "ember", "falcon", "glacier", "hollow", "island", "jasmine", "kettle", "lantern",
    "meadow", "nectar", "orchid", "pebble",
];

/// `n` random words joined by spaces (a search query).
pub fn words(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// The value write `wid` gives key `i`: UTF-8 text (so the semantic index accepts it)
/// that starts with the key and the write id. Most values are short; some span several
/// 1 KiB blocks.
pub fn value(i: u32, wid: u64) -> String {
    let mut rng = Rng::seeded(wid.wrapping_mul(0x1000_0000_01b3) ^ u64::from(i));
    let n = match rng.below(100) {
        0..=79 => 2 + rng.below(20),
        80..=97 => 20 + rng.below(150),
        _ => 200 + rng.below(600),
    };
    let mut s = format!("k{i:05} w{wid}");
    for _ in 0..n {
        s.push(' ');
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
    }
    s
}

/// The write id a value read back for key `i` claims, if it is exactly a value that
/// write would have written.
pub fn parse_value(i: u32, bytes: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let rest = text.strip_prefix(&format!("k{i:05} w"))?;
    let wid: u64 = rest.split(' ').next()?.parse().ok()?;
    (value(i, wid) == text).then_some(wid)
}

/// The options of every open in the stress test: 64 KiB memtables, 16 KiB tables, 1 KiB
/// blocks, compaction after two L0 files.
pub fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        max_file_size: 16 << 10,
        block_size: 1024,
        max_bytes_for_level_base: 1 << 20,
        level0_compaction_trigger: 2,
        cache_size: 256 << 10,
        ..Options::default()
    }
}

/// Open the database at `path` with [`options`] and, when `semantic`, its index over every
/// key with the bag-of-words embedder.
///
/// # Errors
/// The open's.
pub fn open(
    path: &std::path::Path,
    semantic: bool,
) -> shale::Result<(Arc<Db>, Option<VectorIndex>)> {
    let db = Arc::new(Db::open(path, options())?);
    let index = if semantic {
        Some(VectorIndex::open(
            &db,
            "all",
            VectorIndexOptions::text(Arc::new(HashEmbedder)),
        )?)
    } else {
        None
    };
    Ok((db, index))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_write() {
        for wid in [0, 1, 77, 1 << 40] {
            for i in [0, 5, 99_999] {
                assert_eq!(parse_value(i, value(i, wid).as_bytes()), Some(wid));
                assert_eq!(parse_value(i + 1, value(i, wid).as_bytes()), None);
            }
        }
        let mut v = value(3, 9).into_bytes();
        let last = v.len() - 1;
        v[last] ^= 1;
        assert_eq!(parse_value(3, &v), None);
        assert_eq!(key_index(&key(42)), Some(42));
    }
}

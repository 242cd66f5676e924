//! Fuzz entry points: one function per decoder, each taking arbitrary bytes (issue 6, R9).
//!
//! Every function here states a decoder's contract and panics only if the contract is
//! broken: whatever the bytes, the decoder returns a value or a typed [`Error`] (for file
//! decoders, `Error::Corruption`), and where the engine has an encoder, decoding what it
//! encoded gives back what went in. The cargo-fuzz project in `fuzz/` calls these
//! functions, one target each; `tests/fuzz_smoke.rs` runs them on every `cargo test` over
//! [`seeds`] and mutations of them.
//!
//! Most targets read their first byte as a *mode*: an even mode hands the rest of the
//! bytes to the decoder as they are; an odd mode parses the rest into structured input
//! (entries, records, vectors), encodes it with the engine's own encoder, and checks the
//! round trip, and then damages the encoding in ways the input chooses. Checksums stop
//! almost all random bytes at the door, so some modes *re-seal* damaged bytes (recompute
//! the checksums) to reach the decoders behind them.
//!
//! Thread safety: plain functions; each call builds its own in-memory file system.
//! Nothing here is used by the engine itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, BatchReader};
use crate::codec::{self, Decoder};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, MemFs, PowerLoss};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, user_key, InternalKey, SeqNo, ValueKind};
use crate::options::{Compression, Options, WriteOptions};
use crate::sst::block::{Block, BlockBuilder};
use crate::sst::compress::{compress, decompress};
use crate::sst::format::{
    decode_trailer, encode_trailer, BlockHandle, CompressionType, Footer, BLOCK_TRAILER_LEN,
    FOOTER_LEN,
};
use crate::sst::TableProperties;
use crate::sst::{BloomFilter, BloomFilterBuilder, Table, TableBuilder, TableOptions};
use crate::vector::{decode_vector, encode_vector, Hnsw, HnswParams, NodeId};
use crate::version::{
    manifest_name, set_current, FileId, FileMeta, Level, RecoveredManifest, VersionEdit,
};
use crate::wal::{LogReader, LogWriter};
use crate::WriteBatch;

/// A fuzz target: takes any bytes, panics only on a broken contract.
pub type Target = fn(&[u8]);

/// Every target, by name: the names of the files in `fuzz/fuzz_targets/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("block", block),
    ("sst_footer", sst_footer),
    ("sst_table", sst_table),
    ("wal_reader", wal_reader),
    ("manifest", manifest),
    ("vector_graph", vector_graph),
    ("vector_value", vector_value),
    ("db_ops", db_ops),
];

/// Reads structured input from fuzz bytes; past the end every read gives zeros, so any
/// byte string is a valid input.
struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Up to `n` bytes (fewer at the end of the input).
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// Split `data` into its mode byte and the rest (mode 0 for empty input).
fn mode(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&m, rest)) => (m, rest),
        None => (0, data),
    }
}

fn fuzz_path(name: &str) -> PathBuf {
    Path::new("fuzz").join(name)
}

/// An empty in-memory file system with the directory of [`fuzz_path`].
fn mem_fs() -> MemFs {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("fuzz"))
        .expect("MemFs create_dir_all");
    fs
}

/// The contract of every file decoder: damage is reported as `Corruption`.
fn expect_corruption<T>(r: Result<T>, what: &str) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) if e.is_corruption() => None,
        Err(e) => panic!("{what}: expected Ok or Corruption, got {e:?}"),
    }
}

/// Distinct internal keys with values parsed from `input`, sorted in internal-key order.
fn entries_from(input: &mut Input<'_>, max: usize) -> Vec<(InternalKey, Vec<u8>)> {
    let mut out = Vec::new();
    while !input.is_empty() && out.len() < max {
        let shape = input.u8();
        let key = input.bytes(usize::from(shape % 12));
        let seq = SeqNo(u64::from(input.u16()));
        let kind = if shape & 0x80 != 0 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let len = usize::from(input.u8() % 48);
        let value = if kind == ValueKind::Put {
            input.bytes(len).to_vec()
        } else {
            Vec::new()
        };
        out.push((InternalKey::new(key, seq, kind), value));
    }
    out.sort_by(|a, b| compare_internal(a.0.encoded(), b.0.encoded()));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

// ---------------------------------------------------------------------------------------
// block

/// Data and index blocks (`sst/block/`): [`Block::new`] and every [`crate::sst::block::BlockIter`]
/// movement over arbitrary bytes (mode even), or a block built by [`BlockBuilder`] from
/// structured entries, which must read back exactly (mode odd).
pub fn block(data: &[u8]) {
    let (mode, rest) = mode(data);
    if mode & 1 == 0 {
        walk_block(rest);
        return;
    }
    let mut input = Input::new(rest);
    let restart_interval = 1 + usize::from(mode >> 1) % 16;
    let entries = entries_from(&mut input, 64);
    let mut builder = BlockBuilder::new(restart_interval);
    for (k, v) in &entries {
        builder.add(k.encoded(), v);
    }
    let bytes = builder.finish().to_vec();
    let block = Arc::new(
        Block::new(bytes.clone(), Arc::from(fuzz_path("block")), 0)
            .expect("a built block must validate"),
    );
    let read = |it: &mut crate::sst::block::BlockIter| (it.key().to_vec(), it.value().to_vec());
    let want: Vec<(Vec<u8>, Vec<u8>)> = entries
        .iter()
        .map(|(k, v)| (k.encoded().to_vec(), v.clone()))
        .collect();
    // Forwards.
    let mut it = block.iter();
    it.seek_to_first().expect("seek_to_first on a built block");
    let mut got = Vec::new();
    while it.valid() {
        got.push(read(&mut it));
        it.next().expect("next on a built block");
    }
    assert_eq!(got, want, "block forward scan");
    // Backwards.
    it.seek_to_last().expect("seek_to_last on a built block");
    got.clear();
    while it.valid() {
        got.push(read(&mut it));
        it.prev().expect("prev on a built block");
    }
    got.reverse();
    assert_eq!(got, want, "block backward scan");
    // Seeks: every key finds itself.
    for (k, v) in &want {
        it.seek(k).expect("seek on a built block");
        assert!(it.valid(), "seek to a present key");
        assert_eq!(
            (it.key(), it.value()),
            (&k[..], &v[..]),
            "seek lands on the key"
        );
    }
    // Then the same block damaged by the rest of the input, which must not panic.
    let mut damaged = bytes;
    damage(&mut damaged, &mut Input::new(input.rest()));
    walk_block(&damaged);
}

/// Apply byte edits chosen by `input` to `bytes`: xor at positions, truncation, insertion.
fn damage(bytes: &mut Vec<u8>, input: &mut Input<'_>) {
    for _ in 0..8 {
        if input.is_empty() || bytes.is_empty() {
            return;
        }
        let op = input.u8();
        let at = usize::from(input.u16()) % bytes.len();
        match op % 4 {
            0 | 1 => {
                if let Some(b) = bytes.get_mut(at) {
                    *b ^= input.u8() | 1;
                }
            }
            2 => bytes.truncate(at),
            _ => bytes.insert(at, input.u8()),
        }
    }
}

/// Open `bytes` as a block and move over it every way; errors must be `Corruption`.
fn walk_block(bytes: &[u8]) {
    let Some(block) = expect_corruption(
        Block::new(bytes.to_vec(), Arc::from(fuzz_path("block")), 0),
        "Block::new",
    ) else {
        return;
    };
    let block = Arc::new(block);
    // Every entry takes at least 3 bytes, so no walk can be longer than this.
    let bound = bytes.len() / 3 + 2;
    let mut it = block.iter();
    let mut first_key = None;
    if expect_corruption(it.seek_to_first(), "block seek_to_first").is_some() {
        for _ in 0..bound {
            if !it.valid() {
                break;
            }
            first_key.get_or_insert_with(|| it.key().to_vec());
            if expect_corruption(it.next(), "block next").is_none() {
                break;
            }
        }
        assert!(!it.valid(), "a block walk forwards did not end");
    }
    if expect_corruption(it.seek_to_last(), "block seek_to_last").is_some() {
        for _ in 0..bound {
            if !it.valid() {
                break;
            }
            if expect_corruption(it.prev(), "block prev").is_none() {
                break;
            }
        }
        assert!(!it.valid(), "a block walk backwards did not end");
    }
    let tail = bytes
        .get(bytes.len().saturating_sub(13)..)
        .unwrap_or_default();
    for target in [&[][..], first_key.as_deref().unwrap_or_default(), tail] {
        if expect_corruption(it.seek(target), "block seek").is_some() && it.valid() {
            let _ = expect_corruption(it.next(), "block next after seek");
        }
    }
}

// ---------------------------------------------------------------------------------------
// sst_footer

/// The fixed SSTable records (`sst/format.rs`, `properties.rs`, `filter.rs`, `compress.rs`):
/// footer, block handle, block trailer, properties, bloom filter and decompression over
/// arbitrary bytes, with the round trip of each encoder.
pub fn sst_footer(data: &[u8]) {
    // Footer: whole input, and its last FOOTER_LEN bytes.
    let last = data
        .get(data.len().saturating_sub(FOOTER_LEN)..)
        .unwrap_or_default();
    for src in [data, last] {
        if let Ok(f) = Footer::decode(src) {
            assert_eq!(
                Footer::decode(&f.encode()).ok(),
                Some(f),
                "footer round trip"
            );
        }
    }
    if let Ok(h) = BlockHandle::decode_varint(data) {
        let mut buf = Vec::new();
        h.encode_varint(&mut buf);
        assert_eq!(
            BlockHandle::decode_varint(&buf).ok(),
            Some(h),
            "handle round trip"
        );
    }
    let split = data.len().saturating_sub(BLOCK_TRAILER_LEN);
    let (stored, trailer) = data.split_at(split);
    if let Ok(ty) = decode_trailer(stored, trailer) {
        assert_eq!(encode_trailer(stored, ty), trailer, "trailer round trip");
    }
    if let Ok(p) = TableProperties::decode(data) {
        assert_eq!(
            TableProperties::decode(&p.encode()).ok(),
            Some(p),
            "properties round trip"
        );
    }
    let filter = BloomFilter::new(data.to_vec());
    let _ = filter.may_contain(data.get(..8).unwrap_or_default());
    for ty in [
        CompressionType::None,
        CompressionType::Lz4,
        CompressionType::Zstd,
        CompressionType::Snappy,
    ] {
        let _ = decompress(ty, data);
    }
    // Encoders: compression and the bloom filter round-trip on the input bytes.
    let (mode, rest) = mode(data);
    let mut scratch = Vec::new();
    for c in [Compression::Lz4, Compression::Zstd(1), Compression::Snappy] {
        let ty = compress(c, rest, &mut scratch);
        if ty != CompressionType::None {
            assert_eq!(
                decompress(ty, &scratch).ok().as_deref(),
                Some(rest),
                "{c:?} round trip"
            );
        }
    }
    let mut builder = BloomFilterBuilder::new(u32::from(mode % 20));
    let keys: Vec<&[u8]> = rest.chunks(3).collect();
    for k in &keys {
        builder.add_key(k);
    }
    let filter = BloomFilter::new(builder.finish());
    for k in &keys {
        assert!(filter.may_contain(k), "bloom filter lost an added key");
    }
}

// ---------------------------------------------------------------------------------------
// sst_table

/// A whole SSTable (`sst/reader.rs`, `iter.rs`): [`Table::open`] over an in-memory file of
/// arbitrary bytes, then a full scan both ways and point reads (mode 0 mod 4); or a table
/// built by [`TableBuilder`] from structured entries, which must read back exactly, then
/// damaged by the input, with its checksums left alone (mode 1: a read either fails with
/// `Corruption` or returns the original data) or re-sealed (mode 3: nothing may panic).
pub fn sst_table(data: &[u8]) {
    let (mode, rest) = mode(data);
    if mode & 1 == 0 {
        walk_table(rest.to_vec());
        return;
    }
    let mut input = Input::new(rest);
    let shape = input.u8();
    let opts = TableOptions {
        block_size: 64 + usize::from(shape % 8) * 64,
        restart_interval: 1 + usize::from(shape >> 3) % 4,
        filter_bits_per_key: if shape & 0x20 != 0 { 10 } else { 0 },
        compression: match (shape >> 6) % 4 {
            0 => Compression::None,
            1 => Compression::Lz4,
            2 => Compression::Zstd(1),
            _ => Compression::Snappy,
        },
    };
    let entries = entries_from(&mut input, 96);
    if entries.is_empty() {
        return;
    }
    let fs = mem_fs();
    let path = fuzz_path("t.sst");
    let file = fs.create(&path).expect("MemFs create");
    let mut builder = TableBuilder::new(file, path.clone(), opts);
    for (k, v) in &entries {
        builder.add(k.encoded(), v).expect("TableBuilder::add");
    }
    builder.finish().expect("TableBuilder::finish");
    let bytes = fs.read_all(&path).expect("MemFs read_all");
    let want: Vec<(Vec<u8>, Vec<u8>)> = entries
        .iter()
        .map(|(k, v)| (k.encoded().to_vec(), v.clone()))
        .collect();
    let got = walk_table(bytes.clone()).expect("a built table must open and scan");
    assert_eq!(got, want, "table scan");
    let table = open_table(bytes.clone()).expect("a built table must open");
    let mut seen: Vec<&[u8]> = Vec::new();
    for (k, v) in &entries {
        // The first entry of a user key is its newest version.
        if seen.last() == Some(&k.user_key()) {
            continue;
        }
        seen.push(k.user_key());
        let kind = user_kind(k);
        let got = table.get(k.user_key(), SeqNo::MAX).expect("Table::get");
        assert_eq!(got, Some((kind, v.clone())), "table get");
    }
    drop(table);

    let mut damaged = bytes;
    damage(&mut damaged, &mut input);
    if mode & 2 != 0 {
        reseal_table(&mut damaged);
        let _ = walk_table(damaged);
    } else if let Some(got) = walk_table(damaged) {
        // Under intact checksums a read that succeeds returns the table as written.
        assert_eq!(
            got, want,
            "a damaged table read back wrong data without an error"
        );
    }
}

fn user_kind(k: &InternalKey) -> ValueKind {
    crate::key::parse_internal_key(k.encoded())
        .map(|p| p.kind)
        .unwrap_or(ValueKind::Put)
}

/// The table in `bytes`, or `None` if opening it reported corruption.
fn open_table(bytes: Vec<u8>) -> Option<Table> {
    let fs = mem_fs();
    let path = fuzz_path("t.sst");
    let mut f = fs.create(&path).expect("MemFs create");
    f.append(&bytes).expect("MemFs append");
    f.sync().expect("MemFs sync");
    drop(f);
    let file = fs.open(&path).expect("MemFs open");
    expect_corruption(Table::open(file, path), "Table::open")
}

/// Open `bytes` as a table and scan it forwards, backwards and by point reads. Returns the
/// forward scan if every step succeeded, `None` if a step reported corruption.
fn walk_table(bytes: Vec<u8>) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let bound = bytes.len() / 3 + 2;
    let table = Arc::new(open_table(bytes)?);
    let mut it = table.iter_opt(false);
    expect_corruption(it.seek_to_first(), "table seek_to_first")?;
    let mut forward = Vec::new();
    for _ in 0..bound {
        if !it.valid() {
            break;
        }
        forward.push((it.key().to_vec(), it.value().to_vec()));
        expect_corruption(it.next(), "table next")?;
    }
    assert!(!it.valid(), "a table scan forwards did not end");
    expect_corruption(it.seek_to_last(), "table seek_to_last")?;
    for _ in 0..bound {
        if !it.valid() {
            break;
        }
        expect_corruption(it.prev(), "table prev")?;
    }
    assert!(!it.valid(), "a table scan backwards did not end");
    for (k, _) in forward.iter().take(16) {
        expect_corruption(it.seek(k), "table seek")?;
        expect_corruption(table.get(user_key(k), SeqNo::MAX), "Table::get")?;
    }
    Some(forward)
}

/// Recompute every checksum a reader checks (footer, and the trailer of each block the
/// footer and the index name) so that damage inside them reaches the decoders.
fn reseal_table(bytes: &mut [u8]) {
    let Some(footer_at) = bytes.len().checked_sub(FOOTER_LEN) else {
        return;
    };
    if let Some(footer) = bytes.get_mut(footer_at..) {
        let crc = codec::mask_crc(codec::crc32c(footer.get(..52).unwrap_or_default()));
        if let Some(slot) = footer.get_mut(52..56) {
            slot.copy_from_slice(&crc.to_le_bytes());
        }
    }
    let Ok(footer) = Footer::decode(bytes.get(footer_at..).unwrap_or_default()) else {
        return;
    };
    let mut handles: Vec<BlockHandle> = [Some(footer.properties), footer.filter]
        .into_iter()
        .flatten()
        .collect();
    reseal_block(bytes, footer.index);
    if let Some(index) = block_contents(bytes, footer.index) {
        if let Ok(block) = Block::new(index, Arc::from(fuzz_path("t.sst")), 0) {
            let block = Arc::new(block);
            let mut it = block.iter();
            let mut ok = it.seek_to_first().is_ok();
            while ok && it.valid() && handles.len() < 4096 {
                if let Ok(h) = BlockHandle::decode_varint(it.value()) {
                    handles.push(h);
                }
                ok = it.next().is_ok();
            }
        }
    }
    for h in handles {
        reseal_block(bytes, h);
    }
}

/// The byte range of the block at `h` and its trailer, if inside `bytes`.
fn block_range(len: usize, h: BlockHandle) -> Option<(usize, usize)> {
    let start = usize::try_from(h.offset).ok()?;
    let end = usize::try_from(h.end_with_trailer()?).ok()?;
    (end <= len).then_some((start, end))
}

fn reseal_block(bytes: &mut [u8], h: BlockHandle) {
    let Some((start, end)) = block_range(bytes.len(), h) else {
        return;
    };
    let Some(region) = bytes.get_mut(start..end) else {
        return;
    };
    let (stored, trailer) = region.split_at_mut(end - start - BLOCK_TRAILER_LEN);
    let type_byte = trailer.first().copied().unwrap_or(0);
    let crc = codec::mask_crc(codec::crc32c_extend(codec::crc32c(stored), &[type_byte]));
    if let Some(slot) = trailer.get_mut(1..) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
}

/// The decompressed bytes of the block at `h`, if they decode.
fn block_contents(bytes: &[u8], h: BlockHandle) -> Option<Vec<u8>> {
    let (start, end) = block_range(bytes.len(), h)?;
    let region = bytes.get(start..end)?;
    let (stored, trailer) = region.split_at(end - start - BLOCK_TRAILER_LEN);
    let ty = decode_trailer(stored, trailer).ok()?;
    decompress(ty, stored).ok()
}

// ---------------------------------------------------------------------------------------
// wal_reader

/// The log reader shared by the WAL and the manifest (`wal/`), and the WAL payload
/// ([`BatchReader`]). Mode even: arbitrary bytes as a log; every record is decoded as a
/// write batch, and a batch that decodes re-encodes to the same bytes. Mode odd: records
/// written by [`LogWriter`] read back exactly; cut at any point (a torn tail) the log reads
/// back, without an error, every record that ended before the cut; padded with zeros it
/// reads back whole; with a byte flipped it reads back a prefix or reports `Corruption`.
pub fn wal_reader(data: &[u8]) {
    let (mode, rest) = mode(data);
    if mode & 1 == 0 {
        let _ = read_log(rest);
        return;
    }
    let mut input = Input::new(rest);
    let mut records: Vec<Vec<u8>> = Vec::new();
    while !input.is_empty() && records.len() < 32 {
        let shape = input.u8();
        let record = if shape & 0x80 != 0 {
            // A long record spanning blocks, its bytes a pattern (cheap to make).
            let len = usize::from(input.u16()) % (3 * crate::wal::BLOCK_SIZE);
            let seed = input.u8();
            (0..len)
                .map(|i| (i as u8).wrapping_mul(31) ^ seed)
                .collect()
        } else {
            input.bytes(usize::from(shape)).to_vec()
        };
        records.push(record);
    }
    let fs = mem_fs();
    let path = fuzz_path("000001.log");
    let mut writer = LogWriter::new(fs.create_log(&path).expect("MemFs create_log"));
    let mut ends = Vec::new();
    for r in &records {
        writer.add_record(&[r]).expect("LogWriter::add_record");
        ends.push(writer.len());
    }
    writer.sync().expect("LogWriter::sync");
    drop(writer);
    let log = fs.read_all(&path).expect("MemFs read_all");
    let got = read_log(&log).expect("a written log must read back");
    assert_eq!(got, records, "log round trip");

    // A torn tail: every record that ended before the cut, and no error.
    let cut = usize::try_from(input.u32()).unwrap_or(0) % (log.len() + 1);
    let got = read_log(log.get(..cut).unwrap_or_default())
        .expect("a log cut short is a torn tail, not corruption");
    let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
    assert!(got.len() >= whole, "a cut at {cut} lost a whole record");
    assert_eq!(
        got,
        records.get(..got.len()).unwrap_or_default(),
        "torn log prefix"
    );

    // Zeros after the end (preallocation) are the end.
    let mut padded = log.clone();
    padded.resize(log.len() + usize::from(input.u16()), 0);
    assert_eq!(
        read_log(&padded).as_ref(),
        Some(&records),
        "zero-padded log"
    );

    // A flipped byte: a prefix, or Corruption.
    if !log.is_empty() {
        let mut bad = log;
        let at = usize::try_from(input.u32()).unwrap_or(0) % bad.len();
        if let Some(b) = bad.get_mut(at) {
            *b ^= input.u8() | 1;
        }
        if let Some(got) = read_log(&bad) {
            assert_eq!(
                got,
                records.get(..got.len()).unwrap_or_default(),
                "flipped log"
            );
        }
    }
}

/// Every record of the log `data`, or `None` if the reader reported corruption. Each
/// record also goes through the write-batch decoder.
fn read_log(data: &[u8]) -> Option<Vec<Vec<u8>>> {
    let path = fuzz_path("000001.log");
    let mut reader = LogReader::new(data, &path);
    let mut out = Vec::new();
    // Every record takes a 7-byte header.
    for _ in 0..data.len() / 7 + 2 {
        match expect_corruption(reader.next_record(), "LogReader::next_record")? {
            Some((_, record)) => {
                check_batch(record);
                out.push(record.to_vec());
            }
            None => return Some(out),
        }
    }
    panic!("the log reader returned more records than the log has headers");
}

/// A write batch that decodes re-encodes to the same bytes.
fn check_batch(bytes: &[u8]) {
    let Ok(reader) = BatchReader::new(bytes) else {
        return;
    };
    let mut n = 0u32;
    for entry in reader.entries() {
        entry.expect("BatchReader::new validated every entry");
        n += 1;
    }
    assert_eq!(n, reader.count, "batch entry count");
    let mut again = batch::encode_header(reader.first_seq, reader.count).to_vec();
    again.extend_from_slice(reader.body());
    assert_eq!(again, bytes, "batch round trip");
}

// ---------------------------------------------------------------------------------------
// manifest

/// Version edits and the manifest (`version/edit.rs`, `manifest.rs`). Mode 0 mod 4: an edit
/// decoded from arbitrary bytes round-trips through its encoder. Mode 1: the rest split into
/// length-prefixed records, written as a well-framed manifest log, loaded by
/// [`RecoveredManifest::load`]. Mode 2: the rest as the raw manifest file. Mode 3: `CURRENT`
/// itself is the input. Loading returns a consistent state or `Corruption`.
pub fn manifest(data: &[u8]) {
    let (mode, rest) = mode(data);
    match mode % 4 {
        0 => {
            if let Ok(edit) = VersionEdit::decode(rest) {
                let mut buf = Vec::new();
                edit.encode(&mut buf);
                assert_eq!(
                    VersionEdit::decode(&buf).ok(),
                    Some(edit),
                    "edit round trip"
                );
            }
        }
        1 => {
            let mut input = Input::new(rest);
            let mut records = Vec::new();
            while !input.is_empty() && records.len() < 64 {
                let len = usize::from(input.u8());
                records.push(input.bytes(len).to_vec());
            }
            load_manifest(&manifest_log(&records), None);
        }
        2 => load_manifest(rest, None),
        _ => load_manifest(&manifest_log(&[]), Some(rest)),
    }
}

/// A manifest log holding `records`.
fn manifest_log(records: &[Vec<u8>]) -> Vec<u8> {
    let fs = mem_fs();
    let path = fuzz_path("log");
    let mut writer = LogWriter::new(fs.create(&path).expect("MemFs create"));
    for r in records {
        writer.add_record(&[r]).expect("LogWriter::add_record");
    }
    writer.sync().expect("LogWriter::sync");
    drop(writer);
    fs.read_all(&path).expect("MemFs read_all")
}

/// Load a database directory holding MANIFEST-000001 = `log` and CURRENT = `current` (or
/// a CURRENT naming the manifest), and check the state it recovers.
fn load_manifest(log: &[u8], current: Option<&[u8]>) {
    let fs = MemFs::new();
    let dir = Path::new("db");
    fs.create_dir_all(dir).expect("MemFs create_dir_all");
    let mut f = fs
        .create(&dir.join(manifest_name(FileId(1))))
        .expect("MemFs create");
    f.append(log).expect("MemFs append");
    f.sync().expect("MemFs sync");
    drop(f);
    match current {
        None => set_current(&fs, dir, FileId(1)).expect("set_current"),
        Some(bytes) => {
            let mut f = fs.create(&dir.join("CURRENT")).expect("MemFs create");
            f.append(bytes).expect("MemFs append");
            f.sync().expect("MemFs sync");
        }
    }
    let loaded = match RecoveredManifest::load(&fs, dir) {
        Ok(state) => state,
        Err(e) if e.is_corruption() => return,
        // CURRENT naming another manifest number that does not exist is reported as
        // corruption; a read of a missing file is the only other outcome allowed.
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => panic!("RecoveredManifest::load: expected Ok or Corruption, got {e:?}"),
    };
    assert!(
        loaded.valid_bytes <= log.len() as u64,
        "valid_bytes past the end"
    );
    for (id, (level, meta)) in &loaded.files {
        assert_eq!(*id, meta.id, "file map key");
        assert!(level.index() < crate::version::NUM_LEVELS, "level in range");
        assert!(
            *id < loaded.next_file_number,
            "file id below next_file_number"
        );
        assert!(meta.smallest <= meta.largest, "file bounds in order");
    }
    let edit = loaded.snapshot_edit();
    let mut buf = Vec::new();
    edit.encode(&mut buf);
    assert_eq!(
        VersionEdit::decode(&buf).ok(),
        Some(edit),
        "snapshot edit round trip"
    );
}

// ---------------------------------------------------------------------------------------
// vector_graph

/// The HNSW graph file (`vector/format.rs`): [`Hnsw::read_from`] over arbitrary bytes (mode
/// 0 mod 4), or over bytes whose trailing checksum is first recomputed so that the
/// structural checks behind it are reached (mode 2). A graph that loads must write out and
/// load again to the same bytes, answer searches, and take a new node. Mode odd: a graph
/// built from structured vectors writes and reads back to the same bytes.
pub fn vector_graph(data: &[u8]) {
    let (mode, rest) = mode(data);
    if mode & 1 == 0 {
        let mut bytes = rest.to_vec();
        if mode & 2 != 0 {
            reseal_graph(&mut bytes);
        }
        check_graph(&bytes);
        return;
    }
    let mut input = Input::new(rest);
    let dim = 1 + usize::from(input.u8() % 8);
    let params = HnswParams {
        ef_construction: 16,
        ef_search: 16,
        ..HnswParams::with_m(2 + usize::from(mode >> 1) % 6)
    };
    let graph = Hnsw::new(dim, params).expect("valid HNSW parameters");
    let mut id = 0u32;
    while !input.is_empty() && id < 48 {
        // Components are never zero (x.5), so the vector always has a direction.
        let v: Vec<f32> = input
            .bytes(dim)
            .iter()
            .map(|&b| f32::from(b) - 127.5)
            .chain(std::iter::repeat(0.5))
            .take(dim)
            .collect();
        graph.insert(NodeId(id), &v).expect("Hnsw::insert");
        if input.u8() & 7 == 0 {
            // Ids are sparse: half of `id` may not exist, which is an `InvalidArgument`.
            let _ = graph.mark_deleted(NodeId(id / 2));
        }
        id += 1 + u32::from(input.u8() % 3);
    }
    let mut bytes = Vec::new();
    graph.write_to(&mut bytes).expect("Hnsw::write_to");
    let loaded = Hnsw::read_from(&bytes, &fuzz_path("graph")).expect("a written graph must load");
    let mut again = Vec::new();
    loaded.write_to(&mut again).expect("Hnsw::write_to");
    assert!(again == bytes, "graph file round trip");
}

fn reseal_graph(bytes: &mut [u8]) {
    let Some(body_len) = bytes.len().checked_sub(4) else {
        return;
    };
    let (body, trailer) = bytes.split_at_mut(body_len);
    trailer.copy_from_slice(&codec::mask_crc(codec::crc32c(body)).to_le_bytes());
}

fn check_graph(bytes: &[u8]) {
    let path = fuzz_path("graph");
    let Some(graph) = expect_corruption(Hnsw::read_from(bytes, &path), "Hnsw::read_from") else {
        return;
    };
    let mut out = Vec::new();
    graph.write_to(&mut out).expect("Hnsw::write_to");
    let again = Hnsw::read_from(&out, &path).expect("a graph written from a loaded graph loads");
    let mut out2 = Vec::new();
    again.write_to(&mut out2).expect("Hnsw::write_to");
    assert!(out == out2, "graph rewrite is not a fixed point");
    let mut query = vec![0.0f32; graph.dim()];
    if let Some(q) = query.first_mut() {
        *q = 1.0;
    }
    let hits = graph
        .search(&query, 4, Some(8), None)
        .expect("search of a loaded graph");
    assert!(hits.len() <= 4, "search returned more than k");
    for h in &hits {
        assert!(
            graph.contains(h.id) && !graph.is_deleted(h.id),
            "search hit"
        );
    }
    let bound = graph.id_bound();
    if let Ok(id) = u32::try_from(bound) {
        graph
            .insert(NodeId(id), &query)
            .expect("insert into a loaded graph");
    }
}

// ---------------------------------------------------------------------------------------
// vector_value

/// The vector store's value codec (`vector/value.rs`): a value that decodes re-encodes to
/// the same bytes, and an encoded value decodes to what went in.
pub fn vector_value(data: &[u8]) {
    let claimed = data
        .get(12..16)
        .and_then(codec::get_u32)
        .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
    for dim in [0, 1, 3, 384, claimed] {
        if let Some((hash, node, v)) = decode_vector(data, dim) {
            assert_eq!(v.len(), dim, "decoded dimension");
            assert_eq!(
                encode_vector(hash, node, &v),
                data,
                "vector value round trip"
            );
        }
    }
    let mut d = Decoder::new(data);
    let hash = d.u64("hash").unwrap_or(0);
    let node = d.u32("node").unwrap_or(0);
    let v: Vec<f32> = d
        .remaining()
        .chunks_exact(4)
        .filter_map(codec::get_u32)
        .map(f32::from_bits)
        .collect();
    let bytes = encode_vector(hash, node, &v);
    let (h2, n2, v2) = decode_vector(&bytes, v.len()).expect("an encoded value decodes");
    assert_eq!((h2, n2), (hash, node), "vector value header");
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&v2), bits(&v), "vector value components");
}

// ---------------------------------------------------------------------------------------
// db_ops

/// Operations and crashes on a [`crate::Db`] over [`MemFs`], checked against a `BTreeMap`.
///
/// The bytes are a program: put, delete, batch (each synced or not), flush, compact, read
/// checks, a clean reopen, and crashes (kill -9, power loss, power loss with a torn last
/// write). Reads must always match the model. After a crash the database must hold exactly
/// the state after some prefix of the acknowledged writes: all of them after kill -9, at
/// least the synced ones (and everything before a flush, compaction or close) after a
/// power loss.
pub fn db_ops(data: &[u8]) {
    let mut input = Input::new(data);
    let compression = match input.u8() % 3 {
        0 => Compression::None,
        1 => Compression::Lz4,
        _ => Compression::Snappy,
    };
    let mut fs = MemFs::new();
    let mut db = open_db(&fs, compression);
    let mut model = Model::default();
    for _ in 0..48 {
        if input.is_empty() {
            break;
        }
        let op = input.u8();
        let sync = op & 0x80 != 0;
        match op % 16 {
            0..=4 => {
                let k = ops_key(input.u8());
                let len = usize::from(input.u8() % 24);
                let v = input.bytes(len).to_vec();
                let mut b = WriteBatch::new();
                b.put(&k, &v);
                model.write(&db, b, vec![(k, Some(v))], sync);
            }
            5..=6 => {
                let k = ops_key(input.u8());
                let mut b = WriteBatch::new();
                b.delete(&k);
                model.write(&db, b, vec![(k, None)], sync);
            }
            7..=8 => {
                let n = 1 + input.u8() % 4;
                let mut b = WriteBatch::new();
                let mut changes = Vec::new();
                for _ in 0..n {
                    let k = ops_key(input.u8());
                    if input.u8() & 1 == 0 {
                        let len = usize::from(input.u8() % 16);
                        let v = input.bytes(len).to_vec();
                        b.put(&k, &v);
                        changes.push((k, Some(v)));
                    } else {
                        b.delete(&k);
                        changes.push((k, None));
                    }
                }
                model.write(&db, b, changes, sync);
            }
            9 => {
                db.flush().expect("Db::flush");
                model.durable = model.writes.len();
            }
            10 => {
                db.compact_range(None, None).expect("Db::compact_range");
                model.durable = model.writes.len();
            }
            11 => model.check_reads(&db),
            12 => {
                db.close().expect("Db::close");
                drop(db);
                model.durable = model.writes.len();
                db = open_db(&fs, compression);
                model.check_reads(&db);
            }
            _ => {
                let kill = op & 0x10 != 0;
                let image = if kill {
                    fs.process_crash()
                } else {
                    let tear = op & 0x20 != 0;
                    fs.power_loss(PowerLoss {
                        tear_last_write: tear.then(|| u64::from(input.u16())),
                        keep_dir_ops: usize::from(input.u8() % 4),
                    })
                };
                drop(db);
                fs = image;
                db = open_db(&fs, compression);
                model.recover(&db, kill);
            }
        }
    }
    model.check_reads(&db);
}

fn ops_key(b: u8) -> Vec<u8> {
    format!("k{:02}", b % 24).into_bytes()
}

fn open_db(fs: &MemFs, compression: Compression) -> crate::Db {
    let opts = Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 64 << 10,
        max_file_size: 16 << 10,
        block_size: 256,
        block_restart_interval: 4,
        compression,
        cache_size: 64 << 10,
        level0_compaction_trigger: 2,
        max_bytes_for_level_base: 1 << 20,
        ..Options::default()
    };
    crate::Db::open("db", opts).expect("Db::open on a crash image must succeed")
}

type Change = (Vec<u8>, Option<Vec<u8>>);

/// The acknowledged writes, and how many of them must survive a power loss.
#[derive(Default)]
struct Model {
    writes: Vec<Vec<Change>>,
    durable: usize,
}

impl Model {
    fn write(&mut self, db: &crate::Db, batch: WriteBatch, changes: Vec<Change>, sync: bool) {
        let opts = if sync {
            WriteOptions::sync()
        } else {
            WriteOptions::default()
        };
        db.write(batch, opts).expect("Db::write");
        self.writes.push(changes);
        if sync {
            self.durable = self.writes.len();
        }
    }

    fn state_at(&self, n: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut state = BTreeMap::new();
        for changes in self.writes.iter().take(n) {
            for (k, v) in changes {
                match v {
                    Some(v) => state.insert(k.clone(), v.clone()),
                    None => state.remove(k),
                };
            }
        }
        state
    }

    fn check_reads(&self, db: &crate::Db) {
        let want = self.state_at(self.writes.len());
        assert_eq!(read_db(db), want, "database scan differs from the model");
        for b in 0..24u8 {
            let k = ops_key(b);
            let got = db.get(&k).expect("Db::get");
            assert_eq!(
                got.as_ref(),
                want.get(&k),
                "get {}",
                String::from_utf8_lossy(&k)
            );
        }
    }

    /// After a crash: the database holds the state after a prefix of the writes, at least
    /// the durable ones (all of them after kill -9). Forget the writes it lost.
    fn recover(&mut self, db: &crate::Db, kill: bool) {
        let got = read_db(db);
        let lo = if kill {
            self.writes.len()
        } else {
            self.durable
        };
        let found = (lo..=self.writes.len())
            .rev()
            .find(|&n| self.state_at(n) == got);
        let Some(n) = found else {
            panic!(
                "after a {} the database holds no prefix of {} writes with at least {lo}: {got:?}",
                if kill { "kill -9" } else { "power loss" },
                self.writes.len()
            );
        };
        self.writes.truncate(n);
        self.durable = self.durable.min(n);
        self.check_reads(db);
    }
}

fn read_db(db: &crate::Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut state = BTreeMap::new();
    for pair in db.range::<Vec<u8>>(..).expect("Db::range") {
        let (k, v) = pair.expect("Db::range item");
        state.insert(k, v);
    }
    state
}

// ---------------------------------------------------------------------------------------
// seeds

/// Valid inputs for `target`, made by the engine's own encoders: the starting corpus of the
/// fuzz targets and of `tests/fuzz_smoke.rs`. Unknown names give no seeds.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let with_mode = |m: u8, rest: &[u8]| {
        let mut v = vec![m];
        v.extend_from_slice(rest);
        v
    };
    let structured: Vec<u8> = (0u8..=255).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    match target {
        "block" => {
            let mut b = BlockBuilder::new(2);
            for (k, v) in sample_entries() {
                b.add(k.encoded(), &v);
            }
            vec![
                with_mode(0, b.finish()),
                with_mode(1, &structured),
                with_mode(7, &structured),
            ]
        }
        "sst_footer" => {
            let f = Footer {
                filter: Some(BlockHandle::new(100, 20)),
                properties: BlockHandle::new(125, 90),
                index: BlockHandle::new(220, 30),
            };
            let mut handle = Vec::new();
            BlockHandle::new(4096, 1234).encode_varint(&mut handle);
            let block = b"some block bytes".to_vec();
            let mut with_trailer = block.clone();
            with_trailer.extend_from_slice(&encode_trailer(&block, CompressionType::None));
            let props = sample_table_bytes(Compression::None);
            let mut lz4 = Vec::new();
            compress(Compression::Lz4, &[7u8; 200], &mut lz4);
            vec![f.encode(), handle, with_trailer, props, lz4, structured]
        }
        "sst_table" => {
            let mut out = vec![
                with_mode(0, &sample_table_bytes(Compression::None)),
                with_mode(0, &sample_table_bytes(Compression::Lz4)),
            ];
            for m in [1u8, 3] {
                for shape in [0u8, 0x25, 0x6a, 0xa3, 0xe0] {
                    let mut v = vec![m, shape];
                    v.extend_from_slice(&structured);
                    out.push(v);
                }
            }
            out
        }
        "wal_reader" => {
            let mut b = WriteBatch::new();
            b.put(b"key", b"value");
            b.delete(b"gone");
            let mut record = batch::encode_header(SeqNo(7), b.count()).to_vec();
            record.extend_from_slice(b.body());
            let log = manifest_log(&[record.clone(), Vec::new(), record]);
            vec![
                with_mode(0, &log),
                with_mode(1, &structured),
                with_mode(1, &[0x85, 0x10, 0x90, 9, 3, b'a', b'b', b'c', 0, 0, 0, 0]),
            ]
        }
        "manifest" => {
            let edits = sample_edits();
            let mut first = Vec::new();
            if let Some(e) = edits.first() {
                e.encode(&mut first);
            }
            let mut framed = Vec::new();
            for e in &edits {
                let mut buf = Vec::new();
                e.encode(&mut buf);
                framed.push(u8::try_from(buf.len()).unwrap_or(u8::MAX));
                framed.extend_from_slice(&buf);
            }
            let encoded: Vec<Vec<u8>> = edits
                .iter()
                .map(|e| {
                    let mut buf = Vec::new();
                    e.encode(&mut buf);
                    buf
                })
                .collect();
            vec![
                with_mode(0, &first),
                with_mode(1, &framed),
                with_mode(2, &manifest_log(&encoded)),
                with_mode(3, b"MANIFEST-000001\n"),
            ]
        }
        "vector_graph" => {
            let graph = Hnsw::new(3, HnswParams::with_m(4)).expect("valid parameters");
            for i in 0..12u32 {
                let x = i as f32;
                let _ = graph.insert(NodeId(i), &[x.sin(), x.cos(), 0.5]);
            }
            let _ = graph.mark_deleted(NodeId(3));
            let mut file = Vec::new();
            let _ = graph.write_to(&mut file);
            vec![
                with_mode(0, &file),
                with_mode(2, &file),
                with_mode(1, &structured),
                with_mode(5, &structured),
            ]
        }
        "vector_value" => vec![
            encode_vector(42, 7, &[0.5, -0.25, 1.0]),
            encode_vector(1, 0, &[]),
            encode_vector(u64::MAX, u32::MAX, &[f32::NAN]),
        ],
        "db_ops" => vec![
            // put, sync put, flush, delete, power loss, put, kill -9, compact, reads.
            vec![
                1, 0, 3, 4, b'a', b'b', b'c', 0x80, 5, 2, b'x', b'y', 9, 5, 3, 14, 1, 2, 3, 8, 1,
                5, 0x9e, 10, 11,
            ],
            vec![
                0, 7, 3, 1, 0, 2, b'q', b'r', 2, 1, 0x87, 2, 4, 0, 1, b'z', 9, 1, 0, 0, 0x2e, 0x40,
                0, 0, 12, 11,
            ],
            with_mode(2, &structured),
        ],
        _ => Vec::new(),
    }
}

fn sample_entries() -> Vec<(InternalKey, Vec<u8>)> {
    let mut out: Vec<(InternalKey, Vec<u8>)> = (0..40u64)
        .map(|i| {
            let key = format!("key{:03}", i / 2);
            let kind = if i % 7 == 3 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = if kind == ValueKind::Put {
                format!("value-{i}").into_bytes()
            } else {
                Vec::new()
            };
            (
                InternalKey::new(key.as_bytes(), SeqNo(100 - i), kind),
                value,
            )
        })
        .collect();
    out.sort_by(|a, b| compare_internal(a.0.encoded(), b.0.encoded()));
    out
}

fn sample_table_bytes(compression: Compression) -> Vec<u8> {
    let fs = mem_fs();
    let path = fuzz_path("t.sst");
    let Ok(file) = fs.create(&path) else {
        return Vec::new();
    };
    let opts = TableOptions {
        block_size: 128,
        restart_interval: 2,
        filter_bits_per_key: 10,
        compression,
    };
    let mut builder = TableBuilder::new(file, path.clone(), opts);
    for (k, v) in sample_entries() {
        if builder.add(k.encoded(), &v).is_err() {
            return Vec::new();
        }
    }
    if builder.finish().is_err() {
        return Vec::new();
    }
    fs.read_all(&path).unwrap_or_default()
}

fn sample_edits() -> Vec<VersionEdit> {
    let meta = |id: u64, lo: &[u8], hi: &[u8]| FileMeta {
        id: FileId(id),
        size: 4096,
        smallest: InternalKey::new(lo, SeqNo(3), ValueKind::Put),
        largest: InternalKey::new(hi, SeqNo(9), ValueKind::Delete),
        smallest_seq: SeqNo(3),
        largest_seq: SeqNo(9),
    };
    vec![
        VersionEdit {
            log_number: Some(FileId(2)),
            next_file_number: Some(FileId(8)),
            last_seq: Some(SeqNo(10)),
            new_files: vec![
                (Level(0), meta(4, b"a", b"m")),
                (Level(1), meta(5, b"n", b"z")),
            ],
            deleted_files: Vec::new(),
        },
        VersionEdit {
            log_number: Some(FileId(6)),
            next_file_number: Some(FileId(9)),
            last_seq: Some(SeqNo(20)),
            new_files: vec![(Level(1), meta(7, b"a", b"m"))],
            deleted_files: vec![(Level(0), FileId(4))],
        },
    ]
}

//! Data blocks, the SSTable footer and its small blocks, and whole SSTables.

use super::*;

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
pub(super) fn damage(bytes: &mut Vec<u8>, input: &mut Input<'_>) {
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
pub(super) fn walk_block(bytes: &[u8]) {
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
/// footer, block handle, block trailer, properties, range-del block, bloom filter and
/// decompression over arbitrary bytes, with the round trip of each encoder.
pub fn sst_footer(data: &[u8]) {
    footer_handle_and_trailer(data);
    properties_and_range_dels(data);
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

/// The footer (the whole input, and its last `FOOTER_LEN` bytes), a block handle and a
/// block trailer decode from `data` or fail, and re-encode to what they decoded from.
fn footer_handle_and_trailer(data: &[u8]) {
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
}

/// The properties block and the range-del block decode from `data` or fail, and
/// round-trip; decoded range tombstones answer a covering query.
fn properties_and_range_dels(data: &[u8]) {
    if let Ok(p) = TableProperties::decode(data) {
        assert_eq!(
            TableProperties::decode(&p.encode()).ok(),
            Some(p),
            "properties round trip"
        );
    }
    if let Ok(tombstones) = crate::sst::format::decode_range_dels(data) {
        let again = crate::sst::format::encode_range_dels(&tombstones);
        assert_eq!(
            crate::sst::format::decode_range_dels(&again).ok(),
            Some(tombstones.clone()),
            "range-del block round trip"
        );
        let set = crate::range_del::RangeDels::new(&tombstones);
        let _ = set.covering(data.get(..4).unwrap_or_default(), SeqNo::MAX);
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

pub(super) fn user_kind(k: &InternalKey) -> ValueKind {
    crate::key::parse_internal_key(k.encoded())
        .map(|p| p.kind)
        .unwrap_or(ValueKind::Put)
}

/// The table in `bytes`, or `None` if opening it reported corruption.
pub(super) fn open_table(bytes: Vec<u8>) -> Option<Table> {
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
pub(super) fn walk_table(bytes: Vec<u8>) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
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
pub(super) fn reseal_table(bytes: &mut [u8]) {
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
pub(super) fn block_range(len: usize, h: BlockHandle) -> Option<(usize, usize)> {
    let start = usize::try_from(h.offset).ok()?;
    let end = usize::try_from(h.end_with_trailer()?).ok()?;
    (end <= len).then_some((start, end))
}

pub(super) fn reseal_block(bytes: &mut [u8], h: BlockHandle) {
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
pub(super) fn block_contents(bytes: &[u8], h: BlockHandle) -> Option<Vec<u8>> {
    let (start, end) = block_range(bytes.len(), h)?;
    let region = bytes.get(start..end)?;
    let (stored, trailer) = region.split_at(end - start - BLOCK_TRAILER_LEN);
    let ty = decode_trailer(stored, trailer).ok()?;
    decompress(ty, stored).ok()
}

// ---------------------------------------------------------------------------------------
// wal_reader

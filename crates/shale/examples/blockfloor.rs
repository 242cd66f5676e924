//! The floor under a random get of an existing key: the work no point read of a table with
//! compressed blocks can skip, timed alone. Opens every table in DIR through a mapping,
//! lists its data blocks from the index, then, N times, picks a random block and does what
//! a block cache miss must: check its trailer (CRC) and decompress it, straight from the
//! mapping. No bloom filter, index search, block cache or search in the block: whatever a
//! get costs beyond this is the engine's to cut.
//!
//! `cargo run --release -p shale --example blockfloor -- DIR [N]`. Environment:
//! `STAGE=crc` stops after the checksum (the first touch of the block and its CRC alone).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use shale::fs::{FileSystem, PosixFs, RandomAccessFile};
use shale::inspect::iter::InternalIterator;
use shale::inspect::sst::block::Block;
use shale::inspect::sst::compress::decompress;
use shale::inspect::sst::format::{
    decode_trailer, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN,
};

/// The bytes of the block at `handle` in `map`, with its trailer.
fn block_bytes(map: &[u8], handle: BlockHandle) -> Option<&[u8]> {
    let start = usize::try_from(handle.offset).ok()?;
    let end = usize::try_from(handle.end_with_trailer()?).ok()?;
    map.get(start..end)
}

/// Verify and decompress the block in `buf` (block and trailer); `None` if either fails.
/// With `seek`, also seek in the block for that key, as a get does.
fn read_block(buf: &[u8], decompress_too: bool, seek: Option<&[u8]>) -> Option<usize> {
    let (stored, trailer) = buf.split_at(buf.len().checked_sub(BLOCK_TRAILER_LEN)?);
    let ty = decode_trailer(stored, trailer).ok()?;
    if !decompress_too {
        return Some(stored.len());
    }
    let raw = decompress(ty, stored).ok()?;
    let len = raw.len();
    if let Some(key) = seek {
        let block = Arc::new(Block::new(raw, Path::new("block").into(), 0).ok()?);
        let mut it = block.iter();
        it.seek(key).ok()?;
        return it.valid().then_some(len);
    }
    Some(len)
}

/// Every data block handle of the table in `file`.
fn data_blocks(file: &dyn RandomAccessFile) -> Result<Vec<(BlockHandle, Vec<u8>)>, String> {
    let map = file.mapped().ok_or("the table is not mapped")?;
    let footer_at = map.len().checked_sub(FOOTER_LEN).ok_or("too short")?;
    let footer = Footer::decode(map.get(footer_at..).unwrap_or_default())
        .map_err(|e| format!("footer: {}", e.reason))?;
    let buf = block_bytes(map, footer.index).ok_or("index out of range")?;
    let (stored, trailer) = buf.split_at(buf.len().saturating_sub(BLOCK_TRAILER_LEN));
    let ty = decode_trailer(stored, trailer).map_err(|e| format!("index: {}", e.reason))?;
    let index = decompress(ty, stored)?;
    let index =
        Arc::new(Block::new(index, Path::new("index").into(), 0).map_err(|e| e.to_string())?);
    let mut it = index.iter();
    it.seek_to_first().map_err(|e| e.to_string())?;
    let mut handles = Vec::new();
    while it.valid() {
        let handle = BlockHandle::decode_varint(it.value()).map_err(|e| e.reason)?;
        handles.push((handle, it.key().to_vec()));
        it.next().map_err(|e| e.to_string())?;
    }
    Ok(handles)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map_or("readrandom-db", String::as_str));
    let n: usize = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let stage = std::env::var("STAGE").unwrap_or_default();
    let decompress_too = stage != "crc";
    let seek = stage == "seek";
    let fs = PosixFs;
    let mut tables = Vec::new();
    let mut blocks = Vec::new();
    for name in fs.list(dir)? {
        if !name.ends_with(".sst") {
            continue;
        }
        let path = dir.join(&name);
        let file = fs.open_mapped(&path)?;
        for (handle, last_key) in
            data_blocks(&*file).map_err(|why| format!("{}: {why}", path.display()))?
        {
            blocks.push((tables.len(), handle, last_key));
        }
        tables.push(file);
    }
    if blocks.is_empty() {
        eprintln!("no data blocks in {}", dir.display());
        std::process::exit(1);
    }
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let mut bytes = 0usize;
    let start = Instant::now();
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (table, handle, last_key) = &blocks[(x % blocks.len() as u64) as usize];
        let map = tables[*table].mapped().unwrap_or_default();
        let key = seek.then_some(last_key.as_slice());
        bytes += block_bytes(map, *handle)
            .and_then(|buf| read_block(buf, decompress_too, key))
            .expect("a block of a table that opened fails its checksum or decompression");
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} random blocks of {} ({} stage) in {secs:.2} s: {:.0} blocks/s, {:.2} us each, \
         {} bytes each",
        blocks.len(),
        match (decompress_too, seek) {
            (false, _) => "crc",
            (true, false) => "crc+decompress",
            (true, true) => "crc+decompress+seek",
        },
        n as f64 / secs,
        secs * 1e6 / n as f64,
        bytes / n
    );
    Ok(())
}

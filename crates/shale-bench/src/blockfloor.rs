//! `shale-bench blockfloor`: the floor under a random get of an existing key, the work no
//! point read of a table with compressed blocks can skip, timed alone. Maps every table in
//! a database directory, lists its data blocks from the index, then, `--blocks` times, picks
//! a random block and does what a block cache miss must: check its trailer (CRC) and
//! decompress it, straight from the mapping. No bloom filter, index search, block cache or
//! search in the block (unless `--stage seek`): whatever a get costs beyond this is the
//! engine's to cut. One thread; reads the tables through `shale::inspect`, never writes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use shale::fs::{FileSystem, PosixFs, RandomAccessFile};
use shale::inspect::iter::InternalIterator;
use shale::inspect::sst::block::Block;
use shale::inspect::sst::compress::decompress;
use shale::inspect::sst::format::{
    decode_trailer, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN,
};

use crate::engine::BenchResult;
use crate::gen::{shuffled, KeyGen, Rng, ValueGen};

#[derive(Args, Debug, Clone)]
pub struct BlockFloorArgs {
    /// A Shale database directory (its `.sst` files are read, through a mapping).
    #[arg(long)]
    pub dir: PathBuf,
    /// Random blocks to read.
    #[arg(long, default_value_t = 2_000_000)]
    pub blocks: u64,
    /// How far to go with each block.
    #[arg(long, value_enum, default_value_t = Stage::Decompress)]
    pub stage: Stage,
    /// First write this many random keys (16 B keys, 100 B values, as the fills) into
    /// `--dir` with Shale's default options, compact them into the last level and close:
    /// a database to time. 0: time the tables `--dir` holds.
    #[arg(long, default_value_t = 0)]
    pub load: u64,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

/// How much of a block cache miss's work each read does.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The first touch of the block and its checksum alone.
    Crc,
    /// The checksum, then decompression.
    Decompress,
    /// Both, then a seek in the block to its last key, as a get does.
    Seek,
}

impl Stage {
    /// The steps each read takes, as the report names them.
    fn steps(self) -> &'static str {
        match self {
            Stage::Crc => "crc",
            Stage::Decompress => "crc+decompress",
            Stage::Seek => "crc+decompress+seek",
        }
    }
}

/// A mapped table file.
type Table = Arc<dyn RandomAccessFile>;

/// A data block of one of the mapped tables: the table's position, where the block is,
/// and its last key (the index's separator).
struct DataBlock {
    table: usize,
    handle: BlockHandle,
    last_key: Vec<u8>,
}

/// Time `--blocks` random block reads of the tables in `--dir` and print the rate.
///
/// # Errors
/// The directory or a table that cannot be read, no data blocks, or a block that fails its
/// checksum or decompression.
pub fn run(args: &BlockFloorArgs) -> BenchResult<()> {
    if args.load > 0 {
        load(&args.dir, args.load, args.seed)?;
    }
    let (tables, blocks) = data_blocks_of_dir(&args.dir)?;
    if blocks.is_empty() {
        return Err(format!("no data blocks in {}", args.dir.display()).into());
    }
    let n = args.blocks.max(1);
    let count = u64::try_from(blocks.len())?;
    let mut rng = Rng::new(args.seed);
    let mut bytes = 0usize;
    let start = Instant::now();
    for _ in 0..n {
        let i = usize::try_from(rng.below(count))?;
        let block = blocks.get(i).ok_or("block index out of range")?;
        let map = tables
            .get(block.table)
            .and_then(|t| t.mapped())
            .ok_or("the table is not mapped")?;
        let key = (args.stage == Stage::Seek).then_some(block.last_key.as_slice());
        bytes += block_bytes(map, block.handle)
            .and_then(|buf| read_block(buf, args.stage, key))
            .ok_or("a block of a table that opened fails its checksum or decompression")?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} random blocks of {} ({} stage) in {secs:.2} s: {:.0} blocks/s, {:.2} us each, \
         {} bytes each",
        blocks.len(),
        args.stage.steps(),
        n as f64 / secs,
        secs * 1e6 / n as f64,
        bytes / usize::try_from(n)?
    );
    Ok(())
}

/// Write keys `0..n` in a random order into a Shale database in `dir`, compact, close.
fn load(dir: &Path, n: u64, seed: u64) -> BenchResult<()> {
    let db = shale::Db::open(dir, shale::Options::default())?;
    let keys = KeyGen { key_size: 16 };
    let mut values = ValueGen::new(seed);
    let mut key = Vec::new();
    for i in shuffled(n, &mut Rng::new(seed)) {
        keys.key(i, &mut key);
        db.put(&key, values.next(100))?;
    }
    db.compact_range(None, None)?;
    db.wait_idle()?;
    eprintln!(
        "loaded {n} keys into {}; files per level {:?}",
        dir.display(),
        db.level_file_counts()
    );
    db.close()?;
    Ok(())
}

/// Every `.sst` file in `dir`, mapped, and the data blocks of them all.
fn data_blocks_of_dir(dir: &Path) -> BenchResult<(Vec<Table>, Vec<DataBlock>)> {
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
            blocks.push(DataBlock {
                table: tables.len(),
                handle,
                last_key,
            });
        }
        tables.push(file);
    }
    Ok((tables, blocks))
}

/// The bytes of the block at `handle` in `map`, with its trailer.
fn block_bytes(map: &[u8], handle: BlockHandle) -> Option<&[u8]> {
    let start = usize::try_from(handle.offset).ok()?;
    let end = usize::try_from(handle.end_with_trailer()?).ok()?;
    map.get(start..end)
}

/// Verify the block in `buf` (block and trailer) and, as `stage` asks, decompress it and
/// seek in it for `seek`; its stored or decompressed length, `None` if a step fails.
fn read_block(buf: &[u8], stage: Stage, seek: Option<&[u8]>) -> Option<usize> {
    let (stored, trailer) = buf.split_at(buf.len().checked_sub(BLOCK_TRAILER_LEN)?);
    let ty = decode_trailer(stored, trailer).ok()?;
    if stage == Stage::Crc {
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

/// Every data block handle of the table in `file`, with the index's key for it.
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

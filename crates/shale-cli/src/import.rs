//! `import`: bulk load a file in write batches, with a progress bar and a closing
//! throughput line; then, if a semantic index is open, a wait until it has applied them.
//! Vector files (`npy`) are read in `vectors.rs`; this file reads the line formats.
//!
//! Batches are cut at `--batch-bytes` (default 1 MiB): big enough that the per-write costs
//! (WAL record, group commit) vanish, small enough that one batch never approaches the
//! memtable size. Each batch is atomic; the import as a whole is not: if it fails half way,
//! the batches before the failing line are in the database.

use std::io::{BufRead, BufReader, Read};
use std::time::Instant;

use shale::{WriteBatch, WriteOptions};

use crate::args::{Cli, Format, ImportArgs};
use crate::error::{CliError, Result};
use crate::escape::{json_field, unescape};
use crate::vectors::{self, Target};

/// One parsed input line: `None` for a line to skip (blank tsv or jsonl lines).
pub type Pair = Option<(Vec<u8>, Vec<u8>)>;

fn parse_line(
    args: &ImportArgs,
    target: Option<&Target<'_>>,
    number: u64,
    line: &[u8],
) -> Result<Pair, String> {
    match args.format {
        Format::Lines => {
            let mut key = args.key_prefix.as_deref().unwrap_or("").as_bytes().to_vec();
            key.extend_from_slice(format!("{number:010}").as_bytes());
            Ok(Some((key, line.to_vec())))
        }
        Format::Tsv => {
            if line.is_empty() {
                return Ok(None);
            }
            let text = std::str::from_utf8(line).map_err(|e| {
                format!("not UTF-8 at byte {} (use \\xNN escapes)", e.valid_up_to())
            })?;
            let (key, value) = text
                .split_once('\t')
                .ok_or("no tab between key and value")?;
            if value.contains('\t') {
                return Err("more than one tab (escape tabs in values as \\t)".into());
            }
            Ok(Some((
                unescape(key).map_err(|e| format!("key: {e}"))?,
                unescape(value).map_err(|e| format!("value: {e}"))?,
            )))
        }
        Format::Jsonl => {
            if line.iter().all(u8::is_ascii_whitespace) {
                return Ok(None);
            }
            let value: serde_json::Value =
                serde_json::from_slice(line).map_err(|e| format!("bad JSON: {e}"))?;
            let obj = value.as_object().ok_or("not a JSON object")?;
            Ok(Some((json_field(obj, "key")?, json_field(obj, "value")?)))
        }
        Format::VectorsJsonl => {
            if line.iter().all(u8::is_ascii_whitespace) {
                return Ok(None);
            }
            let target = target.ok_or("vector lines need the index open")?;
            vectors::parse_jsonl(target, line).map(Some)
        }
        Format::Npy => Err("a .npy file has no lines".into()),
    }
}

/// Where `import` writes its batches: a database (`run`), or a server (`remote.rs`).
pub trait Sink {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>);
    /// Bytes and entries held since the last `write`.
    fn pending(&self) -> (usize, usize);
    /// Write what is held as one atomic batch.
    fn write(&mut self) -> Result<()>;
}

/// A batch for a database.
struct DbSink<'a> {
    db: &'a shale::Db,
    batch: WriteBatch,
}

impl Sink for DbSink<'_> {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.batch.put(key, value);
    }
    fn pending(&self) -> (usize, usize) {
        (self.batch.approximate_size(), self.batch.len())
    }
    fn write(&mut self) -> Result<()> {
        let batch = std::mem::take(&mut self.batch);
        Ok(self.db.write(batch, WriteOptions::default())?)
    }
}

/// The input `args` names, and its length if known.
fn input(args: &ImportArgs) -> Result<(Box<dyn Read>, Option<u64>)> {
    if args.file.as_os_str() == "-" {
        return Ok((Box::new(std::io::stdin().lock()), None));
    }
    let file = std::fs::File::open(&args.file).map_err(|e| CliError::io(&args.file, e))?;
    let len = file.metadata().ok().map(|m| m.len());
    Ok((Box::new(file), len))
}

/// Read `args`' line format into `sink` in batches of about `--batch-bytes` (and at most
/// `max_ops` entries), with a progress bar; print the throughput line.
pub fn load(
    args: &ImportArgs,
    target: Option<&Target<'_>>,
    sink: &mut dyn Sink,
    max_ops: usize,
) -> Result<()> {
    let (input, total) = input(args)?;
    let batch_bytes = args.batch_bytes.max(1);
    let bar = match total {
        Some(len) => indicatif::ProgressBar::new(len).with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        ),
        None => indicatif::ProgressBar::new_spinner(),
    };
    let start = Instant::now();
    let (mut keys, mut bytes, mut read) = (0u64, 0u64, 0u64);
    let mut reader = BufReader::with_capacity(1 << 20, input);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::io(&args.file, e))?;
        if n == 0 {
            break;
        }
        number += 1;
        read += n as u64;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        let pair = parse_line(args, target, number, &line).map_err(|reason| CliError::Input {
            path: args.file.clone(),
            line: number,
            reason,
        })?;
        if let Some((key, value)) = pair {
            bytes += (key.len() + value.len()) as u64;
            keys += 1;
            sink.put(key, value);
        }
        let (held_bytes, held_ops) = sink.pending();
        if held_bytes >= batch_bytes || held_ops >= max_ops {
            sink.write()?;
            bar.set_position(read);
        }
    }
    if sink.pending().1 > 0 {
        sink.write()?;
    }
    bar.finish_and_clear();
    eprintln!("{}", crate::kv::throughput("imported", keys, bytes, start));
    Ok(())
}

/// `--keys` and `--payloads` go with `.npy` files only.
pub fn check_args(args: &ImportArgs) -> Result<()> {
    if args.format != Format::Npy && (args.keys.is_some() || args.payloads.is_some()) {
        return Err(CliError::Usage(
            "--keys and --payloads go with --format npy".into(),
        ));
    }
    Ok(())
}

pub fn run(cli: &Cli, args: &ImportArgs) -> Result<()> {
    check_args(args)?;
    if args.format == Format::Npy {
        return vectors::import_npy(cli, args);
    }
    let vector_lines = args.format == Format::VectorsJsonl;
    let db = cli.open(true, vector_lines)?;
    let target = if vector_lines {
        Some(Target::new(db.index()?))
    } else {
        None
    };
    let mut sink = DbSink {
        db: &db,
        batch: WriteBatch::new(),
    };
    load(args, target.as_ref(), &mut sink, usize::MAX)?;
    if let Some(open) = &db.index {
        crate::index::wait_indexed(&open.index)?;
    }
    Ok(db.close()?)
}

//! Vectors in: `import --format npy` (a `.npy` file, keys numbered or listed, payloads from a
//! file), the vector lines of `import --format vectors-jsonl`, and the query vector of
//! `search --vector` / `--vector-file`.
//!
//! A vector goes into the database as a vector value ([`vector_value`]: the vector and a
//! payload) under the index's prefix, written in write batches like any import; the index
//! follows the writes by itself. Before a vector is batched it is checked as the index will
//! check it (its key under the prefix, its dimension, finite, a direction under cosine), so
//! that a bad row is reported by its number; the engine refuses the same at the write.
//!
//! What is checked before anything is written: the file's header and length, its dimension
//! against the index's, and the `--keys` and `--payloads` files (a line per row, every key
//! under the prefix). A bad row stops the import; the batches before it are in the database.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::time::Instant;

use shale::{WriteBatch, WriteOptions};
use shale_npy::{NpyError, NpyReader};
use shale_search::semantic::{vector_value, VectorIndex};

use crate::args::{Cli, ImportArgs};
use crate::error::{CliError, Result};
use crate::escape::escape;

/// The index vectors go into, and the checks it will make.
pub struct Target<'a> {
    index: &'a VectorIndex,
}

impl<'a> Target<'a> {
    pub fn new(index: &'a VectorIndex) -> Target<'a> {
        Target { index }
    }

    /// Why `vector` cannot be the value of `key` in the index, if it cannot.
    pub fn check(&self, key: &[u8], vector: &[f32]) -> Result<(), String> {
        let prefix = self.index.prefix();
        if !key.starts_with(prefix) {
            return Err(format!(
                "key {} is outside index {:?} (prefix {}), where a vector is not indexed",
                escape(key),
                self.index.name(),
                escape(prefix)
            ));
        }
        self.index
            .metric()
            .prepare(vector, self.index.dim(), "the vector")
            .map(drop)
            .map_err(|e| match e {
                shale::Error::InvalidArgument(why) => why,
                e => e.to_string(),
            })
    }
}

/// A JSON array of numbers as a vector (a number outside `f32`'s range becomes an infinity,
/// which [`Target::check`] refuses).
pub fn json_vector(value: &serde_json::Value) -> Result<Vec<f32>, String> {
    let items = value
        .as_array()
        .ok_or("the vector is not a JSON array of numbers, like [0.1, -0.2]")?;
    items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            x.as_f64()
                .map(|x| x as f32)
                .ok_or_else(|| format!("element {i} of the vector is not a number: {x}"))
        })
        .collect()
}

/// One line of `--format vectors-jsonl`: `{"key": .., "vector": [..], "payload": ..}` as a
/// key and its vector value.
pub fn parse_jsonl(target: &Target<'_>, line: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("bad JSON: {e}"))?;
    let obj = value.as_object().ok_or("not a JSON object")?;
    let key = crate::escape::json_field(obj, "key")?;
    let vector = json_vector(obj.get("vector").ok_or("no \"vector\" field")?)?;
    let payload = if obj.contains_key("payload") || obj.contains_key("payload_hex") {
        crate::escape::json_field(obj, "payload")?
    } else {
        Vec::new()
    };
    target.check(&key, &vector)?;
    Ok((key, vector_value(&vector, &payload)))
}

/// The query vector of `search`: from `--vector` (JSON) or `--vector-file` (a `.npy` of one
/// vector), with what it came from for errors; `None` if neither is given.
pub fn query(json: Option<&str>, file: Option<&Path>) -> Result<Option<(String, Vec<f32>)>> {
    if let Some(json) = json {
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|e| CliError::Usage(format!("--vector {json:?}: not JSON: {e}")))?;
        let vector = json_vector(&value)
            .map_err(|why| CliError::Usage(format!("--vector {json:?}: {why}")))?;
        return Ok(Some(("--vector".into(), vector)));
    }
    let Some(path) = file else {
        return Ok(None);
    };
    let npy_error = |error| CliError::Npy {
        path: path.to_path_buf(),
        error,
    };
    let mut reader = NpyReader::open(path).map_err(npy_error)?;
    if reader.header().rows != 1 {
        return Err(npy_error(NpyError::Shape {
            shape: reader.header().shape.clone(),
            need: "one vector, of shape (dim,) or (1, dim)",
        }));
    }
    let mut vector = Vec::new();
    reader.next_row(&mut vector).map_err(npy_error)?;
    Ok(Some((path.display().to_string(), vector)))
}

/// Refuse vectors of another dimension than `index`'s, naming where they came from.
pub fn check_dim(what: &str, got: usize, index: &VectorIndex) -> Result<()> {
    if got == index.dim() {
        Ok(())
    } else {
        Err(CliError::Dimension {
            what: what.to_owned(),
            got,
            want: index.dim(),
            index: index.name().to_owned(),
        })
    }
}

/// `import FILE --format npy`: every row of the file as a vector value (see the module
/// documentation), then a wait until the index has them all.
pub fn import_npy(cli: &Cli, args: &ImportArgs) -> Result<()> {
    let path = &args.file;
    let mut reader = open_npy(path)?;
    let (rows, cols) = (reader.header().rows as u64, reader.header().cols);
    let db = cli.open(true, true)?;
    let index = db.index()?;
    check_dim(&path.display().to_string(), cols, index)?;
    let mut keys = match &args.keys {
        Some(file) => {
            check_lines(file, rows, path, Some(index.prefix()))?;
            Keys::Listed(Lines::open(file)?)
        }
        None => Keys::Numbered(match &args.key_prefix {
            Some(p) => p.as_bytes().to_vec(),
            None => index.prefix().to_vec(),
        }),
    };
    let mut payloads = match &args.payloads {
        Some(file) => {
            check_lines(file, rows, path, None)?;
            Some(Lines::open(file)?)
        }
        None => None,
    };
    let bar = indicatif::ProgressBar::new(rows).with_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {human_pos}/{human_len} vectors {per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let rows = Rows {
        path,
        target: Target::new(index),
        keys: &mut keys,
        payloads: payloads.as_mut(),
    };
    let (n, bytes) = rows.write(&mut reader, &db, args.batch_bytes.max(1), &bar)?;
    bar.finish_and_clear();
    eprintln!("{}", crate::kv::throughput("imported", n, bytes, start));
    crate::index::wait_indexed(index)?;
    Ok(db.close()?)
}

/// The `.npy` file `path` ("-": stdin), checked to be a 2-D array.
fn open_npy(path: &Path) -> Result<NpyReader> {
    let npy_error = |error| CliError::Npy {
        path: path.to_path_buf(),
        error,
    };
    let reader = if path.as_os_str() == "-" {
        NpyReader::new(Box::new(std::io::stdin()), None)
    } else {
        NpyReader::open(path)
    }
    .map_err(npy_error)?;
    let shape = &reader.header().shape;
    if shape.len() != 2 {
        return Err(npy_error(NpyError::Shape {
            shape: shape.clone(),
            need: "a 2-D array, one vector per row",
        }));
    }
    Ok(reader)
}

/// What each row of an `.npy` import becomes: its key, its payload, checked against the
/// index.
struct Rows<'a> {
    path: &'a Path,
    target: Target<'a>,
    keys: &'a mut Keys,
    payloads: Option<&'a mut Lines>,
}

impl Rows<'_> {
    /// Write every row of `reader` into `db` in batches of about `batch_bytes`, moving
    /// `bar` on; returns the rows and bytes written.
    fn write(
        mut self,
        reader: &mut NpyReader,
        db: &shale::Db,
        batch_bytes: usize,
        bar: &indicatif::ProgressBar,
    ) -> Result<(u64, u64)> {
        let (mut n, mut bytes) = (0u64, 0u64);
        let mut batch = WriteBatch::new();
        let mut vector = Vec::new();
        while reader
            .next_row(&mut vector)
            .map_err(|error| CliError::Npy {
                path: self.path.to_path_buf(),
                error,
            })?
        {
            let (key, value) = self.row(n, &vector)?;
            bytes += (key.len() + value.len()) as u64;
            batch.put(key, value);
            n += 1;
            if batch.approximate_size() >= batch_bytes {
                db.write(std::mem::take(&mut batch), WriteOptions::default())?;
                bar.set_position(n);
            }
        }
        if !batch.is_empty() {
            db.write(batch, WriteOptions::default())?;
        }
        Ok((n, bytes))
    }

    /// Row `n`'s key and vector value.
    fn row(&mut self, n: u64, vector: &[f32]) -> Result<(Vec<u8>, Vec<u8>)> {
        let key = match &mut self.keys {
            Keys::Numbered(prefix) => {
                let mut key = prefix.clone();
                key.extend_from_slice(format!("{n:010}").as_bytes());
                key
            }
            // check_lines counted a line per row.
            Keys::Listed(lines) => lines.next()?.unwrap_or_default(),
        };
        let payload = match &mut self.payloads {
            Some(lines) => lines.next()?.unwrap_or_default(),
            None => Vec::new(),
        };
        self.target
            .check(&key, vector)
            .map_err(|reason| CliError::Row {
                path: self.path.to_path_buf(),
                row: n,
                reason,
            })?;
        let value = vector_value(vector, &payload);
        Ok((key, value))
    }
}

/// Where the keys of `import --format npy` come from.
enum Keys {
    /// The prefix followed by the row number, zero-padded to 10 digits.
    Numbered(Vec<u8>),
    /// A line of `--keys` per row.
    Listed(Lines),
}

/// The lines of a `--keys` or `--payloads` file, read as `--format lines` reads values: the
/// bytes of each line, without its `\n` or `\r\n`.
struct Lines {
    path: PathBuf,
    reader: BufReader<std::fs::File>,
    number: u64,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines> {
        let file = std::fs::File::open(path).map_err(|e| CliError::io(path, e))?;
        Ok(Lines {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(1 << 20, file),
            number: 0,
        })
    }

    fn next(&mut self) -> Result<Option<Vec<u8>>> {
        let mut line = Vec::new();
        let n = self
            .reader
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::io(&self.path, e))?;
        if n == 0 {
            return Ok(None);
        }
        self.number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        Ok(Some(line))
    }
}

/// Check that `file` has a line for each of the `rows` rows of `npy` and, for keys, that
/// each is a key under `prefix`.
fn check_lines(file: &Path, rows: u64, npy: &Path, prefix: Option<&[u8]>) -> Result<()> {
    let mut lines = Lines::open(file)?;
    while let Some(line) = lines.next()? {
        let Some(prefix) = prefix else { continue };
        let reason = if line.is_empty() {
            "an empty key".to_owned()
        } else if !line.starts_with(prefix) {
            format!(
                "key {} is outside the index's prefix {}",
                escape(&line),
                escape(prefix)
            )
        } else {
            continue;
        };
        return Err(CliError::Input {
            path: file.to_path_buf(),
            line: lines.number,
            reason,
        });
    }
    if lines.number != rows {
        return Err(CliError::Usage(format!(
            "{} has {} lines, but {} has {rows} vectors: one line per vector",
            file.display(),
            lines.number,
            npy.display()
        )));
    }
    Ok(())
}

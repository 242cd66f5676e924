//! The key-value commands: put, get, del, cas, scan, export.

use std::io::Write;
use std::ops::Bound;
use std::time::Instant;

use crate::args::{CasArgs, Cli, ExportArgs, Format, ScanArgs};
use crate::error::{CliError, Result};
use crate::escape::{escape, json_bytes};

/// A compare-and-set's key, expected value (`None`: missing) and new value (`None`:
/// delete), as bytes.
pub struct Cas {
    pub key: Vec<u8>,
    pub expected: Option<Vec<u8>>,
    pub new_value: Option<Vec<u8>>,
}

impl CasArgs {
    pub fn parse(&self, cli: &Cli) -> Result<Cas> {
        let bytes = |v: &Option<String>| v.as_deref().map(|v| cli.bytes(v)).transpose();
        Ok(Cas {
            key: cli.bytes(&self.key)?,
            expected: bytes(&self.expect)?,
            new_value: bytes(&self.value)?,
        })
    }
}

pub fn put(cli: &Cli, key: &str, value: &str, ttl: Option<u64>) -> Result<()> {
    let (key, value) = (cli.bytes(key)?, cli.bytes(value)?);
    if let Some(db) = cli.open_ttl(ttl.is_some())? {
        match ttl {
            Some(secs) => db.put_with_ttl(key, value, std::time::Duration::from_secs(secs))?,
            None => db.put(key, value)?,
        }
        return Ok(db.close()?);
    }
    let db = cli.open(true, false)?;
    Space::open(cli, &db, true)?.put(key, value)?;
    Ok(db.close()?)
}

/// The key space a command reads or writes: the default keyspace, or `--keyspace`'s.
pub enum Space<'a> {
    Default(&'a shale::Db),
    Named(shale::Keyspace),
}

impl<'a> Space<'a> {
    /// `--keyspace`'s keyspace of `db` (made if `create`), or the default one.
    pub fn open(cli: &Cli, db: &'a shale::Db, create: bool) -> Result<Space<'a>> {
        let Some(name) = &cli.keyspace else {
            return Ok(Space::Default(db));
        };
        if !create && !db.keyspace_names().contains(name) {
            return Err(CliError::Usage(format!("no keyspace named {name:?}")));
        }
        Ok(Space::Named(db.keyspace(name)?))
    }

    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> shale::Result<()> {
        match self {
            Space::Default(db) => db.put(key, value),
            Space::Named(ks) => ks.put(key, value),
        }
    }

    fn delete(&self, key: Vec<u8>) -> shale::Result<()> {
        match self {
            Space::Default(db) => db.delete(key),
            Space::Named(ks) => ks.delete(key),
        }
    }

    fn delete_range(&self, start: Vec<u8>, end: Vec<u8>) -> shale::Result<()> {
        match self {
            Space::Default(db) => db.delete_range(start, end),
            Space::Named(ks) => ks.delete_range(start, end),
        }
    }

    fn multi_get(&self, keys: &[Vec<u8>]) -> shale::Result<Vec<Option<Vec<u8>>>> {
        let opts = shale::ReadOptions::default();
        match self {
            Space::Default(db) => db.multi_get(keys, &opts),
            Space::Named(ks) => ks.multi_get(keys, &opts),
        }
    }

    fn range(&self, bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> shale::Result<shale::RangeIter> {
        match self {
            Space::Default(db) => db.range(bounds),
            Space::Named(ks) => ks.range(bounds),
        }
    }

    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> shale::Result<()> {
        match self {
            Space::Default(db) => db.compact_range(begin, end),
            Space::Named(ks) => ks.compact_range(begin, end),
        }
    }
}

pub fn get(cli: &Cli, out: &mut impl Write, keys: &[String], raw: bool, json: bool) -> Result<()> {
    if raw && keys.len() > 1 {
        return Err(CliError::Usage("--raw takes one key".into()));
    }
    let keys = keys
        .iter()
        .map(|k| cli.bytes(k))
        .collect::<Result<Vec<_>>>()?;
    if let Some(db) = cli.open_ttl(false)? {
        let values = keys
            .iter()
            .map(|k| db.get(k))
            .collect::<shale::Result<Vec<_>>>()?;
        db.close()?;
        return print_values(out, &keys, &values, raw, json);
    }
    let db = cli.open(false, false)?;
    let values = Space::open(cli, &db, false)?.multi_get(&keys)?;
    // Every command closes explicitly: a failure found then (a background one) is an error.
    db.close()?;
    print_values(out, &keys, &values, raw, json)
}

/// What `get` prints for `keys` and their `values`: one key's value alone (escaped, or
/// its bytes with `raw`), else a pair per key found; `NotFound` naming the missing keys.
pub fn print_values(
    out: &mut impl Write,
    keys: &[Vec<u8>],
    values: &[Option<Vec<u8>>],
    raw: bool,
    json: bool,
) -> Result<()> {
    if let (false, [key], [value]) = (json, keys, values) {
        let Some(value) = value else {
            return Err(CliError::NotFound(escape(key)));
        };
        return if raw {
            out.write_all(value)
        } else {
            writeln!(out, "{}", escape(value))
        }
        .map_err(CliError::Stdout);
    }
    let mut missing = Vec::new();
    for (key, value) in keys.iter().zip(values) {
        match value {
            Some(value) => write_pair(out, key, value, json).map_err(CliError::Stdout)?,
            None => missing.push(escape(key)),
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    out.flush().map_err(CliError::Stdout)?;
    Err(CliError::NotFound(missing.join(", ")))
}

pub fn del(cli: &Cli, key: &str) -> Result<()> {
    let key = cli.bytes(key)?;
    let db = cli.open(true, false)?;
    Space::open(cli, &db, false)?.delete(key)?;
    Ok(db.close()?)
}

/// `cas`: one transaction that reads KEY and, if it holds the expected value, writes it.
/// The CLI holds the database's lock, so nothing writes between the read and the commit.
pub fn cas(cli: &Cli, out: &mut impl Write, args: &CasArgs) -> Result<()> {
    let cas = args.parse(cli)?;
    let db = cli.open(true, false)?;
    let mut txn = db.transaction();
    let current = txn.get(&cas.key)?;
    let swapped = current == cas.expected;
    if swapped {
        match &cas.new_value {
            Some(value) => txn.put(&cas.key, value),
            None => txn.delete(&cas.key),
        }
        txn.commit()?;
    }
    db.close()?;
    cas_outcome(out, &cas.key, swapped, current.as_deref())
}

/// What `cas` reports: nothing if it swapped; else the value KEY holds (escaped, on
/// stdout; nothing if it is missing) and [`CliError::Unchanged`] (exit 1).
pub fn cas_outcome(
    out: &mut impl Write,
    key: &[u8],
    swapped: bool,
    current: Option<&[u8]>,
) -> Result<()> {
    if swapped {
        return Ok(());
    }
    if let Some(value) = current {
        writeln!(out, "{}", escape(value)).map_err(CliError::Stdout)?;
        out.flush().map_err(CliError::Stdout)?;
    }
    Err(CliError::Unchanged {
        key: escape(key),
        missing: current.is_none(),
    })
}

pub fn del_range(cli: &Cli, start: &str, end: &str) -> Result<()> {
    let (start, end) = (cli.bytes(start)?, cli.bytes(end)?);
    let db = cli.open(true, false)?;
    Space::open(cli, &db, false)?.delete_range(start, end)?;
    Ok(db.close()?)
}

/// The keys `[lower, upper)` that `--from` (inclusive), `--to` (exclusive) and `--prefix`
/// admit together (`None`: no bound), as `scan` and `search` read them.
pub struct KeyRange {
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
}

impl KeyRange {
    /// The range of the three arguments, read with `--escaped` if given.
    pub fn new(
        cli: &Cli,
        from: &Option<String>,
        to: &Option<String>,
        prefix: &Option<String>,
    ) -> Result<KeyRange> {
        let arg = |a: &Option<String>| a.as_deref().map(|s| cli.bytes(s)).transpose();
        let (from, to, prefix) = (arg(from)?, arg(to)?, arg(prefix)?);
        // The tighter of each pair of bounds.
        let lower = match (from, prefix.clone()) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let upper = match (to, prefix.as_deref().and_then(shale::prefix_successor)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Ok(KeyRange { lower, upper })
    }

    /// True if no key can be in the range.
    pub fn is_empty(&self) -> bool {
        matches!((&self.lower, &self.upper), (Some(lo), Some(hi)) if lo >= hi)
    }
}

pub fn scan(cli: &Cli, out: &mut impl Write, args: &ScanArgs) -> Result<()> {
    let range = KeyRange::new(cli, &args.from, &args.to, &args.prefix)?;
    let bounds = (
        range
            .lower
            .clone()
            .map_or(Bound::Unbounded, Bound::Included),
        range
            .upper
            .clone()
            .map_or(Bound::Unbounded, Bound::Excluded),
    );
    if let Some(db) = cli.open_ttl(false)? {
        if !range.is_empty() {
            let mut pairs = db.range(bounds)?;
            if args.reverse {
                pairs = pairs.rev();
            }
            write_pairs(out, pairs, args)?;
        }
        return Ok(db.close()?);
    }
    let db = cli.open(false, false)?;
    if range.is_empty() {
        return Ok(db.close()?);
    }
    let mut pairs = Space::open(cli, &db, false)?.range(bounds)?;
    if args.reverse {
        pairs = pairs.rev();
    }
    write_pairs(out, pairs, args)?;
    Ok(db.close()?)
}

/// At most `--limit` of `pairs`, as `write_pair` prints them.
fn write_pairs(
    out: &mut impl Write,
    pairs: impl Iterator<Item = shale::Result<(Vec<u8>, Vec<u8>)>>,
    args: &ScanArgs,
) -> Result<()> {
    for pair in pairs.take(args.limit.unwrap_or(usize::MAX)) {
        let (key, value) = pair?;
        write_pair(out, &key, &value, args.json).map_err(CliError::Stdout)?;
    }
    Ok(())
}

/// One pair as `key<TAB>value` (escaped) or a JSON line.
pub fn write_pair(
    out: &mut impl Write,
    key: &[u8],
    value: &[u8],
    json: bool,
) -> std::io::Result<()> {
    if json {
        let mut obj = serde_json::Map::new();
        json_bytes(&mut obj, "key", key);
        json_bytes(&mut obj, "value", value);
        writeln!(out, "{}", serde_json::Value::Object(obj))
    } else {
        writeln!(out, "{}\t{}", escape(key), escape(value))
    }
}

pub fn export(cli: &Cli, stdout: &mut impl Write, args: &ExportArgs) -> Result<()> {
    let json = match args.format {
        Format::Tsv => false,
        Format::Jsonl => true,
        Format::Lines | Format::Npy | Format::VectorsJsonl => {
            return Err(CliError::Usage(
                "export supports --format tsv or jsonl (lines would lose the keys; vector \
                 values export as bytes, which import reads back)"
                    .into(),
            ))
        }
    };
    let db = cli.open(false, false)?;
    let mut file = match &args.output {
        Some(path) => Some((
            std::io::BufWriter::new(
                std::fs::File::create(path).map_err(|e| CliError::io(path, e))?,
            ),
            path,
        )),
        None => None,
    };
    let bar = indicatif::ProgressBar::new_spinner().with_style(
        indicatif::ProgressStyle::with_template("{spinner} {human_pos} keys exported, {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    let start = Instant::now();
    let (mut keys, mut bytes) = (0u64, 0u64);
    for pair in db.range::<&[u8]>(..)? {
        let (key, value) = pair?;
        match &mut file {
            Some((w, path)) => {
                write_pair(w, &key, &value, json).map_err(|e| CliError::io(path.as_path(), e))?
            }
            None => write_pair(stdout, &key, &value, json).map_err(CliError::Stdout)?,
        }
        keys += 1;
        bytes += (key.len() + value.len()) as u64;
        if keys.is_multiple_of(4096) {
            bar.set_position(keys);
        }
    }
    if let Some((mut w, path)) = file {
        w.flush().map_err(|e| CliError::io(path.as_path(), e))?;
    }
    bar.finish_and_clear();
    eprintln!("{}", throughput("exported", keys, bytes, start));
    Ok(db.close()?)
}

/// The closing line of import and export: counts and rates.
pub fn throughput(verb: &str, keys: u64, bytes: u64, start: Instant) -> String {
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let mb = bytes as f64 / 1e6;
    format!(
        "{verb} {keys} keys ({mb:.1} MB) in {secs:.2} s: {:.0} keys/s, {:.1} MB/s",
        keys as f64 / secs,
        mb / secs
    )
}

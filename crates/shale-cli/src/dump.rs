//! The file-level commands: `dump-sst`, `dump-wal`, `dump-manifest` and `verify`. They
//! read files with the library's own decoders (docs/format.md describes the bytes) and
//! never open the database, so they work on a copy of a damaged one.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Map, Value};
use shale::fs::{FileSystem, PosixFs};
use shale::inspect::batch::BatchReader;
use shale::inspect::iter::InternalIterator;
use shale::inspect::key::{parse_internal_key, InternalKey, ValueKind};
use shale::inspect::range_del::RangeTombstone;
use shale::inspect::sst::TableProperties;
use shale::inspect::version::VersionEdit;
use shale::inspect::wal::{LogReader, Predecessor, TailReport};
use shale::inspect::IndexEntry;

use crate::args::Cli;
use crate::error::{CliError, Result};
use crate::escape::{escape, json_bytes};

fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Put => "put",
        ValueKind::Delete => "del",
        ValueKind::RangeDelete => "range-del",
    }
}

/// An encoded internal key as `user_key @seq kind` (escaped).
fn ikey_text(encoded: &[u8]) -> String {
    match parse_internal_key(encoded) {
        Some(k) => format!("{} @{} {}", escape(k.user_key), k.seq.0, kind_name(k.kind)),
        None => format!("<not an internal key: {}>", escape(encoded)),
    }
}

fn ikey_json(encoded: &[u8]) -> Value {
    let mut obj = Map::new();
    match parse_internal_key(encoded) {
        Some(k) => {
            json_bytes(&mut obj, "key", k.user_key);
            obj.insert("seq".into(), k.seq.0.into());
            obj.insert("kind".into(), kind_name(k.kind).into());
        }
        None => json_bytes(&mut obj, "raw", encoded),
    }
    Value::Object(obj)
}

fn internal_key_text(k: &InternalKey) -> String {
    ikey_text(k.encoded())
}

fn read_file(path: &Path) -> Result<Vec<u8>> {
    Ok(PosixFs.read_all(path)?)
}

pub fn sst(out: &mut impl Write, path: &Path, json: bool) -> Result<()> {
    let table = shale::inspect::open_table(path)?;
    let index = shale::inspect::table_index(&table)?;
    let mut it = table.iter_opt(false);
    it.seek_to_first()?;
    let mut entries = Vec::new();
    while it.valid() {
        entries.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    let range_dels = table
        .range_dels()
        .map(|s| s.tombstones())
        .unwrap_or_default();
    let dump = SstDump {
        path,
        file_size: table.file_size(),
        props: table.properties(),
        index: &index,
        entries: &entries,
        range_dels: &range_dels,
    };
    let result = match json {
        true => writeln!(out, "{:#}", sst_json(&dump)),
        false => sst_text(out, &dump),
    };
    result.map_err(CliError::Stdout)
}

/// What `dump-sst` shows of a table.
struct SstDump<'a> {
    path: &'a Path,
    file_size: u64,
    props: &'a TableProperties,
    index: &'a [IndexEntry],
    /// (internal key, value) in order.
    entries: &'a [(Vec<u8>, Vec<u8>)],
    range_dels: &'a [RangeTombstone],
}

fn sst_json(d: &SstDump<'_>) -> Value {
    let p = d.props;
    let props = json!({
        "entries": p.entries,
        "deletions": p.deletions,
        "data_blocks": p.data_blocks,
        "data_bytes": p.data_bytes,
        "raw_key_bytes": p.raw_key_bytes,
        "raw_value_bytes": p.raw_value_bytes,
        "smallest_seq": p.smallest_seq.0,
        "largest_seq": p.largest_seq.0,
        "compression": format!("{:?}", p.compression),
        "filter_bits_per_key": p.filter_bits_per_key,
        "smallest": ikey_json(p.smallest.encoded()),
        "largest": ikey_json(p.largest.encoded()),
    });
    let index: Vec<Value> = d
        .index
        .iter()
        .map(|e| {
            json!({
                "last_key": ikey_json(&e.last_key),
                "offset": e.handle.offset,
                "size": e.handle.size,
            })
        })
        .collect();
    let entries: Vec<Value> = d
        .entries
        .iter()
        .map(|(k, v)| {
            let Value::Object(mut obj) = ikey_json(k) else {
                return Value::Null;
            };
            json_bytes(&mut obj, "value", v);
            Value::Object(obj)
        })
        .collect();
    let doc = json!({
        "file": d.path.display().to_string(),
        "file_size": d.file_size,
        "properties": props,
        "index": index,
        "entries": entries,
        "range_tombstones": d
            .range_dels
            .iter()
            .map(|t| {
                let mut obj = Map::new();
                json_bytes(&mut obj, "start", &t.start);
                json_bytes(&mut obj, "end", &t.end);
                obj.insert("seq".into(), t.seq.0.into());
                Value::Object(obj)
            })
            .collect::<Vec<Value>>(),
    });
    doc
}

fn sst_text(out: &mut impl Write, d: &SstDump<'_>) -> std::io::Result<()> {
    let p = d.props;
    writeln!(out, "file: {} ({} bytes)", d.path.display(), d.file_size)?;
    writeln!(out, "properties:")?;
    for (name, v) in [
        ("entries", p.entries),
        ("deletions", p.deletions),
        ("data_blocks", p.data_blocks),
        ("data_bytes", p.data_bytes),
        ("raw_key_bytes", p.raw_key_bytes),
        ("raw_value_bytes", p.raw_value_bytes),
        ("smallest_seq", p.smallest_seq.0),
        ("largest_seq", p.largest_seq.0),
        ("filter_bits_per_key", u64::from(p.filter_bits_per_key)),
    ] {
        writeln!(out, "  {name}: {v}")?;
    }
    writeln!(out, "  compression: {:?}", p.compression)?;
    writeln!(out, "  smallest: {}", internal_key_text(&p.smallest))?;
    writeln!(out, "  largest: {}", internal_key_text(&p.largest))?;
    writeln!(out, "index ({} data blocks):", d.index.len())?;
    for e in d.index {
        writeln!(
            out,
            "  offset {} size {}: last key {}",
            e.handle.offset,
            e.handle.size,
            ikey_text(&e.last_key)
        )?;
    }
    writeln!(out, "entries (key, seq, kind, value):")?;
    for (k, v) in d.entries {
        match parse_internal_key(k) {
            Some(pk) => writeln!(
                out,
                "{}\t{}\t{}\t{}",
                escape(pk.user_key),
                pk.seq.0,
                kind_name(pk.kind),
                escape(v)
            )?,
            None => writeln!(out, "<bad key {}>\t\t\t{}", escape(k), escape(v))?,
        }
    }
    if !d.range_dels.is_empty() {
        writeln!(out, "range tombstones (start, end, seq):")?;
        for t in d.range_dels {
            writeln!(out, "{}\t{}\t{}", escape(&t.start), escape(&t.end), t.seq.0)?;
        }
    }
    Ok(())
}

/// One decoded WAL record (a write batch), owned.
struct WalRecord {
    offset: u64,
    first_seq: u64,
    count: u32,
    /// (seq, kind, key, value) per entry.
    entries: Vec<(u64, ValueKind, Vec<u8>, Vec<u8>)>,
}

pub fn wal(out: &mut impl Write, path: &Path, json: bool) -> Result<()> {
    let data = read_file(path)?;
    let mut reader = LogReader::new(&data, path);
    let mut records = Vec::new();
    // Print what decodes, then fail with the damage (file and offset).
    let mut failure = None;
    loop {
        match reader.next_record() {
            Ok(Some((offset, payload))) => match BatchReader::new(payload) {
                Ok(batch) => records.push(WalRecord {
                    offset,
                    first_seq: batch.first_seq.0,
                    count: batch.count,
                    entries: batch
                        .entries()
                        .filter_map(std::result::Result::ok)
                        .map(|e| (e.seq.0, e.kind, e.key.to_vec(), e.value.to_vec()))
                        .collect(),
                }),
                Err(e) => {
                    failure = Some(shale::Error::Corruption {
                        file: path.to_owned(),
                        offset,
                        reason: format!(
                            "record at offset {offset}: byte {} of its batch: {}",
                            e.offset, e.reason
                        ),
                    });
                    break;
                }
            },
            Ok(None) => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let dump = WalDump {
        path,
        predecessor: reader.predecessor(),
        records: &records,
        tail: reader.tail().cloned(),
    };
    let result = match json {
        true => writeln!(out, "{:#}", wal_json(&dump)),
        false => wal_text(out, &dump),
    };
    result.map_err(CliError::Stdout)?;
    failure.map_or(Ok(()), |e| Err(e.into()))
}

/// What `dump-wal` shows of a WAL.
struct WalDump<'a> {
    path: &'a Path,
    predecessor: Option<Predecessor>,
    records: &'a [WalRecord],
    tail: Option<TailReport>,
}

fn wal_json(d: &WalDump<'_>) -> Value {
    let recs: Vec<Value> = d
        .records
        .iter()
        .map(|r| {
            let ops: Vec<Value> = r
                .entries
                .iter()
                .map(|(seq, kind, key, value)| {
                    let mut obj = Map::new();
                    obj.insert("seq".into(), (*seq).into());
                    obj.insert("kind".into(), kind_name(*kind).into());
                    json_bytes(&mut obj, "key", key);
                    match kind {
                        ValueKind::Put => json_bytes(&mut obj, "value", value),
                        ValueKind::RangeDelete => json_bytes(&mut obj, "end", value),
                        ValueKind::Delete => {}
                    }
                    Value::Object(obj)
                })
                .collect();
            json!({
                "offset": r.offset,
                "first_seq": r.first_seq,
                "count": r.count,
                "entries": ops,
            })
        })
        .collect();
    let tail = d
        .tail
        .as_ref()
        .map(|t| json!({"offset": t.offset, "dropped_bytes": t.dropped_bytes, "reason": t.reason}));
    let predecessor = d
        .predecessor
        .map(|p| json!({"wal": p.wal, "length": p.length}));
    let doc = json!({
        "file": d.path.display().to_string(),
        "predecessor": predecessor,
        "records": recs,
        "torn_tail": tail,
    });
    doc
}

fn wal_text(out: &mut impl Write, d: &WalDump<'_>) -> std::io::Result<()> {
    if let Some(p) = d.predecessor {
        writeln!(
            out,
            "follows WAL {:06}, which was {} bytes long",
            p.wal, p.length
        )?;
    }
    for r in d.records {
        writeln!(
            out,
            "record at offset {}: first seq {}, {} entries",
            r.offset, r.first_seq, r.count
        )?;
        for (seq, kind, key, value) in &r.entries {
            match kind {
                ValueKind::Put => {
                    writeln!(out, "  {seq}\tput\t{}\t{}", escape(key), escape(value))?
                }
                ValueKind::Delete => writeln!(out, "  {seq}\tdel\t{}", escape(key))?,
                ValueKind::RangeDelete => writeln!(
                    out,
                    "  {seq}\trange-del\t{}\t{}",
                    escape(key),
                    escape(value)
                )?,
            }
        }
    }
    tail_text(out, d.tail.as_ref())
}

pub fn manifest(cli: &Cli, out: &mut impl Write, file: Option<&Path>, json: bool) -> Result<()> {
    let path = match file {
        Some(f) => f.to_owned(),
        None => {
            let dir = cli
                .db_dir()
                .map_err(|_| CliError::Usage("dump-manifest needs a FILE or --db DIR".into()))?;
            shale::inspect::live_manifest_path(dir)?
        }
    };
    let data = read_file(&path)?;
    let mut reader = LogReader::new(&data, &path);
    let mut edits = Vec::new();
    let mut failure = None;
    loop {
        match reader.next_record() {
            Ok(Some((offset, payload))) => match VersionEdit::decode(payload) {
                Ok(edit) => edits.push((offset, edit)),
                Err(e) => {
                    failure =
                        Some(e.in_file(&path, offset + shale::inspect::wal::HEADER_LEN as u64));
                    break;
                }
            },
            Ok(None) => break,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    let result = match json {
        true => {
            let edits: Vec<Value> = edits.iter().map(|(o, e)| edit_json(*o, e)).collect();
            let doc = json!({"file": path.display().to_string(), "edits": edits});
            writeln!(out, "{doc:#}")
        }
        false => manifest_text(out, &path, &edits, reader.tail()),
    };
    result.map_err(CliError::Stdout)?;
    failure.map_or(Ok(()), |e| Err(e.into()))
}

fn manifest_text(
    out: &mut impl Write,
    path: &Path,
    edits: &[(u64, VersionEdit)],
    tail: Option<&TailReport>,
) -> std::io::Result<()> {
    writeln!(out, "{}", path.display())?;
    for (i, (offset, e)) in edits.iter().enumerate() {
        writeln!(out, "edit {} at offset {offset}:", i + 1)?;
        if let Some(v) = e.log_number {
            writeln!(out, "  log_number: {}", v.0)?;
        }
        if let Some(v) = e.next_file_number {
            writeln!(out, "  next_file_number: {}", v.0)?;
        }
        if let Some(v) = e.last_seq {
            writeln!(out, "  last_seq: {}", v.0)?;
        }
        if let Some(v) = e.next_keyspace_id {
            writeln!(out, "  next_keyspace_id: {}", v.0)?;
        }
        for k in &e.keyspaces {
            writeln!(
                out,
                "  keyspace {} {:?}: write buffer {} bytes, blocks {} bytes, \
                 {} filter bits per key, {:?}",
                k.id.0,
                k.name,
                k.options.write_buffer_size,
                k.options.block_size,
                k.options.filter_bits_per_key,
                k.options.compression
            )?;
        }
        for id in &e.dropped_keyspaces {
            writeln!(out, "  drop keyspace {}", id.0)?;
        }
        for (level, m) in &e.new_files {
            let ks = match m.keyspace.is_default() {
                true => String::new(),
                false => format!(" of keyspace {}", m.keyspace.0),
            };
            writeln!(
                out,
                "  add L{} {:06}.sst{ks}: {} bytes, seqs {}..{}, keys {} .. {}",
                level.0,
                m.id.0,
                m.size,
                m.smallest_seq.0,
                m.largest_seq.0,
                internal_key_text(&m.smallest),
                internal_key_text(&m.largest)
            )?;
        }
        for (level, id) in &e.deleted_files {
            writeln!(out, "  delete L{} {:06}.sst", level.0, id.0)?;
        }
    }
    tail_text(out, tail)
}

/// The torn tail a log reader dropped, if any, as the text dumps show it.
fn tail_text(out: &mut impl Write, tail: Option<&TailReport>) -> std::io::Result<()> {
    if let Some(t) = tail {
        writeln!(
            out,
            "torn tail at offset {}: {} bytes dropped ({})",
            t.offset, t.dropped_bytes, t.reason
        )?;
    }
    Ok(())
}

fn edit_json(offset: u64, e: &VersionEdit) -> Value {
    let new_files: Vec<Value> = e
        .new_files
        .iter()
        .map(|(level, m)| {
            json!({
                "keyspace": m.keyspace.0,
                "level": level.0,
                "file": m.id.0,
                "size": m.size,
                "smallest": ikey_json(m.smallest.encoded()),
                "largest": ikey_json(m.largest.encoded()),
                "smallest_seq": m.smallest_seq.0,
                "largest_seq": m.largest_seq.0,
            })
        })
        .collect();
    let deleted: Vec<Value> = e
        .deleted_files
        .iter()
        .map(|(level, id)| json!({"level": level.0, "file": id.0}))
        .collect();
    let keyspaces: Vec<Value> = e
        .keyspaces
        .iter()
        .map(|k| {
            json!({
                "id": k.id.0,
                "name": k.name,
                "write_buffer_size": k.options.write_buffer_size,
                "block_size": k.options.block_size,
                "filter_bits_per_key": k.options.filter_bits_per_key,
                "compression": format!("{:?}", k.options.compression),
            })
        })
        .collect();
    let dropped: Vec<u32> = e.dropped_keyspaces.iter().map(|k| k.0).collect();
    json!({
        "offset": offset,
        "log_number": e.log_number.map(|v| v.0),
        "next_file_number": e.next_file_number.map(|v| v.0),
        "last_seq": e.last_seq.map(|v| v.0),
        "next_keyspace_id": e.next_keyspace_id.map(|v| v.0),
        "keyspaces": keyspaces,
        "dropped_keyspaces": dropped,
        "new_files": new_files,
        "deleted_files": deleted,
    })
}

/// `Db::repair`, with its report on stdout.
pub fn repair(cli: &Cli, out: &mut impl Write) -> Result<()> {
    let report = shale::Db::repair(cli.db_dir()?, &shale::Options::default())?;
    write!(out, "{report}").map_err(CliError::Stdout)
}

pub fn verify(cli: &Cli, out: &mut impl Write, json: bool) -> Result<()> {
    let report = shale::inspect::verify_dir(cli.db_dir()?)?;
    let result = if json {
        let problems: Vec<Value> = report
            .problems
            .iter()
            .map(|p| {
                json!({
                    "file": p.file.display().to_string(),
                    "offset": p.offset,
                    "reason": p.reason,
                })
            })
            .collect();
        let doc = json!({
            "ok": report.is_ok(),
            "tables": report.tables,
            "blocks": report.blocks,
            "entries": report.entries,
            "wals": report.wals,
            "wal_records": report.wal_records,
            "manifest_edits": report.manifest_edits,
            "problems": problems,
            "notes": report.notes,
        });
        writeln!(out, "{doc:#}")
    } else {
        (|| {
            for p in &report.problems {
                writeln!(out, "problem: {p}")?;
            }
            for n in &report.notes {
                writeln!(out, "note: {n}")?;
            }
            writeln!(
                out,
                "{}: {} tables ({} blocks, {} entries), {} WALs ({} records), \
                 {} MANIFEST edits checked",
                if report.is_ok() { "ok" } else { "DAMAGED" },
                report.tables,
                report.blocks,
                report.entries,
                report.wals,
                report.wal_records,
                report.manifest_edits
            )
        })()
    };
    result.map_err(CliError::Stdout)?;
    if report.is_ok() {
        Ok(())
    } else {
        Err(CliError::Damaged(report.problems.len()))
    }
}

//! `stats`: the shape of the tree (of the default keyspace, or `--keyspace`'s), read from
//! the live MANIFEST and each SSTable's properties, and the engine's counters.
//!
//! The CLI opens the database for this one command, so the counters (writes, flushes,
//! compactions, cache hits, stalls) cover only this process: the work recovery did at
//! open. The shape (levels, files, bytes, entries, amplification) is what is on disk.

use std::io::Write;

use shale::fs::PosixFs;
use shale::inspect::version::{RecoveredManifest, NUM_LEVELS};

use crate::args::Cli;
use crate::error::{CliError, Result};

#[derive(Default, Clone, Copy)]
struct LevelStats {
    files: u64,
    bytes: u64,
    entries: u64,
    deletions: u64,
    raw_key_bytes: u64,
    raw_value_bytes: u64,
}

/// What `stats` reports.
struct Report {
    keyspace: String,
    levels: [LevelStats; NUM_LEVELS],
    sst_bytes: u64,
    last_seq: u64,
    next_file_number: u64,
    space_amp: Option<f64>,
    write_amp: Option<f64>,
    counters: Vec<(&'static str, u64)>,
}

pub fn run(cli: &Cli, out: &mut impl Write, json: bool) -> Result<()> {
    let dir = cli.db_dir()?;
    let db = cli.open(false, false)?;
    // The manifest as of now; a compaction that finishes meanwhile shows next time.
    let manifest = RecoveredManifest::load(&PosixFs, dir)?;
    let levels = level_stats(dir, &manifest, keyspace_id(cli, &manifest)?);
    let s = db.stats();
    let user = s.user_bytes_written;
    let report = Report {
        keyspace: cli
            .keyspace
            .as_deref()
            .unwrap_or(shale::inspect::keyspace::DEFAULT_NAME)
            .to_owned(),
        space_amp: space_amplification(&levels),
        levels,
        sst_bytes: db.sst_bytes(),
        last_seq: manifest.last_seq.0,
        next_file_number: manifest.next_file_number.0,
        write_amp: (user > 0).then(|| {
            (s.wal_bytes + s.flush_bytes + s.compaction_bytes_written) as f64 / user as f64
        }),
        counters: s.counters(),
    };
    let result = if json {
        write_json(out, &report)
    } else {
        write_text(out, &report)
    };
    result.map_err(CliError::Stdout)?;
    Ok(db.close()?)
}

/// The id of `--keyspace` (default: the default keyspace) in `manifest`.
fn keyspace_id(cli: &Cli, manifest: &RecoveredManifest) -> Result<shale::KeyspaceId> {
    match &cli.keyspace {
        None => Ok(shale::KeyspaceId::DEFAULT),
        Some(name) => manifest
            .keyspaces
            .values()
            .find(|k| &k.name == name)
            .map(|k| k.id)
            .ok_or_else(|| CliError::Usage(format!("no keyspace named {name:?}"))),
    }
}

/// Each level's files of `keyspace`, from the manifest and each SSTable's properties.
fn level_stats(
    dir: &std::path::Path,
    manifest: &RecoveredManifest,
    keyspace: shale::KeyspaceId,
) -> [LevelStats; NUM_LEVELS] {
    let mut levels = [LevelStats::default(); NUM_LEVELS];
    let files = manifest
        .files
        .values()
        .filter(|(_, m)| m.keyspace == keyspace);
    for (level, meta) in files {
        let Some(l) = levels.get_mut(level.index()) else {
            continue;
        };
        l.files += 1;
        l.bytes += meta.size;
        let path = shale::inspect::table_path(dir, meta.id);
        // A file compacted away since the manifest was read: its counts are missing.
        if let Ok(table) = shale::inspect::open_table(&path) {
            let p = table.properties();
            l.entries += p.entries;
            l.deletions += p.deletions;
            l.raw_key_bytes += p.raw_key_bytes;
            l.raw_value_bytes += p.raw_value_bytes;
        }
    }
    levels
}

/// RocksDB's estimate: everything above the last level is (at worst) garbage. `None` for
/// an empty tree.
fn space_amplification(levels: &[LevelStats]) -> Option<f64> {
    let total_bytes: u64 = levels.iter().map(|l| l.bytes).sum();
    let last_level_bytes = levels
        .iter()
        .rev()
        .map(|l| l.bytes)
        .find(|&b| b > 0)
        .unwrap_or(0);
    (last_level_bytes > 0).then(|| total_bytes as f64 / last_level_bytes as f64)
}

fn write_json(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    let levels: Vec<serde_json::Value> = r
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            serde_json::json!({
                "level": i,
                "files": l.files,
                "bytes": l.bytes,
                "entries": l.entries,
                "deletions": l.deletions,
                "raw_key_bytes": l.raw_key_bytes,
                "raw_value_bytes": l.raw_value_bytes,
            })
        })
        .collect();
    let counters: serde_json::Map<String, serde_json::Value> = r
        .counters
        .iter()
        .map(|(name, v)| ((*name).to_owned(), (*v).into()))
        .collect();
    let doc = serde_json::json!({
        "keyspace": r.keyspace,
        "levels": levels,
        "sst_bytes": r.sst_bytes,
        "last_seq": r.last_seq,
        "next_file_number": r.next_file_number,
        "space_amplification": r.space_amp,
        "write_amplification": r.write_amp,
        "counters": counters,
    });
    writeln!(out, "{doc:#}")
}

fn write_text(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    writeln!(
        out,
        "level  files        bytes      entries  deletions  raw key+value bytes"
    )?;
    for (i, l) in r.levels.iter().enumerate() {
        writeln!(
            out,
            "L{i:<5} {:>5} {:>12} {:>12} {:>10} {:>20}",
            l.files,
            l.bytes,
            l.entries,
            l.deletions,
            l.raw_key_bytes + l.raw_value_bytes
        )?;
    }
    writeln!(out, "total SST bytes: {}", r.sst_bytes)?;
    let amp = |a: Option<f64>| a.map_or_else(|| "n/a".to_owned(), |a| format!("{a:.2}"));
    writeln!(
        out,
        "space amplification (all levels / last level): {}",
        amp(r.space_amp)
    )?;
    writeln!(
        out,
        "write amplification (WAL + flush + compaction bytes / user bytes, this process): {}",
        amp(r.write_amp)
    )?;
    writeln!(out, "counters (this process, including recovery at open):")?;
    for (name, v) in &r.counters {
        writeln!(out, "  {name}: {v}")?;
    }
    Ok(())
}

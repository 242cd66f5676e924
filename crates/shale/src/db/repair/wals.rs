//! Step 3 of a repair: read the WALs as point-in-time recovery does, up to the first
//! damaged record.

use std::path::{Path, PathBuf};

use crate::batch::{decode_entries, BatchReader};
use crate::db::replay::{continues, decode_batch};
use crate::error::{Error, Result};
use crate::filename::wal_path;
use crate::fs::FileSystem;
use crate::key::{compare_internal, encode_internal_key, SeqNo, ValueKind};
use crate::range_del::RangeTombstone;
use crate::verify::Problem;
use crate::version::FileId;
use crate::wal::LogReader;

use super::report::{keyspaces_refused, RepairReport};

/// What the WALs held that the tables do not.
pub(super) struct Logged {
    /// Sorted by internal key.
    pub(super) entries: Vec<(Vec<u8>, Vec<u8>)>,
    pub(super) range_dels: Vec<RangeTombstone>,
    pub(super) last_seq: SeqNo,
}

impl Logged {
    /// Keep the batches of `reader`'s records newer than `flushed`, up to the first damaged
    /// record: returns the damage found, if any.
    ///
    /// # Errors
    /// What stops the repair (a keyspace other than the default one), not the damage.
    fn read_records(
        &mut self,
        reader: &mut LogReader<'_>,
        path: &Path,
        flushed: SeqNo,
        report: &mut RepairReport,
    ) -> Result<Option<Error>> {
        loop {
            let (offset, record) = match reader.next_record() {
                Ok(Some(found)) => found,
                Ok(None) => return Ok(None),
                Err(e) => return Ok(Some(e)),
            };
            let batch = match decode_batch(record, path, offset) {
                Ok(batch) => batch,
                Err(e) => return Ok(Some(e)),
            };
            let last = SeqNo((batch.first_seq.0 + u64::from(batch.count)).saturating_sub(1));
            self.last_seq = self.last_seq.max(last);
            if last > flushed {
                report.wal_batches += 1;
                self.add(&batch, path, offset)?;
            }
        }
    }

    /// Keep the entries of `batch`, the record at `offset` of WAL `path`.
    fn add(&mut self, batch: &BatchReader<'_>, path: &Path, offset: u64) -> Result<()> {
        for entry in decode_entries(batch.body(), batch.first_seq) {
            // `decode_batch` decoded every entry already.
            let entry = entry.map_err(|e| e.in_file(path, offset))?;
            if !entry.keyspace.is_default() {
                return Err(keyspaces_refused());
            }
            if entry.kind == ValueKind::RangeDelete {
                self.range_dels.push(RangeTombstone {
                    start: entry.key.to_vec(),
                    end: entry.value.to_vec(),
                    seq: entry.seq,
                });
                continue;
            }
            let mut key = Vec::with_capacity(entry.key.len() + 8);
            encode_internal_key(&mut key, entry.key, entry.seq, entry.kind);
            self.entries.push((key, entry.value.to_vec()));
        }
        Ok(())
    }
}

/// Replay `wals` (ascending) as `WalRecovery::PointInTime` would, keeping batches newer
/// than `flushed`. The WAL with the first damaged record and every later one go to `lost`.
pub(super) fn read_wals(
    fs: &dyn FileSystem,
    dir: &Path,
    wals: &[FileId],
    flushed: SeqNo,
    report: &mut RepairReport,
    lost: &mut Vec<PathBuf>,
) -> Result<Logged> {
    let mut logged = Logged {
        entries: Vec::new(),
        range_dels: Vec::new(),
        last_seq: SeqNo(0),
    };
    let mut cut = false;
    // WALs older than the first one left were flushed and deleted.
    let oldest = wals.first().copied().unwrap_or(FileId(0));
    let mut previous = None;
    for &id in wals {
        let path = wal_path(dir, id);
        let data = fs.read_all(&path)?;
        if cut {
            report.wal_bytes_dropped += data.len() as u64;
            lost.push(path);
            continue;
        }
        let mut reader = LogReader::new(&data, &path);
        if !continues(reader.predecessor(), previous, oldest) {
            // The WAL before it ends short of where it ended when this one began.
            report.wal_bytes_dropped += data.len() as u64;
            report.problems.push(Problem::from_error(
                Error::corruption(&path, 0, "the WAL before this one lost its tail"),
                &path,
            ));
            lost.push(path);
            cut = true;
            continue;
        }
        let damage = logged.read_records(&mut reader, &path, flushed, report)?;
        if reader.records_end() > 0 {
            previous = Some((id, reader.records_end()));
        }
        if let Some(e) = damage {
            let at = match &e {
                Error::Corruption { offset, .. } => *offset,
                _ => return Err(e),
            };
            report.wal_bytes_dropped += (data.len() as u64).saturating_sub(at);
            report.problems.push(Problem::from_error(e, &path));
            lost.push(path);
            cut = true;
        }
    }
    logged
        .entries
        .sort_by(|(a, _), (b, _)| compare_internal(a, b));
    Ok(logged)
}

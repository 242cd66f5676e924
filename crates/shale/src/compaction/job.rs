//! The compaction job: merge sorted inputs into new SSTables, dropping what no reader can
//! see.
//!
//! What may be dropped depends on the live snapshots. They cut the sequence-number line
//! into *stripes*: stripe `i` holds the sequence numbers in `(S[i-1], S[i]]`, and the last
//! stripe everything newer than the newest snapshot. A reader at snapshot `S[i]` sees, for
//! each key, the newest version `<= S[i]`, so within one stripe only a key's newest version
//! can ever be read:
//!
//! ```text
//!   key k:  seq 90 put | 70 put | 60 del | 20 put | 5 put        snapshots: 10, 65
//!   stripe:      2     |    2   |    1   |    1   |   0
//!   kept:        yes   |   drop |    yes |   drop |  yes
//!                 (latest)        (seen at 65)     (seen at 10)
//! ```
//!
//! A tombstone in the oldest stripe is dropped too when no deeper level can hold the key
//! (nothing older is left for it to hide). A user key's versions never straddle two output
//! files: readers of L1+ find a key in exactly one file.
//!
//! Range tombstones (`range_del.rs`) of the inputs delete the entries they cover in their
//! own stripe, as a newer version would, and go to the outputs cut at the outputs' key
//! boundaries, so that each file holds the part of a range its keys span; one in the oldest
//! stripe with no deeper level under its range is dropped.

use crate::compaction_filter::{CompactionFilter, FilterDecision};
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::iter::InternalIterator;
use crate::key::{encode_internal_key, parse_internal_key, ParsedKey, SeqNo, ValueKind};
use crate::keyspace::KeyspaceId;
use crate::range_del::{RangeDels, RangeTombstone};
use crate::sst::{TableBuilder, TableOptions};
use crate::version::{FileId, FileMeta, TableFile};
use std::path::Path;

/// What the merge may drop.
pub struct DropPolicy<'a> {
    /// Live snapshots, ascending.
    pub snapshots: &'a [SeqNo],
    /// True if no level below the output level can hold a key of the user-key range
    /// `[smallest, largest]`.
    pub is_bottommost: &'a dyn Fn(&[u8], &[u8]) -> bool,
    /// The range tombstones of the inputs.
    pub range_dels: Option<&'a RangeDels>,
    /// The user's filter and the output level it is told.
    pub filter: Option<(&'a dyn CompactionFilter, usize)>,
}

impl DropPolicy<'_> {
    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// Whether a range tombstone newer than `(user_key, seq)`, in its stripe, deletes it.
    fn range_deleted(&self, user_key: &[u8], seq: SeqNo, stripe: usize) -> bool {
        let newer = self
            .range_dels
            .and_then(|r| r.oldest_newer_than(user_key, seq));
        newer.is_some_and(|t| self.stripe(t) == stripe)
    }

    /// The range tombstones the outputs keep.
    fn kept_range_dels(&self) -> RangeDels {
        let Some(set) = self.range_dels else {
            return RangeDels::default();
        };
        let kept: Vec<RangeTombstone> = set
            .tombstones()
            .into_iter()
            .filter(|t| self.stripe(t.seq) > 0 || !(self.is_bottommost)(&t.start, &t.end))
            .collect();
        RangeDels::collapsed(&kept, self.snapshots)
    }
}

/// What a compaction produced.
#[derive(Debug, Default)]
pub struct CompactionOutput {
    pub files: Vec<TableFile>,
    pub entries_in: u64,
    pub entries_dropped: u64,
    pub bytes_written: u64,
}

/// Merge `input` (positioned anywhere) into new tables of at most about `max_file_size`
/// bytes each. `next_file` names each new table.
///
/// # Errors
/// Corruption in the inputs, or I/O errors writing the outputs. Outputs written before the
/// error are left on disk for the next open to remove.
pub fn run_compaction(
    mut input: impl InternalIterator,
    policy: &DropPolicy<'_>,
    create: &dyn Fn(&Path) -> Result<Box<dyn WritableFile>>,
    make: &dyn Fn(FileMeta) -> Result<TableFile>,
    table_opts: TableOptions,
    max_file_size: u64,
    next_file: &mut dyn FnMut() -> (FileId, std::path::PathBuf),
) -> Result<CompactionOutput> {
    let mut out = CompactionOutput::default();
    let mut builder: Option<(FileId, std::path::PathBuf, TableBuilder)> = None;
    let mut current_key: Option<Vec<u8>> = None;
    let mut last_stripe: Option<usize> = None;
    let range_dels = policy.kept_range_dels();
    // Where the current output's key range begins: the key the previous output was cut at.
    let mut lower: Option<Vec<u8>> = None;
    input.seek_to_first()?;
    while input.valid() {
        let entry = parse_internal_key(input.key()).ok_or_else(|| {
            Error::corruption(Path::new("<compaction input>"), 0, "malformed internal key")
        })?;
        out.entries_in += 1;
        if current_key.as_deref() != Some(entry.user_key) {
            // A key boundary: the only place an output file may end.
            if builder
                .as_ref()
                .is_some_and(|(_, _, b)| b.estimated_file_size() >= max_file_size)
            {
                if let Some((id, _, mut b)) = builder.take() {
                    b.add_range_dels(range_dels.clipped(lower.as_deref(), Some(entry.user_key)));
                    out.files.push(finish(make, id, b)?);
                    lower = Some(entry.user_key.to_vec());
                }
            }
            current_key = Some(entry.user_key.to_vec());
            last_stripe = None;
        }
        let fate = policy.fate(&entry, input.value(), last_stripe);
        last_stripe = Some(fate.stripe);
        if fate.drop {
            out.entries_dropped += 1;
        } else {
            let (_, _, b) = match builder.as_mut() {
                Some(b) => b,
                None => builder.insert(new_output(create, table_opts, next_file)?),
            };
            fate.write(b, &entry, input.key(), input.value())?;
        }
        input.next()?;
    }
    let rest = range_dels.clipped(lower.as_deref(), None);
    if builder.is_none() && !rest.is_empty() {
        builder = Some(new_output(create, table_opts, next_file)?);
    }
    if let Some((id, _, mut b)) = builder.take() {
        b.add_range_dels(rest);
        out.files.push(finish(make, id, b)?);
    }
    out.bytes_written = out.files.iter().map(|f| f.meta.size).sum();
    Ok(out)
}

/// What becomes of one input entry.
struct Fate {
    /// The snapshot stripe of its sequence number.
    stripe: usize,
    /// The compaction filter's decision (`Keep` where the filter is not asked).
    decision: FilterDecision,
    /// Dropped: shadowed in its stripe, range-deleted, or a tombstone with nothing older
    /// left to hide.
    drop: bool,
}

impl DropPolicy<'_> {
    /// What becomes of `entry` (its value `value`), given the stripe of the version of
    /// its user key before it (`None` for the newest).
    fn fate(&self, entry: &ParsedKey<'_>, value: &[u8], last_stripe: Option<usize>) -> Fate {
        let stripe = self.stripe(entry.seq);
        let range_deleted = self.range_deleted(entry.user_key, entry.seq, stripe);
        // The filter sees a key's newest version when no snapshot can read it.
        let decision = match self.filter {
            Some((filter, level))
                if last_stripe.is_none()
                    && stripe == self.snapshots.len()
                    && entry.kind == ValueKind::Put
                    && !range_deleted =>
            {
                filter.filter(level, entry.user_key, value)
            }
            _ => FilterDecision::Keep,
        };
        let kind = match decision {
            FilterDecision::Remove => ValueKind::Delete,
            _ => entry.kind,
        };
        let drop = last_stripe == Some(stripe)
            || range_deleted
            || (kind == ValueKind::Delete
                && stripe == 0
                && (self.is_bottommost)(entry.user_key, entry.user_key));
        Fate {
            stripe,
            decision,
            drop,
        }
    }
}

impl Fate {
    /// Write the kept `entry` (internal key `key`, value `value`) as the filter decided.
    fn write(
        self,
        b: &mut TableBuilder,
        entry: &ParsedKey<'_>,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        match self.decision {
            FilterDecision::Keep => b.add(key, value),
            FilterDecision::Change(value) => b.add(key, &value),
            FilterDecision::Remove => {
                let mut tombstone = Vec::with_capacity(entry.user_key.len() + 8);
                encode_internal_key(&mut tombstone, entry.user_key, entry.seq, ValueKind::Delete);
                b.add(&tombstone, &[])
            }
        }
    }
}

/// Start the next output table.
fn new_output(
    create: &dyn Fn(&Path) -> Result<Box<dyn WritableFile>>,
    table_opts: TableOptions,
    next_file: &mut dyn FnMut() -> (FileId, std::path::PathBuf),
) -> Result<(FileId, std::path::PathBuf, TableBuilder)> {
    let (id, path) = next_file();
    let b = TableBuilder::new(create(&path)?, path.clone(), table_opts);
    Ok((id, path, b))
}

fn finish(
    make: &dyn Fn(FileMeta) -> Result<TableFile>,
    id: FileId,
    b: TableBuilder,
) -> Result<TableFile> {
    let summary = b.finish()?;
    // The caller's `make` names the keyspace (a compaction's inputs and outputs share one).
    make(FileMeta::from_summary(id, KeyspaceId::DEFAULT, summary))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, PosixFs};
    use crate::iter::VecIter;
    use crate::version::table_cache::TableCache;
    use std::sync::Arc;

    fn entries(list: &[(&str, u64, Option<&str>)]) -> VecIter {
        VecIter::from_versions(list)
    }

    fn run(
        input: VecIter,
        snapshots: &[SeqNo],
        bottommost: bool,
        max: u64,
    ) -> (CompactionOutput, Vec<(String, u64)>) {
        let dir = tempfile::tempdir().unwrap();
        let mut n = 0;
        let dir_path = dir.path().to_owned();
        let mut next = || {
            n += 1;
            (FileId(n), crate::filename::table_path(&dir_path, FileId(n)))
        };
        let tables = Arc::new(TableCache::new(
            Arc::new(PosixFs),
            dir.path().to_owned(),
            Arc::new(crate::sst::BlockCache::new(1 << 20, 4096)),
            64,
            false,
            Arc::default(),
        ));
        let out = run_compaction(
            input,
            &DropPolicy {
                snapshots,
                is_bottommost: &|_, _| bottommost,
                range_dels: None,
                filter: None,
            },
            &|p: &Path| PosixFs.create(p),
            &|meta: FileMeta| {
                let file = TableFile::new(meta, Arc::clone(&tables));
                file.table()?;
                Ok(file)
            },
            TableOptions {
                compression: crate::options::Compression::None,
                ..TableOptions::default()
            },
            max,
            &mut next,
        )
        .unwrap();
        let mut kept = Vec::new();
        for f in &out.files {
            let mut it = f.table().unwrap().iter();
            it.seek_to_first().unwrap();
            while it.valid() {
                let p = parse_internal_key(it.key()).unwrap();
                kept.push((String::from_utf8(p.user_key.to_vec()).unwrap(), p.seq.0));
                it.next().unwrap();
            }
        }
        (out, kept)
    }

    #[test]
    fn stripes_keep_what_snapshots_need() {
        // The example from the module comment.
        let input = entries(&[
            ("k", 90, Some("a")),
            ("k", 70, Some("b")),
            ("k", 60, None),
            ("k", 20, Some("c")),
            ("k", 5, Some("d")),
        ]);
        let (out, kept) = run(input, &[SeqNo(10), SeqNo(65)], true, 1 << 20);
        assert_eq!(
            kept,
            vec![("k".into(), 90), ("k".into(), 60), ("k".into(), 5)]
        );
        assert_eq!(out.entries_dropped, 2);
    }

    #[test]
    fn tombstones_go_only_at_the_bottom_and_below_every_snapshot() {
        let list = [("a", 9, None), ("a", 3, Some("x")), ("b", 4, Some("y"))];
        let (_, kept) = run(entries(&list), &[], true, 1 << 20);
        assert_eq!(
            kept,
            vec![("b".into(), 4)],
            "bottommost, no snapshot: a vanishes"
        );
        let (_, kept) = run(entries(&list), &[], false, 1 << 20);
        assert_eq!(
            kept,
            vec![("a".into(), 9), ("b".into(), 4)],
            "not bottommost: keep the tombstone"
        );
        let (_, kept) = run(entries(&list), &[SeqNo(5)], true, 1 << 20);
        assert_eq!(
            kept,
            vec![("a".into(), 9), ("a".into(), 3), ("b".into(), 4)],
            "a snapshot at 5 still sees a=x"
        );
    }

    #[test]
    fn outputs_are_cut_at_key_boundaries() {
        let mut list = Vec::new();
        let vals: Vec<String> = (0..2000).map(|i| format!("{i:0>200}")).collect();
        let keys: Vec<String> = (0..1000).map(|i| format!("key{i:05}")).collect();
        for i in 0..1000 {
            list.push((keys[i].as_str(), 10 + i as u64, Some(vals[i].as_str())));
            list.push((
                keys[i].as_str(),
                5000 + i as u64,
                Some(vals[1000 + i].as_str()),
            ));
        }
        let (out, kept) = run(entries(&list), &[SeqNo(4000)], true, 16 << 10);
        assert!(out.files.len() > 5, "{} files", out.files.len());
        assert_eq!(kept.len(), 2000);
        for w in out.files.windows(2) {
            assert!(w[0].meta.largest.user_key() < w[1].meta.smallest.user_key());
        }
    }
}

//! Opening a text index: attach its hook, build the inverted index from the records at the
//! attach's snapshot, repair the records that disagree with the values, go live.
//!
//! ```text
//!   definition ── attach hook (snapshot S; records committed after S go to a backlog)
//!   ── scan values and records at S side by side, in key order:
//!        record's hash = value's  ──► the record, as is
//!        no record, or another hash ──► the value analyzed; a repair (put)
//!        record, no value         ──► a repair (delete)
//!   ── go live: the backlog applied over the built index, under the hook's lock
//!   ── repairs written in transactions, minus every document written since S
//! ```
//!
//! Records disagree with values only where the values were written while no hook was
//! attached (the database opened without the index), or when the index is new, or made
//! with another analyzer. A repair is written in a transaction that also skips every
//! document the hook saw written since S: its record is newer than the repair. A write
//! that lands after the transaction's snapshot makes it fail with `Conflict` (its record
//! key changed), and the chunk is tried again with the keys touched since.

use std::sync::Arc;

use shale::{Db, Error, Keyspace, ReadOptions, Result, Snapshot};

use super::format::{doc_key, doc_key_of, DocView, DEFINITION_KEY, DOC_TAG};
use super::hook::{Change, Shared, TextHook};
use super::inverted::Inverted;

/// Repairs written per transaction.
const REPAIRS_PER_TRANSACTION: usize = 4096;
/// Tries of one repair that keeps conflicting with concurrent writes.
const REPAIR_TRIES: usize = 32;

/// What an open found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TextIndexRecovery {
    /// Documents whose records were read as they were.
    pub records_kept: u64,
    /// Documents analyzed again (no record, or one of another value).
    pub documents_analyzed: u64,
    /// Records of values that no longer exist, deleted.
    pub records_deleted: u64,
}

/// Build the index of `hook` at `snapshot`; returns it and the repairs its records need.
pub(crate) fn build(
    hook: &TextHook,
    data: &Keyspace,
    records: &Keyspace,
    snapshot: &Snapshot,
) -> Result<(Inverted, Vec<Change>, TextIndexRecovery)> {
    let at = ReadOptions::at(snapshot);
    let mut values = data.prefix_opt(&hook.prefix, &at)?.peekable();
    let mut stored = records
        .prefix_opt([DOC_TAG], &ReadOptions::at(snapshot))?
        .peekable();
    let mut ix = Inverted::default();
    let mut repairs = Vec::new();
    let mut recovery = TextIndexRecovery::default();
    loop {
        let value_key = match values.peek() {
            Some(Ok((k, _))) => Some(k.as_slice()),
            Some(Err(_)) => return Err(take_err(&mut values)),
            None => None,
        };
        let record_key = match stored.peek() {
            Some(Ok((k, _))) => Some(doc_key_of(k).unwrap_or(&[])),
            Some(Err(_)) => return Err(take_err(&mut stored)),
            None => None,
        };
        match (value_key, record_key) {
            (None, None) => break,
            (Some(v), Some(r)) if v == r => {
                let (key, value) = next_ok(&mut values)?;
                let (_, bytes) = next_ok(&mut stored)?;
                let hash = super::hook::value_hash(&value);
                match DocView::decode(&bytes) {
                    Ok(record) if record.hash == hash => {
                        ix.put(&key, &record);
                        recovery.records_kept += 1;
                    }
                    // Another value's record, or a damaged one: analyzed again.
                    _ => analyze(hook, &mut ix, &mut repairs, &mut recovery, key, &value)?,
                }
            }
            (Some(v), r) if r.is_none_or(|r| v < r) => {
                let (key, value) = next_ok(&mut values)?;
                analyze(hook, &mut ix, &mut repairs, &mut recovery, key, &value)?;
            }
            _ => {
                let (record_key, _) = next_ok(&mut stored)?;
                let key = doc_key_of(&record_key).unwrap_or(&[]).to_vec();
                repairs.push(Change::Delete(key));
                recovery.records_deleted += 1;
            }
        }
    }
    Ok((ix, repairs, recovery))
}

fn analyze(
    hook: &TextHook,
    ix: &mut Inverted,
    repairs: &mut Vec<Change>,
    recovery: &mut TextIndexRecovery,
    key: Vec<u8>,
    value: &[u8],
) -> Result<()> {
    let record = hook.record(&key, value)?;
    ix.put(&key, &record.view());
    repairs.push(Change::Put(key, record));
    recovery.documents_analyzed += 1;
    Ok(())
}

type Entries = std::iter::Peekable<shale::RangeIter>;

fn next_ok(it: &mut Entries) -> Result<(Vec<u8>, Vec<u8>)> {
    it.next()
        .unwrap_or_else(|| Err(Error::InvalidArgument("iterator ended early".into())))
}

fn take_err(it: &mut Entries) -> Error {
    match it.next() {
        Some(Err(e)) => e,
        _ => Error::InvalidArgument("iterator failed".into()),
    }
}

/// Write `repairs` to the index's records, skipping every document written since the
/// open's snapshot; then stop tracking writes. A chunk that conflicts with a concurrent
/// write is tried again in halves: the keys written meanwhile are skipped the next time,
/// and a smaller chunk is less likely to meet the next write.
pub(crate) fn write_repairs(
    db: &Arc<Db>,
    records: &Keyspace,
    shared: &Shared,
    repairs: &[Change],
) -> Result<()> {
    let mut work: Vec<(&[Change], usize)> = repairs
        .chunks(REPAIRS_PER_TRANSACTION)
        .rev()
        .map(|c| (c, 0))
        .collect();
    while let Some((chunk, tries)) = work.pop() {
        match write_chunk(db, records, shared, chunk) {
            Ok(()) => {}
            Err(Error::Conflict(_)) if tries < REPAIR_TRIES => {
                if chunk.len() == 1 {
                    work.push((chunk, tries + 1));
                } else {
                    let (a, b) = chunk.split_at(chunk.len() / 2);
                    work.push((b, tries + 1));
                    work.push((a, tries + 1));
                }
            }
            Err(e) => return Err(e),
        }
    }
    shared.tracking().touched = None;
    Ok(())
}

/// One transaction of repairs.
fn write_chunk(db: &Db, records: &Keyspace, shared: &Shared, chunk: &[Change]) -> Result<()> {
    // The transaction's snapshot first: every write before it is in `touched`.
    let mut txn = db.transaction();
    {
        let tracking = shared.tracking();
        let touched = tracking.touched.as_ref();
        for change in chunk {
            match change {
                Change::Put(key, record) if !touched.is_some_and(|t| t.contains(key)) => {
                    txn.put_in(records, doc_key(key), record.encode())?;
                }
                Change::Delete(key) if !touched.is_some_and(|t| t.contains(key)) => {
                    txn.delete_in(records, doc_key(key))?;
                }
                _ => {}
            }
        }
    }
    txn.commit()
}

/// Write the definition when it is new; when it differs from the stored one (another
/// analyzer, prefix or keyspace), first delete every record made under the old one.
pub(crate) fn write_definition(db: &Db, records: &Keyspace, definition: &[u8]) -> Result<()> {
    match records.get(DEFINITION_KEY)? {
        Some(stored) if stored == definition => Ok(()),
        Some(_) => {
            let mut batch = shale::WriteBatch::new();
            batch.delete_range_in(records.id(), [DOC_TAG], [DOC_TAG + 1]);
            batch.put_in(records.id(), DEFINITION_KEY, definition);
            db.write(batch, shale::WriteOptions::default())
        }
        None => records.put(DEFINITION_KEY, definition),
    }
}

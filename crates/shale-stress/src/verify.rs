//! A reopened database checked against the oracle.
//!
//! Rules, per key of the key space (the database is read by a full scan cross-checked with
//! a point read of every key):
//! - every value read is exactly `value(key, wid)` for some write id (else: wrong value);
//! - each write of the run has a fate. It *survived* if it was acknowledged with the WAL
//!   on, if its value is visible (a put entry's key holds its write id), or if it skipped
//!   the WAL and a later WAL-less write of its thread survived: a WAL-less write is
//!   durable only once a flush covers it, flushes cover sequence numbers in order, and a
//!   thread's writes take increasing sequence numbers, so the WAL-less writes a kill loses
//!   are a suffix of each thread's. It is *lost* if it is the last write of some key it
//!   puts and that key does not hold it. Otherwise (a pending write, or a WAL-less one
//!   whose keys were all overwritten later) it is *unknown*;
//! - a key holds the result of its last surviving write (the state before the run if none),
//!   or of a later write that is not lost: nothing acknowledged lost, nothing resurrected,
//!   nothing stale;
//! - a write whose value is visible on one key shows on all its keys, unless a later write
//!   replaced it there: a batch is never torn;
//! - the expected state then becomes what the database holds, so the next cycle starts
//!   from it;
//! - with the semantic index on: the index holds one vector per live value, and every
//!   search hit is a live key with exactly its current text.

use std::collections::BTreeMap;

use shale::Db;
use shale_search::semantic::{SearchOptions, VectorIndex};

use crate::oracle::{Expected, LoggedWrite, RunLog};
use crate::workload::{self, key, parse_value, Rng};

/// Counts from one verification.
#[derive(Debug, Default, Clone, Copy)]
pub struct Verified {
    /// Keys compared with the expected state.
    pub keys: u64,
    /// Acknowledged writes of the run whose effect was checked.
    pub acked: u64,
    /// Pending writes found applied / found absent (or not known to be applied).
    pub pending_applied: u64,
    pub pending_absent: u64,
    /// Acknowledged writes without the WAL that survived / were lost (or not known to
    /// have survived) the kill.
    pub unlogged_survived: u64,
    pub unlogged_lost: u64,
    /// Search hits checked against the data.
    pub hits: u64,
}

/// Read every key of `0..keys` from `db`: `index -> write id`. Fails on a value that is
/// not exactly what its write id would have written, a key outside the key space, or a
/// scan that disagrees with point reads.
pub fn read_all(db: &Db, keys: u32) -> Result<BTreeMap<u32, u64>, String> {
    let mut actual = BTreeMap::new();
    let mut last: Option<Vec<u8>> = None;
    for pair in db.range::<&[u8]>(..).map_err(|e| format!("scan: {e}"))? {
        let (k, v) = pair.map_err(|e| format!("scan: {e}"))?;
        if last.as_ref().is_some_and(|l| *l >= k) {
            return Err(format!(
                "scan out of order at {}",
                String::from_utf8_lossy(&k)
            ));
        }
        let i = workload::key_index(&k)
            .filter(|&i| i < keys)
            .ok_or_else(|| {
                format!(
                    "unknown key {:?} in the database",
                    String::from_utf8_lossy(&k)
                )
            })?;
        let wid = parse_value(i, &v).ok_or_else(|| {
            format!(
                "wrong value for k{i:05}: {:?}",
                String::from_utf8_lossy(&v)
                    .chars()
                    .take(60)
                    .collect::<String>()
            )
        })?;
        actual.insert(i, wid);
        last = Some(k);
    }
    for i in 0..keys {
        let got = db.get(key(i)).map_err(|e| format!("get k{i:05}: {e}"))?;
        let got = got.map(|v| parse_value(i, &v));
        if got != actual.get(&i).map(|&w| Some(w)) {
            return Err(format!(
                "get and scan disagree on k{i:05}: {got:?} vs {:?}",
                actual.get(&i)
            ));
        }
    }
    Ok(actual)
}

/// What recovery did with one write of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Survived,
    Lost,
    Unknown,
}

/// Check `db` against `expected` after the run `log`; on success `expected` becomes the
/// database's state.
pub fn verify(
    db: &Db,
    expected: &mut Expected,
    log: &RunLog,
    keys: u32,
    index: Option<&VectorIndex>,
) -> Result<Verified, String> {
    let actual = read_all(db, keys)?;
    let mut counts = Verified {
        acked: log.acked.len() as u64,
        ..Verified::default()
    };
    let history = judge_writes(log, &actual, &mut counts)?;
    check_keys(keys, expected, &actual, &history)?;
    counts.keys = u64::from(keys);
    expected.live = actual;
    if let Some(index) = index {
        counts.hits = check_search(index, &expected.live, 8, &mut Rng::new(keys.into()))?;
    }
    Ok(counts)
}

/// Per key, its writes in order: (result, fate).
type History = BTreeMap<u32, Vec<(Option<u64>, Fate)>>;

/// The fate of every write of the run `log` against the database's state `actual`, counted
/// into `counts`, as each key's history; an error where a batch shows torn.
fn judge_writes(
    log: &RunLog,
    actual: &BTreeMap<u32, u64>,
    counts: &mut Verified,
) -> Result<History, String> {
    // Each thread's writes in program order: the acknowledged ones, then its pending one.
    let mut threads: BTreeMap<u32, Vec<(&LoggedWrite, bool)>> = BTreeMap::new();
    let acked = log.acked.iter().map(|w| (w, true));
    for (w, is_acked) in acked.chain(log.pending.iter().map(|w| (w, false))) {
        threads.entry(w.tid).or_default().push((w, is_acked));
    }
    let visible = |w: &LoggedWrite| {
        w.entries
            .iter()
            .any(|&(k, put)| put && actual.get(&k) == Some(&w.wid))
    };
    let mut history = History::new();
    for steps in threads.values() {
        // The last WAL-less write known to have survived: all before it survived too.
        let cut = steps.iter().rposition(|&(w, _)| !w.wal && visible(w));
        // Per key, the position of the thread's last write to it.
        let mut last_write = BTreeMap::new();
        for (i, (w, _)) in steps.iter().enumerate() {
            for &(k, _) in &w.entries {
                last_write.insert(k, i);
            }
        }
        for (i, &(w, is_acked)) in steps.iter().enumerate() {
            let is_last_write_of = |k: u32| last_write.get(&k) == Some(&i);
            let shown = visible(w);
            let fate = if shown || (is_acked && w.wal) || cut.is_some_and(|c| i <= c) {
                Fate::Survived
            } else if w.entries.iter().any(|&(k, put)| put && is_last_write_of(k)) {
                Fate::Lost
            } else {
                Fate::Unknown
            };
            match (is_acked, w.wal, fate) {
                (false, _, Fate::Survived) => counts.pending_applied += 1,
                (false, _, _) => counts.pending_absent += 1,
                (true, false, Fate::Survived) => counts.unlogged_survived += 1,
                (true, false, _) => counts.unlogged_lost += 1,
                (true, true, _) => {}
            }
            for &(k, put) in &w.entries {
                let result = put.then_some(w.wid);
                history.entry(k).or_default().push((result, fate));
                // A write visible on one key shows on every key it wrote, unless replaced
                // there. (A survivor that shows nowhere is judged per key below.)
                if shown && is_last_write_of(k) && actual.get(&k).copied() != result {
                    let what = if is_acked { "acknowledged" } else { "pending" };
                    return Err(format!(
                        "{what} batch {} is torn: k{k:05} holds {:?}, the batch wrote {result:?}: {:?}",
                        w.wid,
                        actual.get(&k),
                        w.entries
                    ));
                }
            }
        }
    }
    Ok(history)
}

/// Every key holds its last surviving write (or the state before the run where none
/// survived) or a later write whose fate is not known to be lost.
fn check_keys(
    keys: u32,
    expected: &Expected,
    actual: &BTreeMap<u32, u64>,
    history: &History,
) -> Result<(), String> {
    for k in 0..keys {
        let base = expected.live.get(&k).copied();
        let got = actual.get(&k).copied();
        let writes = history.get(&k).map_or(&[][..], Vec::as_slice);
        let last = writes.iter().rposition(|&(_, fate)| fate == Fate::Survived);
        let must = last.map_or(base, |i| writes[i].0);
        let later = writes[last.map_or(0, |i| i + 1)..]
            .iter()
            .filter(|&&(_, fate)| fate != Fate::Lost)
            .map(|&(result, _)| result);
        let allowed: Vec<Option<u64>> = std::iter::once(must).chain(later).collect();
        if !allowed.contains(&got) {
            let what = match (must, got) {
                (Some(_), None) => "acknowledged write lost",
                (None, Some(_)) => "deleted key resurrected",
                _ => "stale or wrong write",
            };
            return Err(format!(
                "k{k:05}: {what}: expected one of {allowed:?}, found {got:?}"
            ));
        }
    }
    Ok(())
}

/// Check the semantic index of a quiescent database whose state is `actual`: one vector per
/// live value, and `queries` searches whose every hit is a live key with its exact text.
/// Returns the hits checked.
pub fn check_search(
    index: &VectorIndex,
    actual: &BTreeMap<u32, u64>,
    queries: usize,
    rng: &mut Rng,
) -> Result<u64, String> {
    let indexed = index.len().map_err(|e| format!("index len: {e}"))?;
    if indexed != actual.len() {
        return Err(format!(
            "{indexed} vectors indexed for {} live values",
            actual.len()
        ));
    }
    let mut hits = 0;
    for _ in 0..queries {
        let query = workload::words(rng, 3);
        for hit in index
            .search(&query, &SearchOptions::k(20).exact())
            .map_err(|e| format!("search: {e}"))?
        {
            hits += 1;
            let i = workload::key_index(&hit.key).ok_or("search hit with an unknown key")?;
            let want = actual.get(&i).map(|&wid| workload::value(i, wid));
            let text = hit.text().unwrap_or_default();
            if want.as_deref() != Some(text) {
                return Err(format!(
                    "search hit k{i:05} {:?} is not its live value {:?}",
                    text.chars().take(40).collect::<String>(),
                    actual.get(&i)
                ));
            }
        }
    }
    Ok(hits)
}

//! A reopened database checked against the oracle.
//!
//! Rules, per key of the key space (the database is read by a full scan cross-checked with
//! a point read of every key):
//! - every value read is exactly `value(key, wid)` for some write id (else: wrong value);
//! - a key no pending write touches holds exactly what the acknowledged writes say:
//!   nothing lost, nothing resurrected, nothing stale;
//! - a pending write's keys hold either the old state or the new one, and all of a batch's
//!   keys agree on which (keys where old and new are the same say nothing). The expected
//!   state then takes whichever the database chose, so the next cycle starts from it;
//! - with the semantic index on: the index holds one vector per live value, and every
//!   search hit is a live key with exactly its current text.

use std::collections::BTreeMap;

use shale::Db;

use crate::oracle::{Expected, RunLog};
use crate::workload::{self, key, parse_value, Rng};

/// Counts from one verification.
#[derive(Debug, Default, Clone, Copy)]
pub struct Verified {
    /// Keys compared with the expected state.
    pub keys: u64,
    /// Acknowledged writes of the run whose effect was checked.
    pub acked: u64,
    /// Pending writes found applied / found absent.
    pub pending_applied: u64,
    pub pending_absent: u64,
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

/// Check `db` against `expected` after the run `log`; on success `expected` becomes the
/// database's state (pending writes resolved).
pub fn verify(
    db: &Db,
    expected: &mut Expected,
    log: &RunLog,
    keys: u32,
    semantic: bool,
) -> Result<Verified, String> {
    let mut counts = Verified::default();
    for w in &log.acked {
        expected.apply(w);
    }
    counts.acked = log.acked.len() as u64;
    let actual = read_all(db, keys)?;
    let mut touched = std::collections::BTreeSet::new();
    for w in &log.pending {
        let (mut new, mut old) = (0, 0);
        for &(k, put) in &w.entries {
            touched.insert(k);
            let before = expected.live.get(&k).copied();
            let after = put.then_some(w.wid);
            let now = actual.get(&k).copied();
            if before == after {
                if now != before {
                    return Err(format!(
                        "k{k:05}: {now:?}, expected {before:?} (pending write {} leaves it so)",
                        w.wid
                    ));
                }
            } else if now == after {
                new += 1;
            } else if now == before {
                old += 1;
            } else {
                return Err(format!(
                    "k{k:05}: {now:?}, expected {before:?} or {after:?} (pending write {})",
                    w.wid
                ));
            }
        }
        if new > 0 && old > 0 {
            return Err(format!(
                "pending batch {} is torn: {new} entries applied, {old} not: {:?}",
                w.wid, w.entries
            ));
        }
        if new > 0 {
            expected.apply(w);
            counts.pending_applied += 1;
        } else {
            counts.pending_absent += 1;
        }
    }
    for k in 0..keys {
        if touched.contains(&k) {
            continue;
        }
        let want = expected.live.get(&k);
        let got = actual.get(&k);
        if want != got {
            let what = match (want, got) {
                (Some(_), None) => "acknowledged write lost",
                (None, Some(_)) => "deleted key resurrected",
                _ => "stale or wrong write",
            };
            return Err(format!("k{k:05}: {what}: expected {want:?}, found {got:?}"));
        }
    }
    counts.keys = u64::from(keys);
    if expected.live != actual {
        return Err("expected state and database differ after resolution".into());
    }
    if semantic {
        counts.hits = check_search(db, &actual, 8, &mut Rng::new(keys.into()))?;
    }
    Ok(counts)
}

/// Check the semantic index of a quiescent `db` whose state is `actual`: one vector per
/// live value, and `queries` searches whose every hit is a live key with its exact text.
/// Returns the hits checked.
pub fn check_search(
    db: &Db,
    actual: &BTreeMap<u32, u64>,
    queries: usize,
    rng: &mut Rng,
) -> Result<u64, String> {
    let indexed = db.indexed_len().map_err(|e| format!("indexed_len: {e}"))?;
    if indexed != actual.len() {
        return Err(format!(
            "{indexed} vectors indexed for {} live values",
            actual.len()
        ));
    }
    let mut hits = 0;
    for _ in 0..queries {
        let query = workload::words(rng, 3);
        for hit in db
            .search_knn(&query, 20)
            .map_err(|e| format!("search: {e}"))?
        {
            hits += 1;
            let i = workload::key_index(&hit.key).ok_or("search hit with an unknown key")?;
            let want = actual.get(&i).map(|&wid| workload::value(i, wid));
            if want.as_deref() != Some(hit.text.as_str()) {
                return Err(format!(
                    "search hit k{i:05} {:?} is not its live value {:?}",
                    hit.text.chars().take(40).collect::<String>(),
                    actual.get(&i)
                ));
            }
        }
    }
    Ok(hits)
}

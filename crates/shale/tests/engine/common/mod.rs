//! Shared by the crash and I/O-error tests: a deterministic workload of sync and non-sync
//! writes, batches, range deletes, flushes, compactions and reopens with tiny buffers, over
//! the default keyspace and a second one (`KEYSPACE`, made at the first open); an oracle
//! that knows the state after every prefix of the write sequence; and the check that a
//! recovered database is one of those prefixes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use shale::fs::FileSystem;
use shale::{Db, KeyspaceId, Options, WriteBatch, WriteOptions};
pub use shale_rng::SplitMix64 as Rng;

pub const DIR: &str = "/db";

/// The second keyspace of the workload. In the oracle's state its keys carry
/// `KEYSPACE_PREFIX` in front (which sorts after every default key, `key...`).
pub const KEYSPACE: &str = "ks1";
pub const KEYSPACE_PREFIX: &[u8] = b"ks1/";

/// The keyspace a key of the oracle's state lives in, and its key there.
fn split(key: &[u8], ks: KeyspaceId) -> (KeyspaceId, &[u8]) {
    match key.strip_prefix(KEYSPACE_PREFIX) {
        Some(rest) => (ks, rest),
        None => (KeyspaceId::DEFAULT, key),
    }
}

/// One entry of a write.
#[derive(Debug, Clone)]
pub enum Entry {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// Every key from the first up to, not including, the second.
    DeleteRange(Vec<u8>, Vec<u8>),
}

impl Entry {
    /// Add to `batch`; keys of the second keyspace go to `ks`.
    fn add_to(&self, batch: &mut WriteBatch, ks: KeyspaceId) {
        match self {
            Entry::Put(k, v) => {
                let (ks, k) = split(k, ks);
                batch.put_in(ks, k, v);
            }
            Entry::Delete(k) => {
                let (ks, k) = split(k, ks);
                batch.delete_in(ks, k);
            }
            Entry::DeleteRange(start, end) => {
                let (ks, start) = split(start, ks);
                let (_, end) = split(end, ks);
                batch.delete_range_in(ks, start, end);
            }
        }
    }

    /// Apply to `state`, keeping `fp`, its fingerprint, up to date.
    fn apply(&self, state: &mut State, fp: &mut u64) {
        let mut remove = |state: &mut State, k: &[u8]| {
            if let Some(old) = state.remove(k) {
                *fp = fp.wrapping_sub(entry_hash(k, &old));
            }
        };
        match self {
            Entry::Put(k, v) => {
                remove(state, k);
                *fp = fp.wrapping_add(entry_hash(k, v));
                state.insert(k.clone(), v.clone());
            }
            Entry::Delete(k) => remove(state, k),
            Entry::DeleteRange(start, end) => {
                let doomed: Vec<Vec<u8>> = state
                    .range(start.clone()..end.clone())
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in doomed {
                    remove(state, &k);
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
pub enum Step {
    /// A `WriteBatch` (one entry for a plain put or delete).
    Write { entries: Vec<Entry>, sync: bool },
    /// `Db::flush`.
    Flush,
    /// `Db::compact_range(None, None)`.
    Compact,
    /// `Db::close`, then open again.
    Reopen,
}

fn key(k: u64) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

/// `steps` steps from `seed`: mostly writes (a fifth of them sync, a sixth batches, one
/// entry in fifty a range delete of up to a sixteenth of the keys, a quarter of the entries
/// in the second keyspace), with flushes, compactions and reopens mixed in.
pub fn workload(seed: u64, steps: usize, keys: u64) -> Vec<Step> {
    let mut rng = Rng::seeded(seed);
    let mut out = Vec::with_capacity(steps);
    for i in 0..steps {
        let roll = rng.below(1000);
        let step = if roll < 12 {
            Step::Flush
        } else if roll < 17 {
            Step::Compact
        } else if roll < 21 {
            Step::Reopen
        } else {
            let n = if rng.percent(16) { 2 + rng.below(7) } else { 1 };
            let entries = (0..n)
                .map(|j| {
                    let first = rng.below(keys);
                    let in_keyspace = rng.percent(25);
                    let key_in = |n: u64| match in_keyspace {
                        true => [KEYSPACE_PREFIX, &key(n)].concat(),
                        false => key(n),
                    };
                    let k = key_in(first);
                    if rng.below(100) < 2 {
                        let width = 1 + rng.below((keys / 16).max(1));
                        return Entry::DeleteRange(k, key_in(first + width));
                    }
                    if rng.percent(15) {
                        return Entry::Delete(k);
                    }
                    let len = 8 + rng.below(1200) as usize;
                    let mut v = format!("w{i}-{j}-").into_bytes();
                    v.resize(len.max(v.len()), b'a' + (i % 26) as u8);
                    Entry::Put(k, v)
                })
                .collect();
            Step::Write {
                entries,
                sync: rng.percent(20),
            }
        };
        out.push(step);
    }
    out
}

pub type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn entry_hash(k: &[u8], v: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    k.hash(&mut h);
    v.hash(&mut h);
    h.finish()
}

/// A fingerprint of a state that can be updated one entry at a time.
pub fn fingerprint(state: &State) -> u64 {
    state
        .iter()
        .fold(0u64, |acc, (k, v)| acc.wrapping_add(entry_hash(k, v)))
}

/// The writes of a workload, in order, and the fingerprint of the state after each prefix.
pub struct Oracle {
    writes: Vec<Vec<Entry>>,
    /// `prefix_fp[j]`: fingerprint after the first `j` writes.
    prefix_fp: Vec<u64>,
}

impl Oracle {
    pub fn new(steps: &[Step]) -> Oracle {
        let writes: Vec<Vec<Entry>> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Write { entries, .. } => Some(entries.clone()),
                _ => None,
            })
            .collect();
        let mut state = State::new();
        let mut fp = 0u64;
        let mut prefix_fp = vec![fp];
        for w in &writes {
            for e in w {
                e.apply(&mut state, &mut fp);
            }
            prefix_fp.push(fp);
        }
        Oracle { writes, prefix_fp }
    }

    pub fn writes(&self) -> usize {
        self.writes.len()
    }

    /// The state after the first `j` writes.
    pub fn state_at(&self, j: usize) -> State {
        let (mut state, mut fp) = (State::new(), 0);
        for w in self.writes.iter().take(j) {
            for e in w {
                e.apply(&mut state, &mut fp);
            }
        }
        state
    }

    /// The `j` in `lo..=hi` whose prefix state is exactly `state`, if any.
    pub fn find_prefix(&self, state: &State, lo: usize, hi: usize) -> Option<usize> {
        let fp = fingerprint(state);
        (lo..=hi.min(self.writes.len()))
            .rev()
            .filter(|&j| self.prefix_fp.get(j) == Some(&fp))
            .find(|&j| &self.state_at(j) == state)
    }
}

/// How far a run got.
#[derive(Debug, Default, Clone, Copy)]
pub struct Progress {
    /// Writes acknowledged (returned `Ok`), in workload order.
    pub acked: usize,
    /// Writes that must survive power loss: up to the last acknowledged sync write, or the
    /// last `flush`, `compact_range` or `close` that returned `Ok`.
    pub durable: usize,
    /// True if a write was attempted and failed: it may or may not be in a recovered state.
    pub in_flight: bool,
    /// Steps completed.
    pub steps: usize,
    /// Flushes and compactions (trivial moves included) the database reported, summed
    /// over every open that was closed.
    pub flushes: u64,
    pub compactions: u64,
}

impl Progress {
    fn add_stats(&mut self, db: &Db) {
        let s = db.stats();
        self.flushes += s.flushes;
        self.compactions += s.compactions;
    }
}

pub fn options(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        fs,
        write_buffer_size: 64 << 10,
        max_file_size: 16 << 10,
        block_size: 1024,
        max_bytes_for_level_base: 1 << 20,
        level0_compaction_trigger: 2,
        cache_size: 256 << 10,
        // The smallest allowed: the manifest rolls whenever it has doubled since its
        // snapshot, often in these workloads, so crashes and injected faults land around
        // rolls too.
        max_manifest_file_size: 1,
        ..Options::default()
    }
}

/// How a run ended.
pub struct Run {
    pub progress: Progress,
    /// The database, if it is still open.
    pub db: Option<Db>,
    /// The first error, and which step returned it.
    pub error: Option<(String, shale::Error)>,
}

/// Open the database on `fs` and its second keyspace (made at the first open).
fn open(fs: &Arc<dyn FileSystem>) -> Result<(Db, KeyspaceId), (String, shale::Error)> {
    let db = Db::open(DIR, options(Arc::clone(fs))).map_err(|e| ("open".to_owned(), e))?;
    let ks = db
        .keyspace(KEYSPACE)
        .map_err(|e| ("keyspace".to_owned(), e))?;
    Ok((db, ks.id()))
}

/// Open a database on `fs` and run `steps`, stopping at the first error.
pub fn run(fs: &Arc<dyn FileSystem>, steps: &[Step]) -> Run {
    let mut p = Progress::default();
    let (mut db, mut ks) = match open(fs) {
        Ok(opened) => opened,
        Err(error) => {
            return Run {
                progress: p,
                db: None,
                error: Some(error),
            }
        }
    };
    for step in steps {
        let result = match step {
            Step::Write { entries, sync } => {
                let mut batch = WriteBatch::new();
                for e in entries {
                    e.add_to(&mut batch, ks);
                }
                let opts = if *sync {
                    WriteOptions::sync()
                } else {
                    WriteOptions::default()
                };
                match db.write(batch, opts) {
                    Ok(()) => {
                        p.acked += 1;
                        if *sync {
                            p.durable = p.acked;
                        }
                        Ok(())
                    }
                    Err(e) => {
                        p.in_flight = true;
                        Err(e)
                    }
                }
            }
            Step::Flush => db.flush().map(|()| p.durable = p.acked),
            Step::Compact => db.compact_range(None, None).map(|()| p.durable = p.acked),
            Step::Reopen => match db.close() {
                Ok(()) => {
                    p.add_stats(&db);
                    p.durable = p.acked;
                    drop(db);
                    match open(fs) {
                        Ok(again) => {
                            (db, ks) = again;
                            Ok(())
                        }
                        Err((what, e)) => {
                            return Run {
                                progress: p,
                                db: None,
                                error: Some((format!("re{what}"), e)),
                            }
                        }
                    }
                }
                Err(e) => Err(e),
            },
        };
        if let Err(e) = result {
            return Run {
                progress: p,
                db: Some(db),
                error: Some((format!("{step:?}").chars().take(40).collect(), e)),
            };
        }
        p.steps += 1;
    }
    p.add_stats(&db);
    Run {
        progress: p,
        db: Some(db),
        error: None,
    }
}

/// Every pair in `db` (the second keyspace's with `KEYSPACE_PREFIX`, if it exists), by
/// full scans, cross-checked with point reads of every key the workload writes.
pub fn read_state(db: &Db, keys: u64) -> shale::Result<State> {
    let mut state = State::new();
    for pair in db.range::<Vec<u8>>(..)? {
        let (k, v) = pair?;
        state.insert(k, v);
    }
    let ks = match db.keyspace_names().iter().any(|n| n == KEYSPACE) {
        true => Some(db.keyspace(KEYSPACE)?),
        false => None,
    };
    if let Some(ks) = &ks {
        for pair in ks.range::<Vec<u8>>(..)? {
            let (k, v) = pair?;
            state.insert([KEYSPACE_PREFIX, &k].concat(), v);
        }
    }
    for k in 0..keys {
        let k = key(k);
        let mut reads = vec![(k.clone(), db.get(&k)?)];
        if let Some(ks) = &ks {
            reads.push(([KEYSPACE_PREFIX, &k].concat(), ks.get(&k)?));
        }
        for (k, got) in reads {
            if got.as_ref() != state.get(&k) {
                return Err(shale::Error::InvalidArgument(format!(
                    "get and scan disagree on {}",
                    String::from_utf8_lossy(&k)
                )));
            }
        }
    }
    Ok(state)
}

/// Open `fs` and check that it holds a prefix of the oracle's writes with at least `lo`
/// and at most `hi` of them. Returns the prefix length.
pub fn verify(
    fs: Arc<dyn FileSystem>,
    oracle: &Oracle,
    keys: u64,
    lo: usize,
    hi: usize,
) -> Result<usize, String> {
    let db = Db::open(DIR, options(fs)).map_err(|e| format!("reopen failed: {e}"))?;
    let state = read_state(&db, keys).map_err(|e| format!("read failed: {e}"))?;
    db.close().map_err(|e| format!("close failed: {e}"))?;
    oracle.find_prefix(&state, lo, hi).ok_or_else(|| {
        let any = oracle.find_prefix(&state, 0, oracle.writes());
        format!(
            "recovered state ({} keys) is no prefix of {lo}..={hi} writes (matches prefix {any:?})",
            state.len()
        )
    })
}

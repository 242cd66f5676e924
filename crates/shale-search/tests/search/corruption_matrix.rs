//! The corruption matrix. A small database (kilobytes, semantic index on over
//! the prefix `doc`, plain keys beside it, two ranges of which are deleted with range
//! tombstones: one in a table's range-del block, one in the WAL) is built on the real file
//! system with SSTables read through memory mappings; then, for
//! each file kind of the database and of its index's vector store (`indexes/all/`), a bit is flipped at
//! each sampled offset, and separately the file is cut at each sampled offset. The damage is
//! done to a fresh copy while no `Db` has it open; the copy is then opened and read in full
//! (a scan, a point read of every key, searches), inside `catch_unwind`.
//!
//! What a trial may show (the rule the counts are judged by):
//! - Any damage may make `open`, or a read, fail with a typed `Error`. A panic never.
//! - A value returned is the value the oracle says, in a state the damage allows; anything
//!   else is a **wrong value** (must be 0).
//! - Only a torn WAL tail may lose writes silently: cutting the WAL at offset `o` may drop
//!   exactly the records that do not end by `o`; a flipped bit in the WAL's *last* record
//!   may drop that record (a torn write looks the same). A flip in any earlier record must
//!   fail the open. Every other kind (SSTable, MANIFEST, CURRENT) must read back the whole
//!   state or fail: a key missing or stale without an error is **silent loss** (must be 0).
//! - The vector store is derived from the data: damage to it may fail the open but must not
//!   change the data, and a search must return only live keys with their current text, and
//!   after a successful open index every live value.
//!
//! The database's files are damaged twice over: opened without the index (damage met by
//! reads) and with it (open's reconciling scan meets it first).
//!
//! CI mode samples at most 300 offsets per (file kind, damage) cell: the first and last 32
//! bytes of every file and an even stride between. Long mode, every byte of every file:
//! `SHALE_CORRUPTION_EVERY_BYTE=1`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use shale::{Db, Error, Options, WriteBatch, WriteOptions};
use shale_search::semantic::{Embedder, SearchOptions, VectorIndex, VectorIndexOptions};

const KEYS: usize = 80;
/// Keys from this index on are plain data outside the index (`raw000`...), and the deletes
/// of them in one write are one range tombstone (see [`apply`]).
const RAW: usize = 1000;
const RAW_KEYS: usize = 40;
const CI_SAMPLES_PER_CELL: usize = 300;

#[derive(Debug)]
struct BagOfWords;

impl Embedder for BagOfWords {
    fn dim(&self) -> usize {
        16
    }

    fn model_id(&self) -> String {
        "corruption-matrix bag of words, 16 buckets".into()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = [0f32; 16];
                for w in t.split_whitespace() {
                    let h = w
                        .bytes()
                        .fold(0u32, |h, b| h.wrapping_mul(31) ^ u32::from(b));
                    v[(h % 16) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
                v.iter().map(|x| x / n).collect()
            })
            .collect())
    }
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        max_file_size: 16 << 10,
        block_size: 1024,
        cache_size: 64 << 10,
        ..Options::default()
    }
}

/// The name of the index over every key.
const INDEX: &str = "all";

/// A database opened for a trial, and its index when `semantic`.
struct Opened {
    db: Arc<Db>,
    index: Option<VectorIndex>,
}

impl Opened {
    fn open(dir: &Path, semantic: bool) -> Result<Opened, Error> {
        let db = Arc::new(Db::open(dir, options())?);
        let index = if semantic {
            Some(VectorIndex::open(
                &db,
                INDEX,
                VectorIndexOptions::text(Arc::new(BagOfWords)).prefix("doc"),
            )?)
        } else {
            None
        };
        Ok(Opened { db, index })
    }
}

fn key(i: usize) -> Vec<u8> {
    match i.checked_sub(RAW) {
        Some(r) => format!("raw{r:03}").into_bytes(),
        None => format!("doc{i:03}").into_bytes(),
    }
}

/// The index of a key made by [`key`] (`usize::MAX` for any other).
fn key_index(k: &[u8]) -> usize {
    let k = std::str::from_utf8(k).unwrap_or("");
    let parse = |n: &str| n.parse::<usize>().ok().filter(|_| n.len() == 3);
    k.strip_prefix("doc")
        .and_then(parse)
        .or_else(|| k.strip_prefix("raw").and_then(parse).map(|r| r + RAW))
        .unwrap_or(usize::MAX)
}

fn text(i: usize, version: usize) -> String {
    const WORDS: [&str; 8] = [
        "river", "stone", "cloud", "lamp", "garden", "window", "train", "violin",
    ];
    format!(
        "doc{i:03} v{version} {} {} {}",
        WORDS[i % 8],
        WORDS[(i / 8) % 8],
        WORDS[(i * 3 + version) % 8]
    )
}

type Write = Vec<(usize, Option<String>)>;
type State = BTreeMap<usize, String>;

/// The writes, in order, and how many of them precede the live WAL's.
struct Oracle {
    writes: Vec<Write>,
    base: usize,
    /// End offset of each record of the live WAL (one per write after `base`).
    wal_ends: Vec<u64>,
}

impl Oracle {
    fn state_at(&self, j: usize) -> State {
        let mut s = State::new();
        for w in self.writes.iter().take(j) {
            for (k, v) in w {
                match v {
                    Some(v) => s.insert(*k, v.clone()),
                    None => s.remove(k),
                };
            }
        }
        s
    }
}

/// Commit `w` as one batch. Its deletes of plain keys (from [`RAW`] on) must be of
/// consecutive keys, and are written as one range tombstone over them.
fn apply(db: &Db, writes: &mut Vec<Write>, w: Write) {
    let mut batch = WriteBatch::new();
    let raw_deletes: Vec<usize> = w
        .iter()
        .filter(|(k, v)| *k >= RAW && v.is_none())
        .map(|(k, _)| *k)
        .collect();
    if let (Some(&first), Some(&last)) = (raw_deletes.first(), raw_deletes.last()) {
        assert_eq!(
            last + 1 - first,
            raw_deletes.len(),
            "one range of plain keys"
        );
        batch.delete_range(key(first), key(last + 1));
    }
    for (k, v) in &w {
        match v {
            Some(v) => batch.put(key(*k), v),
            None if *k >= RAW => {}
            None => batch.delete(key(*k)),
        }
    }
    db.write(batch, WriteOptions::default()).unwrap();
    writes.push(w);
}

/// Two sessions: the first leaves SSTables and a WAL that the second's open turns into an
/// SSTable; the second flushes (a MANIFEST edit after the open's snapshot) and then writes
/// what stays in its WAL. The vector store gets an SSTable (its WAL replayed at the second
/// open) and a WAL.
fn build(dir: &Path) -> Oracle {
    let mut writes = Vec::new();
    {
        let opened = Opened::open(dir, true).unwrap();
        let db = &*opened.db;
        for i in 0..60 {
            apply(db, &mut writes, vec![(i, Some(text(i, 1)))]);
        }
        apply(
            db,
            &mut writes,
            (60..65).map(|i| (i, Some(text(i, 1)))).collect(),
        );
        for i in [3, 17, 33] {
            apply(db, &mut writes, vec![(i, None)]);
        }
        apply(
            db,
            &mut writes,
            (0..RAW_KEYS).map(|r| (RAW + r, Some(text(r, 1)))).collect(),
        );
        apply(
            db,
            &mut writes,
            (RAW + 5..RAW + 12).map(|k| (k, None)).collect(),
        );
        db.flush().unwrap();
        for i in 10..20 {
            apply(db, &mut writes, vec![(i, Some(text(i, 2)))]);
        }
        db.close().unwrap();
    }
    let opened = Opened::open(dir, true).unwrap();
    let db = &*opened.db;
    for i in 20..25 {
        apply(db, &mut writes, vec![(i, None)]);
    }
    db.flush().unwrap();
    let base = writes.len();
    for i in 30..40 {
        apply(db, &mut writes, vec![(i, Some(text(i, 3)))]);
    }
    for i in 40..44 {
        apply(db, &mut writes, vec![(i, None)]);
    }
    apply(
        db,
        &mut writes,
        (RAW + 20..RAW + 26).map(|k| (k, None)).collect(),
    );
    apply(
        db,
        &mut writes,
        vec![(1, Some(text(1, 4))), (2, None), (65, Some(text(65, 4)))],
    );
    for i in 70..76 {
        apply(db, &mut writes, vec![(i, Some(text(i, 5)))]);
    }
    opened.index.as_ref().unwrap().wait_indexed().unwrap();
    db.close().unwrap();
    drop(opened);
    // Where each record of the live WAL ends, from the WAL's own reader.
    let wal = files_of(dir, Kind::Wal);
    assert_eq!(wal.len(), 1, "one live WAL expected: {wal:?}");
    let data = std::fs::read(&wal[0]).unwrap();
    let mut reader = shale::inspect::wal::LogReader::new(&data, &wal[0]);
    let mut wal_ends = Vec::new();
    while let Some((offset, record)) = reader.next_record().unwrap() {
        wal_ends.push(offset + (shale::inspect::wal::HEADER_LEN + record.len()) as u64);
    }
    assert_eq!(wal_ends.len(), writes.len() - base, "one record per write");
    // The first session's range tombstone is in a table's range-del block, the second's
    // in the WAL: damage reaches both.
    let with_range_dels = files_of(dir, Kind::Sst)
        .iter()
        .filter(|f| {
            shale::inspect::open_table(f)
                .unwrap()
                .range_dels()
                .is_some()
        })
        .count();
    assert_eq!(with_range_dels, 1, "one table with range tombstones");
    Oracle {
        writes,
        base,
        wal_ends,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Wal,
    Sst,
    Manifest,
    Current,
}

impl Kind {
    fn matches(self, name: &str) -> bool {
        match self {
            Kind::Wal => name.ends_with(".wal"),
            Kind::Sst => name.ends_with(".sst"),
            Kind::Manifest => name.starts_with("MANIFEST-"),
            Kind::Current => name == "CURRENT",
        }
    }
}

fn files_of(dir: &Path, kind: Kind) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .filter(|e| kind.matches(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    Flip,
    Truncate,
}

/// Offsets to damage in a file of `len` bytes: every one, or the first and last 32 and an
/// even stride between, about `budget` in all.
fn offsets(len: u64, budget: usize) -> Vec<u64> {
    if budget == 0 || len <= budget as u64 {
        return (0..len).collect();
    }
    let mut out: Vec<u64> = (0..32.min(len))
        .chain(len.saturating_sub(32)..len)
        .collect();
    let inner = budget.saturating_sub(64).max(1) as u64;
    let stride = (len / inner).max(1);
    out.extend((32..len.saturating_sub(32)).step_by(stride as usize));
    out.sort();
    out.dedup();
    out
}

fn damage(path: &Path, how: Damage, offset: u64) {
    let mut data = std::fs::read(path).unwrap();
    match how {
        Damage::Flip => data[offset as usize] ^= 1 << (offset % 8),
        Damage::Truncate => data.truncate(offset as usize),
    }
    std::fs::write(path, data).unwrap();
}

#[derive(Debug, Default, Clone)]
struct Cell {
    trials: u64,
    /// `open` failed: with `Corruption`, or with another typed error.
    open_corruption: u64,
    open_other: u64,
    /// Opened and read everything back as written.
    intact: u64,
    /// Opened and read back a prefix the torn-tail rule allows (the last records dropped).
    torn_tail: u64,
    /// Opened, but a read (or the index check) failed with a typed error.
    read_error: u64,
    panics: u64,
    wrong_values: u64,
    silent_loss: u64,
    index_wrong: u64,
    /// After a typed error, `Db::repair`: the repaired database read back every write, or
    /// a part of them; or repair, or the open and reads after it, failed.
    repaired_whole: u64,
    repaired_part: u64,
    repair_failed: u64,
    examples: Vec<String>,
}

impl Cell {
    fn failures(&self) -> u64 {
        self.panics + self.wrong_values + self.silent_loss + self.index_wrong + self.repair_failed
    }

    fn note(&mut self, what: String) {
        if self.examples.len() < 4 {
            self.examples.push(what);
        }
    }
}

/// Every key's value by a full scan and a point read (which must agree), and the search
/// hits of a few queries checked against those values. `Err` only for typed read errors.
fn read_back(opened: &Opened) -> Result<(State, Vec<String>), Error> {
    let db = &opened.db;
    let mut scanned = State::new();
    for pair in db.range::<&[u8]>(..)? {
        let (k, v) = pair?;
        scanned.insert(key_index(&k), String::from_utf8_lossy(&v).into_owned());
    }
    let mut problems = Vec::new();
    for i in (0..KEYS).chain(RAW..RAW + RAW_KEYS) {
        let got = db
            .get(key(i))?
            .map(|v| String::from_utf8_lossy(&v).into_owned());
        if got.as_ref() != scanned.get(&i) {
            problems.push(format!(
                "{}: get {got:?} but scan {:?}",
                String::from_utf8_lossy(&key(i)),
                scanned.get(&i)
            ));
        }
    }
    let Some(index) = &opened.index else {
        return Ok((scanned, problems));
    };
    for query in ["river stone", "cloud lamp garden", "violin train window"] {
        for hit in index.search(query, &SearchOptions::k(10).exact())? {
            let k = String::from_utf8_lossy(&hit.key).into_owned();
            let text = String::from_utf8_lossy(&hit.document).into_owned();
            let live = Some(key_index(&hit.key))
                .filter(|&i| i < RAW)
                .and_then(|i| scanned.get(&i));
            if live != Some(&text) {
                problems.push(format!("search hit {k} {text:?} is not live"));
            }
        }
    }
    let indexed = index.len()?;
    let documents = scanned.range(..RAW).count();
    if indexed != documents {
        problems.push(format!("{indexed} indexed for {documents} live documents"));
    }
    Ok((scanned, problems))
}

/// Which prefixes of the writes a trial may recover.
fn allowed(o: &Oracle, target: &str, kind: Kind, how: Damage, offset: u64) -> Vec<usize> {
    let all = o.writes.len();
    if target != "main" || kind != Kind::Wal {
        return vec![all];
    }
    let whole_before = o.wal_ends.iter().filter(|&&end| end <= offset).count();
    match how {
        Damage::Truncate => vec![o.base + whole_before],
        // A flip inside the last record may drop it as a torn tail.
        Damage::Flip if whole_before + 1 == o.wal_ends.len() => vec![all - 1, all],
        Damage::Flip => vec![all],
    }
}

fn trial(
    o: &Oracle,
    work: &Path,
    semantic: bool,
    allowed_prefixes: &[usize],
    cell: &mut Cell,
    label: &str,
) {
    cell.trials += 1;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let opened = Opened::open(work, semantic)?;
        let read = read_back(&opened);
        let _ = opened.db.close();
        Ok::<_, Error>(read)
    }));
    match outcome {
        Err(_) => {
            cell.panics += 1;
            cell.note(format!("{label}: panic"));
        }
        Ok(Err(e)) => {
            if e.is_corruption() {
                cell.open_corruption += 1;
            } else {
                cell.open_other += 1;
                cell.note(format!("{label}: open: {e}"));
            }
            repair_trial(o, work, semantic, cell, label);
        }
        Ok(Ok(Err(_))) => {
            cell.read_error += 1;
            repair_trial(o, work, semantic, cell, label);
        }
        Ok(Ok(Ok((state, problems)))) => {
            if !problems.is_empty() {
                cell.index_wrong += 1;
                cell.note(format!("{label}: {}", problems[0]));
            }
            let all = o.writes.len();
            if allowed_prefixes
                .iter()
                .any(|&j| j == all && o.state_at(j) == state)
            {
                cell.intact += 1;
            } else if allowed_prefixes.iter().any(|&j| o.state_at(j) == state) {
                cell.torn_tail += 1;
            } else if (0..=all).any(|j| o.state_at(j) == state) {
                cell.silent_loss += 1;
                let j = (0..=all).rev().find(|&j| o.state_at(j) == state);
                cell.note(format!(
                    "{label}: silent loss: recovered the first {j:?} of {all} writes, allowed {allowed_prefixes:?}"
                ));
            } else {
                // Not a prefix: a value no allowed state holds, or a key from nowhere.
                let want = o.state_at(all);
                let wrong = state.iter().any(|(k, v)| {
                    allowed_prefixes
                        .iter()
                        .all(|&j| o.state_at(j).get(k) != Some(v))
                        && want.get(k) != Some(v)
                });
                if wrong {
                    cell.wrong_values += 1;
                    cell.note(format!("{label}: wrong value"));
                } else {
                    cell.silent_loss += 1;
                    cell.note(format!(
                        "{label}: silent loss: {} keys recovered, {} expected",
                        state.len(),
                        want.len()
                    ));
                }
            }
        }
    }
}

/// After a typed error, the opt-in way out: `Db::repair`, then open and read everything
/// again. Repair may lose what the damage covered, so the state need not be one of the
/// oracle's; but it must succeed, every value read must be one its key was given by some
/// write, and the index must agree with the values.
fn repair_trial(o: &Oracle, work: &Path, semantic: bool, cell: &mut Cell, label: &str) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        Db::repair(work, &options())?;
        let opened = Opened::open(work, semantic)?;
        let read = read_back(&opened);
        let _ = opened.db.close();
        read
    }));
    match outcome {
        Err(_) => {
            cell.panics += 1;
            cell.note(format!("{label}: panic in or after repair"));
        }
        Ok(Err(e)) => {
            cell.repair_failed += 1;
            cell.note(format!("{label}: repair: {e}"));
        }
        Ok(Ok((state, problems))) => {
            if !problems.is_empty() {
                cell.index_wrong += 1;
                cell.note(format!("{label}: after repair: {}", problems[0]));
            }
            let ever_written = |k: &usize, v: &String| {
                o.writes
                    .iter()
                    .flatten()
                    .any(|(wk, wv)| wk == k && wv.as_ref() == Some(v))
            };
            if let Some((k, v)) = state.iter().find(|(k, v)| !ever_written(k, v)) {
                cell.wrong_values += 1;
                cell.note(format!(
                    "{label}: after repair {} = {v:?}, never written",
                    String::from_utf8_lossy(&key(*k))
                ));
            } else if state == o.state_at(o.writes.len()) {
                cell.repaired_whole += 1;
            } else {
                cell.repaired_part += 1;
            }
        }
    }
}

#[test]
fn corruption_matrix_never_panics_or_returns_wrong_values() {
    if !shale_trials::in_own_process(
        module_path!(),
        "corruption_matrix_never_panics_or_returns_wrong_values",
    ) {
        return;
    }
    shale_trials::count_panics();
    let budget = if shale_trials::env_count("SHALE_CORRUPTION_EVERY_BYTE", 0) > 0 {
        0
    } else {
        CI_SAMPLES_PER_CELL
    };
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let pristine = root.path().join("pristine");
    let oracle = build(&pristine);
    let work = root.path().join("work");
    let start = Instant::now();
    let panics_before = shale_trials::panics();
    let mut rows: Vec<(String, Damage, Cell, u64, usize)> = Vec::new();
    // The database's own files are read twice: opened plainly, so that damage is met by
    // reads (gets and scans through the mapped SSTables), and with the index on, whose
    // open scans every value to reconcile. The vector store's files need the index on.
    for (target, semantic) in [("main", false), ("main", true), ("vectors", true)] {
        let dir = if target == "main" {
            pristine.clone()
        } else {
            shale_search::semantic::index_dir(&pristine, INDEX)
        };
        for kind in [Kind::Wal, Kind::Sst, Kind::Manifest, Kind::Current] {
            let files = files_of(&dir, kind);
            assert!(!files.is_empty(), "no {kind:?} in {}", dir.display());
            let bytes: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
            for how in [Damage::Flip, Damage::Truncate] {
                let mut cell = Cell::default();
                for file in &files {
                    let len = file.metadata().unwrap().len();
                    // Split the cell's budget between the files by size.
                    let share = if budget == 0 {
                        0
                    } else {
                        ((budget as u64 * len).div_ceil(bytes.max(1)) as usize).max(16)
                    };
                    let rel = file.strip_prefix(&pristine).unwrap();
                    for offset in offsets(len, share) {
                        let _ = std::fs::remove_dir_all(&work);
                        copy_dir(&pristine, &work);
                        damage(&work.join(rel), how, offset);
                        let label = format!("{} {how:?} @{offset}", rel.display());
                        let ok = allowed(&oracle, target, kind, how, offset);
                        trial(&oracle, &work, semantic, &ok, &mut cell, &label);
                    }
                }
                let name = match (target, semantic) {
                    ("main", false) => format!("{kind:?}, plain open"),
                    ("main", true) => format!("{kind:?}, index on"),
                    _ => format!("indexes/{INDEX}/{kind:?}, index on"),
                };
                rows.push((name, how, cell, bytes, files.len()));
            }
        }
    }
    let background_panics = shale_trials::panics() - panics_before;
    println!(
        "corruption matrix ({} mode), {:.1} s, background-thread panics {background_panics}:",
        if budget == 0 {
            "every byte"
        } else {
            "CI sample"
        },
        start.elapsed().as_secs_f64()
    );
    println!(
        "| file kind | files, bytes | damage | trials | open: Corruption | open: other error | read error | intact | torn tail dropped | panics | wrong values | silent loss | index wrong | repaired: all / part / failed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut failures = background_panics;
    for (name, how, c, bytes, nfiles) in &rows {
        println!(
            "| {name} | {nfiles}, {bytes} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} / {} |",
            match how {
                Damage::Flip => "bit flip",
                Damage::Truncate => "truncate",
            },
            c.trials,
            c.open_corruption,
            c.open_other,
            c.read_error,
            c.intact,
            c.torn_tail,
            c.panics,
            c.wrong_values,
            c.silent_loss,
            c.index_wrong,
            c.repaired_whole,
            c.repaired_part,
            c.repair_failed
        );
        failures += c.failures();
    }
    for (name, how, c, _, _) in &rows {
        for e in &c.examples {
            println!("  {name} {how:?}: {e}");
        }
    }
    assert_eq!(
        failures, 0,
        "panics, wrong values or silent loss: see the table"
    );
}

//! Whole-table tests: build with `TableBuilder` through `PosixFs` into a temporary directory,
//! read back with `Table`, and damage the file byte by byte.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Table, TableBuilder, TableOptions, TableSummary};
use crate::error::Result;
use crate::fs::{FileSystem, PosixFs};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, parse_internal_key, InternalKey, SeqNo, ValueKind};
use crate::options::Compression;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

const COMPRESSIONS: [Compression; 4] = [
    Compression::None,
    Compression::Lz4,
    Compression::Zstd(3),
    Compression::Snappy,
];

fn opts(compression: Compression, block_size: usize, restart_interval: usize) -> TableOptions {
    TableOptions {
        block_size,
        restart_interval,
        filter_bits_per_key: 10,
        compression,
    }
}

fn write_table(path: &Path, opts: TableOptions, entries: &Entries) -> TableSummary {
    let file = PosixFs.create(path).unwrap();
    let mut b = TableBuilder::new(file, path.to_owned(), opts);
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    // The estimate counts the unflushed blocks uncompressed: an upper bound, roughly.
    let estimate = b.estimated_file_size();
    assert_eq!(b.num_entries(), entries.len() as u64);
    let summary = b.finish().unwrap();
    assert!(
        estimate <= summary.file_size * 2 + opts.block_size as u64,
        "{estimate}"
    );
    summary
}

fn open(path: &Path) -> Result<Arc<Table>> {
    Ok(Arc::new(Table::open(PosixFs.open(path)?, path.to_owned())?))
}

/// Through a memory mapping: uncompressed blocks are then views into the mapping.
fn open_mapped(path: &Path) -> Result<Arc<Table>> {
    Ok(Arc::new(Table::open(
        PosixFs.open_mapped(path)?,
        path.to_owned(),
    )?))
}

/// Both ways of reading a table; every read test runs through each.
type Opener = fn(&Path) -> Result<Arc<Table>>;
const OPENERS: [Opener; 2] = [open, open_mapped];

fn ikey(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    InternalKey::new(user_key, SeqNo(seq), kind)
        .encoded()
        .to_vec()
}

/// `n` user keys `key000000, key000002, ...` (odd numbers are absent), each with 1 to 4
/// versions, some of them deletes; values of varied, compressible content.
fn dataset(n: u64) -> Entries {
    let mut out = Vec::new();
    for i in 0..n {
        let uk = format!("key{:06}", 2 * i);
        let versions = 1 + i % 4;
        for j in (0..versions).rev() {
            let seq = 10 * i + j + 1;
            let kind = if (i + j) % 7 == 0 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = match kind {
                ValueKind::Delete | ValueKind::RangeDelete => Vec::new(),
                ValueKind::Put => format!("value-{i}-{j};")
                    .repeat(1 + (i % 5) as usize)
                    .into_bytes(),
            };
            out.push((ikey(uk.as_bytes(), seq, kind), value));
        }
    }
    out
}

/// What `get(user_key, snapshot)` must return according to the sorted `entries`.
fn model_get(entries: &Entries, user_key: &[u8], snapshot: u64) -> Option<(ValueKind, Vec<u8>)> {
    entries.iter().find_map(|(k, v)| {
        let p = parse_internal_key(k).unwrap();
        (p.user_key == user_key && p.seq.0 <= snapshot).then(|| (p.kind, v.clone()))
    })
}

fn scan_forward(table: &Arc<Table>) -> Result<Entries> {
    let mut it = table.iter();
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn scan_backward(table: &Arc<Table>) -> Result<Entries> {
    let mut it = table.iter();
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

#[test]
fn ten_thousand_entries_every_compression() {
    let dir = tempfile::tempdir().unwrap();
    let entries = dataset(4000);
    assert!(entries.len() >= 10_000, "{}", entries.len());
    for c in COMPRESSIONS {
        let path = dir.path().join(format!("{c:?}.sst"));
        let summary = write_table(&path, opts(c, 1024, 16), &entries);
        assert_eq!(summary.entries, entries.len() as u64);
        assert_eq!(summary.smallest.encoded(), &entries[0].0[..]);
        assert_eq!(summary.largest.encoded(), &entries.last().unwrap().0[..]);
        assert_eq!(summary.smallest_seq, SeqNo(1));
        assert_eq!(summary.largest_seq, SeqNo(10 * 3999 + 4));
        assert_eq!(summary.file_size, std::fs::metadata(&path).unwrap().len());

        for open in OPENERS {
            let table = open(&path).unwrap();
            let p = table.properties();
            assert_eq!(p.entries, entries.len() as u64);
            assert_eq!(p.compression, c);
            assert!(p.data_blocks > 10);
            assert_eq!(table.smallest(), &summary.smallest);
            assert_eq!(table.largest(), &summary.largest);
            assert_eq!(table.file_size(), summary.file_size);

            for i in 0..4000u64 {
                let uk = format!("key{:06}", 2 * i);
                let uk = uk.as_bytes();
                assert_eq!(
                    table.get(uk, SeqNo::MAX).unwrap(),
                    model_get(&entries, uk, u64::MAX)
                );
                // Every snapshot between this key's first version and past its last.
                for snap in 10 * i..10 * i + 6 {
                    let want = model_get(&entries, uk, snap);
                    assert_eq!(table.get(uk, SeqNo(snap)).unwrap(), want, "{i}@{snap}");
                }
                let missing = format!("key{:06}", 2 * i + 1);
                assert_eq!(table.get(missing.as_bytes(), SeqNo::MAX).unwrap(), None);
            }
            assert_eq!(table.get(b"", SeqNo::MAX).unwrap(), None);
            assert_eq!(table.get(b"zzz", SeqNo::MAX).unwrap(), None);

            assert_eq!(scan_forward(&table).unwrap(), entries, "{c:?}");
            assert_eq!(scan_backward(&table).unwrap(), entries, "{c:?}");
        }
    }
}

#[test]
fn compressed_tables_are_smaller() {
    let dir = tempfile::tempdir().unwrap();
    let entries = dataset(2000);
    let size = |c: Compression| {
        let path = dir.path().join(format!("{c:?}.sst"));
        write_table(&path, opts(c, 4096, 16), &entries).file_size
    };
    let plain = size(Compression::None);
    for c in [Compression::Lz4, Compression::Zstd(3), Compression::Snappy] {
        assert!(size(c) < plain, "{c:?}");
    }
}

#[test]
fn seek_across_block_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let entries = dataset(300);
    let path = dir.path().join("seek.sst");
    write_table(&path, opts(Compression::Lz4, 200, 2), &entries);
    let table = open(&path).unwrap();
    assert!(table.properties().data_blocks > 20);
    let mut it = table.iter();
    // Exact keys, then keys just after each entry (the next entry, often in the next block).
    for (n, (k, v)) in entries.iter().enumerate() {
        it.seek(k).unwrap();
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        let p = parse_internal_key(k).unwrap();
        if p.seq.0 > 0 {
            let after = ikey(p.user_key, p.seq.0 - 1, ValueKind::SEEK);
            it.seek(&after).unwrap();
            match entries.get(n + 1) {
                Some((next, _)) => assert_eq!(it.key(), &next[..]),
                None => assert!(!it.valid()),
            }
        }
        // Walk two steps forward and back from here: crosses boundaries in both directions.
        it.seek(k).unwrap();
        for step in 1..=2 {
            if it.valid() {
                it.next().unwrap();
                assert_eq!(it.valid(), n + step < entries.len());
            }
        }
        if it.valid() {
            it.prev().unwrap();
            it.prev().unwrap();
            assert_eq!(it.key(), &k[..]);
        }
    }
    // Before the first key and after the last.
    it.seek(&ikey(b"", u64::from(u32::MAX), ValueKind::SEEK))
        .unwrap();
    assert_eq!(it.key(), &entries[0].0[..]);
    it.seek(&ikey(b"zzz", 0, ValueKind::SEEK)).unwrap();
    assert!(!it.valid());
}

#[test]
fn versions_of_one_key_straddle_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let mut entries = vec![(ikey(b"a", 1000, ValueKind::Put), b"a".to_vec())];
    for seq in (1..=300u64).rev() {
        let kind = if seq % 10 == 0 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let value = format!("hot-{seq}").into_bytes();
        entries.push((ikey(b"hot", seq * 2, kind), value));
    }
    entries.push((ikey(b"z", 1, ValueKind::Put), b"z".to_vec()));
    for restart in [1, 16] {
        let path = dir.path().join(format!("hot{restart}.sst"));
        write_table(&path, opts(Compression::Snappy, 128, restart), &entries);
        let table = open(&path).unwrap();
        assert!(table.properties().data_blocks > 10);
        for snap in 0..=610 {
            let want = model_get(&entries, b"hot", snap);
            assert_eq!(
                table.get(b"hot", SeqNo(snap)).unwrap(),
                want,
                "snapshot {snap}"
            );
        }
        assert_eq!(table.get(b"a", SeqNo(999)).unwrap(), None);
        assert_eq!(
            table.get(b"z", SeqNo::MAX).unwrap(),
            Some((ValueKind::Put, b"z".to_vec()))
        );
        assert_eq!(scan_backward(&table).unwrap(), entries);
    }
}

#[test]
fn filter_and_no_filter() {
    let dir = tempfile::tempdir().unwrap();
    let entries = dataset(500);
    let with = dir.path().join("with.sst");
    let without = dir.path().join("without.sst");
    write_table(&with, opts(Compression::Lz4, 1024, 16), &entries);
    let no_filter = TableOptions {
        filter_bits_per_key: 0,
        ..opts(Compression::Lz4, 1024, 16)
    };
    write_table(&without, no_filter, &entries);
    let (with, without) = (open(&with).unwrap(), open(&without).unwrap());
    assert!(std::fs::metadata(with.path()).unwrap().len() > without.file_size());
    let absent = (0..500)
        .filter(|i| with.may_contain(format!("key{:06}", 2 * i + 1).as_bytes()))
        .count();
    assert!(absent < 25, "{absent} false positives of 500");
    for i in 0..500 {
        let uk = format!("key{:06}", 2 * i);
        assert!(with.may_contain(uk.as_bytes()));
        assert!(without.may_contain(b"anything"));
        assert_eq!(
            without.get(uk.as_bytes(), SeqNo::MAX).unwrap(),
            model_get(&entries, uk.as_bytes(), u64::MAX)
        );
    }
}

#[test]
fn empty_table_and_bad_keys_are_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.sst");
    let b = TableBuilder::new(
        PosixFs.create(&path).unwrap(),
        path.clone(),
        opts(Compression::None, 4096, 16),
    );
    let err = b.finish().unwrap_err();
    assert!(matches!(err, crate::Error::InvalidArgument(_)), "{err}");
    let mut b = TableBuilder::new(
        PosixFs.create(&path).unwrap(),
        path,
        TableOptions::default(),
    );
    assert!(b.add(b"short", b"v").is_err());
}

/// A small table in every compression, for the damage tests.
fn small_tables(dir: &Path) -> Vec<(PathBuf, Entries)> {
    let entries = dataset(40);
    [Compression::None, Compression::Lz4, Compression::Zstd(1)]
        .into_iter()
        .map(|c| {
            let path = dir.join(format!("small-{c:?}.sst"));
            write_table(&path, opts(c, 256, 4), &entries);
            (path, entries.clone())
        })
        .collect()
}

/// Read everything the table holds; every answer that is not an error must be right.
fn check_readable_parts(path: &Path, entries: &Entries) {
    for open in OPENERS {
        check_readable_parts_with(open, path, entries);
    }
}

fn check_readable_parts_with(open: Opener, path: &Path, entries: &Entries) {
    let table = match open(path) {
        Ok(t) => t,
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            return;
        }
    };
    for i in 0..40u64 {
        let uk = format!("key{:06}", 2 * i);
        for snap in [u64::MAX, 10 * i + 2] {
            match table.get(uk.as_bytes(), SeqNo(snap.min(SeqNo::MAX.0))) {
                Ok(got) => assert_eq!(got, model_get(entries, uk.as_bytes(), snap)),
                Err(e) => assert!(e.is_corruption(), "{e}"),
            }
        }
    }
    let mut it = table.iter();
    let mut n = 0;
    let mut r = it.seek_to_first();
    while r.is_ok() && it.valid() {
        assert_eq!(
            (it.key(), it.value()),
            (&entries[n].0[..], &entries[n].1[..])
        );
        n += 1;
        r = it.next();
    }
    match r {
        Ok(()) => assert_eq!(n, entries.len()),
        Err(e) => assert!(e.is_corruption(), "{e}"),
    }
}

#[test]
fn every_flipped_byte_is_detected_or_harmless() {
    let dir = tempfile::tempdir().unwrap();
    for (path, entries) in small_tables(dir.path()) {
        let good = std::fs::read(&path).unwrap();
        let damaged = dir.path().join("damaged.sst");
        for i in 0..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = good.clone();
                bad[i] ^= bit;
                std::fs::write(&damaged, &bad).unwrap();
                check_readable_parts(&damaged, &entries);
            }
        }
    }
}

#[test]
fn every_truncation_fails_to_open() {
    let dir = tempfile::tempdir().unwrap();
    for (path, _) in small_tables(dir.path()) {
        let good = std::fs::read(&path).unwrap();
        let cut = dir.path().join("cut.sst");
        for n in 0..good.len() {
            std::fs::write(&cut, &good[..n]).unwrap();
            let err = open(&cut).unwrap_err();
            assert!(err.is_corruption(), "length {n}: {err}");
        }
    }
}

#[test]
fn corruption_errors_name_the_file_and_block() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = small_tables(dir.path()).remove(0);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[3] ^= 0xff; // inside the first data block
    std::fs::write(&path, &bytes).unwrap();
    let table = open(&path).unwrap();
    let err = table.get(b"key000000", SeqNo::MAX).unwrap_err();
    match err {
        crate::Error::Corruption {
            file,
            offset,
            reason,
        } => {
            assert_eq!(file, path);
            assert_eq!(offset, 0);
            assert!(reason.contains("checksum"), "{reason}");
        }
        other => panic!("{other}"),
    }
    assert!(scan_forward(&table).is_err());
    assert_eq!(
        compare_internal(table.smallest().encoded(), table.largest().encoded()),
        Ordering::Less
    );
}

/// Point reads find their block through the index words and the handles array when the
/// words decide, and through the index block when a word ties. Keys here share their first
/// eight bytes after the common prefix in runs, so targets tie with some index keys and not
/// others; every answer must match the model either way.
#[test]
fn gets_agree_whether_the_index_words_decide_or_tie() {
    let dir = tempfile::tempdir().unwrap();
    let mut entries = Vec::new();
    for i in 0..3000u64 {
        let uk = format!("user/{:04}/{:06}", i / 64, i * 3);
        entries.push((ikey(uk.as_bytes(), i + 1, ValueKind::Put), uk.into_bytes()));
    }
    for restart in [1, 16] {
        let path = dir.path().join(format!("words{restart}.sst"));
        write_table(&path, opts(Compression::Lz4, 256, restart), &entries);
        for open in OPENERS {
            let table = open(&path).unwrap();
            let (mut decided, mut tied) = (0, 0);
            for i in 0..3000u64 {
                for (j, snap) in [(0, u64::MAX), (1, u64::MAX), (0, i)] {
                    let uk = format!("user/{:04}/{:06}", i / 64, i * 3 + j);
                    let uk = uk.as_bytes();
                    match table.index_words.restarts_before(uk) {
                        Some(_) => decided += 1,
                        None => tied += 1,
                    }
                    let want = model_get(&entries, uk, snap);
                    assert_eq!(table.get(uk, SeqNo(snap)).unwrap(), want, "{i}+{j}@{snap}");
                }
            }
            assert!(
                decided > 1000 && tied > 1000,
                "{decided} decided, {tied} tied"
            );
            for absent in [&b""[..], b"user/", b"user/9999", b"v"] {
                assert_eq!(table.get(absent, SeqNo::MAX).unwrap(), None);
            }
        }
    }
}

#[test]
fn a_closing_table_takes_its_cached_blocks_out_of_the_cache() {
    use crate::sst::BlockCache;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cached.sst");
    let entries = dataset(2000);
    write_table(&path, opts(Compression::Lz4, 512, 16), &entries);
    let cache = Arc::new(BlockCache::new(64 << 20, 512));
    let open_cached = || {
        let file = PosixFs.open_mapped(&path).unwrap();
        Arc::new(Table::open_cached(file, path.clone(), Arc::clone(&cache)).unwrap())
    };
    // Read without filling the cache: nothing to take out at close.
    let table = open_cached();
    for (k, _) in entries.iter().step_by(50) {
        table
            .get_opt(crate::key::user_key(k), SeqNo::MAX, false)
            .unwrap();
    }
    assert_eq!(cache.usage(), 0);
    drop(table);
    // Fill it: every block read is admitted (the cache is far from full), and all of
    // them leave with the table.
    let table = open_cached();
    for (k, _) in &entries {
        let user_key = crate::key::user_key(k);
        let want = model_get(&entries, user_key, u64::MAX);
        assert_eq!(table.get(user_key, SeqNo::MAX).unwrap(), want);
    }
    assert!(cache.usage() > 0);
    assert!(cache.stats.inserts.load() > 10);
    drop(table);
    assert_eq!(cache.usage(), 0);
}

fn tombstone(start: &str, end: &str, seq: u64) -> crate::range_del::RangeTombstone {
    crate::range_del::RangeTombstone {
        start: start.as_bytes().to_vec(),
        end: end.as_bytes().to_vec(),
        seq: SeqNo(seq),
    }
}

/// A table of `entries` and `tombstones` (fragments), as a flush writes it.
fn write_with_range_dels(
    path: &Path,
    entries: &Entries,
    tombstones: &[crate::range_del::RangeTombstone],
) -> TableSummary {
    let mut b = TableBuilder::new(
        PosixFs.create(path).unwrap(),
        path.to_owned(),
        opts(Compression::Lz4, 256, 4),
    );
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    b.add_range_dels(tombstones.to_vec());
    b.finish().unwrap()
}

#[test]
fn range_tombstones_round_trip_with_and_without_points() {
    let dir = tempfile::tempdir().unwrap();
    let tombstones = vec![tombstone("key000010", "key000030", 900)];
    let entries = dataset(40);

    let path = dir.path().join("mixed.sst");
    let summary = write_with_range_dels(&path, &entries, &tombstones);
    assert_eq!(summary.range_deletions, 1);
    assert_eq!(summary.largest_seq, SeqNo(900));
    let table = open(&path).unwrap();
    assert_eq!(table.range_dels().unwrap().tombstones(), tombstones);
    assert_eq!(
        scan_forward(&table).unwrap(),
        entries,
        "points are untouched"
    );
    let bytes = std::fs::read(&path).unwrap();
    let version = crate::codec::get_u32(&bytes[bytes.len() - 16..]).unwrap();
    assert_eq!(version, super::format::FORMAT_VERSION_RANGE_DELS);

    // Only tombstones: no data block; the range is the table's whole key range.
    let path = dir.path().join("only.sst");
    let tombstones = vec![
        tombstone("b", "m", 7),
        tombstone("m", "q", 9),
        tombstone("m", "q", 7),
    ];
    let summary = write_with_range_dels(&path, &Vec::new(), &tombstones);
    assert_eq!(summary.entries, 0);
    assert_eq!(
        summary.smallest,
        InternalKey::new(b"b", SeqNo(7), ValueKind::RangeDelete)
    );
    assert_eq!(summary.largest, InternalKey::range_end(b"q"));
    assert!(summary.largest.is_range_end());
    assert_eq!(
        (summary.smallest_seq, summary.largest_seq),
        (SeqNo(7), SeqNo(9))
    );
    for open in OPENERS {
        let table = open(&path).unwrap();
        assert_eq!(table.range_dels().unwrap().tombstones(), tombstones);
        assert_eq!(scan_forward(&table).unwrap(), Vec::new());
        assert_eq!(scan_backward(&table).unwrap(), Vec::new());
        assert_eq!(table.get(b"c", SeqNo::MAX).unwrap(), None);
        let mut it = table.iter();
        it.seek(&ikey(b"c", 100, ValueKind::Put)).unwrap();
        assert!(!it.valid());
    }

    // A table without tombstones stays format version 1.
    let path = dir.path().join("points.sst");
    write_table(&path, opts(Compression::None, 256, 4), &entries);
    let bytes = std::fs::read(&path).unwrap();
    let version = crate::codec::get_u32(&bytes[bytes.len() - 16..]).unwrap();
    assert_eq!(version, super::format::FORMAT_VERSION);
    assert!(open(&path).unwrap().range_dels().is_none());
}

#[test]
fn every_flipped_byte_of_a_range_del_table_is_detected_or_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let entries = dataset(12);
    let tombstones = vec![tombstone("key000004", "key000012", 500)];
    let path = dir.path().join("rd.sst");
    write_with_range_dels(&path, &entries, &tombstones);
    let good = std::fs::read(&path).unwrap();
    let damaged = dir.path().join("damaged.sst");
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        std::fs::write(&damaged, &bad).unwrap();
        match open(&damaged) {
            Ok(table) => {
                let got = table.range_dels().map(|s| s.tombstones());
                assert_eq!(got, Some(tombstones.clone()), "flip at {i}");
            }
            Err(e) => assert!(e.is_corruption(), "flip at {i}: {e}"),
        }
    }
}

/// A file that records the read-ahead its readers ask for.
#[derive(Debug)]
struct ReadAheadLog {
    file: Arc<dyn crate::fs::RandomAccessFile>,
    asked: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl crate::fs::RandomAccessFile for ReadAheadLog {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file.read_exact_at(offset, buf)
    }

    fn len(&self) -> u64 {
        self.file.len()
    }

    fn read_ahead(&self, offset: u64, len: u64) {
        self.asked.lock().unwrap().push((offset, len));
    }
}

#[test]
fn a_long_scan_reads_ahead_and_a_short_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let entries = dataset(20_000);
    write_table(&path, opts(Compression::None, 4096, 16), &entries);
    let log = Arc::new(ReadAheadLog {
        file: PosixFs.open(&path).unwrap(),
        asked: Default::default(),
    });
    let file_len = log.file.len();
    let table = Arc::new(Table::open(log.clone(), path.clone()).unwrap());
    let asked = |log: &ReadAheadLog| std::mem::take(&mut *log.asked.lock().unwrap());

    // Point reads and a seek followed by a few steps: no read-ahead.
    for i in (0..20_000u64).step_by(997) {
        let user_key = format!("key{:06}", 2 * i);
        table
            .get(user_key.as_bytes(), SeqNo(u64::MAX >> 8))
            .unwrap();
        let key = ikey(user_key.as_bytes(), u64::MAX >> 8, ValueKind::Put);
        let mut it = table.iter();
        it.seek(&key).unwrap();
        for _ in 0..20 {
            if it.valid() {
                it.next().unwrap();
            }
        }
    }
    assert_eq!(asked(&log), []);

    // A whole scan: windows that grow, each starting where the one before ended, and
    // together reaching the end of the data blocks.
    assert_eq!(scan_forward(&table).unwrap(), entries);
    let windows = asked(&log);
    assert!(windows.len() >= 3, "{windows:?}");
    for pair in windows.windows(2) {
        let ((a, a_len), (b, b_len)) = (pair[0], pair[1]);
        assert_eq!(a + a_len, b, "{windows:?}");
        assert!(b_len >= a_len && b_len <= 1 << 20, "{windows:?}");
    }
    let (last, last_len) = windows[windows.len() - 1];
    assert!(
        last + last_len >= file_len - (64 << 10),
        "{windows:?} of {file_len}"
    );
}

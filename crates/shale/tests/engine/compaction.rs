//! Compaction: space stays bounded under overwrites, tombstones disappear, snapshots keep
//! exactly what they need, and reads stay right while compactions run.

use shale::{Compression, Db, Options, ReadOptions};

/// Small buffers and files so a few MB of data make a real tree; the default level
/// multiplier (10), which the 1.3x space bound is about.
fn options() -> Options {
    Options {
        write_buffer_size: 256 << 10,
        max_file_size: 256 << 10,
        max_bytes_for_level_base: 1 << 20,
        compression: Compression::None,
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i}-{round}-").into_bytes();
    v.resize(200, b'x');
    v
}

#[test]
fn space_stays_within_1_3x_of_live_data_after_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let n = 20_000u32;
    for round in 0..6 {
        for i in 0..n {
            // Scattered order so every flush overlaps every other.
            let k = (i * 7919) % n;
            db.put(key(k), value(k, round)).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let stats = db.stats();
    assert!(stats.compactions > 0, "{stats:?}");
    let live: u64 = (0..n)
        .map(|i| (key(i).len() + value(i, 5).len()) as u64)
        .sum();
    let on_disk = db.sst_bytes();
    let amp = on_disk as f64 / live as f64;
    println!(
        "space amplification after settling: {amp:.3} ({on_disk} / {live}); levels {:?}",
        db.level_file_counts()
    );
    assert!(
        amp <= 1.3,
        "space amplification {amp:.3} > 1.3, levels {:?}",
        db.level_file_counts()
    );
    for i in (0..n).step_by(101) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 5)));
    }
}

/// The codec of each table in `dir`, as its properties block records it.
fn table_codecs(dir: &std::path::Path) -> Vec<Compression> {
    let mut codecs = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "sst") {
            codecs.push(
                shale::inspect::open_table(&path)
                    .unwrap()
                    .properties()
                    .compression,
            );
        }
    }
    codecs
}

#[test]
fn bottommost_compression_applies_to_the_last_level_only() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        compression: Compression::Lz4,
        bottommost_compression: Some(Compression::Zstd(3)),
        // One table per flush, and no compaction but the one asked for.
        write_buffer_size: 4 << 20,
        ..options()
    };
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let fill = |round| {
        for i in 0..2_000 {
            db.put(key(i), value(i, round)).unwrap();
        }
        db.flush().unwrap();
    };
    fill(0);
    assert_eq!(
        table_codecs(dir.path()),
        [Compression::Lz4],
        "a flush writes L0"
    );
    db.compact_range(None, None).unwrap();
    // A small tree's base level is the last one: everything went there.
    let counts = db.level_file_counts();
    assert!(counts[..6].iter().all(|&n| n == 0), "levels {counts:?}");
    let codecs = table_codecs(dir.path());
    assert!(
        !codecs.is_empty() && codecs.iter().all(|c| *c == Compression::Zstd(3)),
        "{codecs:?}"
    );
    fill(1);
    let mut codecs = table_codecs(dir.path());
    codecs.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(codecs.first(), Some(&Compression::Lz4), "{codecs:?}");
    assert_eq!(codecs.last(), Some(&Compression::Zstd(3)), "{codecs:?}");
    for i in 0..2_000 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)));
    }
    // A repair writes everything into the last level: with its codec.
    db.close().unwrap();
    drop(db);
    Db::repair(dir.path(), &opts).unwrap();
    let codecs = table_codecs(dir.path());
    assert!(
        !codecs.is_empty() && codecs.iter().all(|c| *c == Compression::Zstd(3)),
        "{codecs:?}"
    );
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 1)));
}

#[test]
fn compression_per_level_applies_to_each_level() {
    let dir = tempfile::tempdir().unwrap();
    // `options()` has `compression: None`, which no level names: a table written with
    // it would show that some path ignores the list.
    let per_level = vec![
        Compression::Snappy,
        Compression::Lz4,
        Compression::Lz4,
        Compression::Lz4,
        Compression::Lz4,
        Compression::Zstd(1),
    ];
    let opts = Options {
        compression_per_level: per_level.clone(),
        bottommost_compression: Some(Compression::Zstd(3)),
        // A multiplier of 2 puts a real share of a small tree above the last level.
        level_size_multiplier: 2,
        ..options()
    };
    // Values that do not compress, so the last level stays large enough (4 MB) to give
    // L5 a target above `max_bytes_for_level_base`.
    let value = |i: u32, round: u32| {
        let mut x = u64::from(i) << 8 | u64::from(round);
        (0..200)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (x >> 56) as u8
            })
            .collect::<Vec<u8>>()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    let n = 20_000u32;
    for round in 0..2 {
        for i in 0..n {
            let k = (i * 7919) % n;
            db.put(key(k), value(k, round)).unwrap();
        }
    }
    // Then an append-only load: its files overlap nothing below them, so they would be
    // moved down as they are if the codecs allowed it.
    for i in n..2 * n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let mut flushed = false;
    for i in 0..500 {
        db.put(key(i), value(i, 2)).unwrap();
    }
    db.flush().unwrap();
    let files = db.live_files();
    let mut levels_seen = [false; 7];
    for f in &files {
        let codec = shale::inspect::open_table(&f.path)
            .unwrap()
            .properties()
            .compression;
        let want = match f.level {
            6 => Compression::Zstd(3),
            l => per_level[l],
        };
        assert_eq!(codec, want, "{} in L{}", f.path.display(), f.level);
        levels_seen[f.level] = true;
        flushed |= f.level == 0;
    }
    // The tree must have exercised the interesting levels: a flush (L0), a level above
    // the last (whose codec comes from the list), and the last.
    assert!(flushed, "{files:#?}");
    assert!(levels_seen[6], "{files:#?}");
    assert!(levels_seen[1..6].iter().any(|&s| s), "{files:#?}");
    println!("levels with files: {levels_seen:?}");
    for i in (0..2 * n).step_by(97) {
        let round = match i {
            _ if i < 500 => 2,
            _ if i < n => 1,
            _ => 0,
        };
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, round)));
    }
}

#[test]
fn tombstones_disappear_after_a_full_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..5_000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    for i in 0..5_000 {
        db.delete(key(i)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    assert_eq!(db.sst_bytes(), 0, "levels {:?}", db.level_file_counts());
    assert_eq!(db.range::<&[u8]>(..).unwrap().count(), 0);
    assert!(db.stats().compaction_entries_dropped >= 10_000);
}

#[test]
fn snapshots_keep_what_they_need_through_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..3_000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let snap = db.snapshot();
    for i in 0..3_000 {
        if i % 3 == 0 {
            db.delete(key(i)).unwrap();
        } else {
            db.put(key(i), value(i, 1)).unwrap();
        }
    }
    db.compact_range(None, None).unwrap();
    let at = ReadOptions::at(&snap);
    for i in 0..3_000 {
        assert_eq!(
            db.get_opt(key(i), &at).unwrap(),
            Some(value(i, 0)),
            "snapshot view of {i}"
        );
        let now = if i % 3 == 0 { None } else { Some(value(i, 1)) };
        assert_eq!(db.get(key(i)).unwrap(), now, "current view of {i}");
    }
    assert_eq!(db.range::<&[u8]>(..).unwrap().count(), 2_000);
    // Once the snapshot is gone, a compaction drops the old versions.
    drop(snap);
    let before = db.sst_bytes();
    db.compact_range(None, None).unwrap();
    assert!(db.sst_bytes() < before, "{} !< {before}", db.sst_bytes());
    // And everything survives a reopen.
    drop(db);
    let db = Db::open(dir.path(), options()).unwrap();
    for i in (0..3_000).step_by(7) {
        let now = if i % 3 == 0 { None } else { Some(value(i, 1)) };
        assert_eq!(db.get(key(i)).unwrap(), now);
    }
}

/// Reads over four times the cache's worth of blocks fill it, and then most blocks are
/// turned away at their first miss; a small set read again soon is admitted at its second
/// miss and served from the cache after that.
/// A database with a 1 MiB block cache holding 20,000 keys of about 200 bytes in
/// flushed tables.
fn loaded_with_small_cache(dir: &std::path::Path, mmap_reads: bool) -> Db {
    let db = Db::open(
        dir,
        Options {
            cache_size: 1 << 20,
            mmap_reads,
            ..options()
        },
    )
    .unwrap();
    for i in 0..20_000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    db
}

#[test]
fn a_full_block_cache_admits_blocks_that_miss_again() {
    let dir = tempfile::tempdir().unwrap();
    // Blocks read with pread live on the heap and are charged their full size (a mapped,
    // uncompressed block is a view into the mapping and costs the cache next to nothing).
    let db = loaded_with_small_cache(dir.path(), false);
    for i in 0..20_000 {
        db.get(key(i)).unwrap();
    }
    let s = db.stats();
    assert!(
        s.block_cache_usage_bytes * 10 > s.block_cache_capacity_bytes * 9,
        "{s:?}"
    );
    assert!(s.block_cache_rejections > 0, "{s:?}");
    let hot = 10_000..10_200;
    for _ in 0..2 {
        for i in hot.clone() {
            db.get(key(i)).unwrap();
        }
    }
    let before = db.stats();
    for i in hot {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)));
    }
    let after = db.stats();
    assert_eq!(
        after.block_cache_misses, before.block_cache_misses,
        "{after:?}"
    );
    assert!(after.block_cache_usage_bytes <= after.block_cache_capacity_bytes + 64 * 1024);
}

#[test]
fn block_cache_serves_repeated_reads_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let db = loaded_with_small_cache(dir.path(), Options::default().mmap_reads);
    let start = db.stats();
    for _ in 0..3 {
        for i in 0..200 {
            assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)));
        }
    }
    let s = db.stats();
    let (hits, misses) = (
        s.block_cache_hits - start.block_cache_hits,
        s.block_cache_misses - start.block_cache_misses,
    );
    assert!(hits >= 2 * misses, "hits {hits} misses {misses}");
    // A full scan that does not fill the cache leaves it as it was.
    let before = db.stats().block_cache_usage_bytes;
    let opts = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    let mut it = db.iter(&opts).unwrap();
    it.seek_to_first().unwrap();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, 20_000);
    assert_eq!(db.stats().block_cache_usage_bytes, before);
    // The iterator pins its version's files; let them go.
    drop(it);
    // Reading everything stays within the budget.
    for i in 0..20_000 {
        db.get(key(i)).unwrap();
    }
    let s = db.stats();
    assert!(
        s.block_cache_usage_bytes <= s.block_cache_capacity_bytes + 64 * 1024,
        "{s:?}"
    );
    assert!(s.pinned_table_metadata_bytes > 0);
    // Tables that a compaction replaces take their blocks out of the cache with them
    // (with mapped reads a cached block would otherwise pin a deleted file's space).
    // Overwriting every key makes a full compaction rewrite every table.
    assert!(s.block_cache_usage_bytes > 0);
    for i in 0..20_000 {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.wait_idle().unwrap();
    assert_eq!(db.stats().block_cache_usage_bytes, 0, "{:?}", db.stats());
    for i in 0..200 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)));
    }
}

/// The same reads through `pread` instead of memory mappings give the same answers.
#[test]
fn reads_without_mmap_agree() {
    let dir = tempfile::tempdir().unwrap();
    for (mmap_reads, compression) in [
        (false, Compression::None),
        (false, Compression::Lz4),
        (true, Compression::Lz4),
    ] {
        let db = Db::open(
            dir.path(),
            Options {
                mmap_reads,
                compression,
                ..options()
            },
        )
        .unwrap();
        for i in 0..5_000 {
            db.put(key(i), value(i, u32::from(mmap_reads))).unwrap();
        }
        db.flush().unwrap();
        db.wait_idle().unwrap();
        for i in (0..5_000).step_by(7) {
            assert_eq!(
                db.get(key(i)).unwrap(),
                Some(value(i, u32::from(mmap_reads)))
            );
        }
        let n = db.range(key(100)..key(200)).unwrap().count();
        assert_eq!(n, 100);
    }
}

#[test]
fn rate_limit_paces_background_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            rate_limit_bytes_per_sec: 1 << 20,
            ..options()
        },
    )
    .unwrap();
    // About 1.5 MiB of SSTable bytes at 1 MiB/s: the flushes take over a second.
    let start = std::time::Instant::now();
    for i in 0..7_000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let s = db.stats();
    assert!(s.flush_bytes > 1 << 20, "{s:?}");
    assert!(start.elapsed().as_secs_f64() > 0.5, "{:?}", start.elapsed());
    assert!(s.rate_limit_wait_micros > 300_000, "{s:?}");
    assert_eq!(s.rate_limit_bytes_per_sec, 1 << 20);
}

#[test]
fn range_compaction_of_part_of_l0_keeps_newest_versions_visible() {
    // Found in review: rewriting only the L0 files that overlap the range into a new L0
    // file let an older version of `b` sort ahead of the newer one.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put("a", "1").unwrap();
    db.put("b", "old").unwrap();
    db.put("z", "1").unwrap();
    db.flush().unwrap();
    db.put("b", "new").unwrap();
    db.flush().unwrap();
    db.put("m", "1").unwrap();
    db.flush().unwrap();
    db.compact_range(Some(b"m"), Some(b"m")).unwrap();
    assert_eq!(db.get("b").unwrap(), Some(b"new".to_vec()));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("b").unwrap(), Some(b"new".to_vec()));
    assert_eq!(db.level_file_counts()[0], 0, "a full compaction empties L0");
}

#[test]
fn open_tables_stay_bounded_and_replaced_files_outlive_their_readers() {
    // 16: every table in the CLOCK cache; 64: half of them pinned by their files.
    for max_open_files in [16, 64] {
        open_tables_stay_bounded(max_open_files);
    }
}

fn open_tables_stay_bounded(max_open_files: usize) {
    let dir = tempfile::tempdir().unwrap();
    let opts = || Options {
        max_file_size: 16 << 10,
        max_open_files,
        ..options()
    };
    let db = Db::open(dir.path(), opts()).unwrap();
    for i in 0..20_000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_idle().unwrap();
    let sst_files = || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "sst")
            })
            .count()
    };
    assert!(sst_files() > 100, "{} files", sst_files());

    // An iterator pins the version it started from.
    let mut old = db.iter(&ReadOptions::default()).unwrap();
    old.seek_to_first().unwrap();
    for i in 0..20_000 {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let mut n = 0;
    while old.valid() {
        assert_eq!(old.value(), value(n, 0).as_slice(), "old view of {n}");
        n += 1;
        old.next().unwrap();
    }
    assert_eq!(n, 20_000);
    let s = db.stats();
    // The budget, plus the tables in use at once (here: the old iterator's).
    assert!(
        s.open_tables as usize <= 2 * max_open_files,
        "{} tables open",
        s.open_tables
    );
    assert!(s.pinned_table_metadata_bytes > 0);

    // Once the last reader of the old version is gone, its files are deleted (by the
    // purge thread, which `wait_idle` waits for).
    let before = sst_files();
    drop(old);
    db.wait_idle().unwrap();
    assert!(sst_files() < before, "{} !< {before}", sst_files());
    for i in (0..20_000).step_by(97) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1)));
    }
    let open = db.stats().open_tables as usize;
    assert!(open <= max_open_files, "{open} tables open");
    drop(db);
    let db = Db::open(dir.path(), opts()).unwrap();
    assert_eq!(db.get(key(777)).unwrap(), Some(value(777, 1)));
}

/// `close` in one thread while `compact_range` runs in another: close waits for the manual
/// compaction to stop (at its next step, with `Closed`, or done), so an open right after
/// close returns sees a whole tree. Before, the compaction went on after close had
/// released the directory: it installed into the old manifest and deleted its inputs,
/// which the new open's tree still listed.
#[test]
fn close_waits_for_a_manual_compaction_in_another_thread() {
    for round in 0..6u64 {
        let dir = tempfile::tempdir().unwrap();
        let opts = Options {
            level0_compaction_trigger: 64,
            level0_slowdown_trigger: 64,
            level0_stop_trigger: 64,
            ..options()
        };
        let db = std::sync::Arc::new(Db::open(dir.path(), opts.clone()).unwrap());
        for round in 0..8 {
            for i in 0..4_000 {
                db.put(key(i), value(i, round)).unwrap();
            }
            db.flush().unwrap();
        }
        let compactor = {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || db.compact_range(None, None))
        };
        std::thread::sleep(std::time::Duration::from_millis(round * 3));
        db.close().unwrap();
        let reopened = Db::open(dir.path(), opts.clone()).unwrap();
        let compacted = compactor.join().unwrap();
        assert!(
            matches!(compacted, Ok(()) | Err(shale::Error::Closed)),
            "{compacted:?}"
        );
        reopened.close().unwrap();
        drop(reopened);
        // Opened again, from what is on disk now (a table deleted under the first reopen
        // stays readable through its open mapping).
        let reopened = Db::open(dir.path(), opts).unwrap();
        for i in (0..4_000).step_by(7) {
            let got = reopened.get(key(i)).unwrap();
            assert_eq!(got, Some(value(i, 7)), "round {round}");
        }
    }
}

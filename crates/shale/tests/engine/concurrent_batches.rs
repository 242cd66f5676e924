//! Writers commit batches whose keys must be seen together, while readers (point reads at a
//! snapshot) and iterators run during flushes and compactions. No reader may ever see half
//! a batch.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale::{Compression, Db, Options, ReadOptions, WriteBatch, WriteOptions};

const KEYS_PER_BATCH: usize = 8;
const WRITERS: usize = 2;

fn key(writer: usize, j: usize) -> Vec<u8> {
    format!("w{writer}/k{j}").into_bytes()
}

fn value(n: u64) -> Vec<u8> {
    // Padded so memtables fill and flush often.
    let mut v = n.to_string().into_bytes();
    v.push(b'|');
    v.resize(120, b'.');
    v
}

fn version_of(v: &[u8]) -> &[u8] {
    v.split(|&b| b == b'|').next().unwrap_or(v)
}

#[test]
fn readers_never_see_half_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open(
            dir.path(),
            Options {
                write_buffer_size: 64 << 10,
                max_file_size: 64 << 10,
                max_bytes_for_level_base: 1 << 20,
                level0_compaction_trigger: 2,
                compression: Compression::None,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let checks = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(3);

    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut b = WriteBatch::new();
                    for j in 0..KEYS_PER_BATCH {
                        b.put(key(w, j), value(n));
                    }
                    // Filler keys so the tree grows and compacts.
                    b.put(format!("fill/{w}/{}", n % 5000), value(n));
                    db.write(b, WriteOptions::default()).unwrap();
                    n += 1;
                }
            });
        }
        // Point readers at a snapshot.
        for _ in 0..2 {
            let (db, stop, checks) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&checks));
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let snap = db.snapshot();
                    let at = ReadOptions::at(&snap);
                    for w in 0..WRITERS {
                        let seen: Vec<Option<Vec<u8>>> = (0..KEYS_PER_BATCH)
                            .map(|j| db.get_opt(key(w, j), &at).unwrap())
                            .collect();
                        let first = seen[0].as_deref().map(version_of);
                        for v in &seen {
                            assert_eq!(
                                v.as_deref().map(version_of),
                                first,
                                "half a batch: {seen:?}"
                            );
                        }
                        checks.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        // An iterator reader: a prefix scan is one consistent view.
        {
            let (db, stop, checks) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&checks));
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for w in 0..WRITERS {
                        let rows: Vec<(Vec<u8>, Vec<u8>)> = db
                            .prefix(format!("w{w}/"))
                            .unwrap()
                            .map(|r| r.unwrap())
                            .collect();
                        assert!(
                            rows.is_empty() || rows.len() == KEYS_PER_BATCH,
                            "{} rows",
                            rows.len()
                        );
                        if let Some((_, v0)) = rows.first() {
                            for (_, v) in &rows {
                                assert_eq!(version_of(v), version_of(v0), "half a batch in a scan");
                            }
                        }
                        checks.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let stats = db.stats();
    println!("checks {} stats {stats:?}", checks.load(Ordering::Relaxed));
    assert!(stats.flushes > 5, "{stats:?}");
    assert!(stats.compactions > 0, "{stats:?}");
    assert!(checks.load(Ordering::Relaxed) > 100);
}

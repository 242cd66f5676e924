//! Criterion micro-benchmarks of the write path's parts, after the RocksDB write-path study:
//!
//! - `memtable_insert`: 100k random 16-byte keys with 100-byte values into Shale's
//!   [`MemTable`], against the floors a memtable cannot beat (a `Vec` of owned pairs, one
//!   byte arena) and against `crossbeam_skiplist::SkipMap` (the shape RocksDB uses; the study
//!   found it 4-6x slower than a `Vec`); also into a table grown from empty rather than
//!   sized for the write buffer, and in key order.
//! - `memtable_read`: on those 100k entries, a get of each key, the first iterator (which
//!   sorts what is not sorted yet), with random keys and with db_bench's zero-padded decimal
//!   keys (long shared prefixes), and a full scan.
//! - `wal_append`: one 100-byte put per [`Db::write`] for each durability mode (WAL off,
//!   buffered, fsync per write), and the bare [`LogWriter`] below it.
//! - `block`: build a 4 KiB data block (restart interval 16), then decode it: validate,
//!   seek to random keys, iterate it fully.
//! - `bloom`: [`BloomFilter::may_contain`] on a 100k-key, 10 bits/key filter for present and
//!   absent keys, and [`BloomFilterBuilder::finish`].
//!
//! Run with `cargo bench -p shale-bench --bench write_path`; the whole suite takes about
//! 1.5 minutes on two cores. `-- --test` runs each benchmark once, as a smoke test.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput,
};
use crossbeam_skiplist::SkipMap;
use shale::fs::{FileSystem, PosixFs};
use shale::inspect::iter::InternalIterator;
use shale::inspect::key::{encode_internal_key, SeqNo, ValueKind};
use shale::inspect::memtable::MemTable;
use shale::inspect::sst::block::{Block, BlockBuilder};
use shale::inspect::sst::{BloomFilter, BloomFilterBuilder};
use shale::inspect::wal::LogWriter;
use shale::{Db, Options, WriteBatch, WriteOptions};

const N: usize = 100_000;
const KEY_LEN: usize = 16;
const VALUE_LEN: usize = 100;
const BLOCK_BYTES: usize = 4 << 10;
const RESTART_INTERVAL: usize = 16;
const BITS_PER_KEY: u32 = 10;

/// A fixed splitmix64 stream, so every run and every contender sees the same keys.
struct KeyGen(shale_rng::SplitMix64);

impl KeyGen {
    fn new(seed: u64) -> KeyGen {
        KeyGen(shale_rng::SplitMix64::new(seed))
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn key(&mut self) -> Vec<u8> {
        let mut key = Vec::with_capacity(KEY_LEN);
        key.extend_from_slice(&self.next_u64().to_le_bytes());
        key.extend_from_slice(&self.next_u64().to_le_bytes());
        key
    }

    fn keys(&mut self, n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|_| self.key()).collect()
    }
}

type Group<'a> = BenchmarkGroup<'a, WallTime>;

fn value() -> Vec<u8> {
    (0..VALUE_LEN).map(|i| (i % 251) as u8).collect()
}

fn memtable_insert(c: &mut Criterion) {
    let keys = KeyGen::new(1).keys(N);
    let value = value();
    let mut group = c.benchmark_group("memtable_insert");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    // Setup (allocation) and drop are outside the timing for every contender.
    insert_into_shale(&mut group, &keys, &value);
    insert_into_floors(&mut group, &keys, &value);
    group.finish();
}

/// Shale's memtable: sized as the DB sizes its active one, grown from empty, in key order.
fn insert_into_shale(group: &mut Group<'_>, keys: &[Vec<u8>], value: &[u8]) {
    group.bench_function("shale_memtable", |b| {
        b.iter_batched(
            // Sized as the DB sizes its active memtable for the default 64 MiB write buffer.
            || MemTable::with_capacity(64 << 20),
            |table| {
                for (i, key) in keys.iter().enumerate() {
                    table.insert(SeqNo(i as u64 + 1), ValueKind::Put, key, value);
                }
                table
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("shale_memtable_grown_from_empty", |b| {
        b.iter_batched(
            MemTable::new,
            |table| {
                for (i, key) in keys.iter().enumerate() {
                    table.insert(SeqNo(i as u64 + 1), ValueKind::Put, key, value);
                }
                table
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("shale_memtable_in_key_order", |b| {
        b.iter_batched(
            || MemTable::with_capacity(64 << 20),
            |table| {
                for i in 0..N as u64 {
                    table.insert(SeqNo(i + 1), ValueKind::Put, &i.to_be_bytes(), value);
                }
                table
            },
            BatchSize::PerIteration,
        );
    });
}

/// What a memtable cannot beat (a `Vec` of owned pairs, one byte arena) and the skiplist
/// RocksDB's memtable is shaped like.
fn insert_into_floors(group: &mut Group<'_>, keys: &[Vec<u8>], value: &[u8]) {
    group.bench_function("vec_push_owned_pairs", |b| {
        b.iter_batched(
            || Vec::with_capacity(N),
            |mut v: Vec<(Vec<u8>, Vec<u8>)>| {
                for key in keys {
                    v.push((key.clone(), value.to_vec()));
                }
                v
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("vec_arena_append", |b| {
        b.iter_batched(
            || {
                (
                    Vec::with_capacity(N * (KEY_LEN + VALUE_LEN)),
                    Vec::with_capacity(N),
                )
            },
            |(mut arena, mut offsets): (Vec<u8>, Vec<u32>)| {
                for key in keys {
                    offsets.push(arena.len() as u32);
                    arena.extend_from_slice(key);
                    arena.extend_from_slice(value);
                }
                (arena, offsets)
            },
            BatchSize::PerIteration,
        );
    });
    group.bench_function("crossbeam_skipmap", |b| {
        b.iter_batched(
            SkipMap::new,
            |map: SkipMap<Vec<u8>, Vec<u8>>| {
                for key in keys {
                    map.insert(key.clone(), value.to_vec());
                }
                map
            },
            BatchSize::PerIteration,
        );
    });
}

/// A memtable sized for the default write buffer, holding `keys` in that order.
fn filled_memtable(keys: &[Vec<u8>], value: &[u8]) -> Arc<MemTable> {
    let table = Arc::new(MemTable::with_capacity(64 << 20));
    for (i, key) in keys.iter().enumerate() {
        table.insert(SeqNo(i as u64 + 1), ValueKind::Put, key, value);
    }
    table
}

fn memtable_read(c: &mut Criterion) {
    let keys = KeyGen::new(1).keys(N);
    let value = value();
    let mut group = c.benchmark_group("memtable_read");
    group.throughput(Throughput::Elements(N as u64));
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));

    let table = filled_memtable(&keys, &value);
    group.bench_function("get_each_key", |b| {
        b.iter(|| {
            for key in &keys {
                black_box(table.get_entry(key, SeqNo::MAX));
            }
        });
    });
    // The first iterator sorts the entries written since the last one: a fresh table each time.
    group.bench_function("first_iter_random_keys", |b| {
        b.iter_batched(
            || filled_memtable(&keys, &value),
            |table| black_box(table.iter()),
            BatchSize::PerIteration,
        );
    });
    // db_bench's keys: numbers below 3 million, zero-padded to 16 decimal digits, so that
    // the keys of a table share their first 9 or 10 bytes.
    let decimal: Vec<Vec<u8>> = keys
        .iter()
        .map(|k| {
            let n = u64::from_le_bytes(k[..8].try_into().unwrap()) % 3_000_000;
            format!("{n:016}").into_bytes()
        })
        .collect();
    group.bench_function("first_iter_decimal_keys", |b| {
        b.iter_batched(
            || filled_memtable(&decimal, &value),
            |table| black_box(table.iter()),
            BatchSize::PerIteration,
        );
    });
    group.bench_function("full_scan", |b| {
        b.iter(|| {
            let mut it = table.iter();
            it.seek_to_first().unwrap();
            let mut n = 0;
            while it.valid() {
                n += 1;
                it.next().unwrap();
            }
            assert_eq!(n, N);
        });
    });
    group.finish();
}

fn open_db(dir: &Path) -> Db {
    let opts = Options {
        // Large enough that few or no flushes start during a measurement.
        write_buffer_size: 256 << 20,
        ..Options::default()
    };
    Db::open(dir, opts).expect("open benchmark database")
}

fn wal_append(c: &mut Criterion) {
    let value = value();
    let mut group = c.benchmark_group("wal_append");
    group.throughput(Throughput::Elements(1));
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));

    db_write(&mut group, &value);
    log_writer_append(&mut group, &value);
    group.finish();
}

/// One put per `Db::write` in each durability mode: WAL off, buffered, fsync per write.
fn db_write(group: &mut Group<'_>, value: &[u8]) {
    let modes = [
        ("db_write_wal_off", WriteOptions::no_wal()),
        ("db_write_buffered", WriteOptions::default()),
        ("db_write_sync", WriteOptions::sync()),
    ];
    for (name, wopts) in modes {
        if wopts.sync {
            // An fsync per write: milliseconds on some disks, so few samples.
            group.sample_size(10);
        } else {
            group.sample_size(30);
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let db = open_db(dir.path());
        let mut keys = KeyGen::new(2);
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let mut batch = WriteBatch::new();
                    batch.put(keys.key(), value);
                    batch
                },
                |batch| db.write(batch, wopts).expect("write"),
                BatchSize::SmallInput,
            );
        });
        drop(db);
    }
}

/// The log writer alone, on the same memory-mapped log file the DB uses, with and without a
/// flush per record. A fresh file per sample keeps the disk footprint to one sample's records.
fn log_writer_append(group: &mut Group<'_>, value: &[u8]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.log");
    let mut payload = Vec::new();
    encode_internal_key(
        &mut payload,
        &KeyGen::new(3).key(),
        SeqNo(1),
        ValueKind::Put,
    );
    payload.extend_from_slice(value);
    group.sample_size(30);
    for (name, flush) in [
        ("log_writer_append", false),
        ("log_writer_append_flush", true),
    ] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let file = PosixFs.create_log(&path).expect("create log");
                let mut log = LogWriter::new(file);
                let start = Instant::now();
                for _ in 0..iters {
                    log.add_record(&[&payload]).expect("append");
                    if flush {
                        log.flush().expect("flush");
                    }
                }
                let elapsed = start.elapsed();
                drop(log);
                PosixFs.remove(&path).expect("remove log");
                elapsed
            });
        });
    }
}

/// A block built as the table builder builds one: entries in internal-key order until the
/// estimate reaches `BLOCK_BYTES`. Returns the internal keys and the finished bytes.
fn build_block(builder: &mut BlockBuilder, ikeys: &[Vec<u8>], value: &[u8]) -> Vec<u8> {
    builder.reset();
    for ikey in ikeys {
        builder.add(ikey, value);
        if builder.current_size_estimate() >= BLOCK_BYTES {
            break;
        }
    }
    builder.finish().to_vec()
}

/// `n` random user keys, sorted, as internal keys of one sequence number.
fn sorted_internal_keys(n: usize) -> Vec<Vec<u8>> {
    let mut user_keys = KeyGen::new(4).keys(n);
    user_keys.sort();
    user_keys
        .iter()
        .map(|k| {
            let mut ikey = Vec::new();
            encode_internal_key(&mut ikey, k, SeqNo(7), ValueKind::Put);
            ikey
        })
        .collect()
}

fn entries_of(block: &Arc<Block>) -> usize {
    let mut it = block.iter();
    it.seek_to_first().expect("seek");
    let mut n = 0usize;
    while it.valid() {
        n += 1;
        it.next().expect("next");
    }
    n
}

fn block(c: &mut Criterion) {
    let value = value();
    let ikeys = sorted_internal_keys(1000);
    let mut builder = BlockBuilder::new(RESTART_INTERVAL);
    let bytes = build_block(&mut builder, &ikeys, &value);
    let file: Arc<Path> = Arc::from(Path::new("bench.sst"));
    let block = Arc::new(Block::new(bytes.clone(), Arc::clone(&file), 0).expect("valid block"));
    let entries = entries_of(&block);
    let in_block = ikeys.get(..entries).expect("entries come from ikeys");
    let mut pick = KeyGen::new(5);
    let targets: Vec<&[u8]> = (0..1024)
        .map(|_| in_block[(pick.next_u64() % entries as u64) as usize].as_slice())
        .collect();

    let mut group = c.benchmark_group("block");
    group.sample_size(50);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));

    group.throughput(Throughput::Elements(entries as u64));
    group.bench_function("build_4k", |b| {
        b.iter(|| {
            builder.reset();
            for ikey in in_block {
                builder.add(ikey, &value);
            }
            black_box(builder.finish().len())
        });
    });
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function("open_4k", |b| {
        b.iter_batched(
            || bytes.clone(),
            |data| Block::new(data, Arc::clone(&file), 0).expect("valid block"),
            BatchSize::SmallInput,
        );
    });
    group.throughput(Throughput::Elements(1));
    group.bench_function("seek_random", |b| {
        let mut it = block.iter();
        let mut i = 0usize;
        b.iter(|| {
            i = (i + 1) % targets.len();
            it.seek(targets.get(i).expect("in range")).expect("seek");
            black_box(it.value().len())
        });
    });
    group.throughput(Throughput::Elements(entries as u64));
    group.bench_function("iterate_full", |b| {
        b.iter(|| {
            let mut it = block.iter();
            it.seek_to_first().expect("seek");
            let mut bytes = 0usize;
            while it.valid() {
                bytes += it.key().len() + it.value().len();
                it.next().expect("next");
            }
            black_box(bytes)
        });
    });
    group.finish();
    println!(
        "block: {entries} entries of {}-byte internal keys and {VALUE_LEN}-byte values, {} bytes",
        KEY_LEN + 8,
        bytes.len()
    );
}

fn bloom(c: &mut Criterion) {
    let mut gen = KeyGen::new(6);
    let present = gen.keys(N);
    let absent = gen.keys(N);
    let mut builder = BloomFilterBuilder::new(BITS_PER_KEY);
    for key in &present {
        builder.add_key(key);
    }
    let filter = BloomFilter::new(builder.finish());
    let false_positives = absent.iter().filter(|k| filter.may_contain(k)).count();
    println!(
        "bloom: {N} keys at {BITS_PER_KEY} bits/key, {} bytes, false-positive rate {:.3}%",
        filter.size(),
        100.0 * false_positives as f64 / N as f64
    );

    let mut group = c.benchmark_group("bloom");
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements(N as u64));
    for (name, keys) in [("probe_present", &present), ("probe_absent", &absent)] {
        group.bench_function(name, |b| {
            b.iter(|| keys.iter().filter(|k| filter.may_contain(k)).count());
        });
    }
    group.bench_function("builder_finish", |b| b.iter(|| builder.finish()));
    group.finish();
}

criterion_group!(
    benches,
    memtable_insert,
    memtable_read,
    wal_append,
    block,
    bloom
);
criterion_main!(benches);

//! Tests for the memtable: its hash index, version chains, sorted runs and iterator.

use std::cmp::Ordering;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Acquire, Ordering::Release};
use std::sync::Arc;

use super::{MemGet, MemTable};
use crate::iter::InternalIterator;
use crate::key::{compare_internal, parse_internal_key, InternalKey, SeqNo, ValueKind};
use shale_rng::SplitMix64 as Rng;

fn ikey(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    InternalKey::new(user_key, SeqNo(seq), kind)
        .encoded()
        .to_vec()
}

fn collect_forward(t: &Arc<MemTable>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = t.iter();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

#[test]
fn memtable_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<MemTable>();
    check::<super::iter::MemTableIter>();
}

#[test]
fn empty_table() {
    let t = Arc::new(MemTable::new());
    assert!(t.is_empty());
    assert_eq!(t.len(), 0);
    assert_eq!(t.max_seq(), SeqNo::ZERO);
    assert_eq!(t.min_seq(), None);
    assert_eq!(t.get(b"a", SeqNo::MAX), MemGet::NotFound);
    let mut it = t.iter();
    assert!(!it.valid());
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert!(!it.valid());
    it.seek(&ikey(b"a", 1, ValueKind::Put)).unwrap();
    assert!(!it.valid());
    // Moving an invalid iterator is harmless.
    it.next().unwrap();
    it.prev().unwrap();
    assert!(!it.valid());
    assert_eq!(it.key(), b"");
    assert_eq!(it.value(), b"");
}

#[test]
fn get_sees_the_newest_version_at_each_snapshot() {
    let t = MemTable::new();
    t.insert(SeqNo(10), ValueKind::Put, b"k", b"v10");
    t.insert(SeqNo(20), ValueKind::Put, b"k", b"v20");
    t.insert(SeqNo(30), ValueKind::Delete, b"k", b"");
    t.insert(SeqNo(40), ValueKind::Put, b"k", b"v40");
    t.insert(SeqNo(15), ValueKind::Put, b"j", b"j15");
    t.insert(SeqNo(16), ValueKind::Put, b"l", b"l16");

    assert_eq!(t.get(b"k", SeqNo(9)), MemGet::NotFound);
    assert_eq!(t.get(b"k", SeqNo(10)), MemGet::Found(b"v10"));
    assert_eq!(t.get(b"k", SeqNo(19)), MemGet::Found(b"v10"));
    assert_eq!(t.get(b"k", SeqNo(20)), MemGet::Found(b"v20"));
    assert_eq!(t.get(b"k", SeqNo(30)), MemGet::Deleted);
    assert_eq!(t.get(b"k", SeqNo(39)), MemGet::Deleted);
    assert_eq!(t.get(b"k", SeqNo(40)), MemGet::Found(b"v40"));
    assert_eq!(t.get(b"k", SeqNo::MAX), MemGet::Found(b"v40"));
    assert_eq!(t.get(b"j", SeqNo(14)), MemGet::NotFound);
    assert_eq!(t.get(b"j", SeqNo(15)), MemGet::Found(b"j15"));
    assert_eq!(t.get(b"l", SeqNo::MAX), MemGet::Found(b"l16"));
    // Neighbours and prefixes of existing keys are not found.
    assert_eq!(t.get(b"", SeqNo::MAX), MemGet::NotFound);
    assert_eq!(t.get(b"kk", SeqNo::MAX), MemGet::NotFound);
    assert_eq!(t.get(b"m", SeqNo::MAX), MemGet::NotFound);

    assert_eq!(t.len(), 6);
    assert_eq!(t.min_seq(), Some(SeqNo(10)));
    assert_eq!(t.max_seq(), SeqNo(40));
}

#[test]
fn delete_then_put_at_same_snapshot_boundaries() {
    let t = MemTable::new();
    t.insert(SeqNo(1), ValueKind::Delete, b"gone", b"");
    assert_eq!(t.get(b"gone", SeqNo(0)), MemGet::NotFound);
    assert_eq!(t.get(b"gone", SeqNo(1)), MemGet::Deleted);
    t.insert(SeqNo(2), ValueKind::Put, b"gone", b"back");
    assert_eq!(t.get(b"gone", SeqNo(1)), MemGet::Deleted);
    assert_eq!(t.get(b"gone", SeqNo(2)), MemGet::Found(b"back"));
}

#[test]
fn iteration_matches_sorted_vec_for_random_entries() {
    let t = Arc::new(MemTable::new());
    let mut rng = Rng::new(7);
    let mut expected = Vec::new();
    for seq in 1..=10_000u64 {
        // Few distinct user keys of varied length, so many share a key across seqnos.
        let len = 1 + rng.below(6) as usize;
        let user_key: Vec<u8> = (0..len).map(|_| b'a' + rng.below(4) as u8).collect();
        let kind = if rng.below(5) == 0 {
            ValueKind::Delete
        } else {
            ValueKind::Put
        };
        let value = seq.to_le_bytes().repeat(rng.below(4) as usize);
        t.insert(SeqNo(seq), kind, &user_key, &value);
        expected.push((ikey(&user_key, seq, kind), value));
    }
    expected.sort_by(|a, b| compare_internal(&a.0, &b.0));
    assert_eq!(t.len(), expected.len());
    assert_eq!(collect_forward(&t), expected);

    // Backwards through prev.
    let mut it = t.iter();
    it.seek_to_last().unwrap();
    let mut backwards = Vec::new();
    while it.valid() {
        backwards.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    backwards.reverse();
    assert_eq!(backwards, expected);

    // Seeking agrees with compare_internal, including for targets too short to have a
    // trailer (which compare_internal orders in its own way).
    for probe in 0..2000u64 {
        let len = rng.below(12) as usize;
        let target: Vec<u8> = (0..len).map(|_| b'a' + rng.below(4) as u8).collect();
        let want = expected
            .iter()
            .find(|(k, _)| compare_internal(k, &target) != Ordering::Less);
        it.seek(&target).unwrap();
        match want {
            Some((k, v)) => {
                assert_eq!(
                    (it.key(), it.value()),
                    (k.as_slice(), v.as_slice()),
                    "seek {probe}"
                );
            }
            None => assert!(!it.valid(), "seek {probe}"),
        }
    }

    // Every get agrees with a scan of the sorted vec.
    for probe in 0..2000u64 {
        let len = 1 + rng.below(6) as usize;
        let user_key: Vec<u8> = (0..len).map(|_| b'a' + rng.below(4) as u8).collect();
        let snapshot = SeqNo(rng.below(10_500));
        let want = expected
            .iter()
            .find(|(k, _)| {
                let p = parse_internal_key(k).unwrap();
                p.user_key == user_key.as_slice() && p.seq <= snapshot
            })
            .map(|(k, v)| match parse_internal_key(k).unwrap().kind {
                ValueKind::Put => MemGet::Found(v.as_slice()),
                ValueKind::Delete | ValueKind::RangeDelete => MemGet::Deleted,
            })
            .unwrap_or(MemGet::NotFound);
        assert_eq!(t.get(&user_key, snapshot), want, "probe {probe}");
    }
}

#[test]
fn ascending_and_descending_inserts_stay_sorted() {
    // Presorted and reverse-sorted input are the sort's special cases.
    for ascending in [true, false] {
        let t = Arc::new(MemTable::new());
        let n = 5000u64;
        for i in 0..n {
            let k = if ascending { i } else { n - 1 - i };
            t.insert(
                SeqNo(i + 1),
                ValueKind::Put,
                &k.to_be_bytes(),
                &i.to_le_bytes(),
            );
        }
        let keys: Vec<Vec<u8>> = collect_forward(&t).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys.len(), n as usize);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(
                parse_internal_key(k).unwrap().user_key,
                (i as u64).to_be_bytes()
            );
        }
        // Interleave: an ascending run, then keys that fall into the gaps behind it.
        t.insert(
            SeqNo(n + 1),
            ValueKind::Put,
            &[0, 0, 0, 0, 0, 0, 0, 5, 1],
            b"x",
        );
        t.insert(
            SeqNo(n + 2),
            ValueKind::Put,
            &[0, 0, 0, 0, 0, 0, 0, 5, 2],
            b"y",
        );
        t.insert(
            SeqNo(n + 3),
            ValueKind::Put,
            &[0, 0, 0, 0, 0, 0, 0, 3, 9],
            b"z",
        );
        let all = collect_forward(&t);
        assert!(all
            .windows(2)
            .all(|w| compare_internal(&w[0].0, &w[1].0) == Ordering::Less));
        assert_eq!(all.len(), n as usize + 3);
    }
}

#[test]
fn seek_prev_and_seek_to_last() {
    let t = Arc::new(MemTable::new());
    for (i, k) in [b"b", b"d", b"f"].iter().enumerate() {
        t.insert(SeqNo(i as u64 + 1), ValueKind::Put, *k, *k);
    }
    t.insert(SeqNo(9), ValueKind::Put, b"d", b"d9");
    let mut it = t.iter();

    it.seek(&ikey(b"c", SeqNo::MAX.0, ValueKind::SEEK)).unwrap();
    assert_eq!(it.key(), ikey(b"d", 9, ValueKind::Put));
    assert_eq!(it.value(), b"d9");
    it.next().unwrap();
    assert_eq!(it.key(), ikey(b"d", 2, ValueKind::Put));
    it.prev().unwrap();
    assert_eq!(it.key(), ikey(b"d", 9, ValueKind::Put));
    it.prev().unwrap();
    assert_eq!(it.key(), ikey(b"b", 1, ValueKind::Put));
    it.prev().unwrap();
    assert!(!it.valid());

    // Seeking to an exact key lands on it; seeking between versions lands on the older one.
    it.seek(&ikey(b"d", 2, ValueKind::Put)).unwrap();
    assert_eq!(it.key(), ikey(b"d", 2, ValueKind::Put));
    it.seek(&ikey(b"d", 5, ValueKind::SEEK)).unwrap();
    assert_eq!(it.key(), ikey(b"d", 2, ValueKind::Put));
    it.seek(&ikey(b"g", 1, ValueKind::Put)).unwrap();
    assert!(!it.valid());

    it.seek_to_last().unwrap();
    assert_eq!(it.key(), ikey(b"f", 3, ValueKind::Put));
    it.next().unwrap();
    assert!(!it.valid());
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), ikey(b"b", 1, ValueKind::Put));
}

#[test]
fn large_values_get_their_own_chunk() {
    let t = Arc::new(MemTable::new());
    t.insert(SeqNo(1), ValueKind::Put, b"small", b"v");
    let before = t.approximate_memory_usage();
    let big: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    t.insert(SeqNo(2), ValueKind::Put, b"big", &big);
    let after = t.approximate_memory_usage();
    assert!(after >= before + big.len(), "{before} -> {after}");
    assert!(after <= before + big.len() + 4096, "{before} -> {after}");
    // Small entries keep using the small chunk.
    t.insert(SeqNo(3), ValueKind::Put, b"tiny", b"t");
    assert_eq!(t.approximate_memory_usage(), after);
    assert_eq!(t.get(b"big", SeqNo(2)), MemGet::Found(big.as_slice()));
    assert_eq!(t.get(b"small", SeqNo(3)), MemGet::Found(b"v".as_slice()));
    let all = collect_forward(&t);
    assert_eq!(all.len(), 3);
    assert_eq!(all[0].1, big);
}

#[test]
fn memory_usage_tracks_inserted_bytes() {
    let t = MemTable::new();
    let start = t.approximate_memory_usage();
    assert!(start <= 4096);
    let value = [7u8; 100];
    for i in 0..10_000u64 {
        t.insert(SeqNo(i + 1), ValueKind::Put, &i.to_be_bytes(), &value);
    }
    let used = t.approximate_memory_usage();
    // Each entry is at least 8 + 8 + 100 bytes plus a 12-byte header, 8 bytes in the id
    // table, and two hash slots (16 bytes, more while the index doubles).
    assert!(used >= 10_000 * (128 + 8 + 16), "{used}");
    assert!(used <= 10_000 * (128 + 8 + 16) * 2, "{used}");
}

#[test]
fn versions_inserted_out_of_order_are_spliced_into_the_chain() {
    // The DB never does this, but the memtable must still answer by seqno, not by arrival.
    let t = Arc::new(MemTable::new());
    for seq in [50, 10, 30, 20, 60, 40] {
        let v = format!("v{seq}");
        t.insert(SeqNo(seq), ValueKind::Put, b"k", v.as_bytes());
    }
    t.insert(SeqNo(35), ValueKind::Delete, b"k", b"");
    assert_eq!(t.get(b"k", SeqNo(9)), MemGet::NotFound);
    for (snapshot, want) in [
        (10, "v10"),
        (29, "v20"),
        (34, "v30"),
        (45, "v40"),
        (59, "v50"),
    ] {
        assert_eq!(
            t.get(b"k", SeqNo(snapshot)),
            MemGet::Found(want.as_bytes()),
            "{snapshot}"
        );
    }
    assert_eq!(t.get(b"k", SeqNo(35)), MemGet::Deleted);
    assert_eq!(t.get(b"k", SeqNo::MAX), MemGet::Found(b"v60".as_slice()));
    let seqs: Vec<u64> = collect_forward(&t)
        .iter()
        .map(|(k, _)| parse_internal_key(k).unwrap().seq.0)
        .collect();
    assert_eq!(seqs, [60, 50, 40, 35, 30, 20, 10]);
}

#[test]
fn iteration_after_more_inserts_builds_new_runs() {
    let t = Arc::new(MemTable::new());
    let mut rng = Rng::new(11);
    let mut expected = Vec::new();
    let mut seq = 0;
    // Batches of varied sizes between iterators: runs get sorted, then merged.
    for batch in [1usize, 1000, 3, 200, 50, 4000, 7, 7, 7, 2500, 0, 1] {
        let before = t.iter();
        for _ in 0..batch {
            seq += 1;
            let user_key = rng.below(3000).to_be_bytes();
            t.insert(SeqNo(seq), ValueKind::Put, &user_key, &seq.to_le_bytes());
            expected.push((
                ikey(&user_key, seq, ValueKind::Put),
                seq.to_le_bytes().to_vec(),
            ));
        }
        expected.sort_by(|a, b| compare_internal(&a.0, &b.0));
        assert_eq!(collect_forward(&t), expected, "after a batch of {batch}");
        // An iterator made before the batch does not see it.
        let mut before = before;
        before.seek_to_first().unwrap();
        let mut n = 0;
        while before.valid() {
            n += 1;
            before.next().unwrap();
        }
        assert_eq!(n, expected.len() - batch);
        // Runs stay geometric: a handful of children however the batches fell.
        assert!(t.sorted.lock().unwrap().runs().len() <= 14);
    }
    // Backwards, and switching direction across runs.
    let mut it = t.iter();
    it.seek_to_last().unwrap();
    for (k, _) in expected.iter().rev().take(500) {
        assert_eq!(it.key(), k.as_slice());
        it.prev().unwrap();
    }
    let middle = &expected[expected.len() / 2].0;
    it.seek(middle).unwrap();
    it.prev().unwrap();
    it.next().unwrap();
    assert_eq!(it.key(), middle.as_slice());
}

/// Seek every target and compare with a binary search of the sorted `expected`.
fn assert_seeks(t: &Arc<MemTable>, expected: &[(Vec<u8>, Vec<u8>)], targets: &[Vec<u8>]) {
    let mut it = t.iter();
    for target in targets {
        let seek = ikey(target, SeqNo::MAX.0, ValueKind::SEEK);
        it.seek(&seek).unwrap();
        let at = expected.partition_point(|(k, _)| compare_internal(k, &seek).is_lt());
        match expected.get(at) {
            Some((k, _)) => assert_eq!(it.key(), k.as_slice(), "seek {target:?}"),
            None => assert!(!it.valid(), "seek {target:?} past the end"),
        }
    }
}

#[test]
fn keys_sharing_a_long_prefix_sort_and_seek_and_the_prefix_can_shrink() {
    let t = Arc::new(MemTable::new());
    let mut rng = Rng::new(23);
    let mut expected = Vec::new();
    let mut seq = 0;
    let mut put = |t: &MemTable, key: Vec<u8>, expected: &mut Vec<(Vec<u8>, Vec<u8>)>| {
        seq += 1;
        t.insert(SeqNo(seq), ValueKind::Put, &key, b"v");
        expected.push((ikey(&key, seq, ValueKind::Put), b"v".to_vec()));
    };
    let mut targets: Vec<Vec<u8>> = ["", "a", "user", "user/", "user/000000000", "zzz"]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect();
    // db_bench-like keys: every one starts with "user/0000000000", and 8 bytes from the
    // start of the key would never tell two apart.
    for _ in 0..2000 {
        let key = format!("user/{:016}", rng.below(900_000)).into_bytes();
        targets.push(key.clone());
        targets.push(format!("user/{:016}", rng.below(900_000)).into_bytes());
        put(&t, key, &mut expected);
    }
    expected.sort_by(|a, b| compare_internal(&a.0, &b.0));
    assert_eq!(collect_forward(&t), expected);
    assert!(t.sorted.lock().unwrap().skip() >= 15);
    assert_seeks(&t, &expected, &targets);

    // Keys outside that prefix: the older run's prefixes are taken again from further left.
    for key in [
        "user/1",
        "user/00000000009",
        "a",
        "user/0000000000",
        "b/0000000000000000",
    ] {
        put(&t, key.as_bytes().to_vec(), &mut expected);
        targets.push(key.as_bytes().to_vec());
        targets.push(format!("{key}0").into_bytes());
        expected.sort_by(|a, b| compare_internal(&a.0, &b.0));
        assert_eq!(collect_forward(&t), expected, "after {key}");
        assert_seeks(&t, &expected, &targets);
    }
    assert_eq!(t.sorted.lock().unwrap().skip(), 0);
}

#[test]
fn is_full_at_the_index_load_limit() {
    // 4 KiB of write buffer: the smallest index, 64 slots, full at 32 keys.
    let t = Arc::new(MemTable::with_capacity(4096));
    let index_bytes = t.approximate_memory_usage();
    assert_eq!(index_bytes, 64 * 8);
    for i in 0..32u64 {
        assert!(!t.is_full(), "{i}");
        t.insert(SeqNo(i + 1), ValueKind::Put, &i.to_be_bytes(), b"v");
    }
    assert!(t.is_full());
    // New versions of existing keys take no slot: still full, still fine.
    t.insert(SeqNo(100), ValueKind::Put, &3u64.to_be_bytes(), b"v3");
    assert!(t.is_full());
    assert_eq!(
        t.get(&3u64.to_be_bytes(), SeqNo::MAX),
        MemGet::Found(b"v3".as_slice())
    );
    // A caller that does not freeze keeps working: the index doubles, the old one stays
    // allocated (and counted) for readers that may still probe it.
    t.insert(SeqNo(101), ValueKind::Put, b"one more", b"x");
    assert!(!t.is_full());
    assert!(t.approximate_memory_usage() >= index_bytes * 3);
    for i in 0..32u64 {
        assert!(matches!(
            t.get(&i.to_be_bytes(), SeqNo::MAX),
            MemGet::Found(_)
        ));
    }
    assert_eq!(
        t.get(b"one more", SeqNo::MAX),
        MemGet::Found(b"x".as_slice())
    );
    let before_iter = t.approximate_memory_usage();
    assert_eq!(collect_forward(&t).len(), 34);
    // The sorted run the iterator needed is counted too: 16 bytes an entry.
    assert_eq!(t.approximate_memory_usage(), before_iter + 34 * 16);

    // The DB's sizing: 64 MiB of write buffer gets 2^20 slots (8 MiB), room for 2^19 keys.
    let t = MemTable::with_capacity(64 << 20);
    assert_eq!(t.approximate_memory_usage(), 8 << 20);
}

/// The value the concurrency test stores for a key, so readers can check what they find.
fn value_for(user_key: &[u8]) -> Vec<u8> {
    let mut v: Vec<u8> = user_key.iter().rev().copied().collect();
    v.extend_from_slice(b"-value");
    v
}

fn key_for(i: u64) -> [u8; 8] {
    // A bijection on u64, so keys are unique but arrive in scrambled order.
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_be_bytes()
}

#[test]
fn one_writer_and_concurrent_readers() {
    const N: u64 = 200_000;
    let t = Arc::new(MemTable::new());
    // How many inserts have returned; every key below it must be visible to a reader that
    // loaded it.
    let published = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let readers: Vec<_> = (0..2u64)
        .map(|r| {
            let t = Arc::clone(&t);
            let published = Arc::clone(&published);
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut rng = Rng::new(100 + r);
                let mut scans = 0;
                loop {
                    let finished = done.load(Acquire);
                    let n = published.load(Acquire) as u64;
                    for _ in 0..200 {
                        let i = rng.below(N);
                        let k = key_for(i);
                        match t.get(&k, SeqNo::MAX) {
                            MemGet::Found(v) => assert_eq!(v, value_for(&k)),
                            MemGet::Deleted => panic!("no deletes were written"),
                            MemGet::NotFound => assert!(i >= n, "key {i} < {n} not visible"),
                        }
                    }
                    // A partial scan from a random point, then a full one now and then.
                    let mut it = t.iter();
                    let full = scans % 20 == 0;
                    if full {
                        it.seek_to_first().unwrap();
                    } else {
                        it.seek(&key_for(rng.below(N))).unwrap();
                    }
                    let mut prev: Option<Vec<u8>> = None;
                    let mut seen = 0u64;
                    while it.valid() && (full || seen < 2000) {
                        let p = parse_internal_key(it.key()).unwrap();
                        assert_eq!(it.value(), value_for(p.user_key));
                        if let Some(prev) = &prev {
                            assert_eq!(compare_internal(prev, it.key()), Ordering::Less);
                        }
                        prev = Some(it.key().to_vec());
                        seen += 1;
                        it.next().unwrap();
                    }
                    if full {
                        assert!(seen >= n, "full scan saw {seen} of at least {n}");
                    }
                    scans += 1;
                    if finished {
                        return scans;
                    }
                }
            })
        })
        .collect();

    for i in 0..N {
        let k = key_for(i);
        t.insert(SeqNo(i + 1), ValueKind::Put, &k, &value_for(&k));
        published.store(i as usize + 1, Release);
    }
    done.store(true, Release);
    for r in readers {
        let scans = r.join().unwrap();
        assert!(scans > 0);
    }
    assert_eq!(t.len(), N as usize);
    assert_eq!(collect_forward(&t).len(), N as usize);
}

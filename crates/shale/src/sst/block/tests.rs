//! Block builder and iterator tests: round trips, seeks, reverse iteration, damage.

use std::path::Path;
use std::sync::Arc;

use super::{Block, BlockBuilder, BlockIter};
use crate::iter::InternalIterator;
use crate::key::{InternalKey, SeqNo, ValueKind};

fn path() -> Arc<Path> {
    Arc::from(Path::new("/test/block"))
}

/// Keys with a long shared prefix, two versions each, in internal order.
fn entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let prefix = "a-rather-long-shared-prefix/".repeat(4);
    let mut out = Vec::new();
    for i in 0..n {
        let uk = format!("{prefix}{i:05}");
        for seq in [2 * i as u64 + 10, 2 * i as u64 + 1] {
            let k = InternalKey::new(uk.as_bytes(), SeqNo(seq), ValueKind::Put);
            out.push((
                k.encoded().to_vec(),
                format!("value-{i}-{seq}").into_bytes(),
            ));
        }
    }
    out
}

fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(interval);
    assert!(b.is_empty());
    for (k, v) in entries {
        b.add(k, v);
    }
    let estimate = b.current_size_estimate();
    let bytes = b.finish().to_vec();
    assert_eq!(bytes.len(), estimate);
    Arc::new(Block::new(bytes, path(), 0).unwrap())
}

fn collect_forward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

#[test]
fn round_trip_forward_and_reverse() {
    let es = entries(100);
    for interval in [1, 2, 16] {
        let block = build(&es, interval);
        let mut it = block.iter();
        assert!(!it.valid());
        assert_eq!(collect_forward(&mut it), es, "interval {interval}");
        let mut back = Vec::new();
        it.seek_to_last().unwrap();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        back.reverse();
        assert_eq!(back, es, "interval {interval}");
    }
}

#[test]
fn prefix_compression_shrinks_the_block() {
    let es = entries(100);
    let raw: usize = es.iter().map(|(k, v)| k.len() + v.len()).sum();
    let b16 = build(&es, 16);
    let b1 = build(&es, 1);
    assert!(b16.byte_len() < raw * 2 / 3, "{} vs {raw}", b16.byte_len());
    assert!(b16.byte_len() < b1.byte_len());
}

#[test]
fn seeks_hit_miss_and_fall_off_the_ends() {
    let es = entries(50);
    for interval in [1, 2, 16] {
        let block = build(&es, interval);
        let mut it = block.iter();
        // Exact hits.
        for (k, v) in &es {
            it.seek(k).unwrap();
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        }
        // A snapshot between two versions lands on the older one.
        let prefix = "a-rather-long-shared-prefix/".repeat(4);
        let uk = format!("{prefix}{:05}", 7);
        it.seek(InternalKey::new(uk.as_bytes(), SeqNo(20), ValueKind::SEEK).encoded())
            .unwrap();
        assert_eq!(it.key(), es[15].0, "seq 15 is the newest <= 20");
        // Misses land on the next user key.
        let between = format!("{prefix}{:05}x", 7);
        it.seek(InternalKey::new(between.as_bytes(), SeqNo::MAX, ValueKind::SEEK).encoded())
            .unwrap();
        assert_eq!(it.key(), es[16].0);
        // Before the first and after the last.
        it.seek(InternalKey::new(b"", SeqNo::MAX, ValueKind::SEEK).encoded())
            .unwrap();
        assert_eq!(it.key(), es[0].0);
        it.seek(InternalKey::new(b"zzz", SeqNo::MAX, ValueKind::SEEK).encoded())
            .unwrap();
        assert!(!it.valid());
        // prev from the first entry invalidates.
        it.seek_to_first().unwrap();
        it.prev().unwrap();
        assert!(!it.valid());
    }
}

/// [`Block::seek_entry`] gives what an iterator's seek gives: the same entry, the same end,
/// or an error for both.
fn seek_entry_agrees(block: &Arc<Block>, target: &[u8]) {
    let mut it = block.iter();
    let seek = it.seek(target);
    let mut key = vec![0xEE; 3]; // stale contents must not leak into the answer
    match (seek, block.seek_entry(target, &mut key)) {
        (Err(_), Err(_)) => {}
        (Ok(()), Ok(Some(value))) => {
            assert!(it.valid());
            assert_eq!((it.key(), it.value()), (&key[..], value));
        }
        (Ok(()), Ok(None)) => assert!(!it.valid()),
        (seek, entry) => panic!("iterator {seek:?}, seek_entry {entry:?}"),
    }
}

#[test]
fn seek_entry_matches_the_iterator() {
    let es = entries(50);
    let prefix = "a-rather-long-shared-prefix/".repeat(4);
    let mut targets: Vec<Vec<u8>> = es.iter().map(|(k, _)| k.clone()).collect();
    for i in [0, 7, 49] {
        let uk = format!("{prefix}{i:05}");
        for seq in [0, 5, 20, SeqNo::MAX.0] {
            targets.push(
                InternalKey::new(uk.as_bytes(), SeqNo(seq), ValueKind::SEEK)
                    .encoded()
                    .to_vec(),
            );
        }
        let between = format!("{uk}x");
        targets.push(
            InternalKey::new(between.as_bytes(), SeqNo::MAX, ValueKind::SEEK)
                .encoded()
                .to_vec(),
        );
    }
    for edge in [&b""[..], b"a", b"zzz"] {
        targets.push(
            InternalKey::new(edge, SeqNo::MAX, ValueKind::SEEK)
                .encoded()
                .to_vec(),
        );
    }
    for interval in [1, 2, 16] {
        let block = build(&es, interval);
        for target in &targets {
            seek_entry_agrees(&block, target);
        }
        let mut key = Vec::new();
        let last = &es[es.len() - 1].0;
        assert_eq!(
            block.seek_entry(last, &mut key).unwrap(),
            Some(&es[es.len() - 1].1[..])
        );
        let past = InternalKey::new(b"zzz", SeqNo::MAX, ValueKind::SEEK);
        assert_eq!(block.seek_entry(past.encoded(), &mut key).unwrap(), None);
    }
}

#[test]
fn single_entry_and_reset() {
    let mut b = BlockBuilder::new(16);
    let k = InternalKey::new(b"k", SeqNo(1), ValueKind::Delete);
    b.add(k.encoded(), b"");
    let block = Arc::new(Block::new(b.finish().to_vec(), path(), 0).unwrap());
    let mut it = block.iter();
    it.seek_to_last().unwrap();
    assert_eq!(it.key(), k.encoded());
    assert_eq!(it.value(), b"");
    it.next().unwrap();
    assert!(!it.valid());
    b.reset();
    assert!(b.is_empty());
    let empty = Arc::new(Block::new(b.finish().to_vec(), path(), 0).unwrap());
    let mut it = empty.iter();
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert!(!it.valid());
    it.seek(k.encoded()).unwrap();
    assert!(!it.valid());
}

#[test]
fn malformed_restart_arrays_are_rejected() {
    let bad: [&[u8]; 5] = [
        &[],
        &[1, 0, 0],
        &[0, 0, 0, 0],             // zero restarts
        &[0, 0, 0, 0, 9, 0, 0, 0], // claims 9 restarts in 8 bytes
        &[5, 0, 0, 0, 1, 0, 0, 0], // first restart is not 0
    ];
    for data in bad {
        let err = Block::new(data.to_vec(), path(), 77).unwrap_err();
        assert!(err.is_corruption(), "{data:?}: {err}");
    }
    let mut count_overflow = vec![0u8; 4];
    count_overflow.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(Block::new(count_overflow, path(), 0).is_err());
}

/// Damage anywhere in a block: construction or movement fails, or the walk terminates;
/// nothing panics.
#[test]
fn flipped_and_truncated_blocks_never_panic() {
    let es = entries(20);
    let good = build(&es, 4);
    let mut bytes = Vec::new();
    {
        let mut b = BlockBuilder::new(4);
        for (k, v) in &es {
            b.add(k, v);
        }
        bytes.extend_from_slice(b.finish());
    }
    assert_eq!(bytes.len(), good.byte_len());
    let walk = |data: Vec<u8>| {
        let Ok(block) = Block::new(data, path(), 0) else {
            return;
        };
        let block = Arc::new(block);
        let mut it = block.iter();
        let mut steps = 0;
        if it.seek_to_first().is_ok() {
            while it.valid() && it.next().is_ok() {
                steps += 1;
                assert!(steps <= 10_000);
            }
        }
        if it.seek_to_last().is_ok() {
            while it.valid() && it.prev().is_ok() {
                steps += 1;
                assert!(steps <= 20_000);
            }
        }
        for (k, _) in &es {
            seek_entry_agrees(&block, k);
        }
    };
    for i in 0..bytes.len() {
        for bit in [0x01, 0x40, 0x80] {
            let mut bad = bytes.clone();
            bad[i] ^= bit;
            walk(bad);
        }
    }
    for n in 0..bytes.len() {
        walk(bytes[..n].to_vec());
    }
}

#[test]
fn malformed_entry_is_a_corruption_error() {
    let k = InternalKey::new(b"key", SeqNo(1), ValueKind::Put);
    let mut b = BlockBuilder::new(16);
    b.add(k.encoded(), b"value");
    let mut bytes = b.finish().to_vec();
    bytes[2] = 200; // value length far past the end of the entries
    let block = Arc::new(Block::new(bytes, path(), 4096).unwrap());
    let mut it = block.iter();
    let err = it.seek_to_first().unwrap_err();
    assert!(err.is_corruption());
    assert!(err.to_string().contains("offset 4096"), "{err}");
    assert!(!it.valid());
}

/// The block layout byte by byte, as docs/format.md should show it.
#[test]
fn block_worked_example() {
    let mut b = BlockBuilder::new(16);
    let apple = InternalKey::new(b"apple", SeqNo(2), ValueKind::Put);
    let apply = InternalKey::new(b"apply", SeqNo(1), ValueKind::Put);
    b.add(apple.encoded(), b"x");
    b.add(apply.encoded(), b"z");
    let mut want: Vec<u8> = vec![0, 13, 1];
    want.extend_from_slice(b"apple");
    want.extend_from_slice(&[0x01, 0x02, 0, 0, 0, 0, 0, 0]); // (2 << 8) | Put, LE
    want.extend_from_slice(b"x");
    want.extend_from_slice(&[4, 9, 1]); // shares "appl"
    want.extend_from_slice(b"y");
    want.extend_from_slice(&[0x01, 0x01, 0, 0, 0, 0, 0, 0]);
    want.extend_from_slice(b"z");
    want.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]); // restart[0] = 0, num_restarts = 1
    assert_eq!(b.finish(), &want[..]);
}

/// A seek narrowed by `RestartWords` lands where a plain seek does, for every target: keys
/// present, keys between them, keys before and after the block, and keys that leave the
/// shared prefix. Keys vary in length around the 8-byte word, and some have many versions.
#[test]
fn seek_narrowed_by_restart_words_matches_plain_seek() {
    use super::RestartWords;
    let mut user_keys: Vec<Vec<u8>> = Vec::new();
    for i in 0..300u32 {
        let mut k = b"tbl/".to_vec();
        k.extend_from_slice(format!("{:x}", i * 7).as_bytes());
        if i % 5 == 0 {
            k.push(0);
        }
        if i % 7 == 0 {
            k.extend_from_slice(b"-a-much-longer-tail");
        }
        user_keys.push(k);
    }
    user_keys.sort();
    user_keys.dedup();
    let mut es = Vec::new();
    for (i, uk) in user_keys.iter().enumerate() {
        let versions = if i % 11 == 0 { 20 } else { 1 };
        for v in (0..versions).rev() {
            let k = InternalKey::new(uk, SeqNo(100 + v), ValueKind::Put);
            es.push((k.encoded().to_vec(), vec![i as u8]));
        }
    }
    let mut targets: Vec<Vec<u8>> = vec![Vec::new(), b"a".to_vec(), b"tbl".to_vec(), b"z".to_vec()];
    targets.push(b"tbl/".to_vec());
    targets.push(b"tbm".to_vec());
    for uk in &user_keys {
        targets.push(uk.clone());
        let mut after = uk.clone();
        after.push(0);
        targets.push(after);
        let mut before = uk.clone();
        before.pop();
        targets.push(before);
    }
    for interval in [1, 3, 16] {
        let block = build(&es, interval);
        let words = RestartWords::new(&block).unwrap();
        for uk in &targets {
            for seq in [0, 105, 200] {
                let target = InternalKey::new(uk, SeqNo(seq), ValueKind::SEEK);
                let mut plain = block.iter();
                plain.seek(target.encoded()).unwrap();
                let mut narrowed = block.iter();
                narrowed.seek_in(target.encoded(), words.range(uk)).unwrap();
                assert_eq!(
                    plain.valid(),
                    narrowed.valid(),
                    "{uk:?}@{seq} interval {interval}"
                );
                if plain.valid() {
                    assert_eq!(
                        plain.key(),
                        narrowed.key(),
                        "{uk:?}@{seq} interval {interval}"
                    );
                }
            }
        }
    }
}

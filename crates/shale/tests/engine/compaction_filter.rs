//! `Options::compaction_filter`: compactions keep, remove or change each key's newest value;
//! a removal never brings an older version back, and a snapshot's reads never change.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale::{CompactionFilter, Db, FilterDecision, Options, ReadOptions};

/// Removes values that start with `tmp`, rewrites `old:` to `new:`, counts its calls.
#[derive(Default)]
struct Filter {
    calls: AtomicU64,
}

impl CompactionFilter for Filter {
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> FilterDecision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if value.starts_with(b"tmp") {
            FilterDecision::Remove
        } else if let Some(rest) = value.strip_prefix(b"old:") {
            FilterDecision::Change([b"new:", rest].concat())
        } else {
            FilterDecision::Keep
        }
    }
}

fn open(dir: &std::path::Path, filter: &Arc<Filter>) -> Db {
    let filter: Arc<dyn CompactionFilter> = filter.clone();
    Db::open(
        dir,
        Options {
            compaction_filter: Some(filter),
            ..Options::default()
        },
    )
    .unwrap()
}

#[test]
fn compactions_remove_and_change_values_without_bringing_older_ones_back() {
    let dir = tempfile::tempdir().unwrap();
    let filter = Arc::new(Filter::default());
    let db = open(dir.path(), &filter);
    for i in 0..1_000 {
        db.put(format!("k{i:04}"), format!("base{i}")).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap(); // the base values settle in the last level
    for i in (0..1_000).step_by(3) {
        db.put(format!("k{i:04}"), format!("tmp{i}")).unwrap();
    }
    for i in (1..1_000).step_by(3) {
        db.put(format!("k{i:04}"), format!("old:{i}")).unwrap();
    }
    db.flush().unwrap();
    // Before a compaction the values are as written.
    assert_eq!(db.get("k0000").unwrap().as_deref(), Some(&b"tmp0"[..]));
    db.compact_range(None, None).unwrap();
    for i in 0..1_000 {
        let want = match i % 3 {
            0 => None, // removed, and the base value stays hidden
            1 => Some(format!("new:{i}")),
            _ => Some(format!("base{i}")),
        };
        let got = db.get(format!("k{i:04}")).unwrap();
        assert_eq!(got, want.map(String::into_bytes), "k{i:04}");
    }
    let keys = db.range::<&[u8]>(..).unwrap().count();
    assert_eq!(keys, 666);
    assert!(filter.calls.load(Ordering::Relaxed) >= 1_000);
    drop(db);
    // And after a reopen.
    let db = open(dir.path(), &filter);
    assert_eq!(db.get("k0003").unwrap(), None);
    assert_eq!(db.get("k0004").unwrap().as_deref(), Some(&b"new:4"[..]));
}

#[test]
fn a_value_a_snapshot_can_read_is_not_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let filter = Arc::new(Filter::default());
    let db = open(dir.path(), &filter);
    db.put("a", "tmp-a").unwrap();
    db.put("b", "old:b").unwrap();
    db.put("d", "base-d").unwrap();
    let snap = db.snapshot();
    db.put("c", "tmp-c").unwrap(); // newer than the snapshot
    db.put("d", "tmp-d").unwrap(); // the snapshot keeps base-d below it
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let at = ReadOptions::at(&snap);
    assert_eq!(
        db.get_opt("a", &at).unwrap().as_deref(),
        Some(&b"tmp-a"[..])
    );
    assert_eq!(
        db.get_opt("b", &at).unwrap().as_deref(),
        Some(&b"old:b"[..])
    );
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"tmp-a"[..]));
    assert_eq!(db.get("c").unwrap(), None); // no snapshot could read it
                                            // Removed as a tombstone: the version the snapshot keeps stays hidden from the rest.
    assert_eq!(db.get("d").unwrap(), None);
    assert_eq!(
        db.get_opt("d", &at).unwrap().as_deref(),
        Some(&b"base-d"[..])
    );
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("a").unwrap(), None);
    assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"new:b"[..]));
}

//! `range`, `prefix` and reverse iteration over memtables and SSTables together.

use shale::{Db, Options, ReadOptions};

#[test]
fn range_prefix_and_reverse_span_memtable_and_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..100u32 {
        db.put(format!("a/{i:03}"), i.to_string()).unwrap();
        db.put(format!("b/{i:03}"), i.to_string()).unwrap();
    }
    db.flush().unwrap();
    // Newer versions and deletes in the memtable shadow the flushed ones.
    for i in (0..100u32).step_by(10) {
        db.put(format!("a/{i:03}"), "new").unwrap();
        db.delete(format!("a/{:03}", i + 1)).unwrap();
    }
    db.put([0xffu8, 0xff], "edge").unwrap();

    let keys = |it: shale::RangeIter| -> Vec<String> {
        it.map(|r| String::from_utf8(r.unwrap().0).unwrap())
            .collect()
    };
    let a: Vec<String> = keys(db.prefix("a/").unwrap());
    assert_eq!(a.len(), 90);
    assert!(a.iter().all(|k| k.starts_with("a/")));
    assert_eq!(db.get("a/010").unwrap(), Some(b"new".to_vec()));

    let r = keys(db.range("a/050".."a/060").unwrap());
    assert_eq!(r.first().map(String::as_str), Some("a/050"));
    assert_eq!(r.len(), 9, "{r:?}"); // 050..059 minus the deleted 051
    let rev = keys(db.range("a/050".."a/060").unwrap().rev());
    let mut fwd = r.clone();
    fwd.reverse();
    assert_eq!(rev, fwd);
    // `rev` on a partly used iterator starts over from the other end.
    let mut part = db.range("a/050".."a/060").unwrap();
    part.next().unwrap().unwrap();
    part.next().unwrap().unwrap();
    assert_eq!(keys(part.rev()), fwd);

    let inclusive = keys(db.range("b/098"..="b/099").unwrap());
    assert_eq!(inclusive, vec!["b/098", "b/099"]);

    let all: Vec<_> = db.range::<&[u8]>(..).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), 191);
    assert_eq!(all.last().unwrap().0, vec![0xff, 0xff]);
    assert_eq!(db.prefix([0xffu8]).unwrap().count(), 1);
}

/// `range_opt` and `prefix_opt` read at a snapshot: later writes, deletes and a flush do
/// not show.
#[test]
fn range_and_prefix_at_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..20u32 {
        db.put(format!("p/{i:02}"), "old").unwrap();
    }
    let snapshot = db.snapshot();
    for i in 0..20u32 {
        if i % 2 == 0 {
            db.delete(format!("p/{i:02}")).unwrap();
        } else {
            db.put(format!("p/{i:02}"), "new").unwrap();
        }
    }
    db.put("p/99", "new").unwrap();
    db.flush().unwrap();
    let opts = ReadOptions {
        snapshot: Some(&snapshot),
        ..ReadOptions::default()
    };
    let at_snapshot: Vec<_> = db
        .prefix_opt("p/", &opts)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(at_snapshot.len(), 20);
    assert!(at_snapshot.iter().all(|(_, v)| v == b"old"));
    let ranged = db.range_opt("p/05".."p/10", &opts).unwrap().count();
    assert_eq!(ranged, 5);
    let latest: Vec<_> = db.prefix("p/").unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(latest.len(), 11);
    assert!(latest.iter().all(|(_, v)| v == b"new"));
}

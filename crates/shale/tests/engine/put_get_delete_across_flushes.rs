//! Puts, gets and deletes across many flushes: 512 keys, then 65,536 keys whose
//! value `i` is `"s" * (i + 1)` (up to 64 KiB), with put / get / delete / get-after-delete,
//! across many flushes (a small write buffer forces them).

use shale::{Db, Options};

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn value(i: u64) -> Vec<u8> {
    vec![b's'; i as usize + 1]
}

fn regular_test(db: &Db, max: u64) {
    for i in 0..max {
        db.put(key(i), value(i)).unwrap();
        assert_eq!(
            db.get(key(i)).unwrap(),
            Some(value(i)),
            "get right after put {i}"
        );
    }
    for i in 0..max {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "get {i}");
    }
    // Delete the even keys.
    for i in (0..max).step_by(2) {
        db.delete(key(i)).unwrap();
    }
    for i in 0..max {
        let expected = if i % 2 == 0 { None } else { Some(value(i)) };
        assert_eq!(db.get(key(i)).unwrap(), expected, "get after delete {i}");
    }
    // Deleting what is already gone, or was never there, is not an error.
    db.delete(key(0)).unwrap();
    db.delete(key(max + 10)).unwrap();
    assert_eq!(db.get(key(max + 10)).unwrap(), None);
}

fn small_buffers() -> Options {
    Options {
        write_buffer_size: 4 << 20,
        ..Options::default()
    }
}

#[test]
fn lab_512_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            write_buffer_size: 64 << 10,
            ..Options::default()
        },
    )
    .unwrap();
    regular_test(&db, 512);
    // Wait for flushes in flight so the count below is not a race.
    db.flush().unwrap();
    assert!(
        db.stats().flushes >= 2,
        "the small test crossed flushes: {:?}",
        db.stats()
    );
}

#[test]
fn lab_65536_keys_up_to_64_kib() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_buffers()).unwrap();
    regular_test(&db, 65_536);
    db.flush().unwrap();
    let stats = db.stats();
    assert!(stats.flushes >= 100, "expected many flushes, got {stats:?}");
    drop(db);
    // And everything is still right after a reopen.
    let db = Db::open(dir.path(), small_buffers()).unwrap();
    for i in (0..65_536).step_by(97) {
        let expected = if i % 2 == 0 { None } else { Some(value(i)) };
        assert_eq!(db.get(key(i)).unwrap(), expected, "after reopen {i}");
    }
}

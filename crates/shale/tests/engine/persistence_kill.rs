//! Persistence: 32 x 1024 keys with 1 KiB values, written by a child
//! process that is then killed with SIGKILL (no close, no destructor), reopened and checked.
//! Also: the same after a clean close, and batch atomicity under a kill at a random moment.
//!
//! The child is this test binary run again with `SHALE_CHILD` set; it prints a line after
//! each acknowledged unit of work so the parent knows what must survive.

use std::path::Path;
use std::process::Stdio;

use shale::{Db, Options, WriteBatch, WriteOptions};
use shale_trials::TestChild;

const ROUNDS: u64 = 32;
const PER_ROUND: u64 = 1024;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(1024, b'a' + (i % 26) as u8);
    v
}

fn options() -> Options {
    Options {
        write_buffer_size: 1 << 20,
        ..Options::default()
    }
}

/// Run `role` in a child process on `dir`.
fn spawn_child(role: &str, dir: &Path) -> TestChild {
    TestChild::spawn(
        shale_trials::test_in_child(module_path!(), "child_entry")
            .env("SHALE_CHILD", role)
            .env("SHALE_CHILD_DIR", dir)
            .stderr(Stdio::inherit()),
    )
}

/// The child side. A no-op when run as an ordinary test.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var("SHALE_CHILD") else {
        return;
    };
    let dir = std::env::var("SHALE_CHILD_DIR").unwrap();
    let db = Db::open(&dir, options()).unwrap();
    match role.as_str() {
        "fill" => {
            for round in 0..ROUNDS {
                for j in 0..PER_ROUND {
                    let i = round * PER_ROUND + j;
                    db.put(key(i), value(i)).unwrap();
                }
                println!("round {round}");
            }
            println!("done");
            // Wait to be killed: never close.
            loop {
                std::thread::park();
            }
        }
        "batches" => {
            for n in 0u64.. {
                let mut b = WriteBatch::new();
                for j in 0..10 {
                    b.put(format!("b{n:08}-{j}"), value(n * 10 + j));
                }
                let opts = if n % 3 == 0 {
                    WriteOptions::sync()
                } else {
                    WriteOptions::default()
                };
                db.write(b, opts).unwrap();
                println!("acked {n}");
            }
        }
        other => panic!("unknown role {other}"),
    }
}

fn check_all(db: &Db) {
    for i in 0..ROUNDS * PER_ROUND {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i)), "key {i}");
    }
}

#[test]
fn survives_kill_without_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("fill", dir.path());
    child.wait_for("done");
    child.kill();
    let db = Db::open(dir.path(), options()).unwrap();
    check_all(&db);
}

#[test]
fn survives_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..ROUNDS * PER_ROUND {
            db.put(key(i), value(i)).unwrap();
        }
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    check_all(&db);
}

#[test]
fn batches_are_atomic_and_acknowledged_ones_survive_a_kill() {
    for attempt in 0..3u64 {
        let dir = tempfile::tempdir().unwrap();
        let mut child = spawn_child("batches", dir.path());
        let stop_after = 200 + attempt * 700;
        let mut acked = None;
        child.read_until(|line| {
            let n: u64 = line.strip_prefix("acked ")?.parse().unwrap();
            acked = Some(n);
            (n >= stop_after).then_some(())
        });
        child.kill();
        let acked = acked.expect("child acknowledged some batches");
        let db = Db::open(dir.path(), options()).unwrap();
        let mut n = 0;
        loop {
            let present: Vec<bool> = (0..10)
                .map(|j| db.get(format!("b{n:08}-{j}")).unwrap().is_some())
                .collect();
            if present.iter().all(|&p| !p) {
                break;
            }
            assert!(present.iter().all(|&p| p), "batch {n} is torn: {present:?}");
            n += 1;
        }
        assert!(
            n > acked,
            "batch {acked} was acknowledged but only {n} survived"
        );
    }
}

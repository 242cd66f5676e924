//! Optimistic transactions: read-your-writes at a snapshot, conflicts on keys read or
//! written since the snapshot, and a bank-transfer workload on many threads whose total
//! never changes (with a control that shows the check catches a lost update).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale::{Db, Error, Options};

fn open(dir: &std::path::Path) -> Db {
    Db::open(dir, Options::default()).unwrap()
}

#[test]
fn a_transaction_reads_its_writes_at_its_snapshot_and_commits_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("a", "1").unwrap();
    let mut txn = db.transaction();
    let mut reader = db.transaction();
    db.put("b", "later").unwrap();
    assert_eq!(txn.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(reader.get("b").unwrap(), None); // written after its snapshot
    txn.put("a", "2");
    txn.delete("c");
    txn.put("d", "new");
    assert_eq!(txn.get("a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..])); // not yet
    txn.commit().unwrap();
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get("d").unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.get("b").unwrap().as_deref(), Some(&b"later"[..]));
    // Dropped without a commit: nothing.
    let mut txn = db.transaction();
    txn.put("e", "never");
    drop(txn);
    assert_eq!(db.get("e").unwrap(), None);
}

#[test]
fn a_key_read_or_written_since_the_snapshot_is_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("k", "0").unwrap();

    // Read, then someone else writes it.
    let mut txn = db.transaction();
    txn.get("k").unwrap();
    txn.put("other", "x");
    db.put("k", "1").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict(_))));
    assert_eq!(db.get("other").unwrap(), None);

    // A blind write, and someone else writes the same key: write-write conflict.
    let mut txn = db.transaction();
    txn.put("k", "mine");
    db.delete("k").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict(_))));
    assert_eq!(db.get("k").unwrap(), None);

    // Another key written meanwhile is no conflict.
    let mut txn = db.transaction();
    txn.get("k").unwrap();
    txn.put("k", "2");
    db.put("unrelated", "y").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"2"[..]));

    // A flush since the snapshot leaves no memtable history to check against: refused too.
    let mut txn = db.transaction();
    txn.get("k").unwrap();
    txn.put("k", "3");
    db.put("unrelated", "z").unwrap();
    db.flush().unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict(_))));
}

const ACCOUNTS: u64 = 16;
const START: u64 = 1_000;

fn account(i: u64) -> String {
    format!("acct{i:02}")
}

fn balance(v: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(v.unwrap().try_into().unwrap())
}

fn total(db: &Db) -> u64 {
    let mut txn = db.transaction();
    (0..ACCOUNTS)
        .map(|i| balance(txn.get(account(i)).unwrap()))
        .sum()
}

#[test]
fn concurrent_transfers_keep_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    for i in 0..ACCOUNTS {
        db.put(account(i), START.to_le_bytes()).unwrap();
    }
    let (committed, conflicts) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let (db, committed, conflicts) = (
                Arc::clone(&db),
                Arc::clone(&committed),
                Arc::clone(&conflicts),
            );
            std::thread::spawn(move || {
                let mut s = t.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut next = move || {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    s
                };
                for _ in 0..400 {
                    let (from, to) = (next() % ACCOUNTS, next() % ACCOUNTS);
                    let amount = next() % 50;
                    loop {
                        let mut txn = db.transaction();
                        let a = balance(txn.get(account(from)).unwrap());
                        let b = balance(txn.get(account(to)).unwrap());
                        if from == to || a < amount {
                            break;
                        }
                        // Let the others in between the reads and the commit.
                        std::thread::yield_now();
                        txn.put(account(from), (a - amount).to_le_bytes());
                        txn.put(account(to), (b + amount).to_le_bytes());
                        match txn.commit() {
                            Ok(()) => {
                                committed.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            Err(Error::Conflict(_)) => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            })
        })
        .collect();
    // A reader checks the invariant at its snapshots while the transfers run.
    for _ in 0..50 {
        assert_eq!(total(&db), ACCOUNTS * START);
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(total(&db), ACCOUNTS * START);
    let (committed, conflicts) = (
        committed.load(Ordering::Relaxed),
        conflicts.load(Ordering::Relaxed),
    );
    println!("{committed} transfers committed, {conflicts} conflicts retried");
    assert!(committed > 1_000, "{committed}");
}

/// The control: two transfers from one account interleaved. Without a transaction the
/// second overwrites the first (a lost update) and the total check catches it; as
/// transactions the second commit is refused.
#[test]
fn the_total_check_catches_a_lost_update_that_transactions_prevent() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for i in 0..ACCOUNTS {
        db.put(account(i), START.to_le_bytes()).unwrap();
    }
    // Plain reads and writes, interleaved: both read account 0 before either writes.
    let a1 = balance(db.get(account(0)).unwrap());
    let a2 = balance(db.get(account(0)).unwrap());
    let b1 = balance(db.get(account(1)).unwrap());
    db.put(account(0), (a1 - 10).to_le_bytes()).unwrap();
    db.put(account(1), (b1 + 10).to_le_bytes()).unwrap();
    let c2 = balance(db.get(account(2)).unwrap());
    db.put(account(0), (a2 - 20).to_le_bytes()).unwrap();
    db.put(account(2), (c2 + 20).to_le_bytes()).unwrap();
    assert_ne!(
        total(&db),
        ACCOUNTS * START,
        "the check missed a lost update"
    );

    // The same interleaving as transactions.
    for i in 0..ACCOUNTS {
        db.put(account(i), START.to_le_bytes()).unwrap();
    }
    let (mut t1, mut t2) = (db.transaction(), db.transaction());
    let a1 = balance(t1.get(account(0)).unwrap());
    let a2 = balance(t2.get(account(0)).unwrap());
    let b1 = balance(t1.get(account(1)).unwrap());
    t1.put(account(0), (a1 - 10).to_le_bytes());
    t1.put(account(1), (b1 + 10).to_le_bytes());
    t1.commit().unwrap();
    let c2 = balance(t2.get(account(2)).unwrap());
    t2.put(account(0), (a2 - 20).to_le_bytes());
    t2.put(account(2), (c2 + 20).to_le_bytes());
    assert!(matches!(t2.commit(), Err(Error::Conflict(_))));
    assert_eq!(total(&db), ACCOUNTS * START);
}

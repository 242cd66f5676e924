//! Optimistic transactions: read-your-writes at a snapshot, conflicts on keys read or
//! written since the snapshot, and a bank-transfer workload on many threads whose total
//! never changes (with a control that shows the check catches a lost update), within one
//! keyspace and across two.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use shale::{Db, Error, Keyspace, Options, Transaction};

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

/// Where the accounts live: all in the default keyspace, or the odd ones in a second.
struct Bank {
    db: Db,
    savings: Option<Keyspace>,
}

impl Bank {
    fn open(dir: &std::path::Path, split: bool) -> Bank {
        let db = open(dir);
        let savings = split.then(|| db.keyspace("savings").unwrap());
        let bank = Bank { db, savings };
        let mut txn = bank.db.transaction();
        for i in 0..ACCOUNTS {
            bank.set(&mut txn, i, START);
        }
        txn.commit().unwrap();
        bank
    }

    fn keyspace(&self, i: u64) -> Option<&Keyspace> {
        self.savings.as_ref().filter(|_| i % 2 == 1)
    }

    fn get(&self, txn: &mut Transaction, i: u64) -> u64 {
        balance(match self.keyspace(i) {
            Some(ks) => txn.get_in(ks, account(i)).unwrap(),
            None => txn.get(account(i)).unwrap(),
        })
    }

    fn set(&self, txn: &mut Transaction, i: u64, amount: u64) {
        match self.keyspace(i) {
            Some(ks) => txn.put_in(ks, account(i), amount.to_le_bytes()).unwrap(),
            None => txn.put(account(i), amount.to_le_bytes()),
        }
    }

    fn total(&self) -> u64 {
        let mut txn = self.db.transaction();
        (0..ACCOUNTS).map(|i| self.get(&mut txn, i)).sum()
    }
}

/// Six threads transfer between random accounts; a reader checks the total at its
/// snapshots meanwhile, and at the end.
fn transfers_keep_the_total(split: bool) {
    let dir = tempfile::tempdir().unwrap();
    let bank = Arc::new(Bank::open(dir.path(), split));
    let (committed, conflicts) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let (bank, committed, conflicts) = (
                Arc::clone(&bank),
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
                        let mut txn = bank.db.transaction();
                        let a = bank.get(&mut txn, from);
                        let b = bank.get(&mut txn, to);
                        if from == to || a < amount {
                            break;
                        }
                        // Let the others in between the reads and the commit.
                        std::thread::yield_now();
                        bank.set(&mut txn, from, a - amount);
                        bank.set(&mut txn, to, b + amount);
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
    for _ in 0..50 {
        assert_eq!(bank.total(), ACCOUNTS * START);
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(bank.total(), ACCOUNTS * START);
    let (committed, conflicts) = (
        committed.load(Ordering::Relaxed),
        conflicts.load(Ordering::Relaxed),
    );
    println!("{committed} transfers committed, {conflicts} conflicts retried");
    assert!(committed > 1_000, "{committed}");
}

#[test]
fn concurrent_transfers_keep_the_total() {
    transfers_keep_the_total(false);
}

/// The same with the odd accounts in a second keyspace: every transfer between an odd
/// and an even account is a transaction across keyspaces.
#[test]
fn concurrent_transfers_across_keyspaces_keep_the_total() {
    transfers_keep_the_total(true);
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

#[test]
fn a_conflict_is_found_in_its_own_keyspace_and_only_there() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ks = db.keyspace("ks").unwrap();
    ks.put("k", "0").unwrap();
    // Read in the keyspace; the same key written in the default keyspace is no conflict,
    // nor are other writes while the keyspace's memtable holds nothing newer.
    let mut txn = db.transaction();
    assert_eq!(txn.get_in(&ks, "k").unwrap().unwrap(), b"0");
    db.put("k", "other keyspace").unwrap();
    for i in 0..100 {
        db.put(format!("noise{i}"), "x").unwrap();
    }
    txn.put_in(&ks, "k", "1").unwrap();
    txn.commit().unwrap();
    assert_eq!(ks.get("k").unwrap().unwrap(), b"1");
    // A write to the key in its keyspace after the transaction began is one.
    let mut txn = db.transaction();
    txn.get_in(&ks, "k").unwrap();
    txn.put("elsewhere", "y");
    ks.put("k", "2").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict(_))));
    assert_eq!(db.get("elsewhere").unwrap(), None);
    // A keyspace of another database is refused.
    let other_dir = tempfile::tempdir().unwrap();
    let other = open(other_dir.path());
    let foreign = other.keyspace("ks").unwrap();
    let mut txn = db.transaction();
    assert!(matches!(
        txn.get_in(&foreign, "k"),
        Err(Error::InvalidArgument(_))
    ));
}

//! Model test: random sequences of put / delete / batch / flush / reopen against a
//! `BTreeMap`, checked key by key after every step that can lose or reorder data.

use std::collections::BTreeMap;

use proptest::prelude::*;
use shale::{Db, Options, WriteBatch, WriteOptions};

#[derive(Debug, Clone)]
enum Op {
    Put(u8, Vec<u8>),
    Delete(u8),
    Batch(Vec<(u8, Option<Vec<u8>>)>),
    Get(u8),
    Flush,
    Reopen,
}

fn key(k: u8) -> Vec<u8> {
    // Keys share long prefixes to exercise prefix compression.
    format!("user/profile/{k:03}").into_bytes()
}

fn op() -> impl Strategy<Value = Op> {
    let value = proptest::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        10 => (any::<u8>(), value.clone()).prop_map(|(k, v)| Op::Put(k % 64, v)),
        4 => any::<u8>().prop_map(|k| Op::Delete(k % 64)),
        3 => proptest::collection::vec((any::<u8>(), proptest::option::of(value)), 1..8)
            .prop_map(|ops| Op::Batch(ops.into_iter().map(|(k, v)| (k % 64, v)).collect())),
        6 => any::<u8>().prop_map(|k| Op::Get(k % 64)),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

fn options() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        block_size: 256,
        block_restart_interval: 4,
        ..Options::default()
    }
}

fn check_all(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for k in 0..64u8 {
        assert_eq!(
            db.get(key(k)).unwrap().as_ref(),
            model.get(&key(k)),
            "key {k}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn matches_btreemap(ops in proptest::collection::vec(op(), 1..400)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open(dir.path(), options()).unwrap();
        let mut model = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    db.put(key(k), &v).unwrap();
                    model.insert(key(k), v);
                }
                Op::Delete(k) => {
                    db.delete(key(k)).unwrap();
                    model.remove(&key(k));
                }
                Op::Batch(entries) => {
                    let mut b = WriteBatch::new();
                    for (k, v) in entries {
                        match v {
                            Some(v) => {
                                b.put(key(k), &v);
                                model.insert(key(k), v);
                            }
                            None => {
                                b.delete(key(k));
                                model.remove(&key(k));
                            }
                        }
                    }
                    db.write(b, WriteOptions::default()).unwrap();
                }
                Op::Get(k) => {
                    let got = db.get(key(k)).unwrap();
                    prop_assert_eq!(got.as_ref(), model.get(&key(k)));
                }
                Op::Flush => {
                    db.flush().unwrap();
                    check_all(&db, &model);
                }
                Op::Reopen => {
                    drop(db);
                    db = Db::open(dir.path(), options()).unwrap();
                    check_all(&db, &model);
                }
            }
        }
        check_all(&db, &model);
    }
}

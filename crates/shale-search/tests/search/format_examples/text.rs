//! Section 15 of docs/format.md, the text index records, checked against the code in both
//! directions: the document's bytes decode to the values it states, and a real database
//! writes exactly those bytes.

use std::sync::Arc;

use shale::{Db, Options};
use shale_search::text::{Definition, DocRecord};
use shale_search::{Analyzer, TextIndex, TextIndexOptions};

use super::hex;

const TEXT: &str = "The cats chase cats";

#[test]
fn text_index_records_example() {
    let definition = hex("text-definition-example");
    assert_eq!(
        Definition::decode(&definition),
        Ok(Definition {
            analyzer: Analyzer::English,
            keyspace: None,
            prefix: b"doc/".to_vec(),
        })
    );
    let record = hex("text-document-example");
    let decoded = DocRecord::decode(&record).expect("decodes");
    assert_eq!(decoded.hash, xxhash_of(TEXT));
    assert_eq!(decoded.length, 3, "the stop word takes no token");
    assert_eq!(
        decoded.terms,
        [("cat".to_owned(), 2), ("chase".to_owned(), 1)]
    );

    // A real database writes exactly those bytes.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(dir.path(), Options::default()).expect("open"));
    let _ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("doc/")).expect("index");
    db.put("doc/1", TEXT).expect("put");
    let records = db.keyspace("text.docs").expect("keyspace");
    assert_eq!(records.get([0x00]).expect("get"), Some(definition));
    assert_eq!(records.get(b"\x01doc/1").expect("get"), Some(record));
}

/// The value hash a document record carries: xxh3-64 of the value's bytes.
fn xxhash_of(text: &str) -> u64 {
    shale_search::semantic::value_hash(text.as_bytes())
}

#[test]
#[ignore = "prints the examples after a deliberate format change"]
fn print_examples() {
    let d = Definition {
        analyzer: Analyzer::English,
        keyspace: None,
        prefix: b"doc/".to_vec(),
    };
    println!("{:02x?}", d.encode());
    let r = DocRecord::analyze(Analyzer::English, TEXT, xxhash_of(TEXT));
    println!("{:02x?}", r.encode());
}

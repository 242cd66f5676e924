//! Section 4's and 6.9's range delete examples of docs/format.md: the WAL entry and the
//! format version 2 table a flush of it writes.

use shale::inspect::batch::BatchReader;
use shale::inspect::key::{InternalKey, SeqNo, ValueKind};
use shale::inspect::range_del::RangeTombstone;
use shale::inspect::sst::format::{
    decode_range_dels, CompressionType, Footer, FOOTER_LEN, FORMAT_VERSION_RANGE_DELS,
};
use shale::inspect::sst::TableProperties;
use shale::{Db, Options};

use super::hex;
use super::kv::{checked_block, records};

/// A fresh database, `delete_range("apple", "pear")` (seq 1), flushed: the WAL payload and
/// the table (`000005.sst`).
fn range_delete_sample() -> (Vec<u8>, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    db.delete_range("apple", "pear").unwrap();
    let wal = std::fs::read(tmp.path().join("000002.wal")).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let payload = records(&wal).remove(0).1;
    (
        payload,
        std::fs::read(tmp.path().join("000005.sst")).unwrap(),
    )
}

#[test]
fn range_delete_example() {
    // The WAL entry: kind 2, the start as the key, the end as the value.
    let batch = hex("batch-range-example");
    let r = BatchReader::new(&batch).unwrap();
    let entries: Vec<_> = r.entries().map(Result::unwrap).collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].kind, ValueKind::RangeDelete);
    assert_eq!(
        (entries[0].key, entries[0].value),
        (&b"apple"[..], &b"pear"[..])
    );
    assert_eq!(entries[0].seq, SeqNo(1));

    // The table: no data block, the range-del block, properties with its handle, an empty
    // index, a version 2 footer.
    let sst = hex("sst-range-example");
    let footer = Footer::decode(&sst[sst.len() - FOOTER_LEN..]).unwrap();
    assert_eq!(footer.version, FORMAT_VERSION_RANGE_DELS);
    let (props_raw, _) = checked_block(&sst, footer.properties);
    let p = TableProperties::decode(&props_raw).unwrap();
    assert_eq!((p.entries, p.data_blocks), (0, 0));
    assert_eq!(
        p.smallest,
        InternalKey::new(b"apple", SeqNo(1), ValueKind::RangeDelete)
    );
    assert_eq!(p.largest, InternalKey::range_end(b"pear"));
    let (handle, count) = p.range_dels.unwrap();
    assert_eq!(count, 1);
    let (block, ty) = checked_block(&sst, handle);
    assert_eq!(ty, CompressionType::None);
    assert_eq!(block, hex("range-del-example"));
    let tombstones = decode_range_dels(&block).unwrap();
    assert_eq!(
        tombstones,
        vec![RangeTombstone {
            start: b"apple".to_vec(),
            end: b"pear".to_vec(),
            seq: SeqNo(1)
        }]
    );
    let (index_raw, _) = checked_block(&sst, footer.index);
    assert_eq!(
        index_raw,
        [0, 0, 0, 0, 1, 0, 0, 0],
        "an empty block: restart 0, count 1"
    );

    // The engine writes exactly these bytes.
    let (payload, table) = range_delete_sample();
    assert_eq!(payload, batch);
    assert_eq!(table, sst);
}

#[test]
#[ignore = "prints the range delete examples for docs/format.md"]
fn print_range_delete_examples() {
    let (payload, table) = range_delete_sample();
    for (name, bytes) in [
        ("batch-range-example", payload),
        ("sst-range-example", table),
    ] {
        println!("{name}:");
        for line in bytes.chunks(16) {
            let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
            println!("{}", hex.join(" "));
        }
    }
}

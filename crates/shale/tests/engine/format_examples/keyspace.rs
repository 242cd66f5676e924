//! Section 4's and 5's keyspace examples of docs/format.md: a batch entry naming a keyspace,
//! the edit that creates a keyspace and the flush edit that adds a file to it.

use shale::inspect::batch::BatchReader;
use shale::inspect::key::{SeqNo, ValueKind};
use shale::inspect::keyspace::KeyspaceId;
use shale::inspect::version::KeyspaceDef;
use shale::inspect::version::{FileId, Level, VersionEdit};
use shale::KeyspaceOptions;
use shale::{Compression, Db, Options};

use super::hex;
use super::kv::records;

fn log_options() -> KeyspaceOptions {
    KeyspaceOptions {
        write_buffer_size: 1 << 20,
        block_size: 4096,
        filter_bits_per_key: 10,
        compression: Compression::Zstd(3),
    }
}

/// A fresh database: keyspace `log` made with `log_options`, `put("k", "v")` in it (seq
/// 1), flushed. The WAL payload and the manifest's edits after its snapshot.
fn keyspace_sample() -> (Vec<u8>, Vec<Vec<u8>>) {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open(tmp.path(), Options::default()).unwrap();
    let log = db.keyspace_with("log", log_options()).unwrap();
    log.put("k", "v").unwrap();
    let wal = std::fs::read(tmp.path().join("000002.wal")).unwrap();
    db.flush().unwrap();
    let manifest = std::fs::read(tmp.path().join("MANIFEST-000003")).unwrap();
    drop(log);
    db.close().unwrap();
    let payload = records(&wal).remove(0).1;
    let edits = records(&manifest)
        .into_iter()
        .skip(1)
        .map(|(_, r)| r)
        .collect();
    (payload, edits)
}

#[test]
fn keyspace_examples() {
    let batch = hex("batch-keyspace-example");
    let entries: Vec<_> = BatchReader::new(&batch)
        .unwrap()
        .entries()
        .map(Result::unwrap)
        .collect();
    assert_eq!(entries.len(), 1);
    let e = entries[0];
    assert_eq!(
        (e.seq, e.kind, e.keyspace),
        (SeqNo(1), ValueKind::Put, KeyspaceId(1))
    );
    assert_eq!((e.key, e.value), (&b"k"[..], &b"v"[..]));

    let created = VersionEdit::decode(&hex("edit-keyspace-example")).unwrap();
    assert_eq!(
        created,
        VersionEdit {
            next_file_number: Some(FileId(4)),
            last_seq: Some(SeqNo(0)),
            next_keyspace_id: Some(KeyspaceId(2)),
            keyspaces: vec![KeyspaceDef {
                id: KeyspaceId(1),
                name: "log".into(),
                options: log_options(),
            }],
            ..VersionEdit::default()
        }
    );

    let flushed = VersionEdit::decode(&hex("edit-keyspace-file-example")).unwrap();
    assert_eq!(flushed.log_number, Some(FileId(4)));
    let [(level, file)] = &flushed.new_files[..] else {
        panic!("one new file expected: {flushed:?}");
    };
    assert_eq!(
        (*level, file.id, file.keyspace),
        (Level(0), FileId(5), KeyspaceId(1))
    );
    assert_eq!(
        (file.smallest.user_key(), file.largest.user_key()),
        (&b"k"[..], &b"k"[..])
    );

    // The engine writes exactly these bytes.
    let (payload, edits) = keyspace_sample();
    assert_eq!(payload, batch);
    assert_eq!(edits.len(), 2);
    assert_eq!(edits[0], hex("edit-keyspace-example"));
    assert_eq!(edits[1], hex("edit-keyspace-file-example"));
}

#[test]
#[ignore = "prints the examples for docs/format.md"]
fn print_keyspace_examples() {
    let (payload, edits) = keyspace_sample();
    for (name, bytes) in [
        ("batch-keyspace-example", &payload),
        ("edit-keyspace-example", &edits[0]),
        ("edit-keyspace-file-example", &edits[1]),
    ] {
        println!("```hex {name}");
        for line in bytes.chunks(16) {
            let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
            println!("{}", hex.join(" "));
        }
        println!("```\n");
    }
}

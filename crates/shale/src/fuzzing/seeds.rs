//! Valid inputs for every target, made with the engine's own encoders.

use super::log::manifest_log;
use super::*;

/// Valid inputs for `target`, made by the engine's own encoders: the starting corpus of the
/// fuzz targets and of `tests/engine/fuzz_smoke.rs`. Unknown names give no seeds.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    match target {
        "block" => block_seeds(),
        "sst_footer" => sst_footer_seeds(),
        "sst_table" => sst_table_seeds(),
        "wal_reader" => wal_reader_seeds(),
        "manifest" => manifest_seeds(),
        "db_ops" => db_ops_seeds(),
        _ => Vec::new(),
    }
}

/// `rest` behind a mode byte (the first byte of most targets' input picks what it feeds).
fn with_mode(m: u8, rest: &[u8]) -> Vec<u8> {
    let mut v = vec![m];
    v.extend_from_slice(rest);
    v
}

/// 256 bytes of no format, for the modes that build their input from raw bytes.
fn structured() -> Vec<u8> {
    (0u8..=255).map(|i| i.wrapping_mul(37) ^ 0x5a).collect()
}

fn block_seeds() -> Vec<Vec<u8>> {
    let structured = structured();
    let mut b = BlockBuilder::new(2);
    for (k, v) in sample_entries() {
        b.add(k.encoded(), &v);
    }
    vec![
        with_mode(0, b.finish()),
        with_mode(1, &structured),
        with_mode(7, &structured),
    ]
}

fn sst_footer_seeds() -> Vec<Vec<u8>> {
    let structured = structured();
    let f = Footer {
        filter: Some(BlockHandle::new(100, 20)),
        properties: BlockHandle::new(125, 90),
        index: BlockHandle::new(220, 30),
        version: crate::sst::format::FORMAT_VERSION,
    };
    let mut handle = Vec::new();
    BlockHandle::new(4096, 1234).encode_varint(&mut handle);
    let block = b"some block bytes".to_vec();
    let mut with_trailer = block.clone();
    with_trailer.extend_from_slice(&encode_trailer(&block, CompressionType::None));
    let props = sample_table_bytes(Compression::None);
    let mut lz4 = Vec::new();
    compress(Compression::Lz4, &[7u8; 200], &mut lz4);
    vec![f.encode(), handle, with_trailer, props, lz4, structured]
}

fn sst_table_seeds() -> Vec<Vec<u8>> {
    let structured = structured();
    let mut out = vec![
        with_mode(0, &sample_table_bytes(Compression::None)),
        with_mode(0, &sample_table_bytes(Compression::Lz4)),
    ];
    for m in [1u8, 3] {
        for shape in [0u8, 0x25, 0x6a, 0xa3, 0xe0] {
            let mut v = vec![m, shape];
            v.extend_from_slice(&structured);
            out.push(v);
        }
    }
    out
}

fn wal_reader_seeds() -> Vec<Vec<u8>> {
    let structured = structured();
    let mut b = WriteBatch::new();
    b.put(b"key", b"value");
    b.delete(b"gone");
    b.put_in(crate::keyspace::KeyspaceId(1), b"in", b"keyspace");
    b.delete_range_in(crate::keyspace::KeyspaceId(300), b"a", b"b");
    let mut record = batch::encode_header(SeqNo(7), b.count()).to_vec();
    record.extend_from_slice(b.body());
    let log = manifest_log(&[record.clone(), Vec::new(), record]);
    vec![
        with_mode(0, &log),
        with_mode(1, &structured),
        with_mode(1, &[0x85, 0x10, 0x90, 9, 3, b'a', b'b', b'c', 0, 0, 0, 0]),
    ]
}

fn manifest_seeds() -> Vec<Vec<u8>> {
    let edits = sample_edits();
    let mut first = Vec::new();
    if let Some(e) = edits.first() {
        e.encode(&mut first);
    }
    let mut framed = Vec::new();
    for e in &edits {
        let mut buf = Vec::new();
        e.encode(&mut buf);
        framed.push(u8::try_from(buf.len()).unwrap_or(u8::MAX));
        framed.extend_from_slice(&buf);
    }
    let encoded: Vec<Vec<u8>> = edits
        .iter()
        .map(|e| {
            let mut buf = Vec::new();
            e.encode(&mut buf);
            buf
        })
        .collect();
    vec![
        with_mode(0, &first),
        with_mode(1, &framed),
        with_mode(2, &manifest_log(&encoded)),
        with_mode(3, b"MANIFEST-000001\n"),
    ]
}

fn db_ops_seeds() -> Vec<Vec<u8>> {
    let structured = structured();
    vec![
        // put, sync put, flush, delete, power loss, put, kill -9, compact, reads.
        vec![
            1, 0, 3, 4, b'a', b'b', b'c', 0x80, 5, 2, b'x', b'y', 9, 5, 3, 14, 1, 2, 3, 8, 1, 5,
            0x9e, 10, 11,
        ],
        vec![
            0, 7, 3, 1, 0, 2, b'q', b'r', 2, 1, 0x87, 2, 4, 0, 1, b'z', 9, 1, 0, 0, 0x2e, 0x40, 0,
            0, 12, 11,
        ],
        // put, put, flush, delete, compact, put, clean close + repair + reopen, reads.
        vec![
            1, 0, 3, 4, b'a', b'b', b'c', b'd', 1, 5, 2, b'x', b'y', 9, 5, 3, 10, 2, 7, 1, b'z',
            0x4c, 11,
        ],
        with_mode(2, &structured),
    ]
}

pub(super) fn sample_entries() -> Vec<(InternalKey, Vec<u8>)> {
    let mut out: Vec<(InternalKey, Vec<u8>)> = (0..40u64)
        .map(|i| {
            let key = format!("key{:03}", i / 2);
            let kind = if i % 7 == 3 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = if kind == ValueKind::Put {
                format!("value-{i}").into_bytes()
            } else {
                Vec::new()
            };
            (
                InternalKey::new(key.as_bytes(), SeqNo(100 - i), kind),
                value,
            )
        })
        .collect();
    out.sort_by(|a, b| compare_internal(a.0.encoded(), b.0.encoded()));
    out
}

pub(super) fn sample_table_bytes(compression: Compression) -> Vec<u8> {
    let fs = mem_fs();
    let path = fuzz_path("t.sst");
    let Ok(file) = fs.create(&path) else {
        return Vec::new();
    };
    let opts = TableOptions {
        block_size: 128,
        restart_interval: 2,
        filter_bits_per_key: 10,
        compression,
    };
    let mut builder = TableBuilder::new(file, path.clone(), opts);
    for (k, v) in sample_entries() {
        if builder.add(k.encoded(), &v).is_err() {
            return Vec::new();
        }
    }
    if builder.finish().is_err() {
        return Vec::new();
    }
    fs.read_all(&path).unwrap_or_default()
}

pub(super) fn sample_edits() -> Vec<VersionEdit> {
    let meta = |id: u64, lo: &[u8], hi: &[u8]| FileMeta {
        id: FileId(id),
        keyspace: crate::keyspace::KeyspaceId::DEFAULT,
        size: 4096,
        smallest: InternalKey::new(lo, SeqNo(3), ValueKind::Put),
        largest: InternalKey::new(hi, SeqNo(9), ValueKind::Delete),
        smallest_seq: SeqNo(3),
        largest_seq: SeqNo(9),
        range_dels: false,
    };
    vec![
        VersionEdit {
            log_number: Some(FileId(2)),
            next_file_number: Some(FileId(8)),
            last_seq: Some(SeqNo(10)),
            new_files: vec![
                (Level(0), meta(4, b"a", b"m")),
                (Level(1), meta(5, b"n", b"z")),
            ],
            deleted_files: Vec::new(),
            ..VersionEdit::default()
        },
        VersionEdit {
            log_number: Some(FileId(6)),
            next_file_number: Some(FileId(9)),
            last_seq: Some(SeqNo(20)),
            new_files: vec![(Level(1), meta(7, b"a", b"m"))],
            deleted_files: vec![(Level(0), FileId(4))],
            ..VersionEdit::default()
        },
        // A keyspace made, a file added to it, another dropped.
        VersionEdit {
            next_keyspace_id: Some(crate::keyspace::KeyspaceId(3)),
            keyspaces: vec![crate::version::KeyspaceDef {
                id: crate::keyspace::KeyspaceId(2),
                name: "log".into(),
                options: crate::options::KeyspaceOptions::from_db(&Default::default()),
            }],
            dropped_keyspaces: vec![crate::keyspace::KeyspaceId(1)],
            new_files: vec![(
                Level(0),
                FileMeta {
                    keyspace: crate::keyspace::KeyspaceId(2),
                    ..meta(10, b"k", b"l")
                },
            )],
            ..VersionEdit::default()
        },
    ]
}

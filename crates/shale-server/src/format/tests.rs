//! Round trips of every record, and the worked examples of docs/format.md decoded.

use std::collections::{BTreeMap, BTreeSet};

use openraft::{CommittedLeaderId, Entry as RaftEntry, Membership};
use shale_search::vector::Metric;
use shale_search::Analyzer;

use super::*;
use crate::command::{CarriedVector, Command, IndexModel, IndexSpec, Op, Response, SessionSeq};
use crate::{GroupId, TypeConfig};

fn lid(term: u64, node: u64, index: u64) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(term, node), index)
}

fn membership() -> Membership<NodeId, BasicNode> {
    let mut nodes = BTreeMap::new();
    nodes.insert(1, BasicNode::new("127.0.0.1:7001"));
    nodes.insert(2, BasicNode::new("127.0.0.1:7002"));
    nodes.insert(3, BasicNode::new("127.0.0.1:7003"));
    Membership::new(vec![BTreeSet::from([1, 2])], nodes)
}

fn entries() -> Vec<Entry> {
    vec![
        RaftEntry {
            log_id: lid(1, 1, 1),
            payload: EntryPayload::Blank,
        },
        RaftEntry {
            log_id: lid(1, 1, 2),
            payload: EntryPayload::Membership(membership()),
        },
        RaftEntry {
            log_id: lid(2, 3, 3),
            payload: normal(Command::Write(vec![
                Op {
                    key: b"a".to_vec(),
                    value: Some(b"1".to_vec()),
                },
                Op {
                    key: b"b".to_vec(),
                    value: None,
                },
            ])),
        },
        RaftEntry {
            log_id: lid(2, 3, 4),
            payload: normal(Command::CompareAndSet {
                key: b"k".to_vec(),
                expected: None,
                new_value: Some(Vec::new()),
            }),
        },
        RaftEntry {
            log_id: lid(2, 1, 6),
            payload: normal(documented_batch()),
        },
        RaftEntry {
            log_id: lid(2, 1, 7),
            payload: normal(Command::DefineIndex(spec())),
        },
        RaftEntry {
            log_id: lid(2, 1, 8),
            payload: normal(Command::DefineIndex(IndexSpec {
                keywords: None,
                ..spec()
            })),
        },
        RaftEntry {
            log_id: lid(2, 1, 9),
            payload: normal(Command::OpenSession),
        },
        RaftEntry {
            log_id: lid(2, 1, 10),
            payload: normal(documented_put_in_session()),
        },
        RaftEntry {
            log_id: lid(2, 1, 11),
            payload: normal(Command::Batch(vec![
                documented_put_in_session(),
                Command::InSession {
                    at: SessionSeq {
                        session: u64::MAX,
                        seq: 2,
                        lowest_awaited: 1,
                    },
                    cmd: Box::new(Command::CompareAndSet {
                        key: b"k".to_vec(),
                        expected: Some(b"v".to_vec()),
                        new_value: None,
                    }),
                },
            ])),
        },
        RaftEntry {
            log_id: lid(2, 1, 12),
            payload: normal(documented_vectors()),
        },
        RaftEntry {
            log_id: lid(2, 1, 13),
            payload: normal(Command::Split {
                at: b"m/42".to_vec(),
                child: 7,
                version: u64::MAX,
            }),
        },
    ]
}

/// The write in a session of docs/format.md's worked example.
fn documented_put_in_session() -> Command {
    Command::InSession {
        at: SessionSeq {
            session: 9,
            seq: 4,
            lowest_awaited: 3,
        },
        cmd: Box::new(Command::Write(vec![Op {
            key: b"a".to_vec(),
            value: Some(b"1".to_vec()),
        }])),
    }
}

/// The command with carried vectors of docs/format.md's worked example.
fn documented_vectors() -> Command {
    Command::Embedded {
        cmd: Box::new(Command::Write(vec![
            Op {
                key: b"b".to_vec(),
                value: None,
            },
            Op {
                key: b"n/1".to_vec(),
                value: Some(b"hi".to_vec()),
            },
        ])),
        vectors: vec![CarriedVector {
            put: 0,
            vector: vec![1.0, -0.5],
        }],
    }
}

/// docs/format.md, 13.2: a command with the leader's vector of the text it puts.
#[test]
fn decodes_the_documented_vectors() {
    let mut command = Vec::new();
    put_command(&mut command, &documented_vectors());
    let doc = "08 01 00 02 0000803f 000000bf 01 02 02 01 62 01 03 6e2f31 02 6869";
    assert_eq!(command, hex(doc));
    let decoded = get_command(&mut Decoder::new(&hex(doc))).expect("decodes");
    assert_eq!(decoded, documented_vectors());
    decoded.validate().expect("a valid command");
}

/// docs/format.md, 13.2 and 13.3: a put in a session, the session's record, and the
/// answer kept for a compare-and-set.
#[test]
fn decodes_the_documented_session_records() {
    let mut command = Vec::new();
    put_command(&mut command, &documented_put_in_session());
    let doc = "06 0900000000000000 0400000000000000 0300000000000000 01 01 01 0161 0131";
    assert_eq!(command, hex(doc));
    assert_eq!(
        get_command(&mut Decoder::new(&hex(doc))).expect("decodes"),
        documented_put_in_session()
    );

    let key = hex("ff73 0000000000000009");
    assert_eq!(
        SessionKey::decode(&key).expect("key"),
        SessionKey::Session(9)
    );
    let record = decode_session(&hex("01 0400000000000000 0c00000000000000")).expect("session");
    assert_eq!(
        record,
        SessionRecord {
            lowest_kept: 4,
            last_used: 12
        }
    );
    let key = hex("ff73 0000000000000009 0000000000000004");
    assert_eq!(
        SessionKey::decode(&key).expect("key"),
        SessionKey::Answer { session: 9, seq: 4 }
    );
    let bytes = hex("01 0c00000000000000 02 00 01 0176");
    let answer = AnswerRecord {
        index: 12,
        response: Response::CompareAndSet {
            swapped: false,
            current: Some(b"v".to_vec()),
        },
    };
    assert_eq!(decode_answer(&bytes).expect("answer"), answer);
    assert_eq!(encode_answer(&answer).expect("encodes"), bytes);
}

#[test]
fn session_records_round_trip_and_refuse_bad_bytes() {
    let answers = [
        Response::Written,
        Response::Refused("no".into()),
        Response::CompareAndSet {
            swapped: true,
            current: None,
        },
    ];
    for response in answers {
        let a = AnswerRecord { index: 7, response };
        let bytes = encode_answer(&a).expect("encodes");
        assert_eq!(decode_answer(&bytes).expect("decodes"), a);
        for cut in 0..bytes.len() {
            assert!(decode_answer(bytes.get(..cut).expect("cut")).is_err());
        }
    }
    assert!(encode_answer(&AnswerRecord {
        index: 1,
        response: Response::Internal
    })
    .is_err());
    let s = SessionRecord {
        lowest_kept: 3,
        last_used: 99,
    };
    let bytes = encode_session(&s);
    assert_eq!(decode_session(&bytes).expect("decodes"), s);
    assert!(decode_session(&[bytes.as_slice(), &[0]].concat()).is_err());
    for key in [
        SessionKey::Session(1),
        SessionKey::Answer { session: 1, seq: 2 },
    ] {
        assert_eq!(SessionKey::decode(&key.encode()).expect("decodes"), key);
    }
    assert!(SessionKey::decode(&hex("ff73 00")).is_err());
    assert!(SessionKey::decode(&hex("ff78 0000000000000009")).is_err());
    // A session that holds anything but a write or a compare-and-set is refused.
    let nested = "06 0900000000000000 0400000000000000 0300000000000000 07";
    assert!(get_command(&mut Decoder::new(&hex(nested))).is_err());
}

fn spec() -> IndexSpec {
    IndexSpec {
        name: "docs".into(),
        prefix: b"d/".to_vec(),
        dim: 3,
        metric: Metric::L2,
        model: IndexModel::Vectors,
        keywords: Some(Analyzer::English),
    }
}

#[test]
fn decodes_the_documented_index_definition() {
    let bytes = hex("02 04646f6373 02642f 03 02 00 02");
    assert_eq!(encode_index_definition(&spec()), bytes);
    assert_eq!(decode_index_definition(&bytes).expect("decodes"), spec());
    assert!(decode_index_definition(&hex("02 04646f6373 02642f 03 07 00 02")).is_err());
    assert!(decode_index_definition(&hex("02 04646f6373 02642f 03 02 09 02")).is_err());
    assert!(decode_index_definition(&hex("02 04646f6373 02642f 03 02 00 00")).is_err());
    assert!(decode_index_definition(&hex("02 04646f6373 02642f 03 02 00")).is_err());
    assert!(decode_index_definition(&hex("03 04646f6373 02642f 03 02 00 02")).is_err());
    // Without keywords: version 1, and the bytes it had before keyword indexes.
    let plain = IndexSpec {
        keywords: None,
        ..spec()
    };
    let bytes = hex("01 04646f6373 02642f 03 02 00");
    assert_eq!(encode_index_definition(&plain), bytes);
    assert_eq!(decode_index_definition(&bytes).expect("decodes"), plain);
    assert!(decode_index_definition(&hex("01 04646f6373 02642f 03 02 00 02")).is_err());
    assert_eq!(index_key("docs"), hex("ff78 646f6373"));
}

/// The batch of docs/format.md's second worked example of a log entry.
fn documented_batch() -> Command {
    Command::Batch(vec![
        Command::Write(vec![Op {
            key: b"a".to_vec(),
            value: Some(b"1".to_vec()),
        }]),
        Command::CompareAndSet {
            key: b"k".to_vec(),
            expected: None,
            new_value: Some(b"v".to_vec()),
        },
    ])
}

fn hex(doc: &str) -> Vec<u8> {
    doc.split_whitespace()
        .flat_map(|chunk| {
            (0..chunk.len())
                .step_by(2)
                .filter_map(move |i| chunk.get(i..i + 2))
                .map(|h| u8::from_str_radix(h, 16).expect("hex"))
        })
        .collect()
}

#[test]
fn records_round_trip() {
    for e in entries() {
        let got = decode_entry(&encode_entry(&e)).expect("decodes");
        assert_eq!(got.log_id, e.log_id);
        assert_eq!(format!("{:?}", got.payload), format!("{:?}", e.payload));
    }
    let mut vote = Vote::new(7, 2);
    assert_eq!(decode_vote(&encode_vote(&vote)).expect("vote"), vote);
    vote.commit();
    assert_eq!(decode_vote(&encode_vote(&vote)).expect("vote"), vote);
    assert_eq!(
        decode_log_id(&encode_log_id(&lid(3, 1, 9))).expect("id"),
        lid(3, 1, 9)
    );
    let sm = StoredMembership::new(Some(lid(1, 1, 2)), membership());
    assert_eq!(
        decode_stored_membership(&encode_stored_membership(&sm)).expect("m"),
        sm
    );
    let h = SnapshotHeader {
        last_log_id: Some(lid(2, 3, 4)),
        membership: sm,
        snapshot_id: "s-1".into(),
    };
    assert_eq!(
        decode_snapshot_header(&encode_snapshot_header(&h)).expect("h"),
        h
    );
    assert_eq!(
        decode_snapshot_end(&encode_snapshot_end(5, 2)).expect("end"),
        (5, 2)
    );
}

#[test]
fn every_truncation_and_flipped_byte_of_an_entry_is_refused() {
    for e in entries() {
        let bytes = encode_entry(&e);
        for cut in 0..bytes.len() {
            assert!(
                decode_entry(bytes.get(..cut).unwrap_or_default()).is_err(),
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_entry(&longer).is_err());
    }
    let mut frame = Vec::new();
    encode_frame(FrameKind::Pairs, b"\x01a\x011", &mut frame).expect("frame");
    assert!(decode_frame(&frame, "t").is_ok());
    for i in 0..frame.len() {
        let mut bad = frame.clone();
        if let Some(b) = bad.get_mut(i) {
            *b ^= 0x40;
        }
        assert!(decode_frame(&bad, "t").is_err(), "flip at {i}");
    }
}

/// The worked example of docs/format.md 13.3: the shard `["b", "m")` at version 3.
#[test]
fn decodes_the_documented_shard() {
    let shard = crate::shard::Shard {
        start: b"b".to_vec(),
        end: Some(b"m".to_vec()),
        version: 3,
    };
    let bytes = hex("01 0300000000000000 01 62 01 01 6d");
    assert_eq!(encode_shard(&shard), bytes);
    assert_eq!(decode_shard(&bytes).expect("decodes"), shard);
    let to_the_end = crate::shard::Shard { end: None, ..shard };
    assert_eq!(
        decode_shard(&hex("01 0300000000000000 01 62 00")).expect("decodes"),
        to_the_end
    );
    // Backwards, empty, cut, trailing bytes, another version.
    for bad in [
        "01 0300000000000000 01 6d 01 01 62",
        "01 0300000000000000 01 62 01 01 62",
        "01 0300000000000000 01 62 01 01",
        "01 0300000000000000 01 62 00 00",
        "02 0300000000000000 01 62 00",
    ] {
        assert!(decode_shard(&hex(bad)).is_err(), "{bad}");
    }
}

/// The worked example of docs/format.md 13.1: the key of group 1's entry at index 5.
#[test]
fn decodes_the_documented_log_entry_key() {
    let key = hex("20 0000000000000001 10 0000000000000005");
    assert_eq!(LogKeys::of(1).entry(5)[..], key[..]);
    assert_eq!(LogKeys::of(1).entry_index(&key).expect("decodes"), 5);
    assert_eq!(LogKeys::of(1).vote()[..], hex("20 0000000000000001 01")[..]);
}

#[test]
fn log_keys_sort_by_group_then_index() {
    let mut keys: Vec<([u8; 18], GroupId)> =
        [(7, 300u64), (3, 2), (7, 1 << 40), (3, 255), (7, 256)]
            .iter()
            .map(|&(g, i)| (LogKeys::of(g).entry(i), g))
            .collect();
    keys.sort();
    let order: Vec<(GroupId, u64)> = keys
        .iter()
        .map(|(k, g)| (*g, LogKeys::of(*g).entry_index(k).expect("key")))
        .collect();
    assert_eq!(
        order,
        vec![(3, 2), (3, 255), (7, 256), (7, 300), (7, 1 << 40)]
    );
    let seven = LogKeys::of(7);
    assert_eq!(seven.group(), 7);
    assert!(
        seven.entry_index(&LogKeys::of(3).entry(1)).is_err(),
        "group 3's"
    );
    assert!(seven.entry_index(&seven.vote()).is_err());
    assert!(seven.entry_index(&seven.entry(1)[..17]).is_err(), "short");
    for key in [seven.vote(), seven.last_purged()] {
        assert!(key[..] < seven.entry(0)[..], "before the entries");
    }
    assert!(seven.entry(u64::MAX)[..] < seven.entries_end()[..]);
    assert!(seven.entries_end()[..] < LogKeys::of(8).vote()[..]);
    assert_eq!(seven.nest(&[0x10, 0, 0, 0, 0, 0, 0, 0, 9]), seven.entry(9));
}

/// The worked example of docs/format.md, "Raft log entry": a blank entry at index 5 of
/// term 2, proposed by node 1.
#[test]
fn decodes_the_documented_entry() {
    let bytes = hex("01 0200000000000000 0100000000000000 0500000000000000 00");
    let e = decode_entry(&bytes).expect("the documented entry decodes");
    assert_eq!(e.log_id, lid(2, 1, 5));
    assert!(matches!(e.payload, EntryPayload::Blank));
}

#[test]
fn decodes_the_documented_batch() {
    let doc = "01 0200000000000000 0100000000000000 0600000000000000 01 \
               03 02  01 01 01 0161 0131  02 016b 00 01 0176";
    let bytes = hex(doc);
    assert_eq!(bytes.len(), 42);
    let e = decode_entry(&bytes).expect("the documented batch decodes");
    assert_eq!(e.log_id, lid(2, 1, 6));
    assert!(matches!(&e.payload, EntryPayload::Normal(cmd) if **cmd == documented_batch()));
    assert_eq!(encode_entry(&e), bytes);
}

#[test]
fn the_log_id_reads_without_the_payload() {
    for e in entries() {
        let bytes = encode_entry(&e);
        assert_eq!(decode_entry_log_id(&bytes).expect("log id"), e.log_id);
    }
    assert!(decode_entry_log_id(&[0x01, 0x02]).is_err());
    assert!(decode_entry_log_id(&[]).is_err());
}

#[test]
fn a_count_past_the_bytes_is_refused() {
    // The documented entry's header, then a write claiming 2^40 ops with one held:
    // refused as truncated, with no allocation sized by the count (2^40 ops would be
    // tens of terabytes).
    let write = hex("01 0200000000000000 0100000000000000 0600000000000000 01 \
                     01 808080808020  01 0161 0131");
    assert!(decode_entry(&write).is_err());
    // A batch claiming 2^40 commands, one held.
    let batch = hex("01 0200000000000000 0100000000000000 0600000000000000 01 \
                     03 808080808020  01 01 01 0161 0131");
    assert!(decode_entry(&batch).is_err());
}

#[test]
fn a_batch_inside_a_batch_is_refused() {
    let inner = encode_entry(&RaftEntry {
        log_id: lid(1, 1, 1),
        payload: normal(documented_batch()),
    });
    // The documented batch with its first command replaced by a batch of one write.
    let mut bytes = inner.get(..27).expect("header").to_vec();
    bytes.extend_from_slice(&[0x02, 0x03, 0x01, 0x01, 0x01, 0x01, 0x01, 0x61, 0x01, 0x31]);
    bytes.extend_from_slice(inner.get(35..).expect("cas"));
    assert!(decode_entry(&bytes).is_err());
    // The same bytes with a plain write in its place decode.
    let mut flat = inner.get(..27).expect("header").to_vec();
    flat.extend_from_slice(&[0x02, 0x01, 0x01, 0x01, 0x01, 0x61, 0x01, 0x31]);
    flat.extend_from_slice(inner.get(35..).expect("cas"));
    assert!(decode_entry(&flat).is_ok());
}

#[test]
fn decodes_the_documented_index_file_frame() {
    let bytes = hex("04 15000000 04646f6373 054d4f44454c 0000000000000000 6162 501a31a6");
    assert_eq!(bytes.len(), 30);
    let (kind, payload) = decode_frame(&bytes, "the documented frame").expect("frame");
    assert_eq!(kind, FrameKind::IndexFile);
    let chunk = decode_index_file_chunk(payload).expect("the documented piece decodes");
    let want = IndexFileChunk {
        index: "docs",
        file: "MODEL",
        offset: 0,
        bytes: b"ab",
    };
    assert_eq!(chunk, want);
    let mut again = Vec::new();
    encode_frame(
        FrameKind::IndexFile,
        &encode_index_file_chunk(&chunk),
        &mut again,
    )
    .expect("encode");
    assert_eq!(again, bytes);
}

fn normal(cmd: Command) -> EntryPayload<TypeConfig> {
    EntryPayload::Normal(Arc::new(cmd))
}

#[test]
fn decodes_the_documented_identity() {
    let id = Identity {
        layout: 2,
        node_id: 2,
        cluster: Some(0x0f0e_0d0c_0b0a_0908_0706_0504_0302_0100),
    };
    let bytes = hex("01 02000000 0200000000000000 01 000102030405060708090a0b0c0d0e0f");
    assert_eq!(encode_identity(&id), bytes);
    assert_eq!(decode_identity(&bytes).expect("decodes"), id);
    let unjoined = Identity {
        cluster: None,
        ..id
    };
    let bytes = hex("01 02000000 0200000000000000 00");
    assert_eq!(encode_identity(&unjoined), bytes);
    assert_eq!(decode_identity(&bytes).expect("decodes"), unjoined);
    // A presence byte it does not know, a cut id, trailing bytes, another version.
    for bad in [
        "01 02000000 0200000000000000 02",
        "01 02000000 0200000000000000 01 0001020304050607",
        "01 02000000 0200000000000000 00 00",
        "02 02000000 0200000000000000 00",
    ] {
        assert!(decode_identity(&hex(bad)).is_err(), "{bad}");
    }
}

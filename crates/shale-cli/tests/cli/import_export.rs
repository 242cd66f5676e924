//! import in each format, export back, and the closing throughput line.

use crate::common;

use common::TestDb;

#[test]
fn lines_import_numbers_keys_in_line_order() {
    let t = TestDb::new();
    let file = t.path("in.txt");
    std::fs::write(&file, "first\nsecond\r\n\nfourth").unwrap();
    let r = t.run(&["import", file.to_str().unwrap(), "--format", "lines"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("imported 4 keys"), "{}", r.stderr);
    assert!(r.stderr.contains("keys/s") && r.stderr.contains("MB/s"));
    assert_eq!(
        t.run(&["scan"]).ok(),
        "0000000001\tfirst\n0000000002\tsecond\n0000000003\t\n0000000004\tfourth\n"
    );
    let r = t.run(&[
        "import",
        file.to_str().unwrap(),
        "--format",
        "lines",
        "--key-prefix",
        "doc:",
    ]);
    assert_eq!(r.code, 0);
    assert_eq!(t.run(&["get", "doc:0000000002"]).ok(), "second\n");
}

/// Pairs with every awkward byte, in key order.
fn awkward_pairs() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..300u32)
        .map(|i| {
            let key = format!("key{i:04}").into_bytes();
            let value = match i % 4 {
                0 => format!("plain value {i}").into_bytes(),
                1 => vec![0, 9, 10, 13, 92, 255, (i % 256) as u8],
                2 => "tab\there \u{e9}".as_bytes().to_vec(),
                _ => Vec::new(),
            };
            (key, value)
        })
        .collect();
    pairs.push((
        b"\xff\x00binary".to_vec(),
        b"\\x41 is not an escape here".to_vec(),
    ));
    pairs.sort();
    pairs
}

fn escaped_tsv(pairs: &[(Vec<u8>, Vec<u8>)]) -> String {
    // The same escaping rules as the CLI, written out independently.
    fn esc(b: &[u8]) -> String {
        let mut s = String::new();
        for chunk in b.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '\\' => s.push_str("\\\\"),
                    '\t' => s.push_str("\\t"),
                    '\n' => s.push_str("\\n"),
                    '\r' => s.push_str("\\r"),
                    c if c.is_control() => s.push_str(&format!("\\x{:02x}", c as u32)),
                    c => s.push(c),
                }
            }
            for b in chunk.invalid() {
                s.push_str(&format!("\\x{b:02x}"));
            }
        }
        s
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{}\t{}\n", esc(k), esc(v)))
        .collect()
}

#[test]
fn tsv_round_trip() {
    let t = TestDb::new();
    let pairs = awkward_pairs();
    let tsv = escaped_tsv(&pairs);
    let file = t.path("in.tsv");
    std::fs::write(&file, &tsv).unwrap();
    let r = t.run(&[
        "import",
        file.to_str().unwrap(),
        "--format",
        "tsv",
        "--batch-bytes",
        "512",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains(&format!("imported {} keys", pairs.len())));
    assert_eq!(t.run(&["export"]).ok(), tsv);
    let out = t.path("out.tsv");
    t.run(&["export", "--format", "tsv", "-o", out.to_str().unwrap()])
        .ok();
    assert_eq!(std::fs::read_to_string(out).unwrap(), tsv);
}

#[test]
fn jsonl_round_trip() {
    let t = TestDb::new();
    let pairs = awkward_pairs();
    let mut jsonl = String::new();
    for (k, v) in &pairs {
        let mut obj = serde_json::Map::new();
        for (field, bytes) in [("key", k), ("value", v)] {
            match std::str::from_utf8(bytes) {
                Ok(s) => obj.insert(field.into(), s.into()),
                Err(_) => obj.insert(
                    format!("{field}_hex"),
                    bytes
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<String>()
                        .into(),
                ),
            };
        }
        jsonl.push_str(&serde_json::Value::Object(obj).to_string());
        jsonl.push('\n');
    }
    let r = t.run_stdin(&["import", "-", "--format", "jsonl"], jsonl.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    let exported = t.run(&["export", "--format", "jsonl"]).ok();
    assert_eq!(exported, jsonl);
    // And the export imports into a second database unchanged.
    let t2 = TestDb::new();
    t2.run_stdin(&["import", "-", "--format", "jsonl"], exported.as_bytes())
        .ok();
    assert_eq!(t2.run(&["export"]).ok(), t.run(&["export"]).ok());
}

#[test]
fn a_bad_line_names_file_and_line() {
    let t = TestDb::new();
    let file = t.path("bad.tsv");
    std::fs::write(&file, "a\t1\nno tab here\n").unwrap();
    let r = t.run(&["import", file.to_str().unwrap(), "--format", "tsv"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        format!(
            "shale: {}:2: no tab between key and value\n",
            file.display()
        )
    );
    let r = t.run_stdin(&["import", "-", "--format", "jsonl"], b"{\"key\": 1}\n");
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("-:1: \"key\" is not a string"),
        "{}",
        r.stderr
    );
}

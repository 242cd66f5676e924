//! Named semantic indexes through the `shale` binary: vectors in (`.npy` in both orders and
//! dtypes, JSON lines), search by vector (exact and graph, within a key range), the errors
//! of a bad file or a dimension that does not match, text search with the hash embedder on
//! a named index, and `index-stats`.

use crate::common;

use common::{json_vector, keys, test_vectors, with_index, write_npy, TestDb, NOTES_HASH};

const DIM: usize = 16;
const ROWS: usize = 200;

/// The options of the vectors-only index most tests use.
const VEC: [&str; 8] = [
    "--index",
    "vec",
    "--index-prefix",
    "v:",
    "--embedder",
    "none",
    "--dim",
    "16",
];

/// A database with `ROWS` vectors imported from a C-order float32 file under `v:`, with
/// payloads `payload N`.
fn imported() -> (TestDb, Vec<Vec<f32>>) {
    let t = TestDb::new();
    let rows = test_vectors(ROWS, DIM);
    let npy = t.path("v.npy");
    write_npy(&npy, "<f4", false, None, &rows);
    let payloads = t.path("payloads.txt");
    let text: String = (0..ROWS).map(|i| format!("payload {i}\n")).collect();
    std::fs::write(&payloads, text).unwrap();
    let r = t.run(&with_index(
        &VEC,
        &[
            "import",
            npy.to_str().unwrap(),
            "--format",
            "npy",
            "--payloads",
            payloads.to_str().unwrap(),
            "--batch-bytes",
            "2048",
        ],
    ));
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("imported {ROWS} keys")),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!("index \"vec\": {ROWS} values")),
        "{}",
        r.stderr
    );
    (t, rows)
}

#[test]
fn npy_import_then_search_by_vector_finds_each_row_first() {
    let (t, rows) = imported();
    for i in [0, 17, 123, ROWS - 1] {
        let q = json_vector(&rows[i]);
        for mode in [&[][..], &["--exact"][..]] {
            let mut args = vec!["search", "--vector", q.as_str(), "-k", "3"];
            args.extend_from_slice(mode);
            let out = t.run(&with_index(&VEC, &args)).ok();
            let first: Vec<&str> = out.lines().next().unwrap().split('\t').collect();
            assert_eq!(first[2], format!("v:{i:010}"), "{mode:?}: {out}");
            assert_eq!(first[3], format!("payload {i}"));
            assert!(first[1].parse::<f32>().unwrap() > 0.999, "{out}");
            assert_eq!(out.lines().count(), 3);
        }
    }
    // The index remembers it holds vectors of 16 dimensions: no --embedder, no --dim.
    let q = json_vector(&rows[42]);
    let json = t
        .run(&[
            "--index",
            "vec",
            "--index-prefix",
            "v:",
            "search",
            "--vector",
            &q,
            "-k",
            "1",
            "--json",
        ])
        .ok();
    let hits: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(hits[0]["key"], "v:0000000042");
    assert_eq!(hits[0]["document"], "payload 42");
    assert_eq!(hits[0]["rank"], 1);
    // A query from a .npy file of one vector, shape (16,).
    let qfile = t.path("q.npy");
    write_npy(&qfile, "<f4", false, Some("(16,)"), &rows[7..8]);
    let out = t
        .run(&with_index(
            &VEC,
            &[
                "search",
                "--vector-file",
                qfile.to_str().unwrap(),
                "-k",
                "1",
            ],
        ))
        .ok();
    assert_eq!(keys(&out), ["v:0000000007"]);
    // The values are vector values: binary, exported as bytes.
    let got = t.run(&["-e", "get", "v:0000000007"]).ok();
    assert!(got.starts_with("\\xff\\x01"), "{got}");
}

#[test]
fn fortran_float64_and_big_endian_files_read_like_c_float32() {
    let rows = test_vectors(40, DIM);
    for (descr, fortran) in [("<f8", true), (">f4", false), ("<f4", true)] {
        let t = TestDb::new();
        let npy = t.path("v.npy");
        write_npy(&npy, descr, fortran, None, &rows);
        t.run(&with_index(
            &VEC,
            &["import", npy.to_str().unwrap(), "--format", "npy"],
        ))
        .ok();
        for i in [0, 5, 39] {
            let q = json_vector(&rows[i]);
            let out = t
                .run(&with_index(
                    &VEC,
                    &["search", "--vector", &q, "-k", "1", "--exact"],
                ))
                .ok();
            let first: Vec<&str> = out.lines().next().unwrap().split('\t').collect();
            assert_eq!(first[2], format!("v:{i:010}"), "{descr} {fortran}");
            assert!(first[1].parse::<f32>().unwrap() > 0.999, "{descr}: {out}");
        }
    }
}

#[test]
fn search_prefix_from_and_to_restrict_the_keys() {
    let t = TestDb::new();
    let rows = test_vectors(60, DIM);
    let npy = t.path("v.npy");
    write_npy(&npy, "<f4", false, None, &rows);
    // Rows 0..30 under v:a/, 30..60 under v:b/.
    let listed: String = (0..60)
        .map(|i| format!("v:{}/{i:02}\n", if i < 30 { 'a' } else { 'b' }))
        .collect();
    let keys_file = t.path("keys.txt");
    std::fs::write(&keys_file, listed).unwrap();
    t.run(&with_index(
        &VEC,
        &[
            "import",
            npy.to_str().unwrap(),
            "--format",
            "npy",
            "--keys",
            keys_file.to_str().unwrap(),
        ],
    ))
    .ok();
    let q = json_vector(&rows[3]);
    let search = |extra: &[&str]| {
        let mut args = vec!["search", "--vector", q.as_str(), "-k", "100"];
        args.extend_from_slice(extra);
        keys(&t.run(&with_index(&VEC, &args)).ok())
    };
    let all = search(&[]);
    assert_eq!(all.len(), 60);
    assert_eq!(all[0], "v:a/03");
    let b = search(&["--prefix", "v:b/"]);
    assert_eq!(b.len(), 30);
    assert!(b.iter().all(|k| k.starts_with("v:b/")), "{b:?}");
    let mut want: Vec<String> = (10..20).map(|i| format!("v:a/{i:02}")).collect();
    let mut range = search(&["--from", "v:a/10", "--to", "v:a/20"]);
    range.sort();
    assert_eq!(range, want);
    let exact = search(&["--from", "v:a/10", "--to", "v:a/20", "--exact"]);
    assert_eq!(exact.len(), 10);
    // All three together: the tighter of each pair of bounds.
    want.truncate(5);
    let mut both = search(&["--prefix", "v:a/1", "--to", "v:a/15", "--ef", "64"]);
    both.sort();
    assert_eq!(both, want);
    assert!(search(&["--from", "v:b/", "--to", "v:a/"]).is_empty());
}

#[test]
fn a_dimension_mismatch_is_an_error() {
    let t = TestDb::new();
    let npy = t.path("v.npy");
    write_npy(&npy, "<f4", false, None, &test_vectors(10, DIM));
    let r = t.run(&[
        "--index",
        "small",
        "--embedder",
        "none",
        "--dim",
        "8",
        "import",
        npy.to_str().unwrap(),
        "--format",
        "npy",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        format!(
            "shale: {}: vectors of 16 dimensions, but index \"small\" holds vectors of 8\n",
            npy.display()
        )
    );
    assert_eq!(t.run(&["scan"]).ok(), "", "nothing was written");

    let (t, _) = imported();
    let r = t.run(&with_index(&VEC, &["search", "--vector", "[1, 2, 3]"]));
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        "shale: --vector: vectors of 3 dimensions, but index \"vec\" holds vectors of 16\n"
    );
    // Opening the index as one of another dimension would leave it empty: refused.
    let r = t.run(&[
        "--index",
        "vec",
        "--embedder",
        "none",
        "--dim",
        "4",
        "search",
        "--vector",
        "[1, 2, 3, 4]",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("holds vectors of 16 dimensions") && r.stderr.contains("--dim 16"),
        "{}",
        r.stderr
    );
    // Text needs a model; this index has none.
    let r = t.run(&with_index(&VEC, &["search", "some text"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("has no embedder"), "{}", r.stderr);
    // A new vectors-only index needs its dimension.
    let r = t.run(&[
        "--index",
        "new",
        "--embedder",
        "none",
        "search",
        "--vector",
        "[1]",
    ]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            2,
            "shale: --embedder none needs --dim N, the dimension of the index's vectors\n"
        )
    );
}

#[test]
fn bad_npy_files_are_one_line_errors() {
    let t = TestDb::new();
    let rows = test_vectors(4, DIM);
    let good = t.path("good.npy");
    write_npy(&good, "<f4", false, None, &rows);
    let bytes = std::fs::read(&good).unwrap();
    let truncated = t.path("truncated.npy");
    std::fs::write(&truncated, &bytes[..bytes.len() - 3]).unwrap();
    let ints = t.path("ints.npy");
    write_npy(&ints, "<i4", false, None, &rows);
    let cube = t.path("cube.npy");
    write_npy(&cube, "<f4", false, Some("(2, 2, 16)"), &rows);
    let text = t.path("text.npy");
    std::fs::write(&text, "not numpy at all").unwrap();
    let mut nan_rows = rows.clone();
    nan_rows[2][5] = f32::NAN;
    let nan = t.path("nan.npy");
    write_npy(&nan, "<f4", false, None, &nan_rows);
    let short_keys = t.path("keys.txt");
    std::fs::write(&short_keys, "v:1\nv:2\n").unwrap();
    let cases: [(&std::path::Path, &[&str], &str); 7] = [
        (
            &truncated,
            &[],
            "the data is 253 bytes, but the header's shape and dtype need 256",
        ),
        (&ints, &[], "dtype '<i4' is not supported"),
        (&cube, &[], "shape (2, 2, 16); need a 2-D array"),
        (&text, &[], "not a .npy file"),
        (
            &nan,
            &[],
            "row 2: the vector has a NaN or infinite component",
        ),
        (
            &good,
            &["--keys", short_keys.to_str().unwrap()],
            "has 2 lines, but",
        ),
        (
            &good,
            &["--key-prefix", "w:"],
            "row 0: key w:0000000000 is outside index \"vec\"",
        ),
    ];
    for (file, extra, want) in cases {
        let mut args = vec!["import", file.to_str().unwrap(), "--format", "npy"];
        args.extend_from_slice(extra);
        let r = t.run(&with_index(&VEC, &args));
        assert_eq!(r.code, 2, "{}: {}", file.display(), r.stderr);
        assert!(r.stderr.starts_with("shale: "), "{}", r.stderr);
        assert!(r.stderr.contains(want), "want {want:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    }
    // A query file must hold one vector.
    let r = t.run(&with_index(
        &VEC,
        &["search", "--vector-file", good.to_str().unwrap()],
    ));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("shape (4, 16); need one vector"),
        "{}",
        r.stderr
    );
    let r = t.run(&with_index(&VEC, &["search", "--vector", "[1, \"a\"]"]));
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("element 1 of the vector is not a number"),
        "{}",
        r.stderr
    );
}

#[test]
fn vectors_jsonl_import_with_payloads_and_a_bad_line() {
    let t = TestDb::new();
    let idx = [
        "--index",
        "j",
        "--index-prefix",
        "j:",
        "--embedder",
        "none",
        "--dim",
        "3",
        "--metric",
        "l2",
    ];
    let lines = concat!(
        "{\"key\": \"j:a\", \"vector\": [1, 0, 0], \"payload\": \"first\"}\n",
        "\n",
        "{\"key\": \"j:b\", \"vector\": [0, 1, 0], \"payload_hex\": \"ff00\"}\n",
        "{\"key_hex\": \"6a3a63\", \"vector\": [0, 0, 1]}\n",
    );
    let r = t.run_stdin(
        &with_index(&idx, &["import", "-", "--format", "vectors-jsonl"]),
        lines.as_bytes(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("index \"j\": 3 values"), "{}", r.stderr);
    let out = t
        .run(&with_index(
            &idx,
            &["search", "--vector", "[0.1, 0.9, 0]", "--json"],
        ))
        .ok();
    let hits: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(hits[0]["key"], "j:b");
    assert_eq!(hits[0]["document_hex"], "ff00");
    // l2: the score is minus the squared distance, 0.01 + 0.01.
    assert!(
        (hits[0]["score"].as_f64().unwrap() + 0.02).abs() < 1e-4,
        "{out}"
    );
    assert_eq!(hits[2]["key"], "j:c");
    assert_eq!(hits[2]["document"], "");
    // Named alone, the index opens as it was defined: prefix `j:`, vectors only, l2.
    let again = t
        .run(&[
            "--index",
            "j",
            "search",
            "--vector",
            "[0.1, 0.9, 0]",
            "--json",
        ])
        .ok();
    assert_eq!(again, out, "the recorded definition gives the same answer");

    let bad = "{\"key\": \"j:d\", \"vector\": [1, 2]}\n";
    let r = t.run_stdin(
        &with_index(&idx, &["import", "-", "--format", "vectors-jsonl"]),
        bad.as_bytes(),
    );
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            2,
            "shale: -:1: the vector has 2 dimensions, the index has 3\n"
        )
    );
    let outside = "{\"key\": \"x\", \"vector\": [1, 2, 3]}\n";
    let r = t.run_stdin(
        &with_index(&idx, &["import", "-", "--format", "vectors-jsonl"]),
        outside.as_bytes(),
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("-:1: key x is outside index \"j\""),
        "{}",
        r.stderr
    );
}

#[test]
fn text_search_with_the_hash_embedder_on_a_named_index() {
    let t = TestDb::new();
    let idx = NOTES_HASH;
    for (k, v) in [
        ("n:a", "the cat sat on the mat"),
        ("n:b", "stock markets fell sharply"),
        ("n:c", "a dog chased the cat"),
    ] {
        t.run(&with_index(&idx, &["put", k, v])).ok();
    }
    // Outside the prefix a value is any bytes, with the index open.
    t.run(&with_index(
        &idx,
        &["-e", "put", "raw\\x00", "\\xff\\x00\\x01"],
    ))
    .ok();
    assert_eq!(t.run(&["-e", "get", "raw\\x00"]).ok(), "\\xff\\x00\\x01\n");
    // Inside it, bytes that are neither text nor a vector are refused.
    let r = t.run(&with_index(&idx, &["-e", "put", "n:bin", "\\xff\\x00"]));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("in index \"notes\""), "{}", r.stderr);
    // Opened without a model, the index could hold none of its texts: refused.
    let r = t.run(&[
        "--index",
        "notes",
        "--index-prefix",
        "n:",
        "--embedder",
        "none",
        "search",
        "--vector",
        "[1]",
    ]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("holds text embedded by a model"),
        "{}",
        r.stderr
    );

    let out = t
        .run(&with_index(&idx, &["search", "markets", "-k", "1"]))
        .ok();
    assert_eq!(
        out.lines().next().unwrap().split('\t').nth(3),
        Some("stock markets fell sharply")
    );
    for exact in [false, true] {
        let mut args = vec!["search", "cat", "-k", "2"];
        if exact {
            args.push("--exact");
        }
        let mut found = keys(&t.run(&with_index(&idx, &args)).ok());
        found.sort();
        assert_eq!(found, ["n:a", "n:c"]);
    }
    let hits = keys(
        &t.run(&with_index(&idx, &["search", "cat", "--from", "n:b"]))
            .ok(),
    );
    assert_eq!(hits, ["n:c", "n:b"]);
}

#[test]
fn index_stats_shows_the_index_and_its_recovery() {
    let (t, _) = imported();
    let json = t.run(&with_index(&VEC, &["index-stats", "--json"])).ok();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["name"], "vec");
    assert_eq!(v["prefix"], "v:");
    assert_eq!(v["dim"], 16);
    assert_eq!(v["metric"], "cosine");
    assert_eq!(v["model_id"], serde_json::Value::Null);
    assert_eq!(v["live"], ROWS);
    // The import closed the index cleanly: this open took the graph over.
    assert_eq!(v["recovery"]["graph_nodes_reused"], ROWS);
    assert_eq!(v["recovery"]["store_damage"], serde_json::Value::Null);
    let text = t.run(&with_index(&VEC, &["index-stats"])).ok();
    assert!(text.contains("index: vec\n"), "{text}");
    assert!(text.contains(&format!("live: {ROWS}\n")), "{text}");
    assert!(
        text.contains("model: none (vectors given by the user)"),
        "{text}"
    );
}

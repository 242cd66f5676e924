//! Keyword and hybrid search through the `shale` binary: `define-text-index`, writes of
//! later commands kept in the index, `search --keyword` (any, all, phrase, highlights, key
//! ranges) and `search --hybrid` with the hash embedder.

use crate::common;

use common::{keys, with_index, TestDb, NOTES_HASH};

const DOCS: [(&str, &str); 4] = [
    ("n:a", "The Porter stemmer strips suffixes"),
    ("n:b", "a stemmer by porter, for English"),
    ("n:c", "ENOSPC: no space left on device"),
    ("n:d", "porter ale is dark"),
];

#[test]
fn keyword_search_follows_every_write_of_later_commands() {
    let t = TestDb::new();
    t.run(&["put", "n:a", "written before the index"]).ok();
    t.run(&["--index-prefix", "n:", "define-text-index"]).ok();
    for (k, v) in DOCS {
        t.run(&["put", k, v]).ok();
    }
    let mut found = keys(&t.run(&["search", "--keyword", "stemming porters"]).ok());
    found.sort();
    assert_eq!(found, ["n:a", "n:b", "n:d"]);
    assert_eq!(
        keys(&t.run(&["search", "--keyword", "enospc"]).ok()),
        ["n:c"]
    );
    assert_eq!(
        keys(
            &t.run(&["search", "--keyword", "--match", "phrase", "porter stemmer"])
                .ok()
        ),
        ["n:a"]
    );
    let mut all = keys(
        &t.run(&["search", "--keyword", "--match", "all", "porter stemmer"])
            .ok(),
    );
    all.sort();
    assert_eq!(all, ["n:a", "n:b"]);
    assert_eq!(
        keys(
            &t.run(&["search", "--keyword", "porter", "--from", "n:c"])
                .ok()
        ),
        ["n:d"]
    );
    let out = t
        .run(&["search", "--keyword", "--highlight", "suffix", "-k", "1"])
        .ok();
    assert_eq!(
        out.lines().next().and_then(|l| l.split('\t').nth(3)),
        Some("The Porter stemmer strips «suffixes»")
    );
    // A delete and a range delete of later commands reach the index.
    t.run(&["del", "n:c"]).ok();
    assert!(t.run(&["search", "--keyword", "enospc"]).ok().is_empty());
    t.run(&["del-range", "n:a", "n:c"]).ok();
    assert_eq!(
        keys(&t.run(&["search", "--keyword", "porter"]).ok()),
        ["n:d"]
    );
    // A JSON line per hit, and an unknown analyzer refused.
    let json = t.run(&["search", "--keyword", "--json", "porter"]).ok();
    assert!(json.contains("\"key\":\"n:d\""), "{json}");
    let bad = t.run(&["--index", "x", "define-text-index", "--analyzer", "klingon"]);
    assert_eq!(bad.code, 2);
    let missing = t.run(&[
        "--index",
        "nope",
        "--embedder",
        "hash",
        "search",
        "--keyword",
        "x",
    ]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("no text index"),
        "{}",
        missing.stderr
    );
}

#[test]
fn hybrid_search_fuses_keywords_and_meaning() {
    let t = TestDb::new();
    let with = |args: &[&'static str]| with_index(&NOTES_HASH, args);
    t.run(&with(&["define-text-index"])).ok();
    for (k, v) in DOCS {
        t.run(&with(&["put", k, v])).ok();
    }
    for fusion in ["rrf", "minmax"] {
        let out = t
            .run(&with(&[
                "search", "--hybrid", "--fusion", fusion, "porter", "-k", "3",
            ]))
            .ok();
        let found = keys(&out);
        assert_eq!(found.len(), 3, "{out}");
        assert!(found.iter().all(|k| k != "n:c"), "{fusion}: {out}");
    }
    t.run(&with(&["del", "n:d"])).ok();
    let out = t.run(&with(&["search", "--hybrid", "porter ale"])).ok();
    assert!(
        !keys(&out).contains(&"n:d".to_owned()),
        "a deleted document: {out}"
    );
}

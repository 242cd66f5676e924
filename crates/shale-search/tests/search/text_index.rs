//! A text index's behaviour: what it finds, what it refuses, how it opens over values it
//! did not see written, and that a search never mixes two states of a document.

use crate::support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use shale::{Db, Error, Options};
use shale_search::{Analyzer, KeywordOptions, Match, TextIndex, TextIndexOptions};
use support::{brute_force, hits};

fn db_at(dir: &std::path::Path) -> Arc<Db> {
    Arc::new(Db::open(dir, Options::default()).expect("open"))
}

/// Every value under `prefix`, as the oracle sees the database.
fn documents(db: &Db, prefix: &str) -> BTreeMap<Vec<u8>, String> {
    db.prefix(prefix)
        .expect("scan")
        .map(|e| {
            let (k, v) = e.expect("entry");
            (k, String::from_utf8(v).expect("utf8"))
        })
        .collect()
}

#[test]
fn an_english_query_finds_stemmed_forms_and_a_chinese_query_chinese_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_at(dir.path());
    let en = TextIndex::open(&db, "en", TextIndexOptions::new().prefix("en/")).expect("en");
    let zh = TextIndex::open(
        &db,
        "zh",
        TextIndexOptions::new()
            .prefix("zh/")
            .analyzer(Analyzer::Cjk),
    )
    .expect("zh");
    db.put("en/1", "Martin Porter stemmed words in 1980")
        .expect("put");
    db.put("en/2", "The engine stems every word it indexes")
        .expect("put");
    db.put("en/3", "Nothing to see here").expect("put");
    db.put("zh/1", "我爱北京天安门").expect("put");
    db.put("zh/2", "全文検索エンジンを作る").expect("put");
    db.put("zh/3", "上海是一个大城市").expect("put");

    let keys = |hits: Vec<shale_search::KeywordHit>| -> Vec<Vec<u8>> {
        hits.into_iter().map(|h| h.key).collect()
    };
    let mut found = keys(
        en.search("stemming", &KeywordOptions::k(10))
            .expect("search"),
    );
    found.sort();
    assert_eq!(
        found,
        [b"en/1".to_vec(), b"en/2".to_vec()],
        "stemmed and stems match stemming"
    );
    assert_eq!(
        keys(zh.search("北京", &KeywordOptions::k(10)).expect("search")),
        [b"zh/1".to_vec()]
    );
    assert_eq!(
        keys(zh.search("検索", &KeywordOptions::k(10)).expect("search")),
        [b"zh/2".to_vec()]
    );
    assert!(zh
        .search("东京", &KeywordOptions::k(10))
        .expect("search")
        .is_empty());
    // The simple analyzer finds Chinese only character by character: the reason for Cjk.
    assert_eq!(Analyzer::Simple.terms("北京").len(), 2);
}

#[test]
fn phrases_conjunctions_ranges_and_highlights() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_at(dir.path());
    let ix = TextIndex::open(&db, "docs", TextIndexOptions::new()).expect("index");
    db.put("a", "the porter stemmer strips suffixes")
        .expect("put");
    db.put("b", "a stemmer by porter").expect("put");
    db.put("c", "porter ale").expect("put");
    let keys = |q: &str, o: KeywordOptions| -> Vec<String> {
        ix.search(q, &o)
            .expect("search")
            .into_iter()
            .map(|h| String::from_utf8(h.key).expect("utf8"))
            .collect()
    };
    assert_eq!(
        keys("Porter stemmer", KeywordOptions::k(10).mode(Match::Phrase)),
        ["a"]
    );
    let mut all = keys("porter stemmer", KeywordOptions::k(10).mode(Match::All));
    all.sort();
    assert_eq!(all, ["a", "b"]);
    assert_eq!(keys("porter", KeywordOptions::k(10).range("b", "c")), ["b"]);
    assert_eq!(keys("porter", KeywordOptions::k(10).prefix("c")), ["c"]);

    let hit = ix
        .search("stripping suffix", &KeywordOptions::k(1).highlight())
        .expect("search")
        .remove(0);
    let text = hit.text.as_deref().expect("text");
    let marked: Vec<&str> = hit.highlights.iter().map(|r| &text[r.clone()]).collect();
    assert_eq!(marked, ["strips", "suffixes"]);
    assert_eq!(
        shale_search::text::snippet(text, &hit.highlights, 80, "<b>", "</b>"),
        "the porter stemmer <b>strips</b> <b>suffixes</b>"
    );
}

#[test]
fn a_value_that_is_not_text_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_at(dir.path());
    let _ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("t/")).expect("index");
    let mut batch = shale::WriteBatch::new();
    batch.put("t/ok", "fine text");
    batch.put("t/bad", [0xff, 0xfe, 0x00]);
    let err = db
        .write(batch, shale::WriteOptions::default())
        .expect_err("refused");
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m.contains("t/bad")),
        "{err}"
    );
    assert_eq!(
        db.get("t/ok").expect("get"),
        None,
        "the batch is refused whole"
    );
    db.put("u/bad", [0xff, 0xfe])
        .expect("outside the prefix: plain data");
    let bad = KeywordOptions {
        k: shale_search::text::MAX_K + 1,
        ..KeywordOptions::default()
    };
    assert!(matches!(
        _ix.search("x", &bad),
        Err(Error::InvalidOptions(_))
    ));
    assert!(matches!(
        TextIndex::open(&db, "no spaces", TextIndexOptions::new()),
        Err(Error::InvalidOptions(_))
    ));
}

#[test]
fn values_written_while_the_index_was_closed_are_indexed_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = db_at(dir.path());
        for i in 0..300 {
            db.put(
                format!("d/{i:03}"),
                format!("word{} common text {}", i % 17, i % 5),
            )
            .expect("put");
        }
        let ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("d/")).expect("index");
        assert_eq!(
            ix.recovery().documents_analyzed,
            300,
            "a new index analyzes everything"
        );
        db.close().expect("close");
    }
    {
        // Written with no index open: 20 overwritten, 10 deleted, 5 new.
        let db = db_at(dir.path());
        for i in 0..20 {
            db.put(format!("d/{i:03}"), "replaced text entirely")
                .expect("put");
        }
        for i in 100..110 {
            db.delete(format!("d/{i:03}")).expect("delete");
        }
        for i in 300..305 {
            db.put(format!("d/{i:03}"), "fresh document").expect("put");
        }
        db.close().expect("close");
    }
    let db = db_at(dir.path());
    let ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("d/")).expect("index");
    let r = ix.recovery();
    assert_eq!(
        (r.records_kept, r.documents_analyzed, r.records_deleted),
        (270, 25, 10)
    );
    let docs = documents(&db, "d/");
    for q in ["replaced", "common word3", "fresh text", "word16"] {
        let o = KeywordOptions::k(20);
        assert_eq!(
            hits(&ix, q, &o),
            brute_force(&docs, q, Match::Any, 20),
            "{q}"
        );
    }
    // A third open finds every record in place.
    db.close().expect("close");
    let db = db_at(dir.path());
    let ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("d/")).expect("index");
    assert_eq!(ix.recovery().documents_analyzed, 0);
    assert_eq!(ix.recovery().records_kept, 295);
}

#[test]
fn another_analyzer_rebuilds_the_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_at(dir.path());
    db.put("1", "stemming stems").expect("put");
    drop(TextIndex::open(&db, "docs", TextIndexOptions::new()).expect("english"));
    db.close().expect("close");
    let db = db_at(dir.path());
    let ix = TextIndex::open(
        &db,
        "docs",
        TextIndexOptions::new().analyzer(Analyzer::Simple),
    )
    .expect("simple");
    assert_eq!(ix.recovery().documents_analyzed, 1);
    assert!(ix
        .search("stem", &KeywordOptions::k(5))
        .expect("search")
        .is_empty());
    assert_eq!(
        ix.search("stems", &KeywordOptions::k(5))
            .expect("search")
            .len(),
        1
    );
    let def = TextIndex::definition(&db, "docs")
        .expect("definition")
        .expect("some");
    assert_eq!(def.analyzer, Analyzer::Simple);
    assert_eq!(TextIndex::names(&db), ["docs"]);
}

#[test]
fn opening_while_writers_write_misses_nothing() {
    for round in 0..4 {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = db_at(dir.path());
        for i in 0..2000 {
            db.put(format!("k/{i:04}"), format!("seed text {}", i % 13))
                .expect("put");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) && i < 200_000 {
                        let k = format!("k/{:04}", (i * 7919 + t * 31) % 2400);
                        match i % 5 {
                            0 => db.delete(&k).expect("delete"),
                            1 => db.delete_range(&k, format!("{k}5")).expect("range"),
                            _ => db
                                .put(&k, format!("writer {t} pass {i} word{}", i % 11))
                                .expect("put"),
                        }
                        i += 1;
                    }
                })
            })
            .collect();
        let ix = TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("k/")).expect("open");
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            w.join().expect("writer");
        }
        let docs = documents(&db, "k/");
        assert_eq!(ix.stats().documents, docs.len() as u64, "round {round}");
        for q in ["writer word3", "seed text", "pass", "word10 seed"] {
            let o = KeywordOptions::k(25);
            assert_eq!(
                hits(&ix, q, &o),
                brute_force(&docs, q, Match::Any, 25),
                "round {round}: {q}"
            );
        }
        // And the records on disk agree: a reopen analyzes nothing.
        drop(ix);
        db.close().expect("close");
        let db = db_at(dir.path());
        let ix =
            TextIndex::open(&db, "docs", TextIndexOptions::new().prefix("k/")).expect("reopen");
        let r = ix.recovery();
        assert_eq!(
            (r.documents_analyzed, r.records_deleted),
            (0, 0),
            "round {round}: {r:?}"
        );
    }
}

#[test]
fn a_hit_is_scored_and_shown_from_one_state_of_its_document() {
    // One writer flips documents between two texts; every hit's text, read at the
    // search's snapshot, must hold the query's term (it was scored for that text).
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_at(dir.path());
    let ix = Arc::new(TextIndex::open(&db, "docs", TextIndexOptions::new()).expect("index"));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let text = if i.is_multiple_of(2) {
                    "alpha alpha"
                } else {
                    "omega"
                };
                db.put(format!("{}", i % 50), text).expect("put");
                i += 1;
            }
            i
        })
    };
    let mut checked = 0;
    let until = std::time::Instant::now() + std::time::Duration::from_millis(500);
    while std::time::Instant::now() < until {
        for hit in ix
            .search("alpha", &KeywordOptions::k(50).highlight())
            .expect("search")
        {
            assert_eq!(hit.text.as_deref(), Some("alpha alpha"));
            checked += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let writes = writer.join().expect("writer");
    assert!(
        checked > 100 && writes > 100,
        "{checked} hits checked over {writes} writes"
    );
}

/// Waits until the reader has made one more check, for at most ten seconds.
fn wait_for_a_check(checks: &AtomicU64) {
    let from = checks.load(Ordering::SeqCst);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while checks.load(Ordering::SeqCst) == from {
        assert!(std::time::Instant::now() < until, "the reader never ran");
        std::thread::yield_now();
    }
}

#[test]
fn every_acknowledged_put_is_found_while_records_wait_for_the_applier() {
    // Records are applied by the index's thread in batches, after the put returns. Two
    // writers each search for a put of their own as it returns, and a reader checks that
    // the index counts every put acknowledged before its call: a search must apply what
    // the thread has not.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_at(dir.path());
    let ix = Arc::new(TextIndex::open(&db, "docs", TextIndexOptions::new()).expect("index"));
    let acked = Arc::new(AtomicU64::new(0));
    // The reader's count of checks: a writer waits for it to move every 50 puts, so the
    // reader checks while writes are in flight however the threads are scheduled.
    let checks = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (db, ix, acked) = (Arc::clone(&db), Arc::clone(&ix), Arc::clone(&acked));
            let checks = Arc::clone(&checks);
            std::thread::spawn(move || {
                for i in 0..400 {
                    if i % 50 == 0 {
                        wait_for_a_check(&checks);
                    }
                    let key = format!("{w}/{i}");
                    db.put(&key, format!("common word{w}x{i}")).expect("put");
                    acked.fetch_add(1, Ordering::SeqCst);
                    let found = hits(&ix, &format!("word{w}x{i}"), &KeywordOptions::k(5));
                    let keys: Vec<&[u8]> = found.iter().map(|(k, _)| k.as_slice()).collect();
                    assert_eq!(keys, [key.as_bytes()], "{key} as its put returned");
                }
            })
        })
        .collect();
    let reader = {
        let (ix, acked, checks) = (Arc::clone(&ix), Arc::clone(&acked), Arc::clone(&checks));
        std::thread::spawn(move || {
            while acked.load(Ordering::SeqCst) < 800 {
                let before = acked.load(Ordering::SeqCst);
                let counted = ix.stats().documents;
                assert!(
                    counted >= before,
                    "{counted} counted, {before} acknowledged"
                );
                checks.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    writers.into_iter().for_each(|w| w.join().expect("writer"));
    reader.join().expect("reader");
    assert!(
        checks.load(Ordering::SeqCst) >= 8,
        "the reader checked while writes ran"
    );
    assert_eq!(ix.stats().documents, 800);
    assert_eq!(
        ix.search("common", &KeywordOptions::k(1000))
            .expect("search")
            .len(),
        800
    );
}

#[test]
fn a_checkpoint_carries_the_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = db_at(dir.path());
    let ix = TextIndex::open(&db, "docs", TextIndexOptions::new()).expect("index");
    for i in 0..100 {
        db.put(format!("{i}"), format!("checkpoint text {i}"))
            .expect("put");
    }
    let copy = dir.path().join("copy");
    db.checkpoint(&copy).expect("checkpoint");
    let want = hits(&ix, "checkpoint 42", &KeywordOptions::k(5));
    let db2 = db_at(&copy);
    let ix2 = TextIndex::open_existing(&db2, "docs")
        .expect("open")
        .expect("exists");
    assert_eq!(ix2.recovery().records_kept, 100);
    assert_eq!(hits(&ix2, "checkpoint 42", &KeywordOptions::k(5)), want);
}

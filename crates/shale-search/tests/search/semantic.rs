//! Semantic search through the engine, with the library's deterministic word-hashing embedder
//! (the real model's end-to-end tests live in the `shale-embed` crate): read-your-writes,
//! deletes and overwrites never leak, non-text values are refused, the index survives
//! reopening and reconciles with data written while it was off. What the index does when
//! its stored state disagrees with the data or the model is in `semantic_persistence.rs`.

use crate::semantic_support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use semantic_support::{key, open, store_dir, BagOfWords, SemanticDb, ANIMALS};
use shale::{Db, Error, Options, WriteBatch, WriteOptions};
use shale_search::semantic::{Embedder, HashEmbedder, SearchOptions};

#[test]
fn search_sees_writes_and_never_deleted_or_replaced_text() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let db = open(dir.path(), &embedder);
    for (i, text) in ANIMALS.iter().enumerate() {
        db.put(key(i), text).unwrap();
    }
    // Read-your-writes: no waiting by the caller.
    let hits = db.search_knn("cat sleeps mat", 3).unwrap();
    assert_eq!(hits[0].key, b"doc000");
    assert_eq!(hits[0].text, ANIMALS[0]);
    assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));

    db.delete(key(0)).unwrap();
    let hits = db.search_knn("cat sleeps mat", 6).unwrap();
    assert!(hits.iter().all(|h| h.key != b"doc000"), "{hits:?}");
    assert_eq!(hits.len(), 5);

    db.put(key(1), "the cat sleeps on the warm mat").unwrap();
    let hits = db.search_knn("dog barks mail carrier", 6).unwrap();
    for h in &hits {
        assert_eq!(db.get(&h.key).unwrap().unwrap(), h.text.as_bytes());
    }
    let hits = db.search_knn("cat sleeps mat", 1).unwrap();
    assert_eq!(
        (hits[0].key.as_slice(), hits[0].text.as_str()),
        (b"doc001".as_slice(), ANIMALS[0])
    );
    assert_eq!(db.indexed_len().unwrap(), 5);
}

#[test]
fn non_text_values_are_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let db = open(dir.path(), &embedder);
    let mut batch = WriteBatch::new();
    batch.put("good", "plain text");
    batch.put("bad", [0xff, 0xfe, 0x00]);
    let err = db.write(batch, WriteOptions::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("UTF-8"), "{err}");
    assert_eq!(db.get("good").unwrap(), None);
    assert_eq!(db.indexed_len().unwrap(), 0);
}

#[test]
fn key_ranges_restrict_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let db = open(dir.path(), &embedder);
    for i in 0..40 {
        db.put(format!("a/{i:02}"), format!("shared words number {i}"))
            .unwrap();
        db.put(format!("b/{i:02}"), format!("shared words number {i}"))
            .unwrap();
    }
    let opts = SearchOptions {
        lower_bound: Some(b"b/".to_vec()),
        upper_bound: Some(b"b0".to_vec()),
        ..SearchOptions::default()
    };
    for exact in [true, false] {
        let hits = db
            .search_text("shared words number 7", 10, &opts, exact)
            .unwrap();
        assert_eq!(hits.len(), 10);
        assert!(hits.iter().all(|h| h.key.starts_with(b"b/")), "{hits:?}");
        assert_eq!(hits[0].key, b"b/07");
    }
}

#[test]
fn reopen_reuses_vectors_and_reconciles_with_unindexed_writes() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    {
        let db = open(dir.path(), &embedder);
        for (i, text) in ANIMALS.iter().enumerate() {
            db.put(key(i), text).unwrap();
        }
        db.wait_indexed().unwrap();
    }
    assert_eq!(embedder.embedded.load(Ordering::Relaxed), ANIMALS.len());
    // While the index is off: one delete, one overwrite, one new text.
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.delete(key(2)).unwrap();
        db.put(key(3), "a parrot talks in its cage").unwrap();
        db.put(key(9), "the snake hides under a rock").unwrap();
    }
    let db = open(dir.path(), &embedder);
    assert_eq!(db.indexed_len().unwrap(), ANIMALS.len());
    // Only the two texts the index had not seen were embedded again.
    assert_eq!(embedder.embedded.load(Ordering::Relaxed), ANIMALS.len() + 2);
    let hits = db.search_knn("fish swim cold river", 6).unwrap();
    assert!(hits.iter().all(|h| h.key != key(2).as_bytes()), "{hits:?}");
    let hits = db.search_knn("parrot talks cage", 1).unwrap();
    assert_eq!(hits[0].key, key(3).as_bytes());
    let hits = db.search_knn("snake hides rock", 1).unwrap();
    assert_eq!(hits[0].key, key(9).as_bytes());
}

#[test]
fn concurrent_overwrites_never_show_stale_text() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let db = Arc::new(open(dir.path(), &embedder));
    for i in 0..50 {
        db.put(key(i), format!("round zero item {i}")).unwrap();
    }
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for round in 1..20 {
                for i in 0..50 {
                    if (i + round) % 7 == 0 {
                        db.delete(key(i)).unwrap();
                    } else {
                        db.put(key(i), format!("round {round} item {i}")).unwrap();
                    }
                }
            }
        })
    };
    for _ in 0..200 {
        for hit in db.search_knn("round item 7", 5).unwrap() {
            // The value may move on after the search checked it, but never backwards to
            // a text the index had already replaced: check the text's round is plausible.
            assert!(hit.text.ends_with(&format!(
                "item {}",
                String::from_utf8_lossy(&hit.key[3..])
                    .parse::<usize>()
                    .unwrap()
            )));
        }
    }
    writer.join().unwrap();
    // Quiescent: every hit is exactly the current value.
    for hit in db.search_knn("round 19 item", 50).unwrap() {
        assert_eq!(db.get(&hit.key).unwrap().unwrap(), hit.text.as_bytes());
    }
    let live = (0..50)
        .filter(|i| db.get(key(*i)).unwrap().is_some())
        .count();
    assert_eq!(db.indexed_len().unwrap(), live);
}

#[test]
fn node_ids_are_reused_through_overwrites_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let text = |i: usize, round: usize| format!("{} round{round}", lab_text(i));
    let check = |db: &SemanticDb| {
        assert_eq!(db.indexed_len().unwrap(), 40);
        for i in 0..40 {
            let hits = db.search_knn_hnsw(&text(i, 60), 1).unwrap();
            assert_eq!(hits[0].key, key(i).as_bytes(), "{i}: {:?}", hits[0].text);
        }
    };
    {
        let db = open(dir.path(), &embedder);
        for round in 0..=60 {
            for i in 0..40 {
                if round < 60 && (i + round) % 9 == 0 {
                    db.delete(key(i)).unwrap();
                } else {
                    db.put(key(i), text(i, round)).unwrap();
                }
            }
            db.wait_indexed().unwrap();
        }
        // 2,400 values indexed over time, 40 at the end. Without reuse the id space would
        // be 2,400; with it, at most the live nodes plus a quarter in tombstones plus one
        // round in flight.
        let ids = db.index_id_space().unwrap();
        assert!(ids <= 120, "id space {ids}");
        check(&db);
        db.close().unwrap();
    }
    let db = open(dir.path(), &embedder);
    assert!(db.index_id_space().unwrap() <= 120);
    check(&db);
    // Reused ids after the reopen too (the checkpoint's dead ones included).
    for round in (61..80).chain([60]) {
        for i in 0..40 {
            db.put(key(i), text(i, round)).unwrap();
        }
        db.wait_indexed().unwrap();
    }
    let ids = db.index_id_space().unwrap();
    assert!(ids <= 120, "id space {ids}");
    check(&db);
}

#[test]
fn deleted_keys_are_forgotten_once_no_older_change_can_come() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let db = open(dir.path(), &embedder);
    for i in 0..300 {
        db.put(key(i), lab_text(i % 128)).unwrap();
    }
    db.wait_indexed().unwrap();
    for i in 0..300 {
        db.delete(key(i)).unwrap();
    }
    db.wait_indexed().unwrap();
    assert_eq!(db.indexed_len().unwrap(), 0);
    // The batch that applied a delete still held its writer's bound; any later batch
    // forgets the key.
    db.put("last", "one more text").unwrap();
    db.wait_indexed().unwrap();
    assert_eq!(db.index_tracked_keys().unwrap(), 1);
    // A deleted key written again is indexed as new.
    db.put(key(3), "written again after its delete").unwrap();
    assert_eq!(
        db.search_knn("written again", 1).unwrap()[0].key,
        key(3).as_bytes()
    );
    assert_eq!(db.indexed_len().unwrap(), 2);
}

/// An embedder that panics on any text containing "boom".
#[derive(Debug)]
struct Panicky;

impl Embedder for Panicky {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    /// HashEmbedder's vectors whenever it returns any.
    fn model_id(&self) -> String {
        HashEmbedder.model_id()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        assert!(
            !texts.iter().any(|t| t.contains("boom")),
            "the model fell over"
        );
        HashEmbedder.embed(texts)
    }
}

#[test]
fn a_panicking_embedder_fails_searches_instead_of_hanging_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = SemanticDb::open(dir.path(), Options::default(), Arc::new(Panicky)).unwrap();
    db.put("a", "boom goes the model").unwrap();
    match db.search_knn("model", 1) {
        Err(Error::Index(why)) => assert!(why.contains("the model fell over"), "{why}"),
        other => panic!("expected an embedding error, got {other:?}"),
    }
    assert_eq!(
        db.get("a").unwrap().as_deref(),
        Some(&b"boom goes the model"[..])
    );
}

/// The word-hashing embedder, except that a text containing "void" gets a zero vector.
#[derive(Debug)]
struct ZeroForVoid;

impl Embedder for ZeroForVoid {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    /// HashEmbedder's for every vector it can store: a zero vector is refused, never stored.
    fn model_id(&self) -> String {
        HashEmbedder.model_id()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        let mut vectors = HashEmbedder.embed(texts)?;
        for (v, text) in vectors.iter_mut().zip(texts) {
            if text.contains("void") {
                v.fill(0.0);
            }
        }
        Ok(vectors)
    }
}

#[test]
fn a_vector_without_direction_is_an_error_and_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = SemanticDb::open(dir.path(), Options::default(), Arc::new(ZeroForVoid)).unwrap();
        db.put("a", "the cat sleeps").unwrap();
        db.put("b", "into the void").unwrap();
        match db.search_knn("cat", 1) {
            Err(Error::Index(why)) => assert!(why.contains("no direction"), "{why}"),
            other => panic!("expected an embedding error, got {other:?}"),
        }
        db.close().unwrap();
    }
    // As an older version could have: a zero vector stored for "b" (the vector store is
    // a database of its own in the index's directory).
    {
        let store = Db::open(store_dir(dir.path()), Options::default()).unwrap();
        let hash = shale_search::semantic::value_hash(b"into the void");
        let zeros = vec![0.0; HashEmbedder.dim()];
        store
            .put("b", shale_search::semantic::encode_stored(hash, 7, &zeros))
            .unwrap();
        store.close().unwrap();
    }
    // A working model next time: the open embeds the text again, nothing stored blocks it.
    let embedder = Arc::new(BagOfWords::default());
    let db = open(dir.path(), &embedder);
    // "a" too if it was in the failed batch; "b" in any case, its stored vector refused.
    let again = db.index_recovery().unwrap().texts_to_embed;
    assert!((1..=2).contains(&again), "{again}");
    assert_eq!(db.indexed_len().unwrap(), 2);
    assert_eq!(db.search_knn("void", 1).unwrap()[0].key, b"b");
}

/// 128 distinct texts built from a small vocabulary, so that each has its own words.
fn lab_text(i: usize) -> String {
    const WORDS: [&str; 16] = [
        "river", "stone", "cloud", "lamp", "garden", "window", "train", "violin", "desert",
        "harbor", "pepper", "candle", "mirror", "ladder", "forest", "comet",
    ];
    format!(
        "{} {} {} text{i}",
        WORDS[i % 16],
        WORDS[(i / 16) % 16],
        WORDS[(i * 7 + 3) % 16]
    )
}

/// The lab's persistence scenario as writes in order: put 128 texts; delete 32..128;
/// re-put 64..96; overwrite 0..32 with the texts of 96..128.
fn lab_writes() -> Vec<(usize, Option<String>)> {
    let mut writes: Vec<(usize, Option<String>)> =
        (0..128).map(|i| (i, Some(lab_text(i)))).collect();
    writes.extend((32..128).map(|i| (i, None)));
    writes.extend((64..96).map(|i| (i, Some(lab_text(i)))));
    writes.extend((0..32).map(|i| (i, Some(lab_text(i + 96)))));
    writes
}

/// Run the scenario; returns the expected text per key.
fn lab_scenario(db: &Db) -> Vec<Option<String>> {
    for (i, text) in lab_writes() {
        match text {
            Some(text) => db.put(key(i), text).unwrap(),
            None => db.delete(key(i)).unwrap(),
        }
    }
    lab_expected()
}

fn lab_expected() -> Vec<Option<String>> {
    let mut expected = vec![None; 128];
    for (i, text) in lab_writes() {
        expected[i] = text;
    }
    expected
}

fn check_lab(db: &SemanticDb, expected: &[Option<String>]) {
    let mut found = 0;
    let mut approx_found = 0;
    let mut asked = 0;
    for (i, want) in expected.iter().enumerate() {
        let query = lab_text(if i < 32 { i + 96 } else { i });
        let hits = db.search_knn(&query, 3).unwrap();
        let approx = db.search_knn_hnsw(&query, 3).unwrap();
        for hit in &approx {
            let k: usize = String::from_utf8_lossy(&hit.key[3..]).parse().unwrap();
            assert_eq!(
                Some(hit.text.as_str()),
                expected[k].as_deref(),
                "HNSW: stale text"
            );
        }
        if want.is_some() {
            approx_found += usize::from(approx.iter().any(|h| h.key == key(i).as_bytes()));
        }
        for hit in &hits {
            let k: usize = String::from_utf8_lossy(&hit.key[3..]).parse().unwrap();
            let want_k = expected[k].as_deref();
            assert_eq!(
                Some(hit.text.as_str()),
                want_k,
                "a deleted or replaced text came back"
            );
        }
        if want.is_some() {
            asked += 1;
            found += usize::from(hits.iter().any(|h| h.key == key(i).as_bytes()));
        }
    }
    assert!(found * 100 >= asked * 85, "found {found} of {asked}");
    assert!(
        approx_found * 100 >= asked * 85,
        "HNSW found {approx_found} of {asked}"
    );
}

#[test]
fn lab_scenario_after_close() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let expected = {
        let db = open(dir.path(), &embedder);
        let expected = lab_scenario(&db);
        db.wait_indexed().unwrap();
        expected
    };
    let db = open(dir.path(), &embedder);
    // A clean close checkpointed the graph: every live node is taken over, nothing is
    // embedded or inserted again.
    let r = db.index_recovery().unwrap();
    assert_eq!(r.graph_nodes_reused, 64, "{r:?}");
    assert_eq!(
        (r.vectors_reinserted, r.texts_to_embed, r.graph_damaged),
        (0, 0, false)
    );
    check_lab(&db, &expected);
    drop(db);
    // A damaged checkpoint is rebuilt from the stored vectors, not an error.
    let graph = store_dir(dir.path()).join("GRAPH");
    let mut bytes = std::fs::read(&graph).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&graph, &bytes).unwrap();
    let db = open(dir.path(), &embedder);
    let r = db.index_recovery().unwrap();
    assert!(r.graph_damaged, "{r:?}");
    assert_eq!(
        (r.graph_nodes_reused, r.vectors_reinserted, r.texts_to_embed),
        (0, 64, 0)
    );
    check_lab(&db, &expected);
}

/// The child side of the kill test: run the scenario, say so, and wait to be killed.
#[test]
fn child_entry() {
    let Ok(dir) = std::env::var("SHALE_SEMANTIC_CHILD_DIR") else {
        return;
    };
    let db = open(std::path::Path::new(&dir), &Arc::new(BagOfWords::default()));
    lab_scenario(&db);
    println!("done");
    std::thread::sleep(std::time::Duration::from_secs(60));
}

#[test]
fn lab_scenario_after_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = shale_trials::TestChild::spawn(
        shale_trials::test_in_child(module_path!(), "child_entry")
            .env("SHALE_SEMANTIC_CHILD_DIR", dir.path()),
    );
    child.wait_for("done");
    child.kill();
    let expected = lab_expected();
    let db = open(dir.path(), &Arc::new(BagOfWords::default()));
    check_lab(&db, &expected);
}

/// Regression: a huge `k` or `ef` reserved memory in proportion before searching, and the
/// failed allocation aborted the process (from Python too). Past the limit they are
/// refused; up to it they cost what the index holds.
#[test]
fn huge_k_and_ef_are_refused_or_bounded_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let embedder = Arc::new(BagOfWords::default());
    let db = open(dir.path(), &embedder);
    for (i, text) in ANIMALS.iter().enumerate() {
        db.put(key(i), text).unwrap();
    }
    let limit = shale_search::vector::hnsw::MAX_EF;
    let huge = SearchOptions {
        ef: Some(1 << 40),
        ..SearchOptions::default()
    };
    for exact in [false, true] {
        let refused = db.search_text("cat", 1 << 40, &SearchOptions::default(), exact);
        assert!(
            matches!(refused, Err(Error::InvalidArgument(_))),
            "{refused:?}"
        );
        let refused = db.search_text("cat", 3, &huge, exact);
        assert!(
            matches!(refused, Err(Error::InvalidArgument(_))),
            "{refused:?}"
        );
        let at_limit = SearchOptions {
            ef: Some(limit),
            ..SearchOptions::default()
        };
        let hits = db.search_text("cat", limit, &at_limit, exact).unwrap();
        assert_eq!(hits.len(), ANIMALS.len());
    }
}

/// Regression: the vector store was opened with the user's options, so turning search on
/// for an existing database with `create_if_missing: false` (as the CLI's search does)
/// failed: the store's directory did not exist yet.
#[test]
fn search_turns_on_for_an_existing_database_without_create_if_missing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        db.put(key(0), ANIMALS[0]).unwrap();
    }
    let embedder: Arc<dyn Embedder> = Arc::new(BagOfWords::default());
    let db = SemanticDb::open(
        dir.path(),
        Options {
            create_if_missing: false,
            ..Options::default()
        },
        embedder,
    )
    .unwrap();
    assert_eq!(db.search_knn("cat sleeps", 1).unwrap()[0].key, b"doc000");
}

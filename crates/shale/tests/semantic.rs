//! Semantic search through the engine, with the library's deterministic word-hashing embedder
//! (the real model's end-to-end tests live in the `shale-embed` crate): read-your-writes,
//! deletes and overwrites never leak, non-text values are refused, the index survives
//! reopening and reconciles with data written while it was off.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use shale::vector::{Embedder, HashEmbedder, SearchOptions, SemanticOptions};
use shale::{Db, Error, Options, WriteBatch, WriteOptions};

/// The library's word-hashing embedder (texts sharing words are close), counting the
/// texts it embedded.
#[derive(Debug, Default)]
struct BagOfWords {
    embedded: AtomicUsize,
}

impl Embedder for BagOfWords {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    fn model_id(&self) -> String {
        HashEmbedder.model_id()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        self.embedded.fetch_add(texts.len(), Ordering::Relaxed);
        HashEmbedder.embed(texts)
    }
}

fn open(path: &std::path::Path, embedder: &Arc<BagOfWords>) -> Db {
    let embedder: Arc<dyn Embedder> = Arc::clone(embedder) as Arc<dyn Embedder>;
    Db::open(
        path,
        Options {
            semantic: Some(SemanticOptions::new(embedder)),
            ..Options::default()
        },
    )
    .unwrap()
}

const ANIMALS: [&str; 6] = [
    "the cat sleeps on the warm mat",
    "a dog barks at the mail carrier",
    "fish swim in the cold river",
    "birds sing at dawn in the forest",
    "the horse runs across the green field",
    "a cow grazes near the old barn",
];

fn key(i: usize) -> String {
    format!("doc{i:03}")
}

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
    let check = |db: &Db| {
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
    let db = Db::open(
        dir.path(),
        Options {
            semantic: Some(SemanticOptions::new(Arc::new(Panicky))),
            ..Options::default()
        },
    )
    .unwrap();
    db.put("a", "boom goes the model").unwrap();
    match db.search_knn("model", 1) {
        Err(Error::Embedding(why)) => assert!(why.contains("the model fell over"), "{why}"),
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
    let opts = |embedder: Arc<dyn Embedder>| Options {
        semantic: Some(SemanticOptions::new(embedder)),
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), opts(Arc::new(ZeroForVoid))).unwrap();
        db.put("a", "the cat sleeps").unwrap();
        db.put("b", "into the void").unwrap();
        match db.search_knn("cat", 1) {
            Err(Error::Embedding(why)) => assert!(why.contains("no direction"), "{why}"),
            other => panic!("expected an embedding error, got {other:?}"),
        }
        db.close().unwrap();
    }
    // As an older version could have: a zero vector stored for "b" (the vector store is
    // a database of its own in `vectors/`).
    {
        let store = Db::open(dir.path().join("vectors"), Options::default()).unwrap();
        let hash = shale::vector::text_hash(b"into the void");
        let zeros = vec![0.0; HashEmbedder.dim()];
        store
            .put("b", shale::vector::encode_vector(hash, 7, &zeros))
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

fn check_lab(db: &Db, expected: &[Option<String>]) {
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
    let graph = dir.path().join("vectors").join("GRAPH");
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
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env("SHALE_SEMANTIC_CHILD_DIR", dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.contains("done") {
        line.clear();
    }
    assert!(line.contains("done"), "the child failed");
    child.kill().unwrap();
    child.wait().unwrap();
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
    let limit = shale::vector::hnsw::MAX_EF;
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
    let db = Db::open(
        dir.path(),
        Options {
            create_if_missing: false,
            semantic: Some(SemanticOptions::new(embedder)),
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(db.search_knn("cat sleeps", 1).unwrap()[0].key, b"doc000");
}

/// HashEmbedder's vectors negated: the same dimension and, for one text, the same text
/// hash, but another space. A query it embeds, matched against HashEmbedder's vectors,
/// ranks them backwards.
#[derive(Debug, Default)]
struct Negated {
    embedded: AtomicUsize,
}

impl Embedder for Negated {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    fn model_id(&self) -> String {
        "HashEmbedder, negated".into()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        self.embedded.fetch_add(texts.len(), Ordering::Relaxed);
        let mut vectors = HashEmbedder.embed(texts)?;
        for v in &mut vectors {
            v.iter_mut().for_each(|x| *x = -*x);
        }
        Ok(vectors)
    }
}

fn semantic_options(fs: Arc<dyn shale::fs::FileSystem>, embedder: Arc<dyn Embedder>) -> Options {
    Options {
        fs,
        semantic: Some(SemanticOptions::new(embedder)),
        ..Options::default()
    }
}

/// Each text, searched for, finds its own key first with a similarity of 1: the query and
/// every stored vector come from one model.
fn assert_one_vector_space(db: &Db, texts: &[&str]) {
    for (i, text) in texts.iter().enumerate() {
        let hits = db.search_knn(text, 1).unwrap();
        assert_eq!(hits[0].key, key(i).as_bytes(), "{text}");
        assert!(hits[0].score > 0.99, "{text}: {}", hits[0].score);
    }
}

#[test]
fn another_model_of_the_same_dimension_embeds_every_value_again() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn shale::fs::FileSystem> = Arc::new(shale::fs::PosixFs);
    let first = Arc::new(BagOfWords::default());
    let db = open(dir.path(), &first);
    for (i, text) in ANIMALS.iter().enumerate() {
        db.put(key(i), text).unwrap();
    }
    assert_eq!(db.indexed_len().unwrap(), ANIMALS.len());
    db.close().unwrap();

    // The same model again: every vector and graph node is reused.
    let db = open(dir.path(), &first);
    let r = db.index_recovery().unwrap();
    assert_eq!((r.graph_nodes_reused, r.texts_to_embed), (ANIMALS.len(), 0));
    assert_eq!(r.other_model_vectors, 0);
    db.close().unwrap();

    // Another model: nothing stored is reused, everything is embedded by it.
    let second = Arc::new(Negated::default());
    let db = Db::open(
        dir.path(),
        semantic_options(Arc::clone(&fs), Arc::clone(&second) as Arc<dyn Embedder>),
    )
    .unwrap();
    let r = db.index_recovery().unwrap();
    assert_eq!(r.other_model_vectors, ANIMALS.len());
    assert_eq!(r.texts_to_embed, ANIMALS.len());
    assert_eq!(r.graph_nodes_reused + r.vectors_reinserted, 0);
    assert_one_vector_space(&db, &ANIMALS);
    assert_eq!(second.embedded.load(Ordering::Relaxed), 2 * ANIMALS.len());
    db.close().unwrap();

    // And back: the store now names the second model.
    let db = open(dir.path(), &first);
    assert_eq!(
        db.index_recovery().unwrap().other_model_vectors,
        ANIMALS.len()
    );
    assert_one_vector_space(&db, &ANIMALS);
    db.close().unwrap();
}

/// Write the animals, wait until they are indexed, and close; the vector store's writes
/// are then flushed into an SSTable of its own (opened directly: it is a database).
fn indexed_animals(path: &std::path::Path) {
    let embedder = Arc::new(BagOfWords::default());
    let db = open(path, &embedder);
    for (i, text) in ANIMALS.iter().enumerate() {
        db.put(key(i), text).unwrap();
    }
    db.wait_indexed().unwrap();
    db.close().unwrap();
    let store = Db::open(path.join("vectors"), Options::default()).unwrap();
    store.flush().unwrap();
    store.close().unwrap();
}

fn files_ending(dir: &std::path::Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
}

#[test]
fn a_damaged_vector_store_is_built_again_from_the_data() {
    for damage in ["current", "table block", "missing table"] {
        let dir = tempfile::tempdir().unwrap();
        indexed_animals(dir.path());
        let store = dir.path().join("vectors");
        // A file that is not the engine's is left alone.
        std::fs::write(store.join("notes.txt"), "mine").unwrap();
        match damage {
            "current" => std::fs::write(store.join("CURRENT"), "MANIFEST-00000").unwrap(),
            "missing table" => std::fs::remove_file(&files_ending(&store, ".sst")[0]).unwrap(),
            _ => {
                // A byte in the first data block: the open reads only the table's
                // footer, index and filter; the reconcile's scan finds the damage.
                let tables = files_ending(&store, ".sst");
                let mut bytes = std::fs::read(&tables[0]).unwrap();
                bytes[20] ^= 0x40;
                std::fs::write(&tables[0], bytes).unwrap();
            }
        }
        let embedder = Arc::new(BagOfWords::default());
        let db = open(dir.path(), &embedder);
        let r = db.index_recovery().unwrap();
        assert!(r.store_damage.is_some(), "{damage}: {r:?}");
        assert_eq!(r.texts_to_embed, ANIMALS.len(), "{damage}");
        assert_one_vector_space(&db, &ANIMALS);
        assert_eq!(
            db.get(key(1)).unwrap().as_deref(),
            Some(ANIMALS[1].as_bytes())
        );
        db.close().unwrap();
        assert_eq!(std::fs::read(store.join("notes.txt")).unwrap(), b"mine");

        // And the store is whole again: the next open reuses everything.
        let db = open(dir.path(), &embedder);
        let r = db.index_recovery().unwrap();
        assert_eq!(r.store_damage, None, "{damage}");
        assert_eq!(r.graph_nodes_reused, ANIMALS.len(), "{damage}");
        db.close().unwrap();
    }
}

#[test]
fn damage_in_the_data_itself_still_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    indexed_animals(dir.path());
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    let tables = files_ending(dir.path(), ".sst");
    let mut bytes = std::fs::read(&tables[0]).unwrap();
    bytes[20] ^= 0x40;
    std::fs::write(&tables[0], bytes).unwrap();
    let embedder: Arc<dyn Embedder> = Arc::new(BagOfWords::default());
    let err = Db::open(
        dir.path(),
        Options {
            semantic: Some(SemanticOptions::new(embedder)),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(
        files_ending(&dir.path().join("vectors"), ".sst").len() == 1,
        "the vector store was left as it was"
    );
}

/// HashEmbedder's vectors three times as long: not unit vectors, which the index accepts
/// (and keeps rescaled).
#[derive(Debug)]
struct Long;

impl Embedder for Long {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    fn model_id(&self) -> String {
        "HashEmbedder, times 3".into()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        let mut vectors = HashEmbedder.embed(texts)?;
        for v in &mut vectors {
            v.iter_mut().for_each(|x| *x *= 3.0);
        }
        Ok(vectors)
    }
}

#[test]
fn reopening_reuses_the_graph_with_non_unit_vectors_and_a_new_search_ef() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn shale::fs::FileSystem> = Arc::new(shale::fs::PosixFs);
    let options = |ef_search: usize| {
        let mut semantic = SemanticOptions::new(Arc::new(Long));
        semantic.hnsw.ef_search = ef_search;
        Options {
            fs: Arc::clone(&fs),
            semantic: Some(semantic),
            ..Options::default()
        }
    };
    let db = Db::open(dir.path(), options(64)).unwrap();
    for (i, text) in ANIMALS.iter().enumerate() {
        db.put(key(i), text).unwrap();
    }
    db.wait_indexed().unwrap();
    db.close().unwrap();
    for ef_search in [64, 32] {
        let db = Db::open(dir.path(), options(ef_search)).unwrap();
        let r = db.index_recovery().unwrap();
        assert_eq!(
            (r.graph_nodes_reused, r.vectors_reinserted, r.texts_to_embed),
            (ANIMALS.len(), 0, 0),
            "ef_search {ef_search}: {r:?}"
        );
        assert_one_vector_space(&db, &ANIMALS);
        db.close().unwrap();
    }
}

/// The crashes each crash test tries at every step: a killed process, and power losses that
/// keep no unsynced directory change, a prefix of them (a journaling file system), or
/// some files' unsynced bytes (background write-back).
fn crash_kinds() -> Vec<shale::fs::CrashKind> {
    use shale::fs::{CrashKind, PowerLoss};
    let mut kinds = vec![
        CrashKind::Process,
        CrashKind::PowerLoss(PowerLoss::default()),
    ];
    for keep_dir_ops in 1..=3 {
        kinds.push(CrashKind::PowerLoss(PowerLoss {
            keep_dir_ops,
            ..PowerLoss::default()
        }));
    }
    for seed in 1..=2 {
        kinds.push(CrashKind::PowerLoss(PowerLoss {
            write_back: Some(seed),
            keep_dir_ops: 2,
            ..PowerLoss::default()
        }));
    }
    kinds
}

/// `base` holds the animals indexed by HashEmbedder. Crash an open with `Negated` (and its
/// embedding and close) at every step, with every kind of crash; then open each image
/// twice with `Negated` (a file a crash left behind may be picked up only by a later
/// open): it must open, and every vector in it must be `Negated`'s.
fn crash_every_step_of_an_open_with_negated(base: &shale::fs::MemFs) {
    const DIR: &str = "/db";
    for kind in crash_kinds() {
        let mut points = 0;
        for k in 1.. {
            let mem = base.process_crash();
            mem.crash_at_op(k, kind);
            if let Ok(db) = Db::open(
                DIR,
                semantic_options(Arc::new(mem.clone()), Arc::new(Negated::default())),
            ) {
                let _ = db.wait_indexed();
                let _ = db.close();
            }
            let Some(image) = mem.crash_image() else {
                break; // the open, the embedding and the close all finished before op k
            };
            points += 1;
            for _ in 0..2 {
                let db = Db::open(
                    DIR,
                    semantic_options(Arc::new(image.clone()), Arc::new(Negated::default())),
                )
                .unwrap_or_else(|e| panic!("{kind:?} at op {k}: {e}"));
                assert_one_vector_space(&db, &ANIMALS);
                db.close().unwrap();
            }
        }
        assert!(points > 10, "{kind:?}: only {points} crash points");
    }
}

/// The animals, indexed by HashEmbedder, on a `MemFs` at "/db".
fn animals_in_memory() -> shale::fs::MemFs {
    let base = shale::fs::MemFs::new();
    let db = Db::open(
        "/db",
        semantic_options(Arc::new(base.clone()), Arc::new(HashEmbedder)),
    )
    .unwrap();
    for (i, text) in ANIMALS.iter().enumerate() {
        db.put(key(i), text).unwrap();
    }
    db.wait_indexed().unwrap();
    db.close().unwrap();
    base
}

#[test]
fn a_crash_while_switching_models_never_mixes_two_vector_spaces() {
    crash_every_step_of_an_open_with_negated(&animals_in_memory());
}

#[test]
fn a_crash_while_rebuilding_a_damaged_store_is_safe() {
    use shale::fs::FileSystem;
    // Damage the open finds (CURRENT), and damage only the scan finds (a table's block,
    // with the manifest intact).
    for damage in ["current", "table block"] {
        let base = animals_in_memory();
        if damage == "current" {
            let current = std::path::Path::new("/db/vectors/CURRENT");
            base.overwrite(current, b"MANIFEST-0".to_vec()).unwrap();
        } else {
            let vectors = std::path::Path::new("/db/vectors");
            let store = Db::open(vectors, plain_options(&base)).unwrap();
            store.flush().unwrap();
            store.close().unwrap();
            let table = base
                .files()
                .into_iter()
                .find(|p| p.starts_with(vectors) && p.to_string_lossy().ends_with(".sst"))
                .unwrap();
            let mut bytes = base.read_all(&table).unwrap();
            bytes[20] ^= 0x40;
            base.overwrite(&table, bytes).unwrap();
        }
        crash_every_step_of_an_open_with_negated(&base);
    }
}

/// Plain options (no search) over `mem`.
fn plain_options(mem: &shale::fs::MemFs) -> Options {
    Options {
        fs: Arc::new(mem.clone()),
        ..Options::default()
    }
}

#[test]
fn an_unreadable_model_file_fails_the_open_and_keeps_the_store() {
    let dir = tempfile::tempdir().unwrap();
    indexed_animals(dir.path());
    let model = dir.path().join("vectors").join("MODEL");
    std::fs::remove_file(&model).unwrap();
    std::fs::create_dir(&model).unwrap(); // exists, but reading it fails
    let embedder = Arc::new(BagOfWords::default());
    let err = Db::open(
        dir.path(),
        Options {
            semantic: Some(SemanticOptions::new(
                Arc::clone(&embedder) as Arc<dyn Embedder>
            )),
            ..Options::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(files_ending(&dir.path().join("vectors"), ".sst").len(), 1);
}

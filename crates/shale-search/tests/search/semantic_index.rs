//! The index layer's own behaviour: several indexes over key prefixes beside plain binary
//! data, vector values put without a model, every metric, batch search, the bounded queue,
//! an index opened on existing data and reopened as defined, and filtered search
//! (`semantic_restart.rs` has checkpoints and restarts).

use crate::semantic_support;

use std::sync::Arc;
use std::time::Duration;

use semantic_support::{open_db, rng, vectors, BagOfWords};
use shale::{Error, WriteBatch, WriteOptions};
use shale_search::semantic::{
    vector_value, Embedder, HashEmbedder, SearchOptions, VectorIndex, VectorIndexOptions,
};
use shale_search::vector::Metric;

#[test]
fn indexes_over_prefixes_leave_other_keys_plain() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    let docs = VectorIndex::open(
        &db,
        "docs",
        VectorIndexOptions::text(Arc::new(HashEmbedder)).prefix("docs/"),
    )
    .unwrap();
    let items = VectorIndex::open(
        &db,
        "items",
        VectorIndexOptions::vectors(3).prefix("items/"),
    )
    .unwrap();

    // Plain data outside every prefix: binary, never embedded, never refused.
    db.put("raft/vote", [0xff, 0x00, 0x01]).unwrap();
    db.put("docs", "not under docs/ (no slash)").unwrap();
    db.put("docs/1", "the cat sleeps on the warm mat").unwrap();
    db.put("docs/2", "a dog barks at the mail carrier").unwrap();
    items
        .put_vector("items/a", &[1.0, 0.0, 0.0], b"first")
        .unwrap();
    items
        .put_vector("items/b", &[0.0, 1.0, 0.0], b"second")
        .unwrap();

    // Inside a prefix, what the index cannot hold is refused, and the batch with it.
    let mut batch = WriteBatch::new();
    batch.put("plain/x", "fine");
    batch.put("docs/3", [0x80, 0x81]);
    let err = db.write(batch, WriteOptions::default()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("docs"), "{err}");
    assert_eq!(
        db.get("plain/x").unwrap(),
        None,
        "nothing of the batch was written"
    );
    let err = db
        .put("items/c", "text in a vectors-only index")
        .unwrap_err();
    assert!(err.to_string().contains("no embedder"), "{err}");
    let err = items.put_vector("items/c", &[1.0, 0.0], b"").unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument(_)),
        "wrong dimension: {err}"
    );
    let err = items
        .put_vector("other/c", &[1.0, 0.0, 0.0], b"")
        .unwrap_err();
    assert!(err.to_string().contains("outside"), "{err}");
    let err = items
        .put_vector("items/c", &[f32::NAN, 0.0, 0.0], b"")
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = items.put_vector("items/c", &[0.0; 3], b"").unwrap_err();
    assert!(err.to_string().contains("no direction"), "{err}");

    assert_eq!(docs.len().unwrap(), 2);
    assert_eq!(items.len().unwrap(), 2);
    let hits = docs.search("cat mat", &SearchOptions::k(5)).unwrap();
    assert_eq!(hits[0].key, b"docs/1");
    assert_eq!(hits[0].text(), Some("the cat sleeps on the warm mat"));
    assert!(hits.iter().all(|h| h.key.starts_with(b"docs/")), "{hits:?}");
    let hits = items
        .search_vector(&[0.9, 0.1, 0.0], &SearchOptions::k(1))
        .unwrap();
    assert_eq!(
        (hits[0].key.as_slice(), hits[0].document.as_slice()),
        (&b"items/a"[..], &b"first"[..])
    );
    let err = items.search("text", &SearchOptions::k(1)).unwrap_err();
    assert!(err.to_string().contains("no embedder"), "{err}");

    // A vector value written with a plain batch is the same as put_vector.
    let mut batch = WriteBatch::new();
    batch.put("items/z", vector_value(&[0.0, 0.0, 1.0], b"via batch"));
    batch.put("raft/log/1", [0xff, 0xff]);
    db.write(batch, WriteOptions::default()).unwrap();
    let hits = items
        .search_vector(&[0.0, 0.1, 0.9], &SearchOptions::k(1))
        .unwrap();
    assert_eq!(hits[0].document, b"via batch");

    // The same index again is the same index; other options are refused.
    let again = VectorIndex::open(
        &db,
        "items",
        VectorIndexOptions::vectors(3).prefix("items/"),
    )
    .unwrap();
    assert_eq!(again.len().unwrap(), 3);
    let err = VectorIndex::open(
        &db,
        "items",
        VectorIndexOptions::vectors(4).prefix("items/"),
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = VectorIndex::open(&db, "no/slash", VectorIndexOptions::vectors(3)).unwrap_err();
    assert!(matches!(err, Error::InvalidOptions(_)), "{err}");
    drop((docs, items, again));
    db.close().unwrap();

    // Reopened, both indexes come back from their own directories.
    let db = open_db(dir.path());
    let items = VectorIndex::open(
        &db,
        "items",
        VectorIndexOptions::vectors(3).prefix("items/"),
    )
    .unwrap();
    assert_eq!(items.recovery().graph_nodes_reused, 3);
    assert_eq!(items.len().unwrap(), 3);
    assert_eq!(db.get("raft/vote").unwrap().unwrap(), [0xff, 0x00, 0x01]);
}

#[test]
fn an_exact_search_breaks_ties_by_key_whatever_the_write_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    let index = VectorIndex::open(&db, "v", VectorIndexOptions::vectors(3)).unwrap();
    // Ten equal vectors, written last key first, so their nodes' order is the keys'
    // reversed; one better match.
    for i in (0..10).rev() {
        db.put(format!("{i}"), vector_value(&[1.0, 0.0, 0.0], b""))
            .unwrap();
    }
    db.put("z", vector_value(&[0.0, 1.0, 0.0], b"")).unwrap();
    let hits = index
        .search_vector(&[0.1, 1.0, 0.0], &SearchOptions::k(4).exact())
        .unwrap();
    let keys: Vec<&[u8]> = hits.iter().map(|h| h.key.as_slice()).collect();
    assert_eq!(keys, [&b"z"[..], b"0", b"1", b"2"]);
    assert!(hits[1..].iter().all(|h| h.score == hits[1].score));
}

#[test]
fn every_metric_ranks_like_brute_force() {
    let seed = 0x3e7_41c;
    let (n, dim) = (600, 24);
    let data = vectors(n + 20, dim, seed);
    let (data, queries) = data.split_at(n);
    for metric in [Metric::Cosine, Metric::Dot, Metric::L2] {
        let dir = tempfile::tempdir().unwrap();
        let db = open_db(dir.path());
        let index =
            VectorIndex::open(&db, "v", VectorIndexOptions::vectors(dim).metric(metric)).unwrap();
        let mut batch = WriteBatch::new();
        for (i, v) in data.iter().enumerate() {
            batch.put(format!("{i:04}"), vector_value(v, b""));
        }
        db.write(batch, WriteOptions::default()).unwrap();
        let prepared = |v: &[f32]| metric.prepare(v, dim, "v").unwrap();
        let mut agree = 0;
        for q in queries {
            let mut truth: Vec<(f32, usize)> = data
                .iter()
                .enumerate()
                .map(|(i, v)| (metric.score(&prepared(q), &prepared(v)), i))
                .collect();
            truth.sort_by(|a, b| b.0.total_cmp(&a.0));
            let exact = index
                .search_vector(q, &SearchOptions::k(5).exact())
                .unwrap();
            let keys: Vec<String> = exact
                .iter()
                .map(|h| String::from_utf8(h.key.clone()).unwrap())
                .collect();
            let want: Vec<String> = truth
                .iter()
                .take(5)
                .map(|(_, i)| format!("{i:04}"))
                .collect();
            assert_eq!(keys, want, "{metric:?}, seed {seed:#x}");
            // Exact scores are the metric's, computed in full precision.
            assert!((exact[0].score - truth[0].0).abs() <= 1e-5 * truth[0].0.abs().max(1.0));
            let graph = index.search_vector(q, &SearchOptions::k(5)).unwrap();
            agree += graph
                .iter()
                .filter(|h| exact.iter().any(|e| e.key == h.key))
                .count();
        }
        let recall = agree as f64 / (5 * queries.len()) as f64;
        println!("{metric:?}: recall@5 of the graph {recall:.3} (seed {seed:#x})");
        assert!(recall >= 0.95, "{metric:?}: recall {recall}");
    }
}

#[test]
fn batch_search_answers_like_single_searches_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    let index = VectorIndex::open(&db, "v", VectorIndexOptions::vectors(16)).unwrap();
    let data = vectors(300, 16, 7);
    for (i, v) in data.iter().enumerate() {
        index.put_vector(format!("k{i:03}"), v, b"").unwrap();
    }
    let queries: Vec<&[f32]> = data.iter().take(37).map(Vec::as_slice).collect();
    let opts = SearchOptions::k(4);
    for threads in [1, 2, 8] {
        let batch = index.search_batch(&queries, &opts, threads).unwrap();
        assert_eq!(batch.len(), queries.len());
        for (q, hits) in queries.iter().zip(&batch) {
            assert_eq!(hits, &index.search_vector(q, &opts).unwrap());
        }
    }
    assert!(index.search_batch(&[], &opts, 2).unwrap().is_empty());
}

/// An embedder that blocks until told to go on, to fill the queue.
#[derive(Debug)]
struct Gated {
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Embedder for Gated {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    fn model_id(&self) -> String {
        HashEmbedder.model_id()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
        HashEmbedder.embed(texts)
    }
}

#[test]
fn a_full_queue_makes_writers_wait_and_plain_writes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    let gated = Arc::new(Gated {
        open: std::sync::Mutex::new(false),
        cv: std::sync::Condvar::new(),
    });
    let mut opts = VectorIndexOptions::text(Arc::clone(&gated) as Arc<dyn Embedder>).prefix("t/");
    opts.queue_bytes = 8 << 10;
    opts.embed_threads = 1;
    opts.batch_size = 1;
    let index = VectorIndex::open(&db, "t", opts).unwrap();
    let text = "x".repeat(1000);
    let writer = {
        let db = Arc::clone(&db);
        let text = text.clone();
        std::thread::spawn(move || {
            for i in 0..30 {
                db.put(format!("t/{i:02}"), &text).unwrap();
            }
        })
    };
    // The writer fills the queue (the one worker is stuck in the model) and waits.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!writer.is_finished(), "the writer went past a full queue");
    let s = index.stats();
    assert!(s.queued_bytes <= (8 << 10) + 1100, "{s:?}");
    // Keys outside the prefix are not held up.
    db.put("plain", "goes through").unwrap();
    *gated.open.lock().unwrap() = true;
    gated.cv.notify_all();
    writer.join().unwrap();
    index.wait_indexed().unwrap();
    assert_eq!(index.len().unwrap(), 30);
    let s = index.stats();
    println!("{s:?}");
    assert!(s.stalls > 0 && s.stall_micros > 100_000, "{s:?}");
}

#[test]
fn an_index_opened_on_a_database_with_data_indexes_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    for i in 0..50 {
        db.put(format!("doc/{i:02}"), format!("words of document {i}"))
            .unwrap();
    }
    // Writers keep going while the index opens: nothing is missed or indexed twice.
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for i in 50..400 {
                db.put(format!("doc/{i:03}"), format!("words of document {i}"))
                    .unwrap();
            }
        })
    };
    let embedder = Arc::new(BagOfWords::default());
    let index = VectorIndex::open(
        &db,
        "doc",
        VectorIndexOptions::text(Arc::clone(&embedder) as Arc<dyn Embedder>).prefix("doc/"),
    )
    .unwrap();
    writer.join().unwrap();
    assert_eq!(index.len().unwrap(), 400);
    let embedded = embedder.embedded.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        (400..450).contains(&embedded),
        "each text embedded about once: {embedded}"
    );
    // The word-hashing embedder maps some numbers to one bucket: "377" ties with a few.
    let hits = index
        .search("words of document 377", &SearchOptions::k(5).exact())
        .unwrap();
    assert!(
        hits.iter().any(|h| h.key == b"doc/377" && h.score > 0.999),
        "{hits:?}"
    );
}

/// The hashing embedder under another model id: vectors of the same shape from "another
/// model".
#[derive(Debug)]
struct OtherModel;

impl Embedder for OtherModel {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    fn model_id(&self) -> String {
        "another model".into()
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        HashEmbedder.embed(texts)
    }
}

#[test]
fn an_index_reopens_as_it_was_defined() {
    let dir = tempfile::tempdir().unwrap();
    let hnsw = shale_search::vector::HnswParams {
        metric: Metric::L2,
        ef_construction: 64,
        ..shale_search::vector::HnswParams::with_m(8)
    };
    {
        let db = open_db(dir.path());
        assert_eq!(VectorIndex::definition(&db, "items").unwrap(), None);
        let mut opts = VectorIndexOptions::vectors(4).prefix("items/");
        opts.hnsw = hnsw;
        let items = VectorIndex::open(&db, "items", opts).unwrap();
        for (i, v) in vectors(300, 4, 7).iter().enumerate() {
            items.put_vector(format!("items/{i:03}"), v, b"").unwrap();
        }
        db.put("other", "plain").unwrap();
        items.wait_indexed().unwrap();
        let text = VectorIndex::open(
            &db,
            "text",
            VectorIndexOptions::text(Arc::new(HashEmbedder)).prefix("t/"),
        )
        .unwrap();
        drop((items, text));
        db.close().unwrap();
    }
    let db = open_db(dir.path());
    assert_eq!(VectorIndex::names(&db).unwrap(), ["items", "text"]);
    let definition = VectorIndex::definition(&db, "items").unwrap().unwrap();
    assert_eq!(definition.prefix, b"items/");
    assert_eq!(definition.dim, 4);
    assert_eq!(definition.hnsw, hnsw);
    assert_eq!(definition.model_id, shale_search::semantic::USER_VECTORS);

    // Opened as it was: same prefix, metric and graph; nothing embedded or rebuilt.
    let items = VectorIndex::open_existing(&db, "items", None).unwrap();
    assert_eq!(items.prefix(), b"items/");
    assert_eq!(items.metric(), Metric::L2);
    let recovery = items.recovery();
    assert_eq!(recovery.graph_nodes_reused, 300, "{recovery:?}");
    assert_eq!(items.len().unwrap(), 300);

    // A model where the user's vectors are, or none where a model's are, is refused...
    let err = VectorIndex::open_existing(&db, "text", None).unwrap_err();
    assert!(err.to_string().contains("needs that embedder"), "{err}");
    let err = VectorIndex::open_existing(&db, "text", Some(Arc::new(OtherModel))).unwrap_err();
    assert!(err.to_string().contains("embed everything again"), "{err}");
    let err = VectorIndex::open_existing(&db, "nothing", None).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // ...and the right model opens it.
    let text = VectorIndex::open_existing(&db, "text", Some(Arc::new(HashEmbedder))).unwrap();
    assert_eq!(text.prefix(), b"t/");
    drop((items, text));
    db.close().unwrap();

    // A new prefix redefines the index: its vectors are reused, the record follows.
    let db = open_db(dir.path());
    let mut opts = VectorIndexOptions::vectors(4).prefix("items/0");
    opts.hnsw = hnsw;
    let items = VectorIndex::open(&db, "items", opts).unwrap();
    let recovery = items.recovery();
    assert_eq!(recovery.other_model_vectors, 0, "{recovery:?}");
    assert_eq!(recovery.orphans_deleted, 200, "{recovery:?}");
    assert_eq!(items.len().unwrap(), 100);
    assert_eq!(
        VectorIndex::definition(&db, "items")
            .unwrap()
            .unwrap()
            .prefix,
        b"items/0"
    );
}

/// Recall@k of `got` against `want` (keys), the share of `want` found.
fn recall_of(got: &[Vec<Vec<u8>>], want: &[Vec<Vec<u8>>]) -> f64 {
    let found: usize = got
        .iter()
        .zip(want)
        .map(|(g, w)| g.iter().filter(|k| w.contains(k)).count())
        .sum();
    found as f64 / want.iter().map(Vec::len).sum::<usize>().max(1) as f64
}

#[test]
fn filtered_search_keeps_recall_at_every_selectivity() {
    let seed = std::env::var("SHALE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5e1_ec7u64);
    println!("seed {seed:#x} (rerun with SHALE_TEST_SEED={seed})");
    let (n, dim, k) = (20_000usize, 16, 10);
    let data = vectors(n + 40, dim, seed);
    let (data, queries) = data.split_at(n);
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    let index = VectorIndex::open(&db, "v", VectorIndexOptions::vectors(dim)).unwrap();
    // Written in a shuffled order, so that node ids do not follow key order.
    let mut order: Vec<usize> = (0..n).collect();
    let mut next = rng(seed ^ 1);
    for i in (1..n).rev() {
        let j = ((next() + 0.5) * (i + 1) as f32) as usize % (i + 1);
        order.swap(i, j);
    }
    for chunk in order.chunks(1000) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(format!("{i:06}"), vector_value(&data[i], b""));
        }
        db.write(batch, WriteOptions::default()).unwrap();
    }
    index.wait_indexed().unwrap();
    let cosine = |a: &[f32], b: &[f32]| {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm(a) * norm(b))
    };
    // From a handful of keys (scanned) to every key (the unfiltered graph), through shares
    // a graph walk with a widened pool answers.
    for pct in [0.1, 1.0, 10.0, 30.0, 50.0, 80.0, 100.0] {
        let width = (n as f64 * pct / 100.0) as usize;
        let lo = (n - width) / 2;
        let opts = SearchOptions::k(k).range(format!("{lo:06}"), format!("{:06}", lo + width));
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for q in queries {
            let hits = index.search_vector(q, &opts).unwrap();
            assert!(
                hits.iter()
                    .all(|h| h.key >= opts.lower_bound.clone().unwrap()
                        && h.key < opts.upper_bound.clone().unwrap()),
                "{pct}%: a hit outside the range"
            );
            got.push(hits.into_iter().map(|h| h.key).collect::<Vec<_>>());
            let mut truth: Vec<(f32, usize)> =
                (lo..lo + width).map(|i| (cosine(q, &data[i]), i)).collect();
            truth.sort_by(|a, b| b.0.total_cmp(&a.0));
            want.push(
                truth
                    .iter()
                    .take(k)
                    .map(|(_, i)| format!("{i:06}").into_bytes())
                    .collect::<Vec<_>>(),
            );
        }
        let recall = recall_of(&got, &want);
        println!("{pct}% of the keys: recall@{k} {recall:.3}");
        assert!(recall >= 0.95, "{pct}%: recall {recall} (seed {seed:#x})");
        // The control: the same answers scored against the next query's truth fail.
        let shifted: Vec<_> = want
            .iter()
            .cycle()
            .skip(1)
            .take(want.len())
            .cloned()
            .collect();
        let control = recall_of(&got, &shifted);
        assert!(
            control < 0.5,
            "{pct}%: the recall check passed answers to other queries ({control})"
        );
    }
}

/// An index over a keyspace covers its prefix there, not the same keys of the default
/// keyspace; it reopens over its keyspace; the keyspace cannot be dropped under it.
#[test]
fn an_index_covers_a_keyspace_as_it_covers_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open_db(dir.path());
        let opts = VectorIndexOptions::vectors(3)
            .prefix("v/")
            .keyspace("notes");
        let notes = VectorIndex::open(&db, "notes", opts).unwrap();
        let ks = db.keyspace("notes").unwrap();
        notes.put_vector("v/a", &[1.0, 0.0, 0.0], b"a").unwrap();
        ks.put("v/b", vector_value(&[0.0, 1.0, 0.0], b"b")).unwrap();
        // The same key in the default keyspace is plain data, never indexed or refused.
        db.put("v/a", "plain text where the index is not").unwrap();
        db.put("v/z", [0xff, 0x00]).unwrap();
        // In the keyspace, what the index cannot hold is refused.
        let err = ks.put("v/c", "text in a vectors-only index").unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        notes.wait_indexed().unwrap();
        assert_eq!(notes.len().unwrap(), 2);
        let hits = notes
            .search_vector(&[0.9, 0.1, 0.0], &SearchOptions::k(2))
            .unwrap();
        let keys: Vec<_> = hits
            .iter()
            .map(|h| (h.key.clone(), h.document.clone()))
            .collect();
        assert_eq!(
            keys,
            [
                (b"v/a".to_vec(), b"a".to_vec()),
                (b"v/b".to_vec(), b"b".to_vec())
            ]
        );
        // A delete in the keyspace leaves the index; one in the default keyspace does not.
        db.delete("v/b").unwrap();
        ks.delete("v/a").unwrap();
        notes.wait_indexed().unwrap();
        assert_eq!(notes.len().unwrap(), 1);
        let err = db.drop_keyspace("notes").unwrap_err();
        assert!(err.to_string().contains("covered by index"), "{err}");
        drop((notes, ks));
        db.close().unwrap();
    }
    let db = open_db(dir.path());
    let definition = VectorIndex::definition(&db, "notes").unwrap().unwrap();
    assert_eq!(definition.keyspace.as_deref(), Some("notes"));
    let notes = VectorIndex::open_existing(&db, "notes", None).unwrap();
    assert_eq!(notes.len().unwrap(), 1);
    let hits = notes
        .search_vector(&[0.0, 1.0, 0.0], &SearchOptions::k(5))
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].key, b"v/b");
}

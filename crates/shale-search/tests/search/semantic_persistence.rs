//! The semantic index's stored state against the data it was built from: another model
//! embeds every value again, a damaged vector store is built again from the data (damage
//! in the data itself still fails the open), the graph is reused when only the search
//! settings change, and a crash at any step of a model switch or a rebuild is safe.

use crate::semantic_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use semantic_support::{key, open, store_dir, BagOfWords, SemanticDb, ANIMALS};
use shale::{Db, Error, Options};
use shale_search::semantic::{Embedder, HashEmbedder, VectorIndexOptions};

/// HashEmbedder's vectors times `factor`, counting the texts it embedded. Negated
/// (`Scaled::negated()`): the same dimension and, for one text, the same text hash, but
/// another space, so a query it embeds, matched against HashEmbedder's vectors, ranks them
/// backwards. Longer (`factor` 3): not unit vectors, which the index accepts (and keeps
/// rescaled).
#[derive(Debug)]
struct Scaled {
    factor: f32,
    embedded: AtomicUsize,
}

impl Scaled {
    fn new(factor: f32) -> Scaled {
        Scaled {
            factor,
            embedded: AtomicUsize::new(0),
        }
    }

    fn negated() -> Scaled {
        Scaled::new(-1.0)
    }
}

impl Embedder for Scaled {
    fn dim(&self) -> usize {
        HashEmbedder.dim()
    }

    fn model_id(&self) -> String {
        format!("HashEmbedder, times {}", self.factor)
    }

    fn embed(&self, texts: &[&str]) -> shale::Result<Vec<Vec<f32>>> {
        self.embedded.fetch_add(texts.len(), Ordering::Relaxed);
        let mut vectors = HashEmbedder.embed(texts)?;
        for v in &mut vectors {
            v.iter_mut().for_each(|x| *x *= self.factor);
        }
        Ok(vectors)
    }
}

/// The database at `path` on `fs`, with the tests' index embedded by `embedder`.
fn open_on(
    path: impl AsRef<std::path::Path>,
    fs: Arc<dyn shale::fs::FileSystem>,
    embedder: Arc<dyn Embedder>,
) -> shale::Result<SemanticDb> {
    SemanticDb::open(
        path,
        Options {
            fs,
            ..Options::default()
        },
        embedder,
    )
}

/// Each text, searched for, finds its own key first with a similarity of 1: the query and
/// every stored vector come from one model.
fn assert_one_vector_space(db: &SemanticDb, texts: &[&str]) {
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
    let second = Arc::new(Scaled::negated());
    let db = open_on(
        dir.path(),
        Arc::clone(&fs),
        Arc::clone(&second) as Arc<dyn Embedder>,
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
    let store = Db::open(store_dir(path), Options::default()).unwrap();
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
        let store = store_dir(dir.path());
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
    let err = match SemanticDb::open(dir.path(), Options::default(), embedder) {
        Ok(_) => panic!("a damaged table opened"),
        Err(e) => e,
    };
    assert!(err.is_corruption(), "{err}");
    assert!(
        files_ending(&store_dir(dir.path()), ".sst").len() == 1,
        "the vector store was left as it was"
    );
}

#[test]
fn reopening_reuses_the_graph_with_non_unit_vectors_and_a_new_search_ef() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn shale::fs::FileSystem> = Arc::new(shale::fs::PosixFs);
    let open = |ef_search: usize| {
        let mut index = VectorIndexOptions::text(Arc::new(Scaled::new(3.0)));
        index.hnsw.ef_search = ef_search;
        let opts = Options {
            fs: Arc::clone(&fs),
            ..Options::default()
        };
        SemanticDb::open_with(dir.path(), opts, index).unwrap()
    };
    let db = open(64);
    for (i, text) in ANIMALS.iter().enumerate() {
        db.put(key(i), text).unwrap();
    }
    db.wait_indexed().unwrap();
    db.close().unwrap();
    for ef_search in [64, 32] {
        let db = open(ef_search);
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

/// `base` holds the animals indexed by HashEmbedder. Crash an open with the negated
/// embedder (and its embedding and close) at every step, with every kind of crash; then
/// open each image twice with it (a file a crash left behind may be picked up only by a
/// later open): it must open, and every vector in it must be a negated one.
fn crash_every_step_of_an_open_with_negated(base: &shale::fs::MemFs) {
    const DIR: &str = "/db";
    for kind in crash_kinds() {
        let mut points = 0;
        for k in 1.. {
            let mem = base.process_crash();
            mem.crash_at_op(k, kind);
            if let Ok(db) = open_on(DIR, Arc::new(mem.clone()), Arc::new(Scaled::negated())) {
                let _ = db.wait_indexed();
                let _ = db.close();
            }
            let Some(image) = mem.crash_image() else {
                break; // the open, the embedding and the close all finished before op k
            };
            points += 1;
            for _ in 0..2 {
                let db = open_on(DIR, Arc::new(image.clone()), Arc::new(Scaled::negated()))
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
    let db = open_on("/db", Arc::new(base.clone()), Arc::new(HashEmbedder)).unwrap();
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
            let current = store_dir("/db".as_ref()).join("CURRENT");
            base.overwrite(&current, b"MANIFEST-0".to_vec()).unwrap();
        } else {
            let vectors = store_dir("/db".as_ref());
            let vectors = vectors.as_path();
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
    let model = store_dir(dir.path()).join("MODEL");
    std::fs::remove_file(&model).unwrap();
    std::fs::create_dir(&model).unwrap(); // exists, but reading it fails
    let embedder = Arc::new(BagOfWords::default());
    let err = match SemanticDb::open(dir.path(), Options::default(), embedder) {
        Ok(_) => panic!("an unreadable model file opened"),
        Err(e) => e,
    };
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(files_ending(&store_dir(dir.path()), ".sst").len(), 1);
}

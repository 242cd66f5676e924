"""Named indexes (DB.index): vectors in and out as numpy arrays, Python embedders, key
prefixes, metrics, failures, threads, close and reopen."""

import os
import random
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import shale

needs_model = pytest.mark.skipif(
    not os.environ.get("SHALE_MODEL_DIR"),
    reason="SHALE_MODEL_DIR is unset: run `export SHALE_MODEL_DIR=$(scripts/fetch-model.sh)` "
    "(scripts/test.sh does)",
)

VOCAB = ("cat", "dog", "car", "road", "tree", "sea", "fish", "bird")


def toy_embed(texts):
    """A deterministic toy model: how often each word of VOCAB occurs, plus a constant
    component so that no vector is zero. float64 on purpose: the bindings convert."""
    out = np.full((len(texts), len(VOCAB) + 1), 0.01)
    for i, text in enumerate(texts):
        words = text.lower().split()
        for j, word in enumerate(VOCAB):
            out[i, j] += words.count(word)
    return out


def seeded_rng():
    seed = int(os.environ.get("SHALE_TEST_SEED") or random.randrange(2**32))
    print(f"seed {seed} (rerun with SHALE_TEST_SEED={seed})")
    return np.random.default_rng(seed)


def unit_rows(rng, n, dim):
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_vectors_round_trip_through_numpy(db):
    rng = seeded_rng()
    dim = 16
    vectors = unit_rows(rng, 200, dim)
    keys = [b"vec/%04d" % i for i in range(200)]
    payloads = [b"payload %d" % i for i in range(200)]
    index = db.index("vecs", prefix=b"vec/", dim=dim)
    assert (index.name, index.prefix, index.dim, index.metric) == ("vecs", b"vec/", dim, "cosine")
    assert repr(index) == "<shale.VectorIndex 'vecs' prefix=b'vec/' dim=16 cosine>"

    index.put_vectors(keys, vectors, payloads)
    assert len(index) == 200
    # The value is the vector value that shale.vector_value makes, components little-endian.
    assert db[keys[7]] == shale.vector_value(vectors[7], payloads[7])
    stored = np.frombuffer(db[keys[7]], dtype="<f4", count=dim, offset=6)
    np.testing.assert_array_equal(stored, vectors[7])
    # decode_vector_value takes it apart again; any other value is refused.
    vector, payload = shale.decode_vector_value(db[keys[7]])
    assert vector.dtype == np.float32 and payload == payloads[7]
    np.testing.assert_array_equal(vector, vectors[7])
    for not_one in (b"plain text", b"", db[keys[7]][:5]):
        with pytest.raises(shale.InvalidArgumentError):
            shale.decode_vector_value(not_one)

    for i in (0, 42, 199):
        for query in (vectors[i], vectors[i].astype(np.float64), vectors[i].tolist()):
            hit = index.search(vector=query, k=1)[0]
            assert hit.key == keys[i]
            assert hit.document == payloads[i] and hit.text == payloads[i].decode()
            assert hit.score == pytest.approx(1.0, abs=1e-5)

    # One vector, an int list, a payload that is not text.
    index.put_vector(b"vec/one", [3, 0, 0, 0] + [0] * (dim - 4), b"\xff\x00")
    hit = index.search(vector=np.eye(dim, dtype=np.float32)[0], k=1)[0]
    assert hit.key == b"vec/one" and hit.document == b"\xff\x00" and hit.text is None
    assert "document=b'\\xff\\x00'" in repr(hit)
    # Without payloads: empty documents. Deleting a key removes it from the index.
    index.put_vectors([b"vec/two"], vectors[:1] * -1)
    assert index.search(vector=-vectors[0], k=1)[0].document == b""
    db.delete(b"vec/two")
    assert len(index) == 201
    assert b"vec/two" not in [h.key for h in index.search(vector=-vectors[0], k=5)]


def test_search_batch_shapes_and_agreement_with_single_searches(db):
    rng = seeded_rng()
    dim = 12
    vectors = unit_rows(rng, 300, dim)
    index = db.index("batch", prefix=b"b/", dim=dim)
    index.put_vectors([b"b/%03d" % i for i in range(300)], vectors)
    queries = unit_rows(rng, 40, dim)

    for exact in (False, True):
        keys, scores = index.search_batch(queries, k=5, exact=exact)
        assert isinstance(scores, np.ndarray)
        assert scores.dtype == np.float32 and scores.shape == (40, 5)
        assert len(keys) == 40 and all(len(row) == 5 for row in keys)
        for row, query in enumerate(queries):
            hits = index.search(vector=query, k=5, exact=exact)
            assert keys[row] == [h.key for h in hits]
            np.testing.assert_allclose(scores[row], [h.score for h in hits], rtol=1e-6)
            assert list(scores[row]) == sorted(scores[row], reverse=True)

    # Any float array: float64, Fortran order, a strided view, nested lists; any threads.
    expected = index.search_batch(queries, k=3)
    for variant in (queries.astype(np.float64), np.asfortranarray(queries),
                    np.repeat(queries, 2, axis=0)[::2], queries.tolist()):
        keys, scores = index.search_batch(variant, k=3, threads=1)
        assert keys == expected[0]
        np.testing.assert_allclose(scores, expected[1], rtol=1e-6)

    # Rows with fewer than k hits are padded: key None, score NaN.
    keys, scores = index.search_batch(queries[:2], k=304)
    assert scores.shape == (2, 304)
    assert all(k is not None for k in keys[0][:300]) and keys[0][300:] == [None] * 4
    assert not np.isnan(scores[:, :300]).any() and np.isnan(scores[:, 300:]).all()
    keys, scores = index.search_batch(queries[:2], k=3, prefix=b"b/00")   # 10 keys
    assert all(k.startswith(b"b/00") for row in keys for k in row)

    keys, scores = index.search_batch(np.empty((0, dim), np.float32), k=3)
    assert keys == [] and scores.shape == (0, 3)
    keys, scores = index.search_batch(queries[:2], k=0)
    assert keys == [[], []] and scores.shape == (2, 0)
    with pytest.raises(shale.InvalidArgumentError, match="dim 12"):
        index.search_batch(np.ones((2, dim + 1)), k=3)
    with pytest.raises(TypeError):
        index.search_batch(queries[0], k=3)      # one vector is not a matrix
    with pytest.raises(shale.InvalidArgumentError):
        index.search_batch(queries, k=-1)


def test_graph_search_recall_against_exact(db):
    rng = seeded_rng()
    dim, n = 24, 2000
    index = db.index("recall", prefix=b"r/", dim=dim, metric="l2")
    index.put_vectors([b"r/%05d" % i for i in range(n)],
                      rng.standard_normal((n, dim)).astype(np.float32))
    queries = rng.standard_normal((100, dim)).astype(np.float32)
    exact, _ = index.search_batch(queries, k=10, exact=True)
    graph, _ = index.search_batch(queries, k=10)
    recall = np.mean([len(set(e) & set(g)) / 10 for e, g in zip(exact, graph)])
    print(f"recall@10 of the graph search: {recall:.3f}")
    assert recall >= 0.9
    wide, _ = index.search_batch(queries, k=10, ef=400)
    assert np.mean([len(set(e) & set(g)) / 10 for e, g in zip(exact, wide)]) >= recall


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_metrics_score_as_documented(db, metric):
    index = db.index("m", prefix=b"m/", dim=3, metric=metric)
    vectors = np.array([[1, 0, 0], [0, 2, 0], [1, 1, 0], [-1, 0, 0.5]], np.float32)
    index.put_vectors([b"m/%d" % i for i in range(4)], vectors)
    query = np.array([1, 0.4, 0], np.float32)     # no two scores tie
    if metric == "cosine":
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        expected = unit @ (query / np.linalg.norm(query))
    elif metric == "dot":
        expected = vectors @ query
    else:
        expected = -((vectors - query) ** 2).sum(axis=1)
    for exact in (False, True):
        hits = index.search(vector=query, k=4, exact=exact)
        assert [h.key for h in hits] == [b"m/%d" % i for i in np.argsort(-expected)]
        np.testing.assert_allclose([h.score for h in hits], np.sort(expected)[::-1], atol=1e-5)

    # A zero vector has no direction: refused under cosine only. NaN everywhere; and a
    # batch with one bad row writes none of its rows.
    if metric == "cosine":
        with pytest.raises(shale.InvalidArgumentError):
            index.put_vector(b"m/zero", [0, 0, 0])
    else:
        index.put_vector(b"m/zero", [0, 0, 0])
    before = len(index)
    with pytest.raises(shale.InvalidArgumentError):
        index.put_vectors([b"m/a", b"m/b"], [[1, 1, 1], [1, np.nan, 1]])
    assert len(index) == before and b"m/a" not in db
    with pytest.raises(shale.InvalidArgumentError, match="dim 3"):
        index.put_vector(b"m/long", [1, 2, 3, 4])


def test_prefix_isolation(db):
    vecs = db.index("vecs", prefix=b"vec/", dim=2)
    texts = db.index("texts", prefix=b"txt/", embedder=toy_embed)

    # Outside every prefix: plain data, binary or not.
    db[b"raft/meta"] = b"\xff\x00\x01"
    db.put(b"blob", bytes(range(256)))
    # Inside a prefix: what the index can hold, or nothing is written.
    with pytest.raises(shale.InvalidArgumentError, match="vecs"):
        db[b"vec/bad"] = b"\xfe\x00"
    with pytest.raises(shale.InvalidArgumentError, match="no embedder"):
        db[b"vec/text"] = "a text in a vectors-only index"
    with pytest.raises(shale.InvalidArgumentError, match="outside"):
        vecs.put_vector(b"other/1", [1, 0])
    with pytest.raises(shale.InvalidArgumentError, match="outside"):
        vecs.put_vectors([b"vec/ok", b"txt/no"], [[1, 0], [0, 1]])
    with pytest.raises(shale.InvalidArgumentError):
        with db.batch() as b:
            b.put(b"plain", b"x")
            b.put(b"txt/binary", b"\xfe\x00")
    assert b"plain" not in db and b"vec/ok" not in db

    vecs.put_vector(b"vec/a1", [1, 0], b"a1")
    vecs.put_vector(b"vec/a2", [0.9, 0.1], b"a2")
    with db.batch() as b:      # a vector and plain data, atomically
        b.put(b"vec/b1", shale.vector_value([0.8, 0.2], b"b1"))
        b.put(b"meta/count", b"\x03")
    db[b"txt/1"] = "the cat and the dog"
    db[b"txt/2"] = "a fish in the sea"
    assert len(vecs) == 3 and len(texts) == 2
    assert {h.key for h in vecs.search(vector=[1, 0], k=10)} == {b"vec/a1", b"vec/a2", b"vec/b1"}
    assert [h.key for h in texts.search("sea fish", k=10)] == [b"txt/2", b"txt/1"]
    assert texts.search("cat")[0].text == "the cat and the dog"
    assert db[b"raft/meta"] == b"\xff\x00\x01" and db[b"meta/count"] == b"\x03"

    # Search bounds: whole keys, intersected.
    assert [h.key for h in vecs.search(vector=[1, 0], prefix=b"vec/a")] == [b"vec/a1", b"vec/a2"]
    assert [h.key for h in vecs.search(vector=[1, 0], prefix=b"vec/a", start=b"vec/a2")] == [
        b"vec/a2"]
    assert [h.key for h in vecs.search(vector=[1, 0], start=b"vec/a2", end=b"vec/b2")] == [
        b"vec/a2", b"vec/b1"]
    with pytest.raises(TypeError):
        vecs.search("text", vector=[1, 0])
    with pytest.raises(TypeError):
        vecs.search()
    with pytest.raises(shale.InvalidArgumentError, match="no embedder"):
        vecs.search("a vectors-only index has no model")


def test_callable_embedder_runs_in_the_workers_and_names_its_model(db_path):
    callers = set()

    def embed(texts):
        callers.add(threading.get_ident())
        return toy_embed(texts)

    with shale.open(db_path) as db:
        index = db.index("notes", prefix=b"n/", embedder=embed, embed_threads=2)
        assert index.dim == len(VOCAB) + 1      # learnt from one probe call
        with db.batch() as b:
            for i in range(50):
                b.put(b"n/%02d" % i, " ".join(VOCAB[j] for j in range(i % 8 + 1)))
        index.wait_indexed()
        assert len(index) == 50
        assert any(t != threading.get_ident() for t in callers), "no call from a worker"
        hits = index.search("bird", k=6)
        assert {h.key for h in hits} == {b"n/%02d" % i for i in range(7, 50, 8)}
        stats = index.stats()
        assert stats["live"] == 50 and stats["queued"] == 0
        assert stats["applied_since_open"] == stats["queued_since_open"]
        assert set(stats) == {
            "live", "queued", "queued_bytes", "stalls", "stall_micros", "checkpoints",
            "last_checkpoint_micros", "graph_bytes", "id_space", "tracked_keys",
            "applied_since_open", "queued_since_open"}

    # Reopened with the same model: nothing is embedded again.
    with shale.open(db_path) as db:
        index = db.index("notes", prefix=b"n/", embedder=embed)
        recovery = index.recovery()
        assert recovery["texts_to_embed"] == 0 and recovery["graph_nodes_reused"] == 50
    # Another model id: the stored vectors are another model's, so every text is again.
    with shale.open(db_path) as db:
        index = db.index("notes", prefix=b"n/", embedder=embed, model_id="toy-v2")
        recovery = index.recovery()
        assert recovery["other_model_vectors"] == 50 and recovery["texts_to_embed"] == 50
        assert len(index) == 50


def test_embedder_that_raises_fails_the_index_with_embedding_error(db):
    def flaky(texts):
        if any("boom" in t for t in texts):
            raise ValueError("cannot embed boom")
        return toy_embed(texts)

    index = db.index("flaky", prefix=b"t/", embedder=flaky, dim=len(VOCAB) + 1)
    db[b"t/1"] = "cat"
    index.wait_indexed()
    # A query that fails is that search's error only.
    with pytest.raises(shale.EmbeddingError, match="ValueError: cannot embed boom"):
        index.search("boom")
    assert index.search("cat")[0].key == b"t/1"
    # A value that fails is the index's failure; the write itself stands (the data is
    # the truth, and the next open indexes it again).
    db[b"t/2"] = "boom"
    with pytest.raises(shale.EmbeddingError, match="cannot embed boom"):
        index.wait_indexed()
    with pytest.raises(shale.EmbeddingError):
        index.search("cat")
    assert db[b"t/2"] == b"boom"
    db[b"plain"] = b"other keys are unaffected"


@pytest.mark.parametrize("answer, why", [
    (lambda texts: np.ones((len(texts), 3)), "shape"),
    (lambda texts: np.ones((len(texts) + 1, len(VOCAB) + 1)), "shape"),
    (lambda texts: "not an array", "not a 2-d array"),
    (lambda texts: np.full((len(texts), len(VOCAB) + 1), np.nan), "cannot be indexed"),
])
def test_embedder_with_a_bad_answer_is_an_embedding_error(db, answer, why):
    index = db.index("bad", prefix=b"t/", embedder=answer, dim=len(VOCAB) + 1)
    db[b"t/1"] = "cat"
    with pytest.raises(shale.EmbeddingError, match=why):
        index.wait_indexed()


def test_embedder_must_not_call_the_database(db):
    def nosy(texts):
        db.get(b"anything")
        return toy_embed(texts)

    index = db.index("nosy", prefix=b"t/", embedder=nosy, dim=len(VOCAB) + 1)
    with pytest.raises(shale.EmbeddingError, match="must not call the database"):
        index.search("cat")
    db[b"t/1"] = "cat"
    with pytest.raises(shale.EmbeddingError, match="must not call the database"):
        index.wait_indexed()


def test_search_batch_releases_the_gil(db):
    """A ticker thread keeps most of its pace while the main thread is in search_batch
    (as in test_threads.py: with the GIL held it would get a few percent)."""
    rng = seeded_rng()
    dim = 32
    index = db.index("gil", prefix=b"g/", dim=dim)
    index.put_vectors([b"g/%05d" % i for i in range(2000)], unit_rows(rng, 2000, dim))
    index.wait_indexed()
    queries = unit_rows(rng, 600, dim)

    ticks = 0
    stop = threading.Event()

    def ticker():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    t = threading.Thread(target=ticker)
    t.start()
    try:
        start = ticks
        time.sleep(0.2)
        pace = (ticks - start) / 0.2
        before = ticks
        started = time.perf_counter()
        index.search_batch(queries, k=10, exact=True, threads=1)
        elapsed = time.perf_counter() - started
        during = ticks - before
    finally:
        stop.set()
        t.join()
    share = during / (pace * elapsed)
    print(f"ticker at {share:.0%} of its pace during {elapsed:.3f} s of search_batch")
    assert elapsed > 0.1, f"the search was too quick ({elapsed:.3f} s) to tell anything"
    assert share > 0.2, f"the ticker ran at {share:.0%} of its pace: the GIL was held"


def test_reopen_keeps_the_index(db_path):
    rng = seeded_rng()
    vectors = unit_rows(rng, 300, 8)
    queries = unit_rows(rng, 5, 8)
    with shale.open(db_path) as db:
        index = db.index("keep", prefix=b"k/", dim=8, metric="dot")
        index.put_vectors([b"k/%03d" % i for i in range(300)], vectors)
        before = index.search_batch(queries, k=5)
    with shale.open(db_path) as db:
        index = db.index("keep", prefix=b"k/", dim=8, metric="dot")
        assert len(index) == 300
        recovery = index.recovery()
        assert recovery["graph_nodes_reused"] == 300 and recovery["texts_to_embed"] == 0
        assert recovery["store_damage"] is None and recovery["graph_damaged"] is False
        after = index.search_batch(queries, k=5)
        assert after[0] == before[0]
        np.testing.assert_array_equal(after[1], before[1])
    # Named alone, an index opens as it was defined: prefix, dimension, metric, graph.
    with shale.open(db_path) as db:
        index = db.index("keep")
        assert (index.prefix, index.dim, index.metric) == (b"k/", 8, "dot")
        assert index.recovery()["graph_nodes_reused"] == 300
        after = index.search_batch(queries, k=5)
        assert after[0] == before[0]
        text = db.index("text", prefix=b"t/", embedder=toy_embed, model_id="toy")
        db[b"t/1"] = "cat"
        text.wait_indexed()
    with shale.open(db_path) as db:
        # Without its model, an index of text could hold none of what it holds.
        with pytest.raises(shale.InvalidArgumentError, match="give its embedder"):
            db.index("text")
        assert db.index("text", embedder=toy_embed, model_id="toy").prefix == b"t/"


def test_opening_an_open_index_again_gives_the_same_index(db):
    index = db.index("same", prefix=b"s/", dim=2)
    index.put_vector(b"s/1", [1, 0])
    # ef_search may differ (it is only the default of searches); nothing else may.
    again = db.index("same", prefix=b"s/", dim=2, ef_search=100)
    assert len(again) == 1
    with pytest.raises(shale.InvalidArgumentError, match="other options"):
        db.index("same", prefix=b"other/", dim=2)


def test_close_closes_the_indexes(db_path):
    db = shale.open(db_path)
    index = db.index("c", prefix=b"c/", embedder=toy_embed)
    db[b"c/1"] = "cat"
    db.close()
    for call in (lambda: index.search("cat"), lambda: index.search(vector=[1] * 9),
                 lambda: index.search_batch([[1] * 9]), lambda: index.put_vector(b"c/2", [1] * 9),
                 lambda: index.put_vectors([b"c/2"], [[1] * 9]), index.wait_indexed,
                 index.stats, index.recovery, index.checkpoint, lambda: len(index),
                 lambda: db.index("c", prefix=b"c/", embedder=toy_embed)):
        with pytest.raises(shale.ClosedError):
            call()
    assert (index.name, index.prefix, index.dim) == ("c", b"c/", 9)
    # Reopened, the text written before the close is searchable.
    with shale.open(db_path) as db:
        assert db.index("c", prefix=b"c/", embedder=toy_embed).search("cat")[0].key == b"c/1"


def test_bad_index_arguments_are_reported_together(db):
    with pytest.raises(shale.InvalidArgumentError) as info:
        db.index("x", metric="cos", model_dir="/nowhere")
    assert len(info.value.problems) == 2, info.value.problems
    with pytest.raises(shale.InvalidArgumentError, match="needs dim"):
        db.index("x")
    with pytest.raises(shale.InvalidArgumentError, match="embedder must be"):
        db.index("x", embedder="bert", dim=3)
    with pytest.raises(shale.InvalidArgumentError, match="model_id"):
        db.index("x", dim=3, model_id="m")
    with pytest.raises(TypeError):
        db.index("x", embedder=42, dim=3)
    with pytest.raises(shale.InvalidArgumentError) as info:
        db.index("bad name!", dim=0, m=1, embed_threads=0)
    assert len(info.value.problems) >= 3, info.value.problems


def test_dropping_an_unclosed_database_with_a_python_embedder_does_not_hang(tmp_path):
    """The drop joins index workers that wait for the GIL inside the embedder; exit
    closes such a database while they can still run Python. In a subprocess, so that a
    hang or a crash fails this test instead of the run."""
    script = textwrap.dedent(f"""
        import gc, time
        import numpy as np
        import shale

        def slow(texts):
            time.sleep(0.01)
            return np.ones((len(texts), 4))

        path = {str(tmp_path / "db")!r}
        db = shale.open(path)
        index = db.index("slow", embedder=slow, dim=4, batch_size=2)
        for i in range(200):
            db[b"k%03d" % i] = "text %d" % i
        del db, index
        gc.collect()
        db = shale.open(path)          # the drop released the directory
        index = db.index("slow", embedder=slow, dim=4, batch_size=2)
        for i in range(200):
            db[b"j%03d" % i] = "text %d" % i
        print("exiting with embeddings queued", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "exiting with embeddings queued" in done.stdout


@needs_model
def test_minilm_index_over_a_prefix_beside_binary_keys(db_path):
    with shale.open(db_path) as db:
        docs = db.index("docs", prefix=b"docs/", embedder="minilm")
        assert docs.dim == 384
        db[b"docs/1"] = "A cheetah is running behind its prey."
        db[b"docs/2"] = "The stock market fell sharply after the announcement."
        db[b"raft/term"] = (7).to_bytes(8, "little")
        hits = docs.search("a big cat chasing an animal", k=2)
        assert [h.key for h in hits] == [b"docs/1", b"docs/2"]
        assert hits[0].text == "A cheetah is running behind its prey."


@needs_model
def test_db_index_finds_the_default_index_of_semantic_true(db_path):
    with shale.open(db_path, semantic=True) as db:
        index = db.index("default", embedder="minilm")
        db[b"a"] = "Astronomers discovered a planet orbiting a distant star."
        db[b"b"] = "He repaired the flat tire on his bicycle."
        assert index.search("exoplanet found by scientists", k=1)[0].key == b"a"
        assert db.search("exoplanet found by scientists", k=1)[0].key == b"a"

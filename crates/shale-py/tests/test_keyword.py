"""Keyword (BM25) search with DB.text_index, and VectorIndex.search's keyword and hybrid modes."""

import zlib

import numpy as np
import pytest

import shale

DOCS = {
    b"doc/1": "The Porter stemmer strips suffixes from English words",
    b"doc/2": "A stemmer by Martin Porter, published in 1980",
    b"doc/3": "ENOSPC: no space left on device",
    b"doc/4": "全文検索エンジン",
}


def test_a_put_is_found_and_a_delete_is_gone_as_the_write_returns(db):
    docs = db.text_index("docs", prefix=b"doc/")
    for k, v in DOCS.items():
        db[k] = v
    hits = docs.search("stemming porters")
    assert sorted(h.key for h in hits) == [b"doc/1", b"doc/2"]
    assert hits[0].score >= hits[1].score > 0
    assert [h.key for h in docs.search("enospc")] == [b"doc/3"]
    del db[b"doc/3"]
    assert docs.search("enospc") == []
    db[b"doc/2"] = "replaced: nothing about stems"
    assert [h.key for h in docs.search("porter")] == [b"doc/1"]
    assert len(docs) == 3
    assert docs.stats()["documents"] == 3


def test_phrases_all_words_ranges_and_highlights(db):
    docs = db.text_index("docs", prefix=b"doc/")
    for k, v in DOCS.items():
        db[k] = v
    assert [h.key for h in docs.search("porter stemmer", match="phrase")] == [b"doc/1"]
    assert sorted(h.key for h in docs.search("porter stemmer", match="all")) == [
        b"doc/1",
        b"doc/2",
    ]
    assert [h.key for h in docs.search("porter", start=b"doc/2")] == [b"doc/2"]
    hit = docs.search("suffix words", k=1, highlight=True)[0]
    assert [hit.text[s:e] for s, e in hit.highlights] == ["suffixes", "words"]
    with pytest.raises(shale.InvalidArgumentError):
        docs.search("x", match="nearby")


def test_chinese_and_japanese_text_with_the_cjk_analyzer(db):
    cjk = db.text_index("cjk", prefix=b"doc/", analyzer="cjk")
    for k, v in DOCS.items():
        db[k] = v
    hit = cjk.search("検索", highlight=True)[0]
    assert hit.key == b"doc/4"
    # Character offsets, as Python indexes strings.
    assert [hit.text[s:e] for s, e in hit.highlights] == ["検索"]
    assert cjk.analyzer == "cjk"
    with pytest.raises(shale.InvalidArgumentError):
        db.text_index("bad", analyzer="klingon")


def test_an_index_opened_later_finds_what_was_written_before(db_path):
    with shale.open(db_path) as db:
        for k, v in DOCS.items():
            db[k] = v
    with shale.open(db_path) as db:
        docs = db.text_index("docs", prefix=b"doc/")
        assert docs.recovery()["documents_analyzed"] == 4
        assert [h.key for h in docs.search("enospc")] == [b"doc/3"]
    with shale.open(db_path) as db:
        docs = db.text_index("docs", prefix=b"doc/")
        assert docs.recovery()["records_kept"] == 4


def bag_of_words(texts):
    """A stand-in embedder: each word hashed to one of 64 dimensions, by CRC-32 (Python's
    own str hash changes with every process, and with it which words share a dimension)."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().split():
            out[i, zlib.crc32(w.strip(".,:").encode()) % 64] += 1.0
        out[i, 63] += 0.01
    return out


def test_index_search_in_keyword_and_hybrid_modes(db):
    vectors = db.index("docs", prefix=b"doc/", embedder=bag_of_words, model_id="bow")
    db.text_index("docs", prefix=b"doc/")
    for k, v in DOCS.items():
        db[k] = v
    vectors.wait_indexed()
    kw = vectors.search("enospc", mode="keyword")
    assert [h.key for h in kw] == [b"doc/3"]
    assert kw[0].text.startswith("ENOSPC")
    for fusion in ["rrf", "minmax"]:
        hybrid = vectors.search("porter stemmer", mode="hybrid", fusion=fusion, k=3)
        assert {h.key for h in hybrid[:2]} == {b"doc/1", b"doc/2"}, fusion
    del db[b"doc/1"]
    assert b"doc/1" not in [h.key for h in vectors.search("porter", mode="hybrid")]
    with pytest.raises(shale.InvalidArgumentError):
        vectors.search("x", mode="fuzzy")
    with pytest.raises(TypeError):
        vectors.search(mode="keyword", vector=np.ones(64, dtype=np.float32))

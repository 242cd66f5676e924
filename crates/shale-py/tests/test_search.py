"""Semantic search with the real MiniLM model (scripts/fetch-model.sh fetches it)."""

import os

import pytest

import shale

needs_model = pytest.mark.skipif(
    not os.environ.get("SHALE_MODEL_DIR"),
    reason="SHALE_MODEL_DIR is unset: run `export SHALE_MODEL_DIR=$(scripts/fetch-model.sh)` "
    "(scripts/test.sh does)",
)

SENTENCES = {
    b"s00": "A man is eating food.",
    b"s01": "A man is riding a white horse on an enclosed ground.",
    b"s02": "A monkey is playing drums.",
    b"s03": "Two men pushed carts through the woods.",
    b"s04": "A cheetah is running behind its prey.",
    b"s05": "The new movie is awesome and the audience loved it.",
    b"s06": "The stock market fell sharply after the announcement.",
    b"s07": "She is baking bread in a wood-fired oven.",
    b"s08": "The quarterly report shows rising profits.",
    b"s09": "A child is building a sandcastle on the beach.",
    b"s10": "Heavy rain caused flooding in the city streets.",
    b"s11": "The orchestra performed a symphony by Beethoven.",
    b"s12": "He repaired the flat tire on his bicycle.",
    b"s13": "Astronomers discovered a planet orbiting a distant star.",
    b"s14": "The cat is sleeping on the warm windowsill.",
    b"s15": "Programmers fixed a bug in the database engine.",
    b"s16": "The team won the championship in overtime.",
    b"s17": "A volcano erupted and covered the village in ash.",
    b"s18": "Doctors recommend drinking plenty of water every day.",
    b"s19": "The train to the airport leaves every fifteen minutes.",
}


@needs_model
def test_paraphrase_finds_the_sentence_and_deleted_keys_never_return(db_path):
    with shale.open(db_path, semantic=True) as db:
        with db.batch() as b:
            for key, text in SENTENCES.items():
                b.put(key, text)
        db.wait_indexed()

        for exact in (True, False):
            hits = db.search("a big cat chasing an animal", k=3, exact=exact)
            assert len(hits) == 3
            assert b"s04" in [h.key for h in hits], hits
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
            top = hits[0]
            assert isinstance(top.key, bytes) and isinstance(top.text, str)
            assert -1.0 <= top.score <= 1.0
            assert repr(top).startswith("SearchHit(key=b'")

        hits = db.search("the kitty naps in the sun by the window", k=3)
        assert hits[0].key == b"s14"
        assert hits[0].text == SENTENCES[b"s14"]

        del db[b"s14"]
        for exact in (True, False):
            keys = [h.key for h in db.search("the kitty naps in the sun by the window",
                                             k=20, exact=exact)]
            assert b"s14" not in keys
            assert len(keys) == 19

        # Key bounds: only keys in [s10, s13).
        keys = [h.key for h in db.search("music", k=10, start=b"s10", end=b"s13")]
        assert sorted(keys) == [b"s10", b"s11", b"s12"]
        assert keys[0] == b"s11"

        stats = db.stats()
        assert stats["index_applied"] == stats["index_queued"]
        # One node id per text written; the delete took none.
        assert stats["index_id_space"] == 20
        # s14's delete is remembered until a later batch passes it: none has.
        assert stats["index_tracked_keys"] == 20


@needs_model
def test_non_text_value_is_refused_when_semantic(db_path):
    with shale.open(db_path, semantic=True) as db:
        with pytest.raises(shale.InvalidArgumentError):
            db[b"k"] = b"\xff\xfe not utf-8"
        assert b"k" not in db


@needs_model
def test_search_index_survives_reopen(db_path):
    with shale.open(db_path, semantic=True) as db:
        db[b"a"] = "Astronomers discovered a planet orbiting a distant star."
        db[b"b"] = "He repaired the flat tire on his bicycle."
    with shale.open(db_path, semantic=True) as db:
        assert db.search("exoplanet found by scientists", k=1)[0].key == b"a"


@needs_model
def test_search_counts_out_of_range_raise_instead_of_aborting(db_path):
    # Regression: k=2**40 made the engine reserve memory for k hits; the failed
    # allocation aborted the interpreter.
    with shale.open(db_path, semantic=True) as db:
        db[b"a"] = "Astronomers discovered a planet orbiting a distant star."
        for exact in (False, True):
            for kwargs in ({"k": 2**40}, {"k": -1}, {"k": 3, "ef": 2**40},
                           {"k": 3, "ef": -5}, {"k": 2**63}, {"k": -(2**70)},
                           {"k": 3, "ef": 2**100}):
                with pytest.raises(shale.InvalidArgumentError):
                    db.search("planet", exact=exact, **kwargs)
            with pytest.raises(TypeError):
                db.search("planet", k="3", exact=exact)
        assert db.search("planet", k=3)[0].key == b"a"

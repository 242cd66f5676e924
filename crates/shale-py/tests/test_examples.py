"""examples/wordnet_retrieval.py, the Python README's pipeline, on a few hundred of
WordNet's glosses with the real model: over a database and over a three-node cluster,
the same code answers by meaning, keywords and both. Needs $SHALE_MODEL_DIR and
$SHALE_WORDNET_DIR (scripts/test.sh sets both; CI fails without them)."""

import importlib.util
import os
import pathlib

import numpy as np
import pytest

pytest.importorskip(
    "langchain_core", reason="langchain-core is not installed (scripts/test-python.sh installs it)"
)

import shale  # noqa: E402

MODEL = os.environ.get("SHALE_MODEL_DIR")
WORDNET = os.environ.get("SHALE_WORDNET_DIR")
if not (MODEL and WORDNET):
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI runs the examples: set SHALE_MODEL_DIR and SHALE_WORDNET_DIR")
    pytest.skip("SHALE_MODEL_DIR or SHALE_WORDNET_DIR is unset", allow_module_level=True)

_path = pathlib.Path(__file__).parent.parent / "examples" / "wordnet_retrieval.py"
_spec = importlib.util.spec_from_file_location("wordnet_retrieval", _path)
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

LIMIT = 400


@pytest.fixture(scope="module")
def embeddings():
    from shale.langchain import ShaleEmbeddings

    return ShaleEmbeddings()


def test_the_model_embeds_meaning():
    model = shale.MiniLM()
    rows = model.embed(["a cat", "a kitten", "stock markets fell"])
    assert rows.shape == (3, model.dim) == (3, 384) and rows.dtype == np.float32
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2] + 0.2
    assert model.embed([]).shape == (0, 384)


@pytest.mark.parametrize("target_name", ["db", "cluster"])
def test_the_pipeline_answers_by_meaning_keywords_and_both(request, target_name, embeddings):
    target = request.getfixturevalue(target_name)
    rows = list(example.glosses(WORDNET, LIMIT))
    assert len(rows) == LIMIT
    doc_id, text, meta = rows[7]
    store = example.build(target, WORDNET, LIMIT, embeddings)
    # The gloss itself, asked for by meaning, comes first; one rare word of it, by keywords.
    assert store.similarity_search(text, k=1)[0].id == doc_id
    rare = max(text.split(": ", 1)[1].split(), key=len).strip(";,.()")
    by_keyword = store.similarity_search(rare, k=LIMIT, mode="keyword")
    assert doc_id in [d.id for d in by_keyword] and len(by_keyword) < LIMIT
    hybrid = store.similarity_search(text, k=3, mode="hybrid")
    assert hybrid[0].id == doc_id and hybrid[0].metadata == meta

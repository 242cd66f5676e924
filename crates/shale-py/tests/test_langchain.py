"""shale.langchain: LangChain's standard vector store tests (langchain-tests, pinned in
scripts/test-python.sh), run unmodified, sync and async, then what they do not cover:
scores, filters, max-marginal relevance, a reopen. Skipped, saying why, where
langchain-tests is not installed."""

import pytest

pytest.importorskip(
    "langchain_tests", reason="langchain-tests is not installed (scripts/test-python.sh installs it)"
)

from langchain_core.documents import Document  # noqa: E402
from langchain_tests.integration_tests.vectorstores import VectorStoreIntegrationTests  # noqa: E402

import shale  # noqa: E402
from shale.langchain import ShaleVectorStore  # noqa: E402


class TestShaleStandard(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path):
        db = shale.open(str(tmp_path / "db"))
        try:
            yield ShaleVectorStore(self.get_embeddings(), db)
        finally:
            db.close()


@pytest.fixture
def store(db):
    return ShaleVectorStore(VectorStoreIntegrationTests.get_embeddings(), db)


def test_scores_are_cosine_similarities_best_first(store):
    store.add_texts(["alpha", "beta", "gamma"], ids=["a", "b", "c"])
    hits = store.similarity_search_with_score("beta", k=3)
    assert [doc.id for doc, _ in hits][0] == "b"
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)
    relevance = store.similarity_search_with_relevance_scores("beta", k=3)
    assert all(0.0 <= r <= 1.0 for _, r in relevance)


def test_filters_by_metadata_dict_or_callable(store):
    texts = [f"text {i}" for i in range(40)]
    store.add_texts(texts, metadatas=[{"even": i % 2 == 0, "i": i} for i in range(40)])
    evens = store.similarity_search("text 3", k=5, filter={"even": True})
    assert len(evens) == 5 and all(d.metadata["even"] for d in evens)
    rare = store.similarity_search("text 3", k=5, filter=lambda d: d.metadata["i"] == 37)
    assert [d.metadata["i"] for d in rare] == [37]
    with pytest.raises(TypeError):
        store.similarity_search("text 3", filter=["not", "a", "filter"])


def test_max_marginal_relevance_returns_k_distinct_documents(store):
    store.add_texts([f"doc {i}" for i in range(30)])
    docs = store.max_marginal_relevance_search("doc 1", k=5, fetch_k=20)
    assert len(docs) == 5 and len({d.id for d in docs}) == 5


def test_a_reopened_store_finds_what_was_written(db_path):
    embeddings = VectorStoreIntegrationTests.get_embeddings()
    store = ShaleVectorStore.from_texts(
        ["kept", "gone"], embeddings, metadatas=[{"n": 1}, {"n": 2}], ids=["1", "2"], path=db_path
    )
    store.delete(["2"])
    store.close()
    with shale.open(db_path) as db:
        again = ShaleVectorStore(embeddings, db)
        assert again.similarity_search("gone", k=2) == [
            Document(id="1", page_content="kept", metadata={"n": 1})
        ]
        again.delete()
        assert again.similarity_search("kept", k=2) == []


def test_from_texts_needs_exactly_one_database(db, db_path):
    embeddings = VectorStoreIntegrationTests.get_embeddings()
    with pytest.raises(ValueError):
        ShaleVectorStore.from_texts(["x"], embeddings)
    with pytest.raises(ValueError):
        ShaleVectorStore.from_texts(["x"], embeddings, db=db, path=db_path + "-2")

"""shale.llama_index: the store as LlamaIndex's own store packages test theirs (the class,
add and query, delete by document, metadata filters, node and document ids, get, delete
and clear; text search and hybrid queries), over a database and over a three-node
cluster, then through a VectorStoreIndex, and a reopen. Skipped, saying why, where
llama-index-core is not installed."""

import pytest

pytest.importorskip(
    "llama_index.core", reason="llama-index-core is not installed (scripts/test-python.sh installs it)"
)

from llama_index.core import Document, MockEmbedding, StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from llama_index.core.vector_stores.types import (  # noqa: E402
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)

import shale  # noqa: E402
from shale.llama_index import ShaleVectorStore  # noqa: E402


def node(node_id, vector, doc, **metadata):
    return TextNode(
        id_=node_id,
        text=f"text of {node_id}",
        embedding=vector,
        metadata=metadata,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)},
    )


NODES = [
    node("a", [1.0, 0.0, 0.0], "doc1", author="ann", year=2001),
    node("b", [0.9, 0.1, 0.0], "doc1", author="bob", year=2005),
    node("c", [0.0, 1.0, 0.0], "doc2", author="ann", year=2010),
    node("d", [0.0, 0.0, 1.0], "doc3", author="cy", year=2020),
]


def query(store, vector, k=4, **kwargs):
    result = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=k, **kwargs))
    assert len(result.nodes) == len(result.ids) == len(result.similarities)
    assert [n.node_id for n in result.nodes] == result.ids
    return result


@pytest.fixture(params=["db", "cluster"])
def store(request, unique_name):
    """NODES in a store with keywords over a database, then over a three-node cluster."""
    target = request.getfixturevalue(request.param)
    s = ShaleVectorStore(
        target, index_name=unique_name, prefix=unique_name.encode() + b"/", keywords="english"
    )
    assert s.add(NODES) == ["a", "b", "c", "d"]
    return s


def test_class():
    assert BasePydanticVectorStore.__name__ in [b.__name__ for b in ShaleVectorStore.__mro__]
    assert ShaleVectorStore.class_name() == "ShaleVectorStore"


def test_an_empty_store_finds_nothing(db):
    assert query(ShaleVectorStore(db), [1.0, 0.0, 0.0]).ids == []


def test_query_returns_the_nearest_with_text_metadata_and_scores(store):
    result = query(store, [1.0, 0.0, 0.0], k=2)
    assert result.ids == ["a", "b"]
    assert result.similarities[0] == pytest.approx(1.0, abs=1e-5)
    assert result.similarities[0] >= result.similarities[1]
    first = result.nodes[0]
    assert first.get_content() == "text of a"
    assert first.metadata == {"author": "ann", "year": 2001}
    assert first.ref_doc_id == "doc1"


def test_delete_removes_every_node_of_a_document(store):
    store.delete("doc1")
    assert query(store, [1.0, 0.0, 0.0]).ids == ["c", "d"]
    store.delete("no-such-document")
    assert sorted(n.node_id for n in store.get_nodes()) == ["c", "d"]


def test_metadata_filters_node_ids_and_document_ids(store):
    ann = MetadataFilters(filters=[MetadataFilter(key="author", value="ann")])
    assert query(store, [0.5, 0.5, 0.0], filters=ann).ids == ["a", "c"]
    later = MetadataFilters(
        filters=[MetadataFilter(key="year", value=2005, operator=FilterOperator.GT)]
    )
    assert query(store, [1.0, 0.0, 0.0], filters=later).ids == ["c", "d"]
    either = MetadataFilters(
        filters=[MetadataFilter(key="author", value=["bob", "cy"], operator=FilterOperator.IN)]
    )
    assert query(store, [1.0, 0.0, 0.0], filters=either).ids == ["b", "d"]
    assert query(store, [1.0, 0.0, 0.0], node_ids=["c", "d"]).ids == ["c", "d"]
    assert query(store, [1.0, 0.0, 0.0], doc_ids=["doc2", "doc3"]).ids == ["c", "d"]
    assert query(store, [1.0, 0.0, 0.0], k=1, filters=ann, doc_ids=["doc2"]).ids == ["c"]


def text_search(store, words, k=3, **kwargs):
    return store.query(
        VectorStoreQuery(
            query_str=words, similarity_top_k=k, mode=VectorStoreQueryMode.TEXT_SEARCH, **kwargs
        )
    )


def test_text_search_and_hybrid_queries(store):
    enospc = "the ENOSPC error of a full disk"
    store.add([TextNode(id_="e", text=enospc, embedding=[0.0, 0.0, 1.0])])
    found = text_search(store, "enospc")
    assert found.ids == ["e"] and found.similarities[0] > 0
    assert found.nodes[0].get_content() == enospc
    hybrid = store.query(
        VectorStoreQuery(
            query_str="text of a",
            query_embedding=[1.0, 0.0, 0.0],
            similarity_top_k=2,
            mode=VectorStoreQueryMode.HYBRID,
        )
    )
    assert hybrid.ids[0] == "a"
    ann = MetadataFilters(filters=[MetadataFilter(key="author", value="ann")])
    assert sorted(text_search(store, "text", k=4, filters=ann).ids) == ["a", "c"]
    store.delete_nodes(node_ids=["e"])
    assert text_search(store, "enospc").ids == []


def test_other_modes_are_refused(store):
    with pytest.raises(NotImplementedError):
        store.query(
            VectorStoreQuery(
                query_embedding=[1.0, 0.0, 0.0], similarity_top_k=1, mode=VectorStoreQueryMode.MMR
            )
        )
    hybrid_without_words = VectorStoreQuery(
        query_embedding=[1.0, 0.0, 0.0], similarity_top_k=1, mode=VectorStoreQueryMode.HYBRID
    )
    with pytest.raises(ValueError, match="query string"):
        store.query(hybrid_without_words)


def test_get_nodes_delete_nodes_and_clear(store):
    assert [n.node_id for n in store.get_nodes(node_ids=["c", "zz", "a"])] == ["c", "a"]
    bob = MetadataFilters(filters=[MetadataFilter(key="author", value="bob")])
    assert [n.node_id for n in store.get_nodes(filters=bob)] == ["b"]
    store.delete_nodes(node_ids=["a"])
    store.delete_nodes(filters=bob)
    assert [n.node_id for n in store.get_nodes()] == ["c", "d"]
    # The deleted nodes' document keys went with them: deleting doc1 deletes nothing else.
    store.delete("doc1")
    assert [n.node_id for n in store.get_nodes()] == ["c", "d"]
    store.clear()
    assert store.get_nodes() == [] and query(store, [1.0, 0.0, 0.0]).ids == []


def test_a_node_added_again_is_replaced_with_its_new_document(store):
    store.add([node("a", [0.0, 0.0, 1.0], "doc9", author="zed", year=1999)])
    assert query(store, [0.0, 0.0, 1.0], k=2).ids[0] in ("a", "d")
    store.delete("doc1")  # "a" is no longer doc1's
    assert sorted(n.node_id for n in store.get_nodes()) == ["a", "c", "d"]
    store.delete("doc9")
    assert sorted(n.node_id for n in store.get_nodes()) == ["c", "d"]


def test_through_a_vector_store_index_and_a_reopen(db_path):
    embed = MockEmbedding(embed_dim=8)
    with shale.open(db_path) as db:
        storage = StorageContext.from_defaults(vector_store=ShaleVectorStore(db))
        index = VectorStoreIndex.from_documents(
            [Document(text="the cat sleeps", id_="d1"), Document(text="stocks fell", id_="d2")],
            storage_context=storage,
            embed_model=embed,
        )
        assert len(index.as_retriever(similarity_top_k=5).retrieve("cat")) == 2
        index.delete_ref_doc("d2")
    with shale.open(db_path) as db:
        again = VectorStoreIndex.from_vector_store(ShaleVectorStore(db), embed_model=embed)
        hits = again.as_retriever(similarity_top_k=5).retrieve("cat")
        assert [h.node.get_content() for h in hits] == ["the cat sleeps"]


def test_a_vector_store_index_over_a_cluster_answers_hybrid_retrievals(cluster, unique_name):
    embed = MockEmbedding(embed_dim=8)
    store = ShaleVectorStore(
        cluster, index_name=unique_name, prefix=unique_name.encode() + b"/", keywords="english"
    )
    index = VectorStoreIndex.from_documents(
        [Document(text="the cat sleeps", id_="d1"), Document(text="stocks fell", id_="d2")],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed,
    )
    def retrieve(mode, words, k):
        return index.as_retriever(similarity_top_k=k, vector_store_query_mode=mode).retrieve(words)

    assert [h.node.get_content() for h in retrieve("text_search", "stocks", 1)] == ["stocks fell"]
    assert retrieve("hybrid", "cat", 2)[0].node.get_content() == "the cat sleeps"
    index.delete_ref_doc("d1")
    assert retrieve("text_search", "cat", 2) == []


def test_a_partition_filter_searches_its_key_range(store, request, unique_name):
    target = store.client
    parted = ShaleVectorStore(
        target, index_name=unique_name + "p", prefix=unique_name.encode() + b"p/",
        keywords="english", partition="author",
    )
    parted.add(NODES)
    ann = MetadataFilters(filters=[MetadataFilter(key="author", value="ann")])
    assert query(parted, [1.0, 0.0, 0.0], filters=ann).ids == ["a", "c"]
    assert query(parted, [0.0, 1.0, 0.0], k=1, filters=ann).ids == ["c"]
    assert text_search(parted, "text", k=4, filters=ann).ids in (["a", "c"], ["c", "a"])
    parted.delete("doc1")
    assert query(parted, [1.0, 0.0, 0.0], filters=ann).ids == ["c"]
    assert sorted(n.node_id for n in parted.get_nodes()) == ["c", "d"]

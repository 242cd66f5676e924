"""LlamaIndex's vector store over a Shale database or cluster
(``pip install shale-db[llama-index]``).

    import shale
    from llama_index.core import StorageContext, VectorStoreIndex
    from shale.llama_index import ShaleVectorStore

    db = shale.open("/tmp/app")                       # or shale.connect("host:port,...")
    store = ShaleVectorStore(db, keywords="english")
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex.from_documents(documents, storage_context=storage)
    index.as_retriever(vector_store_query_mode="hybrid").retrieve("Porter stemmer")

Each node is two keys written in one atomic batch (``shale._documents``): its embedding
with its text, which a vector index and, with ``keywords`` set, a keyword index of the
same name read, and the node in JSON as LlamaIndex's own stores keep it
(``node_to_metadata_dict``). Each node with a source document also has an empty key
``prefix + b"r/" + ref doc id + b"\0" + node id``, written in the same batch, so that
deleting a document reads only its own nodes. A search sees every write acknowledged
before it and never a deleted or replaced node.

Query modes: ``DEFAULT`` (nearest ``query_embedding``), ``TEXT_SEARCH`` (BM25 over
``query_str``, exact and current at every write) and ``HYBRID`` (both, fused by
reciprocal rank; ``alpha`` is not used). With ``partition`` (a metadata field), a query
whose filters fix that field searches only its key range.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import (
    build_metadata_filter_fn,
    metadata_dict_to_node,
    node_to_metadata_dict,
)

import shale
from shale._documents import DocumentTable, Stored

__all__ = ["ShaleEmbedding", "ShaleVectorStore"]

_MODES = {
    VectorStoreQueryMode.DEFAULT: "vector",
    VectorStoreQueryMode.TEXT_SEARCH: "keyword",
    VectorStoreQueryMode.HYBRID: "hybrid",
}


class ShaleVectorStore(BasePydanticVectorStore):
    """Nodes and their embeddings in a Shale database (``shale.open``) or cluster
    (``shale.connect``), under one key prefix."""

    stores_text: bool = True
    flat_metadata: bool = False

    _db: Any = PrivateAttr()
    _table: Any = PrivateAttr()
    _refs: bytes = PrivateAttr()

    def __init__(
        self,
        db: Union["shale.DB", "shale.Cluster"],
        *,
        index_name: str = "llama_index",
        prefix: bytes = b"llama_index/",
        metric: str = "cosine",
        keywords: Optional[str] = None,
        partition: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        """``keywords`` (``"english"``, ``"simple"``, ``"cjk"``) adds the keyword index
        that ``TEXT_SEARCH`` and ``HYBRID`` queries search. ``partition`` names a metadata
        field (a string in every node) that orders the keys: a query whose filters fix it
        (an ``EQ`` filter under ``AND``) searches that key range only, exactly."""
        super().__init__(**kwargs)
        self._db = db
        self._table = DocumentTable(
            db, name=index_name, root=prefix, metric=metric, keywords=keywords,
            partition=partition,
        )
        self._refs = bytes(prefix) + b"r/"

    @classmethod
    def class_name(cls) -> str:
        return "ShaleVectorStore"

    @property
    def client(self) -> Union["shale.DB", "shale.Cluster"]:
        return self._db

    # Keys and values.

    def _ref_key(self, ref_doc_id: str, node_id: str) -> bytes:
        return self._refs + ref_doc_id.encode("utf-8") + b"\0" + node_id.encode("utf-8")

    def _selected(
        self, node_ids: Optional[List[str]], filters: Optional[MetadataFilters]
    ) -> List[Stored]:
        """The stored nodes among ``node_ids`` (all if None) that pass ``filters``."""
        ids = list(self._table.ids()) if node_ids is None else list(node_ids)
        found = self._table.get(ids)
        metadata = {stored.id: stored.metadata for stored in found}
        passes = build_metadata_filter_fn(lambda node_id: metadata[node_id], filters)
        return [stored for stored in found if passes(stored.id)]

    def _ref_of(self, stored: Stored) -> list[tuple[bytes, None]]:
        ref = stored.metadata.get("ref_doc_id")
        if ref and ref != "None":
            return [(self._ref_key(ref, stored.id), None)]
        return []

    # Writing.

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> List[str]:
        """Put ``nodes`` (each with its embedding) in one atomic batch; a node already
        stored under the same id is replaced."""
        if not nodes:
            return []
        # The old reference keys of replaced nodes go: their source may have changed.
        replaced = self._table.get([node.node_id for node in nodes])
        stale = [ref for old in replaced for ref in self._ref_of(old)]
        puts = []
        refs = []
        for node in nodes:
            meta = node_to_metadata_dict(node, remove_text=False, flat_metadata=self.flat_metadata)
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            vector = np.asarray(node.get_embedding(), dtype=np.float32)
            puts.append((node.node_id, vector, text, meta))
            if node.ref_doc_id:
                refs.append((self._ref_key(node.ref_doc_id, node.node_id), b""))
        self._table.write(puts, extra=stale + refs)
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document ``ref_doc_id``, in one batch."""
        start = self._refs + ref_doc_id.encode("utf-8") + b"\0"
        refs = [key for key, _ in self._db.prefix(start)]
        node_ids = [key[len(start):].decode("utf-8") for key in refs]
        self._table.write([], deletes=node_ids, extra=[(key, None) for key in refs])

    def delete_nodes(
        self,
        node_ids: Optional[List[str]] = None,
        filters: Optional[MetadataFilters] = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete the nodes among ``node_ids`` (all if None) that pass ``filters``."""
        chosen = self._selected(node_ids, filters)
        refs = [ref for stored in chosen for ref in self._ref_of(stored)]
        self._table.write([], deletes=[stored.id for stored in chosen], extra=refs)

    def clear(self) -> None:
        """Delete every node of the store."""
        refs = [(key, None) for key, _ in self._db.prefix(self._refs)]
        self._table.write([], deletes=list(self._table.ids()), extra=refs)

    # Reading.

    def get_nodes(
        self,
        node_ids: Optional[List[str]] = None,
        filters: Optional[MetadataFilters] = None,
    ) -> List[BaseNode]:
        chosen = self._selected(node_ids, filters)
        return [metadata_dict_to_node(stored.metadata) for stored in chosen]

    def _partition_value(self, filters: Optional[MetadataFilters]) -> Optional[str]:
        """The partition value ``filters`` require, if they fix one."""
        partition = self._table.partition
        if partition is None or filters is None or filters.condition != FilterCondition.AND:
            return None
        for f in filters.filters:
            fixed = isinstance(f, MetadataFilter) and f.operator == FilterOperator.EQ
            if fixed and f.key == partition and isinstance(f.value, str):
                return f.value
        return None

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` best nodes for the query that pass its filters, node
        ids and document ids, by its mode (``DEFAULT``, ``TEXT_SEARCH``, ``HYBRID``);
        scores higher for better (for ``DEFAULT`` the cosine similarity, the inner
        product, or minus the squared distance; BM25 for ``TEXT_SEARCH``; the fused score
        for ``HYBRID``)."""
        mode = _MODES.get(query.mode)
        if mode is None:
            raise NotImplementedError(f"ShaleVectorStore does not answer {query.mode} queries")
        if mode != "keyword" and query.query_embedding is None:
            raise ValueError(f"a {query.mode} query needs its query embedding")
        if mode != "vector" and not query.query_str:
            raise ValueError(f"a {query.mode} query needs its query string")
        k = query.similarity_top_k
        if mode == "hybrid" and query.hybrid_top_k:
            k = query.hybrid_top_k
        elif mode == "keyword" and query.sparse_top_k:
            k = query.sparse_top_k
        if k <= 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        # An empty list restricts nothing: a VectorStoreIndex whose store keeps the text
        # asks with `node_ids=[]`.
        node_ids = set(query.node_ids) if query.node_ids else None
        doc_ids = set(query.doc_ids) if query.doc_ids else None
        narrowed = node_ids is not None or doc_ids is not None or query.filters is not None
        ask = 4 * k if narrowed else k
        within = self._partition_value(query.filters)
        while True:
            hits = self._table.search(
                ask,
                vector=None if mode == "keyword" else query.query_embedding,
                text=None if mode == "vector" else query.query_str,
                mode=mode,
                within=within,
            )
            scores = dict(hits)
            found = self._table.get([node_id for node_id, _ in hits])
            metadata = {stored.id: stored.metadata for stored in found}
            passes = build_metadata_filter_fn(lambda node_id: metadata[node_id], query.filters)
            kept = [
                stored
                for stored in found
                if (node_ids is None or stored.id in node_ids)
                and (doc_ids is None or stored.metadata.get("ref_doc_id") in doc_ids)
                and passes(stored.id)
            ]
            if len(kept) >= k or len(hits) < ask:
                break
            ask *= 4
        kept = kept[:k]
        return VectorStoreQueryResult(
            nodes=[metadata_dict_to_node(stored.metadata) for stored in kept],
            similarities=[scores[stored.id] for stored in kept],
            ids=[stored.id for stored in kept],
        )


class ShaleEmbedding(BaseEmbedding):
    """A LlamaIndex embedding by Shale's own model (``shale.MiniLM``: all-MiniLM-L6-v2,
    local, no network), from ``model_dir`` or ``$SHALE_MODEL_DIR``."""

    _model: Any = PrivateAttr()

    def __init__(self, model_dir: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(model_name="all-MiniLM-L6-v2", **kwargs)
        self._model = shale.MiniLM(model_dir)

    @classmethod
    def class_name(cls) -> str:
        return "ShaleEmbedding"

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._model.embed(list(texts)).tolist()

    def _get_text_embedding(self, text: str) -> List[float]:
        return self._get_text_embeddings([text])[0]

    def _get_query_embedding(self, query: str) -> List[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> List[float]:
        return self._get_query_embedding(query)

"""LlamaIndex's vector store over a Shale database (``pip install shale-db[llama-index]``).

    import shale
    from llama_index.core import StorageContext, VectorStoreIndex
    from shale.llama_index import ShaleVectorStore

    db = shale.open("/tmp/app")
    storage = StorageContext.from_defaults(vector_store=ShaleVectorStore(db))
    index = VectorStoreIndex.from_documents(documents, storage_context=storage)

Each node is one key, ``prefix + b"n/" + node id``, whose value is a vector value
(``shale.vector_value``): the node's embedding, and as its payload the node in JSON as
LlamaIndex's own stores keep it (``node_to_metadata_dict``). The keys under
``prefix + b"n/"`` make a vector index of the database (``DB.index``, cosine by default).
Each node with a source document also has an empty key ``prefix + b"r/" + ref doc id +
b"\\0" + node id``, written in the same batch, so that deleting a document reads only its
own nodes. A search sees every write made before it and never a deleted or replaced node.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, List, Optional, Sequence

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
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

__all__ = ["ShaleVectorStore"]


class ShaleVectorStore(BasePydanticVectorStore):
    """Nodes and their embeddings in a Shale database, under one key prefix."""

    stores_text: bool = True
    flat_metadata: bool = False

    _db: Any = PrivateAttr()
    _name: str = PrivateAttr()
    _nodes: bytes = PrivateAttr()
    _refs: bytes = PrivateAttr()
    _metric: str = PrivateAttr()
    _index: Any = PrivateAttr(default=None)

    def __init__(
        self,
        db: "shale.DB",
        *,
        index_name: str = "llama_index",
        prefix: bytes = b"llama_index/",
        metric: str = "cosine",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._db = db
        self._name = index_name
        self._nodes = bytes(prefix) + b"n/"
        self._refs = bytes(prefix) + b"r/"
        self._metric = metric
        # The index, if the database has it; otherwise the first add makes it, with the
        # dimension of its embeddings.
        try:
            self._index = db.index(index_name)
        except shale.InvalidArgumentError:
            self._index = None

    @classmethod
    def class_name(cls) -> str:
        return "ShaleVectorStore"

    @property
    def client(self) -> "shale.DB":
        return self._db

    # Keys and values.

    def _node_key(self, node_id: str) -> bytes:
        return self._nodes + node_id.encode("utf-8")

    def _ref_key(self, ref_doc_id: str, node_id: str) -> bytes:
        return self._refs + ref_doc_id.encode("utf-8") + b"\0" + node_id.encode("utf-8")

    def _stored(self, value: bytes) -> dict:
        _, payload = shale.decode_vector_value(value)
        return json.loads(payload)

    def _all(self) -> Iterator[tuple[str, dict]]:
        for key, value in self._db.prefix(self._nodes):
            yield key[len(self._nodes):].decode("utf-8"), self._stored(value)

    def _selected(
        self, node_ids: Optional[List[str]], filters: Optional[MetadataFilters]
    ) -> List[tuple[str, dict]]:
        """The stored nodes among ``node_ids`` (all if None) that pass ``filters``."""
        if node_ids is None:
            found = list(self._all())
        else:
            found = []
            for node_id in node_ids:
                value = self._db.get(self._node_key(node_id))
                if value is not None:
                    found.append((node_id, self._stored(value)))
        metadata = dict(found)
        passes = build_metadata_filter_fn(lambda node_id: metadata[node_id], filters)
        return [(node_id, meta) for node_id, meta in found if passes(node_id)]

    def _remove(self, batch: Any, node_id: str, meta: dict) -> None:
        batch.delete(self._node_key(node_id))
        ref = meta.get("ref_doc_id")
        if ref and ref != "None":
            batch.delete(self._ref_key(ref, node_id))

    # Writing.

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> List[str]:
        """Put ``nodes`` (each with its embedding) in one atomic batch; a node already
        stored under the same id is replaced."""
        if not nodes:
            return []
        vectors = np.asarray([node.get_embedding() for node in nodes], dtype=np.float32)
        if self._index is None:
            self._index = self._db.index(
                self._name, prefix=self._nodes, dim=vectors.shape[1], metric=self._metric
            )
        replaced = self._selected([node.node_id for node in nodes], None)
        with self._db.batch() as batch:
            for node_id, meta in replaced:
                self._remove(batch, node_id, meta)
            for node, vector in zip(nodes, vectors):
                meta = node_to_metadata_dict(
                    node, remove_text=False, flat_metadata=self.flat_metadata
                )
                payload = json.dumps(meta, ensure_ascii=False).encode("utf-8")
                batch.put(self._node_key(node.node_id), shale.vector_value(vector, payload))
                if node.ref_doc_id:
                    batch.put(self._ref_key(node.ref_doc_id, node.node_id), b"")
        return [node.node_id for node in nodes]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document ``ref_doc_id``, in one batch."""
        start = self._refs + ref_doc_id.encode("utf-8") + b"\0"
        with self._db.batch() as batch:
            for key, _ in self._db.prefix(start):
                batch.delete(self._node_key(key[len(start):].decode("utf-8")))
                batch.delete(key)

    def delete_nodes(
        self,
        node_ids: Optional[List[str]] = None,
        filters: Optional[MetadataFilters] = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete the nodes among ``node_ids`` (all if None) that pass ``filters``."""
        with self._db.batch() as batch:
            for node_id, meta in self._selected(node_ids, filters):
                self._remove(batch, node_id, meta)

    def clear(self) -> None:
        """Delete every node of the store."""
        with self._db.batch() as batch:
            for start in (self._nodes, self._refs):
                for key, _ in self._db.prefix(start):
                    batch.delete(key)

    # Reading.

    def get_nodes(
        self,
        node_ids: Optional[List[str]] = None,
        filters: Optional[MetadataFilters] = None,
    ) -> List[BaseNode]:
        return [metadata_dict_to_node(meta) for _, meta in self._selected(node_ids, filters)]

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The ``similarity_top_k`` nodes nearest ``query.query_embedding`` that pass its
        filters, node ids and document ids; similarities higher for nearer (the cosine
        similarity, the inner product, or minus the squared distance)."""
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise NotImplementedError(f"ShaleVectorStore does not answer {query.mode} queries")
        if query.query_embedding is None:
            raise ValueError("a query embedding is required")
        k = query.similarity_top_k
        if self._index is None or k <= 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        # An empty list restricts nothing: a VectorStoreIndex whose store keeps the text
        # asks with `node_ids=[]`.
        node_ids = set(query.node_ids) if query.node_ids else None
        doc_ids = set(query.doc_ids) if query.doc_ids else None
        vector = np.asarray(query.query_embedding, dtype=np.float32)
        narrowed = node_ids is not None or doc_ids is not None or query.filters is not None
        ask = 4 * k if narrowed else k
        while True:
            hits = self._index.search(vector=vector, k=ask)
            metadata = {}
            for hit in hits:
                node_id = hit.key[len(self._nodes):].decode("utf-8")
                metadata[node_id] = json.loads(hit.document)
            passes = build_metadata_filter_fn(lambda node_id: metadata[node_id], query.filters)
            found = []
            for hit in hits:
                node_id = hit.key[len(self._nodes):].decode("utf-8")
                meta = metadata[node_id]
                if node_ids is not None and node_id not in node_ids:
                    continue
                if doc_ids is not None and meta.get("ref_doc_id") not in doc_ids:
                    continue
                if passes(node_id):
                    found.append((node_id, meta, hit.score))
            if len(found) >= k or len(hits) < ask:
                break
            ask *= 4
        found = found[:k]
        return VectorStoreQueryResult(
            nodes=[metadata_dict_to_node(meta) for _, meta, _ in found],
            similarities=[score for _, _, score in found],
            ids=[node_id for node_id, _, _ in found],
        )

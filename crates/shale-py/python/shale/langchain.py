"""LangChain's ``VectorStore`` over a Shale database (``pip install shale-db[langchain]``).

    import shale
    from shale.langchain import ShaleVectorStore

    db = shale.open("/tmp/app")
    store = ShaleVectorStore(embeddings, db)          # any langchain Embeddings
    store.add_texts(["the cat sleeps", "stocks fell"], metadatas=[{"n": 1}, {"n": 2}])
    store.similarity_search("where is the cat", k=1)

Each document is one key, ``prefix + id`` (the id as UTF-8), whose value is a vector value
(``shale.vector_value``): the embedding, and as its payload the document's text and
metadata in JSON. The keys under ``prefix`` make a vector index of the database
(``DB.index``, cosine by default), so a write is one atomic batch, and a search sees every
write made before it and never a deleted or replaced document. The store does not own a
database it is given; ``ShaleVectorStore.from_texts(..., path=DIR)`` opens one it owns
(``close()`` closes it).

Filters: ``filter`` is a dict of metadata values a document must equal, or a callable
``Document -> bool``; a filtered search asks the index for more hits until ``k`` pass or
the index has no more.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

import shale

__all__ = ["ShaleVectorStore"]

Filter = Union[dict, Callable[[Document], bool], None]


class ShaleVectorStore(VectorStore):
    """Documents and their embeddings in a Shale database, under one key prefix."""

    def __init__(
        self,
        embedding: Embeddings,
        db: "shale.DB",
        *,
        index_name: str = "langchain",
        prefix: bytes = b"langchain/",
        metric: str = "cosine",
    ) -> None:
        self._embedding = embedding
        self._db = db
        self._owned = False
        self._name = index_name
        self._prefix = bytes(prefix)
        self._metric = metric
        self._index = self._existing_index()

    def _existing_index(self) -> Optional["shale.Index"]:
        """The index, if the database has it already; otherwise it is made by the first
        write, which gives its dimension."""
        try:
            return self._db.index(self._name)
        except shale.InvalidArgumentError:
            return None

    def _index_for(self, dim: int) -> "shale.Index":
        if self._index is None:
            self._index = self._db.index(
                self._name, prefix=self._prefix, dim=dim, metric=self._metric
            )
        return self._index

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def db(self) -> "shale.DB":
        return self._db

    def close(self) -> None:
        """Close the database if this store opened it."""
        if self._owned:
            self._db.close()

    # Writing.

    def _key(self, doc_id: str) -> bytes:
        return self._prefix + doc_id.encode("utf-8")

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Optional[list[dict]] = None,
        *,
        ids: Optional[list[Optional[str]]] = None,
        **kwargs: Any,
    ) -> list[str]:
        texts = list(texts)
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValueError(f"{len(metadatas)} metadatas for {len(texts)} texts")
        if ids is not None and len(ids) != len(texts):
            raise ValueError(f"{len(ids)} ids for {len(texts)} texts")
        if not texts:
            return []
        ids = [i if i else uuid.uuid4().hex for i in (ids or [None] * len(texts))]
        metadatas = metadatas or [{} for _ in texts]
        vectors = np.asarray(self._embedding.embed_documents(texts), dtype=np.float32)
        index = self._index_for(vectors.shape[1])
        payloads = [
            json.dumps({"page_content": t, "metadata": m}).encode("utf-8")
            for t, m in zip(texts, metadatas)
        ]
        index.put_vectors([self._key(i) for i in ids], vectors, payloads)
        return ids

    def delete(self, ids: Optional[list[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Delete the documents ``ids`` (those that do not exist are ignored); with no ids,
        every document of the store. One atomic batch."""
        if ids is None:
            keys = [k for k, _ in self._db.prefix(self._prefix)]
        else:
            keys = [self._key(i) for i in ids]
        with self._db.batch() as batch:
            for key in keys:
                batch.delete(key)
        return True

    # Reading.

    def _document(self, doc_id: str, payload: bytes) -> Document:
        fields = json.loads(payload)
        return Document(id=doc_id, page_content=fields["page_content"], metadata=fields["metadata"])

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        out = []
        for doc_id in ids:
            value = self._db.get(self._key(doc_id))
            if value is not None:
                _, payload = shale.decode_vector_value(value)
                out.append(self._document(doc_id, payload))
        return out

    def _hits(self, vector: Sequence[float], k: int, filter: Filter) -> list[tuple[Document, float, bytes]]:
        """Up to ``k`` documents nearest ``vector`` that pass ``filter``, with their scores
        and keys, best first."""
        if self._index is None or k <= 0:
            return []
        passes = _filter_fn(filter)
        ask = k if passes is None else 4 * k
        while True:
            hits = self._index.search(vector=np.asarray(vector, dtype=np.float32), k=ask)
            found = []
            for hit in hits:
                doc = self._document(hit.key[len(self._prefix):].decode("utf-8"), hit.document)
                if passes is None or passes(doc):
                    found.append((doc, hit.score, hit.key))
            if len(found) >= k or len(hits) < ask:
                return found[:k]
            ask *= 4

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest ``embedding`` and their scores (higher is nearer:
        the cosine similarity, the inner product, or minus the squared distance)."""
        return [(doc, score) for doc, score, _ in self._hits(embedding, k, filter)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        vector = self._embedding.embed_query(query)
        return self.similarity_search_with_score_by_vector(vector, k, filter)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, filter)]

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Scores to relevance in [0, 1] (1 the nearest), for unit vectors."""
        if self._metric == "l2":
            return lambda score: 1.0 - min(1.0, (max(0.0, -score) ** 0.5) / 2**0.5)
        return lambda score: (1.0 + score) / 2.0

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter = None,
        **kwargs: Any,
    ) -> list[Document]:
        hits = self._hits(embedding, max(fetch_k, k), filter)
        if not hits:
            return []
        vectors = [shale.decode_vector_value(self._db.get(key))[0] for _, _, key in hits]
        chosen = maximal_marginal_relevance(
            np.asarray(embedding, dtype=np.float32), vectors, lambda_mult=lambda_mult, k=k
        )
        return [hits[i][0] for i in chosen]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter = None,
        **kwargs: Any,
    ) -> list[Document]:
        vector = self._embedding.embed_query(query)
        return self.max_marginal_relevance_search_by_vector(vector, k, fetch_k, lambda_mult, filter)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: Optional[list[dict]] = None,
        *,
        ids: Optional[list[str]] = None,
        db: Optional["shale.DB"] = None,
        path: Optional[str] = None,
        **kwargs: Any,
    ) -> "ShaleVectorStore":
        """A store over ``db``, or over a database it opens at ``path`` (and closes with
        ``close()``), holding ``texts``. Other keyword arguments go to the constructor."""
        if (db is None) == (path is None):
            raise ValueError("give a database (db=) or a directory (path=), one of them")
        owned = db is None
        store = cls(embedding, db if db is not None else shale.open(path), **kwargs)
        store._owned = owned
        store.add_texts(texts, metadatas, ids=ids)
        return store


def _filter_fn(filter: Filter) -> Optional[Callable[[Document], bool]]:
    if filter is None or callable(filter):
        return filter
    if isinstance(filter, dict):
        wanted = dict(filter)
        return lambda doc: all(doc.metadata.get(k) == v for k, v in wanted.items())
    raise TypeError(f"filter must be a dict or a callable, not {type(filter).__name__}")

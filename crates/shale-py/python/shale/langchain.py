"""LangChain's ``VectorStore`` over a Shale database or cluster
(``pip install shale-db[langchain]``).

    import shale
    from shale.langchain import ShaleVectorStore

    db = shale.open("/tmp/app")                       # or shale.connect("host:port,...")
    store = ShaleVectorStore(embeddings, db, keywords="english")
    store.add_texts(["the cat sleeps", "stocks fell"], metadatas=[{"n": 1}, {"n": 2}])
    store.similarity_search("where is the cat", k=1)                   # by meaning
    store.similarity_search("ENOSPC", k=1, mode="keyword")             # BM25
    store.as_retriever(search_kwargs={"mode": "hybrid"}).invoke("cat")  # both, fused

Each document is two keys written in one atomic batch (``shale._documents``): its
embedding with its text, which a vector index and, with ``keywords`` set, a keyword index
of the same name read, and its metadata in JSON. A search sees every write acknowledged
before it and never a deleted or replaced document; keyword results are exact BM25 over
every document, current at every write. The store does not own a database it is given;
``ShaleVectorStore.from_texts(..., path=DIR)`` opens one it owns (``close()`` closes it).

Search modes: ``"vector"`` (the default), ``"keyword"`` and ``"hybrid"`` (reciprocal rank
fusion of both, or ``fusion="minmax"``), chosen per call (``mode=``) or for the store
(``ShaleVectorStore(..., mode=)``). Filters: ``filter`` is a dict of metadata values a
document must equal, or a callable ``Document -> bool``; a filtered search asks the index
for more hits until ``k`` pass or the index has no more. A store made with
``partition="tenant"`` keeps each tenant's documents in one key range, and a dict filter
that names the tenant is the index's key-range search: exact, with no over-fetching.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable, Iterable, Optional, Sequence, Union

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from pydantic import ConfigDict

import shale
from shale._documents import DocumentTable, Stored

__all__ = ["ShaleEmbeddings", "ShaleRetriever", "ShaleVectorStore"]

Filter = Union[dict, Callable[[Document], bool], None]


class ShaleVectorStore(VectorStore):
    """Documents and their embeddings in a Shale database (``shale.open``) or cluster
    (``shale.connect``), under one key prefix."""

    def __init__(
        self,
        embedding: Embeddings,
        db: Union["shale.DB", "shale.Cluster"],
        *,
        index_name: str = "langchain",
        prefix: bytes = b"langchain/",
        metric: str = "cosine",
        keywords: Optional[str] = None,
        mode: str = "vector",
        partition: Optional[str] = None,
    ) -> None:
        """``keywords`` (``"english"``, ``"simple"``, ``"cjk"``) adds the keyword index
        that the ``"keyword"`` and ``"hybrid"`` modes search; ``mode`` is the default mode
        of a search. ``partition`` names a metadata field (a string in every document,
        a tenant or a source) that orders the keys: a filter that fixes it searches that
        key range only, exactly, with no over-fetching."""
        self._embedding = embedding
        self._db = db
        self._owned = False
        self._metric = metric
        self._mode = mode
        self._table = DocumentTable(
            db, name=index_name, root=prefix, metric=metric, keywords=keywords,
            partition=partition,
        )

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def db(self) -> Union["shale.DB", "shale.Cluster"]:
        return self._db

    def close(self) -> None:
        """Close the database if this store opened it."""
        if self._owned:
            self._db.close()

    # Writing.

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
        self._table.write(list(zip(ids, vectors, texts, metadatas)))
        return ids

    def delete(self, ids: Optional[list[str]] = None, **kwargs: Any) -> Optional[bool]:
        """Delete the documents ``ids`` (those that do not exist are ignored); with no ids,
        every document of the store. One atomic batch on a database."""
        self._table.write([], deletes=list(self._table.ids()) if ids is None else ids)
        return True

    # Reading.

    @staticmethod
    def _document(stored: Stored) -> Document:
        return Document(id=stored.id, page_content=stored.text, metadata=stored.metadata)

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return [self._document(s) for s in self._table.get(list(ids))]

    def _hits(
        self,
        k: int,
        filter: Filter,
        *,
        vector: Optional[Sequence[float]] = None,
        query: Optional[str] = None,
        mode: Optional[str] = None,
        fusion: str = "rrf",
    ) -> list[tuple[Stored, float]]:
        """Up to ``k`` documents best for ``vector`` and ``query`` by ``mode`` that pass
        ``filter``, with their scores, best first."""
        if k <= 0:
            return []
        mode = mode or self._mode
        within = None
        if isinstance(filter, dict) and self._table.partition is not None:
            within = filter.get(self._table.partition)
            filter = {f: v for f, v in filter.items() if f != self._table.partition} or None
        passes = _filter_fn(filter)
        ask = k if passes is None else 4 * k
        while True:
            hits = self._table.search(
                ask, vector=vector, text=query, mode=mode, fusion=fusion, within=within
            )
            scores = dict(hits)
            found = []
            for stored in self._table.get([doc_id for doc_id, _ in hits]):
                if passes is None or passes(self._document(stored)):
                    found.append((stored, scores[stored.id]))
            if len(found) >= k or len(hits) < ask:
                return found[:k]
            ask *= 4

    def _query_vector(self, query: str, mode: Optional[str]) -> Optional[list[float]]:
        """The query's embedding, unless the search reads keywords only."""
        if (mode or self._mode) == "keyword":
            return None
        return self._embedding.embed_query(query)

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest ``embedding`` and their scores (higher is nearer:
        the cosine similarity, the inner product, or minus the squared distance)."""
        hits = self._hits(k, filter, vector=embedding, mode="vector")
        return [(self._document(stored), score) for stored, score in hits]

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: Filter = None,
        *,
        mode: Optional[str] = None,
        fusion: str = "rrf",
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """The ``k`` best documents for ``query`` and their scores: by meaning
        (``mode="vector"``, as ``similarity_search_with_score_by_vector``), by BM25
        (``"keyword"``), or fused (``"hybrid"``: by ``fusion``, ``"rrf"`` or
        ``"minmax"``)."""
        vector = self._query_vector(query, mode)
        hits = self._hits(k, filter, vector=vector, query=query, mode=mode, fusion=fusion)
        return [(self._document(stored), score) for stored, score in hits]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score_by_vector(embedding, k, filter)]

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter = None, **kwargs: Any
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Scores to relevance in [0, 1] (1 the nearest), for unit vectors."""
        if self._metric == "l2":
            return lambda score: 1.0 - min(1.0, (max(0.0, -score) ** 0.5) / 2**0.5)
        return lambda score: (1.0 + score) / 2.0

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        if (kwargs.get("mode") or self._mode) != "vector":
            raise ValueError(
                'relevance scores are for mode="vector": BM25 and fused scores have no fixed range'
            )
        return super()._similarity_search_with_relevance_scores(query, k, **kwargs)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter = None,
        **kwargs: Any,
    ) -> list[Document]:
        hits = self._hits(max(fetch_k, k), filter, vector=embedding, mode="vector")
        if not hits:
            return []
        chosen = maximal_marginal_relevance(
            np.asarray(embedding, dtype=np.float32),
            [stored.vector for stored, _ in hits],
            lambda_mult=lambda_mult,
            k=k,
        )
        return [self._document(hits[i][0]) for i in chosen]

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
        db: Union["shale.DB", "shale.Cluster", None] = None,
        path: Optional[str] = None,
        **kwargs: Any,
    ) -> "ShaleVectorStore":
        """A store over ``db`` (a database or a cluster), or over a database it opens at
        ``path`` (and closes with ``close()``), holding ``texts``. Other keyword arguments
        go to the constructor."""
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


class ShaleRetriever(BaseRetriever):
    """The ``k`` best documents of a ``ShaleVectorStore`` for a query, by ``mode``:
    ``"vector"``, ``"keyword"`` or ``"hybrid"`` (the store needs ``keywords`` for the
    last two). ``invoke(query, k=...)`` overrides ``k`` for one call.

        ShaleRetriever(store=store, k=5, mode="hybrid").invoke("Porter stemmer")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: ShaleVectorStore
    k: int = 4
    mode: str = "hybrid"
    fusion: str = "rrf"
    filter: Any = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self.store.similarity_search(
            query,
            k=kwargs.get("k", self.k),
            filter=kwargs.get("filter", self.filter),
            mode=kwargs.get("mode", self.mode),
            fusion=kwargs.get("fusion", self.fusion),
        )


class ShaleEmbeddings(Embeddings):
    """LangChain ``Embeddings`` by Shale's own model (``shale.MiniLM``: all-MiniLM-L6-v2,
    local, no network), from ``model_dir`` or ``$SHALE_MODEL_DIR``."""

    def __init__(self, model_dir: Optional[str] = None) -> None:
        self._model = shale.MiniLM(model_dir)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._model.embed(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._model.embed([text])[0].tolist()

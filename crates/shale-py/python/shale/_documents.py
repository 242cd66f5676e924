"""What the LangChain and LlamaIndex stores share: documents with their embeddings, text
and metadata under one key prefix, in an embedded ``DB`` or a ``Cluster``.

A document ``id`` has two keys, written together in one atomic batch:

- ``root + b"d/" + id``: a vector value (``shale.vector_value``), the embedding with the
  document's text as its payload. The keys under ``root + b"d/"`` make the vector index
  ``name``, and, with ``keywords`` set, the keyword (BM25) index of the same name, which
  reads a vector value's payload as its text: keywords find the text and nothing else.
- ``root + b"m/" + id``: the document's metadata, JSON.

Searches answer ids and scores; the documents are then read in one snapshot (on a
cluster, each key linearizably), and a hit deleted in between is dropped, so no search
shows a deleted document.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np

from . import _shale
from ._cluster import Cluster
from ._errors import InvalidArgumentError, NotFoundError

MODES = ("vector", "keyword", "hybrid")

# A cluster's command holds at most 10,000 operations and 1 MiB of keys and values
# (shale-client's MAX_OPS_PER_COMMAND and MAX_COMMAND_BYTES): a larger write goes as
# several commands, each atomic, filled up to these.
_CLUSTER_OPS_PER_BATCH = 8000
_CLUSTER_BYTES_PER_BATCH = 900 * 1024


@dataclass
class Stored:
    """One document as stored: its id, text, metadata (decoded JSON) and embedding."""

    id: str
    text: str
    metadata: dict
    vector: np.ndarray


class DocumentTable:
    """The documents of one store: ``target`` is a ``shale.DB`` or a ``shale.Cluster``."""

    def __init__(
        self,
        target,
        *,
        name: str,
        root: bytes,
        metric: str = "cosine",
        keywords: Optional[str] = None,
    ) -> None:
        self.target = target
        self.cluster = isinstance(target, Cluster)
        self.name = name
        self.docs = bytes(root) + b"d/"
        self.meta = bytes(root) + b"m/"
        self.metric = metric
        self.keywords = keywords
        # Embedded: the Index, once the database has it. Cluster: whether this table has
        # defined it (defining it again as it is succeeds, so a reopen defines it again).
        self._index = None
        if not self.cluster:
            try:
                self._index = target.index(name)
            except InvalidArgumentError:
                self._index = None
            if self._index is not None and keywords:
                target.text_index(name, prefix=self.docs, analyzer=keywords)

    # Keys.

    def doc_key(self, doc_id: str) -> bytes:
        return self.docs + doc_id.encode("utf-8")

    def meta_key(self, doc_id: str) -> bytes:
        return self.meta + doc_id.encode("utf-8")

    def _id_of(self, key: bytes) -> str:
        return key[len(self.docs):].decode("utf-8")

    # Writing.

    def _define(self, dim: int) -> None:
        if self._index is not None:
            return
        if self.cluster:
            self.target.define_index(
                self.name, prefix=self.docs, model="vectors", dim=dim, metric=self.metric,
                keywords=self.keywords,
            )
            self._index = True
        else:
            self._index = self.target.index(
                self.name, prefix=self.docs, dim=dim, metric=self.metric
            )
            if self.keywords:
                self.target.text_index(self.name, prefix=self.docs, analyzer=self.keywords)

    def write(
        self,
        puts: Sequence[tuple[str, np.ndarray, str, dict]],
        deletes: Iterable[str] = (),
        extra: Sequence[tuple[bytes, Optional[bytes]]] = (),
    ) -> None:
        """Put the documents ``(id, vector, text, metadata)``, delete the ids ``deletes``
        and write the raw ``(key, value or None)`` pairs ``extra``: one atomic batch on a
        database; on a cluster, as few as its command limits allow, a document's two keys
        always in the same one."""
        if puts:
            self._define(len(puts[0][1]))
        groups: list[list[tuple[bytes, Optional[bytes]]]] = []
        for doc_id in deletes:
            groups.append([(self.doc_key(doc_id), None), (self.meta_key(doc_id), None)])
        for doc_id, vector, text, metadata in puts:
            value = _shale.vector_value(np.asarray(vector, dtype=np.float32), text.encode("utf-8"))
            meta = json.dumps(metadata, ensure_ascii=False).encode("utf-8")
            groups.append([(self.doc_key(doc_id), value), (self.meta_key(doc_id), meta)])
        groups += [[op] for op in extra]
        for ops in self._batches(groups):
            with self.target.batch() as batch:
                for key, value in ops:
                    if value is None:
                        batch.delete(key)
                    else:
                        batch.put(key, value)

    def _batches(self, groups):
        """The operations of ``groups`` as batches: all in one on a database; on a
        cluster, whole groups filled up to a command's limits."""
        if not self.cluster:
            yield [op for group in groups for op in group]
            return
        ops: list[tuple[bytes, Optional[bytes]]] = []
        size = 0
        for group in groups:
            group_size = sum(len(key) + len(value or b"") for key, value in group)
            full = size + group_size > _CLUSTER_BYTES_PER_BATCH
            if ops and (full or len(ops) + len(group) > _CLUSTER_OPS_PER_BATCH):
                yield ops
                ops, size = [], 0
            ops += group
            size += group_size
        if ops:
            yield ops

    # Reading.

    def get(self, ids: Sequence[str]) -> list[Stored]:
        """The stored documents among ``ids``, in their order; missing ones are left out."""
        keys = [k for i in ids for k in (self.doc_key(i), self.meta_key(i))]
        if self.cluster:
            values = [self.target.get(key) for key in keys]
        else:
            with self.target.snapshot() as snap:
                values = [snap.get(key) for key in keys]
        out = []
        for n, doc_id in enumerate(ids):
            value, meta = values[2 * n], values[2 * n + 1]
            if value is None or meta is None:
                continue
            vector, text = _shale.decode_vector_value(value)
            out.append(Stored(doc_id, text.decode("utf-8"), json.loads(meta), vector))
        return out

    def ids(self) -> Iterator[str]:
        """Every document id, in key order."""
        for key, _ in self.target.prefix(self.meta):
            yield key[len(self.meta):].decode("utf-8")

    def search(
        self,
        k: int,
        *,
        vector: Optional[Sequence[float]] = None,
        text: Optional[str] = None,
        mode: str = "vector",
        fusion: str = "rrf",
    ) -> list[tuple[str, float]]:
        """The ids and scores of the ``k`` best documents, best first: ``mode`` is
        ``"vector"`` (nearest ``vector``), ``"keyword"`` (BM25 over ``text``) or
        ``"hybrid"`` (both, fused by ``fusion``: ``"rrf"``, reciprocal rank, or
        ``"minmax"``, scaled scores)."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
        if mode != "vector" and not self.keywords:
            raise ValueError(
                f"mode={mode!r} needs a keyword index: make the store with keywords="
                '"english" (or "simple", "cjk")'
            )
        if fusion not in ("rrf", "minmax"):
            raise ValueError(f'fusion must be "rrf" or "minmax", not {fusion!r}')
        if k <= 0 or self._index is None and not self.cluster:
            return []
        vec = None if vector is None else np.asarray(vector, dtype=np.float32)
        if self.cluster:
            cluster_mode = {"vector": "meaning", "keyword": "keywords"}.get(mode, mode)
            try:
                hits = self.target.search(
                    self.name, text if mode != "vector" else None, vector=vec, k=k,
                    mode=cluster_mode, fusion="min_max" if fusion == "minmax" else fusion,
                )
            except NotFoundError:
                return []
        elif mode == "vector":
            hits = self._index.search(vector=vec, k=k)
        else:
            hits = self._index.search(text, vector=vec, k=k, mode=mode, fusion=fusion)
        return [(self._id_of(hit.key), hit.score) for hit in hits]

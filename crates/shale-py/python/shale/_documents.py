"""What the LangChain and LlamaIndex stores share: documents with their embeddings, text
and metadata under one key prefix, in an embedded ``DB`` or a ``Cluster``.

A document ``id`` has two keys, written together in one atomic batch:

- ``root + b"d/" + id``: a vector value (``shale.vector_value``), the embedding with the
  document's text as its payload. The keys under ``root + b"d/"`` make the vector index
  ``name``, and, with ``keywords`` set, the keyword (BM25) index of the same name, which
  reads a vector value's payload as its text: keywords find the text and nothing else.
- ``root + b"m/" + id``: the document's metadata, JSON.

With ``partition`` (the name of a metadata field whose values are strings), the first key
is ``root + b"d/" + value + b"\0" + id`` instead: the documents of one value are one key
range, and a search restricted to it (a filter on that field) is the index's own
key-range search, exact and without over-fetching.

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
from ._cluster import Cluster, _successor
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
        partition: Optional[str] = None,
    ) -> None:
        self.target = target
        self.cluster = isinstance(target, Cluster)
        self.name = name
        self.docs = bytes(root) + b"d/"
        self.meta = bytes(root) + b"m/"
        self.metric = metric
        self.keywords = keywords
        self.partition = partition
        # Embedded: the VectorIndex, once the database has it. Cluster: whether this table has
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

    def part_prefix(self, value: str) -> bytes:
        """The key range of the documents whose partition field is ``value``."""
        if not isinstance(value, str) or "\0" in value:
            raise ValueError(
                f"partition {self.partition!r}: each document's metadata needs it as a "
                f"string without NUL, not {value!r}"
            )
        return self.docs + value.encode("utf-8") + b"\0"

    def doc_key(self, doc_id: str, metadata: dict) -> bytes:
        if self.partition is None:
            return self.docs + doc_id.encode("utf-8")
        return self.part_prefix(metadata.get(self.partition)) + doc_id.encode("utf-8")

    def meta_key(self, doc_id: str) -> bytes:
        return self.meta + doc_id.encode("utf-8")

    def _id_of(self, key: bytes) -> str:
        rest = key[len(self.docs):]
        if self.partition is not None:
            part, nul, rest = rest.partition(b"\0")
            if not nul:
                raise InvalidArgumentError(
                    f"key {key!r} has no partition: the store was written without "
                    f"partition={self.partition!r}"
                )
        try:
            return rest.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidArgumentError(f"key {key!r} is not a document id of this store: {e}")

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
        deletes = list(deletes)
        # The keys of documents stored now: a delete's, and a put's whose partition moves.
        # Without a partition a document's key follows from its id alone.
        now = {}
        if self.partition is not None:
            now = self._read(lambda get: self._metadata(get, deletes + [p[0] for p in puts]))
        if puts:
            self._define(len(puts[0][1]))
        groups: list[list[tuple[bytes, Optional[bytes]]]] = []
        for doc_id in deletes:
            group = [(self.meta_key(doc_id), None)]
            if self.partition is None or doc_id in now:
                group.append((self.doc_key(doc_id, now.get(doc_id, {})), None))
            groups.append(group)
        for doc_id, vector, text, metadata in puts:
            value = _shale.vector_value(np.asarray(vector, dtype=np.float32), text.encode("utf-8"))
            meta = json.dumps(metadata, ensure_ascii=False).encode("utf-8")
            key = self.doc_key(doc_id, metadata)
            group = [(key, value), (self.meta_key(doc_id), meta)]
            if doc_id in now and self.doc_key(doc_id, now[doc_id]) != key:
                group.append((self.doc_key(doc_id, now[doc_id]), None))
            groups.append(group)
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

    def _read(self, reader):
        """``reader(get)``, with ``get`` reading one snapshot of a database, or reading a
        cluster linearizably key by key."""
        if self.cluster:
            return reader(self.target.get)
        with self.target.snapshot() as snap:
            return reader(snap.get)

    def _metadata(self, get, ids: Iterable[str]) -> dict:
        """The metadata of the stored documents among ``ids``."""
        found = {}
        for doc_id in ids:
            meta = get(self.meta_key(doc_id))
            if meta is not None:
                found[doc_id] = json.loads(meta)
        return found

    def get(self, ids: Sequence[str]) -> list[Stored]:
        """The stored documents among ``ids``, in their order; missing ones are left out."""

        def reader(get):
            metadata = self._metadata(get, ids)
            out = []
            for doc_id in ids:
                if doc_id not in metadata:
                    continue
                value = get(self.doc_key(doc_id, metadata[doc_id]))
                if value is None:
                    continue
                vector, text = _shale.decode_vector_value(value)
                out.append(Stored(doc_id, text.decode("utf-8"), metadata[doc_id], vector))
            return out

        return self._read(reader)

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
        within: Optional[str] = None,
    ) -> list[tuple[str, float]]:
        """The ids and scores of the ``k`` best documents, best first: ``mode`` is
        ``"vector"`` (nearest ``vector``), ``"keyword"`` (BM25 over ``text``) or
        ``"hybrid"`` (both, fused by ``fusion``: ``"rrf"``, reciprocal rank, or
        ``"minmax"``, scaled scores). ``within`` restricts the search to the documents
        whose partition field has that value."""
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
        if within is not None and self.partition is None:
            raise ValueError("a search within a partition needs a store made with partition=")
        part = None if within is None else self.part_prefix(within)
        vec = None if vector is None else np.asarray(vector, dtype=np.float32)
        if self.cluster:
            cluster_mode = {"vector": "meaning", "keyword": "keywords"}.get(mode, mode)
            bounds = {} if part is None else {"start": part, "end": _successor(part)}
            try:
                hits = self.target.search(
                    self.name, text if mode != "vector" else None, vector=vec, k=k,
                    mode=cluster_mode, fusion=fusion,
                    **bounds,
                )
            except NotFoundError:
                return []
        elif mode == "vector":
            hits = self._index.search(vector=vec, k=k, prefix=part)
        else:
            hits = self._index.search(text, vector=vec, k=k, mode=mode, fusion=fusion, prefix=part)
        return [(self._id_of(hit.key), hit.score) for hit in hits]

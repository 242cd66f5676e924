"""Shale: an embedded LSM-tree key-value store with semantic search.

    import shale

    with shale.open("/tmp/db") as db:
        db[b"k"] = b"v"
        assert db[b"k"] == b"v"
        with db.batch() as b:          # atomic: all of it or, if the block raises, none
            b.put(b"a", b"1")
            b.delete(b"k")
        for key, value in db.range(b"a", b"z"):
            ...

Keys and values are ``bytes`` (a ``bytearray`` works too, and a ``str`` is encoded as
UTF-8 for convenience); values always come back as ``bytes``. ``open``'s keyword options
are the engine's ``Options`` fields, listed in ``OPTIONS``.

``db.index(name, prefix=..., embedder=...)`` opens a semantic index over the keys under a
prefix: texts embedded by a model (``"minilm"`` or a Python callable) or vectors given as
numpy arrays (``VectorIndex.put_vectors``), searched with ``VectorIndex.search`` and
``VectorIndex.search_batch``. See crates/shale-py/README.md.

``shale.connect("127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")`` talks to a replicated
cluster (crates/shale-server) with the same calls: ``get``, ``put``, ``delete``,
``batch``, ``range``, ``prefix``, ``search``, ``define_index``; each write applies exactly
once, however often the client retries it.
"""

import atexit as _atexit

from ._errors import (
    AmbiguousError,
    ClosedError,
    ClusterError,
    ConflictError,
    CorruptionError,
    CrossShardError,
    DeadlineError,
    EmbeddingError,
    Error,
    InvalidArgumentError,
    IoError,
    LockedError,
    NotFoundError,
    PermissionDeniedError,
    PoisonedError,
    ServerError,
)
from . import _shale
from ._shale import (
    DB,
    Cursor,
    VectorIndex,
    Iterator,
    Keyspace,
    KeywordHit,
    MiniLM,
    SearchHit,
    Snapshot,
    TextIndex,
    Transaction,
    TtlDB,
    WriteBatch,
    decode_vector_value,
    open,
    open_ttl,
    repair,
    vector_value,
)

from ._cluster import Cluster, ClusterBatch, connect

# A database with a Python embedder is closed at exit, while its index workers can still
# run Python (during the interpreter's finalization they could not).
_atexit.register(_shale._close_for_exit)

#: The keyword options ``open`` accepts, with what they mean (defaults in brackets).
OPTIONS = {
    "create_if_missing": "create the database if the directory holds none [True]",
    "error_if_exists": "fail if a database already exists [False]",
    "read_only": "no lock, nothing written: any number beside the writer; writes raise [False]",
    "write_buffer_size": "bytes a memtable holds before it is flushed [64 MiB]",
    "max_write_buffers": "memtables in memory before writes stall [4]",
    "max_file_size": "target SSTable size of compactions [64 MiB]",
    "block_size": "uncompressed data block size [4096]",
    "block_restart_interval": "keys between restart points in a block [16]",
    "filter_bits_per_key": "bloom filter bits per key, 0 for none [10]",
    "compression": '"lz4", "zstd", "zstd:LEVEL", "snappy" or "none" ["lz4"]',
    "bottommost_compression": "compression of tables compacted into the last level (L6); None: as compression [None]",
    "compression_per_level": "codec names per level from L0, the last one for deeper levels; [] for compression everywhere [[]]",
    "cache_size": "block cache bytes [64 MiB]",
    "max_open_files": "SSTables kept open [1000]",
    "mmap_reads": "read SSTables through memory maps [True on 64-bit]",
    "max_manifest_file_size": "MANIFEST bytes before it is replaced by a snapshot [64 MiB]",
    "level0_compaction_trigger": "L0 files that start a compaction [4]",
    "level0_slowdown_trigger": "L0 files at which writes slow down [20]",
    "level0_stop_trigger": "L0 files at which writes stop [36]",
    "max_bytes_for_level_base": "smallest level target [256 MiB]",
    "level_size_multiplier": "growth between level targets [10]",
    "background_threads": "one flush thread plus compaction threads [2]",
    "rate_limit_bytes_per_sec": "ceiling on background writes, 0 = none [0]",
    "rate_limit_auto_tune": "let the engine pick the background rate [False]",
    "compaction_filter": "f(level, key, value) -> True (keep), False (remove) or bytes (replace), asked by compactions about each key's newest value in the default keyspace [None]",
    "keyspace_compaction_filters": "{keyspace name: f} for the other keyspaces, each f as compaction_filter [{}]",
    "semantic": "embed every value with MiniLM and allow db.search() [False]",
    "model_dir": "the MiniLM files for semantic=True [$SHALE_MODEL_DIR or the cache]",
}

__all__ = [
    "DB",
    "OPTIONS",
    "AmbiguousError",
    "ClosedError",
    "Cluster",
    "ClusterBatch",
    "ClusterError",
    "CrossShardError",
    "ConflictError",
    "CorruptionError",
    "Cursor",
    "DeadlineError",
    "EmbeddingError",
    "Error",
    "VectorIndex",
    "InvalidArgumentError",
    "IoError",
    "Iterator",
    "Keyspace",
    "KeywordHit",
    "LockedError",
    "MiniLM",
    "NotFoundError",
    "PermissionDeniedError",
    "PoisonedError",
    "SearchHit",
    "ServerError",
    "Snapshot",
    "TextIndex",
    "Transaction",
    "TtlDB",
    "WriteBatch",
    "connect",
    "open",
    "open_ttl",
    "repair",
    "vector_value",
]

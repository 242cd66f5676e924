"""Exception classes of shale: every error the engine reports is one of these.

They are plain Python so that each can also derive from the builtin it resembles
(``InvalidArgumentError`` is a ``ValueError``, ``IoError`` an ``OSError``); the extension
module raises them by name.
"""


class Error(Exception):
    """Base class of every error shale raises (besides KeyError and TypeError)."""


class IoError(Error, OSError):
    """An operating-system call failed. ``.op`` says what the engine was doing, ``.path``
    which file; ``.errno``/``.strerror``/``.filename`` are set as for ``OSError``."""


class CorruptionError(Error):
    """Bytes on disk do not decode: ``.file`` is the damaged file, ``.offset`` the byte
    offset where the damage was found, ``.reason`` what was wrong."""

    file = None
    offset = None
    reason = None


class InvalidArgumentError(Error, ValueError):
    """The call is wrong: an unknown or bad option (``.problems`` lists them all when
    options failed validation), a key too long, a value that is not text while semantic
    search is on."""

    problems = None


class LockedError(Error):
    """Another handle, in this process or another, has the database open (``.path``)."""

    path = None


class PoisonedError(Error):
    """An earlier background write or fsync failed; the database refuses writes until
    it is reopened."""


class ClosedError(Error):
    """The database was closed."""


class ConflictError(Error):
    """A transaction's commit found a key it read or wrote changed since it began;
    nothing was written, and the transaction may be run again."""


class EmbeddingError(Error):
    """The embedding model is missing, damaged or failed; the message says how to fetch
    it (``scripts/fetch-model.sh``, ``SHALE_MODEL_DIR``)."""


class ClusterError(Error):
    """A replicated cluster (``shale.connect``) could not answer as asked: base of the
    errors below. A refused request (a reserved key, a size limit, a bad index
    definition) is an ``InvalidArgumentError`` instead."""


class AmbiguousError(ClusterError):
    """A write failed in a way that leaves open whether it was applied: its session was
    closed while it was retried, or it was sent without a session."""


class CrossShardError(ClusterError):
    """The keys of one batch lie in more than one shard of the cluster's key space: a
    batch across shards is not supported, and nothing of it was applied."""


class DeadlineError(ClusterError, TimeoutError):
    """No answer within the connection's deadline (``connect(..., deadline=)``); a write
    may or may not have been applied."""


class NotFoundError(ClusterError, LookupError):
    """What the call names does not exist on the cluster (a search of an index never
    defined)."""


class PermissionDeniedError(ClusterError, PermissionError):
    """The token is missing or wrong, or a read-only token asked for a write."""


class ServerError(ClusterError):
    """Anything else the cluster answered (a node that failed)."""

"""``shale.connect``: a replicated Shale cluster with the calls of an embedded ``DB``.

The extension's ``Cluster`` does every call without the GIL on a runtime of its own;
this module adds what is plain Python: the batch context manager and the iterators that
page through ``range`` and ``prefix``.
"""

import os

from . import _shale

__all__ = ["connect", "ClusterBatch"]

_PAGE = 1000


def connect(addresses, token=None, tls_ca=None, deadline=10.0, sessions=True):
    """Connect to the cluster whose nodes listen at ``addresses`` (``"host:port"``, a
    string with commas or a list); nothing is reached until the first call.

    ``token`` is a client token (read-write or read-only); ``tls_ca`` the path of the
    cluster's certificate authority (PEM), which turns TLS on; ``deadline`` the most
    seconds one call may take, retries included. Writes go in a session, so a write the
    client retries after a lost leader or connection applies exactly once; with
    ``sessions=False`` such a write raises ``AmbiguousError`` instead.
    """
    if isinstance(addresses, str):
        addresses = [a.strip() for a in addresses.split(",") if a.strip()]
    cluster = _shale._connect(list(addresses), token, tls_ca, deadline, sessions)
    return Cluster(cluster)


class Cluster:
    """A connection to a replicated cluster: ``get``, ``put``, ``delete``, ``batch``,
    ``compare_and_set``, ``range``, ``prefix``, ``define_index``, ``search``, ``status``
    and the ``dict``-like ``[]``, ``in`` and ``del``. Reads are linearizable. Safe to use
    from several threads."""

    def __init__(self, inner):
        self._inner = inner

    @property
    def addresses(self):
        return self._inner.addresses

    def get(self, key, default=None):
        return self._inner.get(key, default)

    def __getitem__(self, key):
        return self._inner[key]

    def __contains__(self, key):
        return key in self._inner

    def put(self, key, value):
        """Set ``key`` to ``value``; returns the Raft log index it applied at."""
        return self._inner.put(key, value)

    def __setitem__(self, key, value):
        self._inner[key] = value

    def delete(self, key):
        """Remove ``key``; returns the log index."""
        return self._inner.delete(key)

    def __delitem__(self, key):
        del self._inner[key]

    def batch(self):
        """``with cluster.batch() as b: b.put(k, v); b.delete(k2)`` applies all of it
        atomically when the block ends, and nothing if the block raises."""
        return ClusterBatch(self._inner)

    def compare_and_set(self, key, expected, new_value):
        """Set ``key`` to ``new_value`` (delete it for ``None``) if its value is
        ``expected`` (``None``: absent); returns ``(swapped, value_before)``."""
        return self._inner.compare_and_set(key, expected, new_value)

    def range(self, start=b"", end=None):
        """``(key, value)`` pairs with ``start <= key < end`` (``None``: to the end), in
        key order, fetched a page at a time (each page read linearizably)."""
        start = b"" if start is None else start
        while True:
            pairs, start = self._inner._scan(start, end, _PAGE)
            yield from pairs
            if start is None:
                return

    def prefix(self, prefix):
        """``(key, value)`` pairs whose key starts with ``prefix``, in key order."""
        prefix = prefix.encode() if isinstance(prefix, str) else bytes(prefix)
        return self.range(prefix, _successor(prefix))

    def define_index(self, name, *, prefix, model="vectors", dim=None, metric="cosine",
                     keywords=None):
        """Define the index ``name`` over the keys under ``prefix`` on every replica (see
        ``shale._shale.Cluster.define_index``); returns the log index."""
        return self._inner.define_index(name, prefix=prefix, model=model, dim=dim,
                                        metric=metric, keywords=keywords)

    def search(self, index, query=None, **options):
        """The ``k`` best values of index ``index`` for ``query`` (a text) or
        ``vector=``, as ``shale.SearchHit``s, best first; ``mode`` is ``"meaning"``,
        ``"keywords"`` or ``"hybrid"`` (see ``shale._shale.Cluster.search``)."""
        return self._inner.search(index, query, **options)

    def backup(self, path):
        """Write an online backup of the cluster to ``path``: at least every write
        acknowledged before the call (``shale-server --restore`` starts a new cluster
        from it). Returns its size in bytes."""
        return self._inner.backup(os.fspath(path))

    def status(self, address):
        """The view of the node at ``address`` (not linearizable)."""
        return self._inner.status(address)

    def shards(self):
        """The shards of the key space in key order, as the first node reached knows
        them: dicts with ``group``, ``start``, ``end`` (``None``: every key from
        ``start`` on), ``version`` and ``leader_address`` (not linearizable). The
        cluster routes each request to its shard's group; a ``batch`` whose keys lie in
        more than one shard raises ``CrossShardError`` and applies nothing."""
        return self._inner.shards()

    def split(self, group, at, child):
        """Split ``group``'s shard at key ``at`` through its log: ``group`` keeps the keys
        below it, and the new group ``child`` (an id no group has) serves those from it
        on, on the same replicas. Returns the two shards as dicts like ``shards()``'s,
        without leaders; ``InvalidArgumentError`` for a key outside the shard or an id
        in use."""
        return self._inner.split(group, at, child)

    def move_replica(self, group, from_node, to_node, address):
        """Move ``group``'s replica from node ``from_node`` to node ``to_node``, which
        listens at ``address`` (started with the cluster's ``--split`` flags): it
        catches up as a learner, the leadership leaves ``from_node``, then one
        membership change replaces it. Returns the group's voters after the change."""
        return self._inner.move_replica(group, from_node, to_node, address)

    def __repr__(self):
        return f"shale.Cluster({self.addresses!r})"


class ClusterBatch:
    """Puts and deletes applied together by one ``Cluster.batch()`` block."""

    def __init__(self, inner):
        self._inner = inner
        self._ops = []
        self.index = None

    def put(self, key, value):
        self._ops.append((key, value))

    def delete(self, key):
        self._ops.append((key, None))

    def __len__(self):
        return len(self._ops)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and self._ops:
            self.index = self._inner._write(self._ops)
        self._ops = []
        return False


def _successor(prefix):
    """The least key after every key that starts with ``prefix`` (``None``: none)."""
    b = bytearray(prefix)
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return None
    b[-1] += 1
    return bytes(b)

# Drives one peer HNSW engine for shale-bench's vector workloads: hnswlib (Debian's
# python3-hnswlib, on /usr/bin/python3), faiss-cpu, usearch and rabitqlib (pinned PyPI wheels in
# the peers venv that scripts/fetch-bench-data.sh --peers makes). shale-bench passes this file
# on stdin, `python3 - ARGS_JSON`; ARGS_JSON names the engine, the base and query vectors
# (C-order float32 .npy files: the unit vectors Shale indexes) and the parameters.
#
# Every engine follows one protocol, written once below (`main`); an adapter class per
# library says only how that library builds, searches and counts its bytes:
# - a build per thread count, each a new index; the queries use the 1-thread build;
# - the queries of one ef run as one batch call on ONE thread (the library's own loop, one
#   query after another), so only the mean latency is known;
# - labels go to an .npy that shale-bench scores against its own exact search;
# - filtered search (an id range) where the library has one, else one line saying why not.
# One JSON object per measurement goes to stdout.
#
# Vectors are unit length, so every engine uses its inner-product metric (ordering neighbours
# as cosine does, like Shale's -dot) unless its adapter says otherwise.
import importlib.metadata
import json
import os
import resource
import sys
import tempfile
import time

import numpy as np

a = json.loads(sys.argv[1])
base = np.load(a["base"])
queries = np.load(a["queries"])
n, dim = base.shape
K, M, EF_CONSTRUCTION = a["k"], a["m"], a["ef_construction"]


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def emit(obj):
    obj["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(obj), flush=True)


def saved_bytes(save):
    """Size of the file `save(path)` writes: the index as the library stores it."""
    fd, path = tempfile.mkstemp(dir=a["out"], suffix=".index")
    os.close(fd)
    try:
        save(path)
        return os.path.getsize(path)
    finally:
        os.remove(path)


class Peer:
    """One engine. `add` is one timed build step; `search` runs every query on one thread.
    An adapter is made with the keyword arguments of its ENGINES entry; `params` gets the
    same ones and describes the engine for the records' notes."""

    # The distribution whose version the notes give.
    LIBRARY = None
    # add() may be called on consecutive pieces of the base (the insert window is timed).
    incremental = False
    # Why search_range is missing, or None where the adapter has it.
    no_filter = "the library's Python API has no filtered search"

    @classmethod
    def about(cls, **kw):
        return f"{cls.LIBRARY} {version(cls.LIBRARY)} {cls.params(**kw)}"

    def add(self, x, ids, threads):
        raise NotImplementedError

    def search(self, q, k, ef):
        raise NotImplementedError

    def search_range(self, q, k, ef, lo, hi):
        raise NotImplementedError

    def index_bytes(self):
        """(bytes, how they were counted)."""
        raise NotImplementedError


class Hnswlib(Peer):
    LIBRARY = "hnswlib"
    incremental = True
    no_filter = "python3-hnswlib 0.6 has no knn_query(filter=), which came in hnswlib 0.7"

    @staticmethod
    def params():
        return f"Index(space='ip'), M {M}, ef_construction {EF_CONSTRUCTION}, set_ef(ef)"

    def __init__(self):
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.init_index(
            max_elements=n, ef_construction=EF_CONSTRUCTION, M=M, random_seed=a["seed"]
        )

    def add(self, x, ids, threads):
        self.index.add_items(x, ids, num_threads=threads)

    def search(self, q, k, ef):
        self.index.set_ef(ef)
        return self.index.knn_query(q, k=k, num_threads=1)[0]

    def index_bytes(self):
        return saved_bytes(self.index.save_index), "save_index file size"


class Faiss(Peer):
    """IndexHNSWFlat, or IndexHNSWSQ with an 8-bit scalar quantizer (trained on the base)."""

    LIBRARY = "faiss-cpu"
    incremental = True
    no_filter = None

    @staticmethod
    def params(sq8):
        kind = "IndexHNSWSQ(QT_8bit)" if sq8 else "IndexHNSWFlat"
        return (
            f"{kind}, METRIC_INNER_PRODUCT, M {M}, efConstruction {EF_CONSTRUCTION}, "
            f"SearchParametersHNSW(efSearch=ef), omp_set_num_threads(1) for queries"
        )

    def __init__(self, sq8):
        import faiss

        self.faiss = faiss
        ip = faiss.METRIC_INNER_PRODUCT
        if sq8:
            self.index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, M, ip)
        else:
            self.index = faiss.IndexHNSWFlat(dim, M, ip)
        self.index.hnsw.efConstruction = EF_CONSTRUCTION

    def add(self, x, ids, threads):
        self.faiss.omp_set_num_threads(threads)
        if not self.index.is_trained:
            # The scalar quantizer's per-dimension ranges, from the whole base, in the build.
            self.index.train(base)
        self.index.add(x)  # ids are 0.. in order: the labels faiss assigns

    def _search(self, q, k, params):
        self.faiss.omp_set_num_threads(1)
        return self.index.search(q, k, params=params)[1]

    def search(self, q, k, ef):
        return self._search(q, k, self.faiss.SearchParametersHNSW(efSearch=ef))

    def search_range(self, q, k, ef, lo, hi):
        sel = self.faiss.IDSelectorRange(lo, hi)
        return self._search(q, k, self.faiss.SearchParametersHNSW(sel=sel, efSearch=ef))

    def index_bytes(self):
        return self.faiss.serialize_index(self.index).nbytes, "faiss.serialize_index size"


class Usearch(Peer):
    LIBRARY = "usearch"
    incremental = True

    @staticmethod
    def metric(dtype):
        # i8 codes of unit vectors are not unit length: cos renormalises them.
        return "cos" if dtype == "i8" else "ip"

    @staticmethod
    def params(dtype):
        return (
            f"Index(dtype={dtype}, metric={Usearch.metric(dtype)}), connectivity {M}, "
            f"expansion_add {EF_CONSTRUCTION}, expansion_search = ef, threads=1 for queries"
        )

    def __init__(self, dtype):
        from usearch.index import Index

        self.index = Index(
            ndim=dim,
            metric=self.metric(dtype),
            dtype=dtype,
            connectivity=M,
            expansion_add=EF_CONSTRUCTION,
        )

    def add(self, x, ids, threads):
        self.index.add(ids, x, threads=threads)

    def search(self, q, k, ef):
        self.index.expansion_search = ef
        return self.index.search(q, k, threads=1).keys

    def index_bytes(self):
        return self.index.memory_usage, (
            f"usearch memory_usage (serialized_length {self.index.serialized_length})"
        )


def padded(x):
    """`x` with zero columns up to 64: rabitqlib's rotation refuses fewer dimensions
    ('Unsupported dimension for FhtKacRotator': HnswIndex at construction, SymqgIndex at
    build, RaBitQKMeans at train). Inner products are unchanged."""
    if x.shape[1] >= 64:
        return x
    out = np.zeros((x.shape[0], 64), dtype=np.float32)
    out[:, : x.shape[1]] = x
    return out


class Rabitq(Peer):
    """rabitqlib's indexes: built in one call from the padded vectors, searched with the
    padded queries; `describe` and `build` say which index."""

    LIBRARY = "rabitqlib"

    @classmethod
    def params(cls):
        pad = f", vectors zero-padded from {dim} to 64 dimensions" if dim < 64 else ""
        return f"{cls.describe()}, metric ip, ef_construction {EF_CONSTRUCTION}{pad}, search(ef=ef)"

    def add(self, x, ids, threads):
        import rabitqlib

        self.index = self.build(rabitqlib, padded(x), threads)

    def search(self, q, k, ef):
        return self.index.search(padded(q), k=k, ef=ef, num_threads=1)[0]

    def index_bytes(self):
        return saved_bytes(self.index.save), "save() file size"


class RabitqHnsw(Rabitq):
    """HNSW over RaBitQ codes (no raw vectors kept): 16 centroids from RaBitQKMeans
    (spherical, as the library's examples do), nbits 8, in the build time."""

    CLUSTERS = 16
    NBITS = 8

    @classmethod
    def describe(cls):
        return (
            f"HnswIndex, M {M}, nbits {cls.NBITS}, "
            f"{cls.CLUSTERS} spherical RaBitQKMeans centroids"
        )

    def build(self, rabitqlib, x, threads):
        kmeans = rabitqlib.RaBitQKMeans(
            x.shape[1],
            self.CLUSTERS,
            spherical=True,
            num_threads=threads,
            final_assignment=rabitqlib.FinalAssignmentMode.Exact,
        )
        kmeans.train(x)
        index = rabitqlib.HnswIndex(
            dim=x.shape[1],
            max_elements=len(x),
            M=M,
            ef_construction=EF_CONSTRUCTION,
            nbits=self.NBITS,
            metric="ip",
            random_seed=a["seed"],
        )
        index.build(x, kmeans.centroids, kmeans.assignments, num_threads=threads)
        return index


class RabitqQg(Rabitq):
    """SymphonyQG: a fixed-degree graph searched with batched RaBitQ estimates, raw vectors
    kept (quantization_bits 0, the library's default), PiPNN initialisation (its default).
    max_degree must be a multiple of 32: 2 M rounded up, the size of an HNSW base layer's
    neighbour lists."""

    DEGREE = -(-2 * M // 32) * 32

    @classmethod
    def describe(cls):
        return f"SymqgIndex, max_degree {cls.DEGREE}, quantization_bits 0, init pipnn"

    def build(self, rabitqlib, x, threads):
        index = rabitqlib.SymqgIndex(
            dim=x.shape[1], max_degree=self.DEGREE, metric="ip", quantization_bits=0
        )
        index.build(x, ef_construction=EF_CONSTRUCTION, num_threads=threads)
        return index


# name: (adapter, its keyword arguments)
ENGINES = {
    "hnswlib": (Hnswlib, {}),
    "faiss-flat": (Faiss, {"sq8": False}),
    "faiss-sq8": (Faiss, {"sq8": True}),
    "usearch-f32": (Usearch, {"dtype": "f32"}),
    "usearch-i8": (Usearch, {"dtype": "i8"}),
    "rabitq-hnsw": (RabitqHnsw, {}),
    "rabitq-qg": (RabitqQg, {}),
}


def build(make, threads, window):
    rss0 = rss_bytes()
    peer = make()
    ids = np.arange(n, dtype=np.uint64)
    cpu0, t0 = time.process_time(), time.perf_counter()
    timed_window = window if window and peer.incremental else None
    if timed_window:
        lo, hi = timed_window
        peer.add(base[:lo], ids[:lo], threads)
        w0 = time.perf_counter()
        peer.add(base[lo:hi], ids[lo:hi], threads)
        w1 = time.perf_counter()
        peer.add(base[hi:], ids[hi:], threads)
    else:
        peer.add(base, ids, threads)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    index_bytes, how = peer.index_bytes()
    emit(
        {
            "what": "build",
            "threads": threads,
            "seconds": secs,
            "cpu_seconds": cpu,
            "ops": n,
            "index_bytes": index_bytes,
            "index_bytes_how": how,
            "rss_delta_bytes": rss_bytes() - rss0,
        }
    )
    if timed_window:
        emit({"what": "insert_window", "threads": threads, "seconds": w1 - w0, "ops": hi - lo})
    return peer


def timed(what, run, path, **fields):
    """Run one batch of queries, save its labels to `path` and say how long it took."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    labels = run()
    secs = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    # Missing results (-1, or the library's all-ones key) become 2^32 - 1: never a true id.
    np.save(path, np.asarray(labels).astype(np.int64).astype(np.uint32))
    emit(
        dict(
            what=what, seconds=secs, cpu_seconds=cpu, ops=len(labels), labels=path, **fields
        )
    )


def main():
    cls, kw = ENGINES[a["engine"]]
    emit({"what": "engine", "about": cls.about(**kw)})
    # The query index is the one built by one thread (deterministic order, as Shale's).
    peer = None
    for threads in a["threads"]:
        built = build(lambda: cls(**kw), threads, a["window"] if threads == 1 else None)
        if peer is None or threads == 1:
            peer = built
        del built
    out = f"{a['out']}/{a['engine']}"
    for ef in a["efs"]:
        # An ef below k is raised to k, as Shale and hnswlib do themselves.
        timed("query", lambda: peer.search(queries, K, max(ef, K)), f"{out}-ef{ef}.npy", ef=ef)
    f = a["filter"]
    if not f["ranges"]:
        return
    if peer.no_filter:
        emit({"what": "filter_unsupported", "why": peer.no_filter})
        return
    fq = queries[: f["queries"]]
    for sel, lo, hi in f["ranges"]:
        for ef in f["efs"]:
            timed(
                "filter",
                lambda: peer.search_range(fq, K, max(ef, K), lo, hi),
                f"{out}-sel{sel}-ef{ef}.npy",
                sel=sel,
                lo=lo,
                hi=hi,
                ef=ef,
            )


main()

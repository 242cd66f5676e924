# Drives hnswlib (Debian's python3-hnswlib) for shale-bench's HNSW workloads. shale-bench
# passes this file on stdin: `python3 - ARGS_JSON`, where ARGS_JSON names the base and query
# vectors (C-order float32 .npy files shale-bench wrote: the same unit vectors Shale indexes)
# and the parameters. One JSON object per measurement goes to stdout; the labels of each
# query run go to an .npy file that shale-bench scores against its own exact search.
#
# Vectors are unit length, so space 'ip' (distance 1 - dot) orders neighbours as cosine does,
# like Shale's -dot, without hnswlib's extra normalising copy of 'cosine'.
import json
import resource
import sys
import time

import hnswlib
import numpy as np

a = json.loads(sys.argv[1])
base = np.load(a["base"])
queries = np.load(a["queries"])
n, dim = base.shape
ids = np.arange(n, dtype=np.uint64)


def emit(obj):
    obj["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(obj), flush=True)


def build(threads, window):
    index = hnswlib.Index(space="ip", dim=dim)
    index.init_index(
        max_elements=n, ef_construction=a["ef_construction"], M=a["m"], random_seed=a["seed"]
    )
    cpu0, t0 = time.process_time(), time.perf_counter()
    if window:
        lo, hi = window
        index.add_items(base[:lo], ids[:lo], num_threads=threads)
        w0 = time.perf_counter()
        index.add_items(base[lo:hi], ids[lo:hi], num_threads=threads)
        w1 = time.perf_counter()
        index.add_items(base[hi:], ids[hi:], num_threads=threads)
    else:
        index.add_items(base, ids, num_threads=threads)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    emit({"what": "build", "threads": threads, "seconds": secs, "cpu_seconds": cpu, "ops": n})
    if window:
        emit({"what": "insert_window", "threads": threads, "seconds": w1 - w0, "ops": hi - lo})
    return index


# The query graph is the one built by one thread (deterministic order, as Shale's).
index = None
for threads in a["threads"]:
    built = build(threads, a["window"] if threads == 1 else None)
    if index is None or threads == 1:
        index = built

for ef in a["efs"]:
    index.set_ef(ef)
    cpu0, t0 = time.process_time(), time.perf_counter()
    labels, _ = index.knn_query(queries, k=a["k"], num_threads=1)
    secs = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    path = f"{a['out']}/hnswlib-labels-ef{ef}.npy"
    np.save(path, labels.astype(np.uint32))
    emit(
        {
            "what": "query",
            "ef": ef,
            "seconds": secs,
            "cpu_seconds": cpu,
            "ops": len(queries),
            "labels": path,
        }
    )

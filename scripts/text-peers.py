#!/usr/bin/env python3
"""LanceDB and Qdrant Edge, keyword-search peers of Shale, on the corpus and queries of
`shale-bench text`.

    scripts/fetch-bench-data.sh --peers        # the peers' venv, with lancedb and qdrant-edge-py
    ./target/release/shale-bench text --export /tmp/text-export
    ~/.cache/shale/peers-venv/bin/python scripts/text-peers.py /tmp/text-export \\
        [--engines lancedb,qdrant-edge] [--limit N] [--repeat 3] [--dir DIR]

Reads what `shale-bench text --export DIR` wrote (see scripts/text-reference.py). Each engine
runs in a process of its own, one after the other, in a fresh directory under --dir (default:
the system's temporary directory), removed afterwards. Prints a JSON list, one object per
engine, with the fields of shale-bench's TextResult where they apply:

- index_docs_per_s: documents / seconds from the first write until every document is
  searchable in the state the queries then run on (index built, shard optimized);
  write_docs_per_s counts the writes alone.
- size_bytes: the bytes the files under the engine's directory take on disk after indexing
  (allocated blocks: Qdrant preallocates files that stay mostly holes);
  size_apparent_bytes their lengths; size_parts_bytes size_bytes by sub-directory.
  Shale's size_bytes counts only its text index, not the documents.
- qps: the median of --repeat passes over all queries, top 10 each, one at a time from one
  thread; p50_us and p99_us over every query of every pass (shale-bench's are over its
  first pass).
- top10_same_as_shale: queries whose set of top-10 keys equals Shale's; top10_overlap: the
  mean of |ours & Shale's| / max(|ours|, |Shale's|) (1 when both are empty; the divisor
  is 10 except for the few queries that match fewer documents).
- fresh_without_reindex: after indexing, 100 documents holding a word no other holds are
  written, and one query for that word finds all 100 without any rebuild or optimize.

With --limit N only the first N documents are indexed (all queries run); Shale's rankings
are over the whole corpus, so the comparison fields are then null.

THREAD_ENV below is set before the libraries load (each variable names what honours it;
LANCE_IO_THREADS=1 hangs lancedb, so 2). LanceDB's index build gets one worker and Qdrant's
search pool one thread; process_threads counts the process's threads after the queries.

LanceDB (`lancedb`): a table (key, text), rows added in batches of BATCH_DOCS, then its
native full-text index on text, analyzed as close to Shale's English analyzer as LanceDB
allows: the "simple" tokenizer (splits at non-alphanumerics, where Shale uses UAX #29 word
boundaries), lower case, Lucene's 33 stop words, the English (Porter2) stemmer, no ASCII
folding, no token length limit, positions kept (Shale keeps them), one build worker. A
query is the raw query text, top 10 by LanceDB's BM25, with each hit's key; size_bytes
includes the data files, which hold the raw text; fts_index_bytes is the index alone.

Qdrant Edge (`qdrant-edge-py`), an embedded Qdrant shard: Qdrant's BM25 recipe on Shale's
own terms, so analysis cannot differ. A sparse vector "bm25" with the IDF modifier; each
document's vector holds, for each distinct term (its id in a vocabulary built from the
corpus), BM25's term weight tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen)), k1 =
1.2, b = 0.75, len its number of terms, avglen the corpus mean; the point's payload is its
key. A query is its distinct terms with weight 1.0, top 10 with payloads, so Qdrant's
score is sum(idf * weight): Shale's BM25 when Qdrant's idf is Lucene's, which
max_relative_score_difference and top10_same_up_to_ties check (as text-reference.py
does). Points are upserted in batches of BATCH_DOCS, then flushed and optimized;
max_search_threads = 1. The shard is then closed (size_bytes is measured closed: the
segment that optimize replaced lingers until then, size_while_open_bytes counts it) and
loaded again for the queries. The terms come analyzed from the export and the weights are
computed before the clock starts, so Qdrant's rates leave out the analysis that Shale's and
LanceDB's include; a query's vocabulary lookup is timed.
"""
import argparse
import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# Set before lancedb, pyarrow or qdrant_edge load. With LANCE_IO_THREADS=1 lancedb 0.40's
# first table.add never returns, so its I/O pool gets 2, the fewest that work.
THREAD_ENV = {
    "OMP_NUM_THREADS": "1",  # pyarrow's CPU pool
    "LANCE_CPU_THREADS": "1",  # Lance's CPU-bound work
    "LANCE_IO_THREADS": "2",  # Lance's I/O pool
    "RAYON_NUM_THREADS": "1",  # rayon pools, Qdrant's among them
}
for _name, _value in THREAD_ENV.items():
    os.environ.setdefault(_name, _value)

import numpy as np  # noqa: E402

# text-reference.py's reader, tie test and BM25 constants (K1, B, K = 10); the module's
# name has a hyphen, which only importlib can import.
reference = importlib.import_module("text-reference")

ENGINES = ("lancedb", "qdrant-edge")
BATCH_DOCS = 10_000
FRESH_DOCS = 100
# A word no WordNet gloss holds; checked against the corpus.
FRESH_WORD = "zyxquokkaberry"
# Lucene's English stop words, as Shale's English analyzer drops them
# (crates/shale-search/src/text/analyzer.rs).
STOP_WORDS = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
    "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
    "these", "they", "this", "to", "was", "will", "with",
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("export", nargs="?", default="/tmp/text-export")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--limit", type=int, default=None, help="index only the first N documents")
    p.add_argument("--repeat", type=int, default=3, help="passes over the queries")
    p.add_argument("--dir", default=None, help="where the engines' directories go")
    args = p.parse_args()
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in args.engines if e not in ENGINES]
    if unknown:
        p.error(f"unknown engines {unknown} (known: {', '.join(ENGINES)})")
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be at least 1")
    return args


def main():
    args = parse_args()
    if len(args.engines) > 1:
        results = [r for e in args.engines for r in run_child(args, e)]
    else:
        results = [run_engine(args, args.engines[0])]
    print(json.dumps(results, indent=2))


def run_child(args, engine):
    """This script again for one engine, in a process of its own; its results."""
    cmd = [sys.executable, os.path.abspath(__file__), args.export, "--engines", engine,
           "--repeat", str(args.repeat)]
    if args.limit is not None:
        cmd += ["--limit", str(args.limit)]
    if args.dir is not None:
        cmd += ["--dir", args.dir]
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out)


def run_engine(args, engine):
    export = args.export
    corpus = reference.read(os.path.join(export, "corpus.jsonl"))
    queries = reference.read(os.path.join(export, "queries.jsonl"))
    shale = reference.read(os.path.join(export, "shale.jsonl"))
    if args.limit is not None:
        corpus = corpus[: args.limit]
        shale = None
    if any(FRESH_WORD in d["text"].lower() for d in corpus):
        sys.exit(f"text-peers: the corpus holds {FRESH_WORD!r}; choose another FRESH_WORD")
    base = tempfile.mkdtemp(prefix="shale-text-peers-", dir=args.dir)
    try:
        run = run_lancedb if engine == "lancedb" else run_qdrant
        result = run(corpus, queries, args.repeat, os.path.join(base, engine))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rankings = result.pop("rankings")
    result.update(compare(rankings, shale, same_scores=engine == "qdrant-edge"))
    result["threads_env"] = {k: os.environ[k] for k in THREAD_ENV}
    print(f"text-peers: {json.dumps(result)}", file=sys.stderr)
    return result


def run_lancedb(corpus, queries, repeat, path):
    import lancedb
    import pyarrow as pa

    table = lancedb.connect(path).create_table(
        "glosses", schema=pa.schema([("key", pa.string()), ("text", pa.string())])
    )
    write_secs, index_secs, config = lancedb_index(table, pa, corpus)
    (index,) = table.list_indices()
    sizes = dir_sizes(path, parts_of=os.path.join(path, "glosses.lance"))

    def search(q):
        hits = lancedb_query(table, q["query"], reference.K)
        return list(zip(hits.column("key").to_pylist(), hits.column("_score").to_pylist()))

    timing = time_queries(queries, repeat, search)
    found = lancedb_fresh(table, pa)
    return {
        **common("lancedb", lancedb.__version__, corpus, write_secs, index_secs, sizes),
        **timing,
        "fts_index_bytes": index.size_bytes,
        "fresh_without_reindex": found == FRESH_DOCS,
        "fresh_found": found,
        "config": {
            "batch_docs": BATCH_DOCS,
            "fts": {k: v for k, v in vars(config).items() if k != "custom_stop_words"},
            "stop_words": "Lucene's 33",
        },
    }


def lancedb_index(table, pa, corpus):
    """Add the corpus in batches, then build the full-text index: the seconds of the adds,
    the seconds until the index covered every row, and the index's configuration."""
    from lancedb.index import FTS

    config = FTS(
        with_position=True,
        base_tokenizer="simple",
        language="English",
        max_token_length=None,
        lower_case=True,
        stem=True,
        remove_stop_words=True,
        custom_stop_words=STOP_WORDS,
        ascii_folding=False,
        num_workers=1,
    )
    started = time.perf_counter()
    for i in range(0, len(corpus), BATCH_DOCS):
        batch = corpus[i : i + BATCH_DOCS]
        table.add(pa.table({"key": [d["key"] for d in batch], "text": [d["text"] for d in batch]}))
    write_secs = time.perf_counter() - started
    table.create_index("text", config=config)
    index_secs = time.perf_counter() - started
    (index,) = table.list_indices()
    stats = table.index_stats(index.name)
    if stats.num_indexed_rows != len(corpus) or stats.num_unindexed_rows != 0:
        sys.exit(f"text-peers: lancedb indexed {stats}, not {len(corpus)} rows")
    return write_secs, index_secs, config


def lancedb_query(table, text, limit):
    """The top `limit` rows for `text` by LanceDB's BM25: an Arrow table (key, _score)."""
    return table.search(text, query_type="fts").select(["key", "_score"]).limit(limit).to_arrow()


def lancedb_fresh(table, pa):
    """Add FRESH_DOCS rows holding FRESH_WORD after the index was built; how many an FTS
    query finds before any optimize or re-index."""
    keys = [f"~fresh/{i:03}" for i in range(FRESH_DOCS)]
    table.add(pa.table({"key": keys, "text": [f"{FRESH_WORD} {i}" for i in range(FRESH_DOCS)]}))
    hits = lancedb_query(table, FRESH_WORD, 2 * FRESH_DOCS)
    return len(set(hits.column("key").to_pylist()) & set(keys))


def run_qdrant(corpus, queries, repeat, path):
    import qdrant_edge as qe

    vocab, weights = bm25_weights([d["terms"] for d in corpus])
    config = qe.EdgeConfig(
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        max_search_threads=1,
    )
    shard = qe.EdgeShard.create(path, config)
    keys = [d["key"] for d in corpus]
    write_secs, index_secs, optimized = qdrant_index(shard, qe, keys, weights)
    # The segment that optimize replaced stays on disk until the shard closes; the size
    # is the closed shard's, and the queries run on it loaded again.
    open_bytes = dir_sizes(path)["size_bytes"]
    shard.close()
    sizes = dir_sizes(path)
    shard = qe.EdgeShard.load(path, config)
    segments = shard.info().segments_count

    def search(q):
        ids = list(dict.fromkeys(vocab[t] for t in q["terms"] if t in vocab))
        return qdrant_query(shard, qe, ids, reference.K) if ids else []

    timing = time_queries(queries, repeat, search)
    # The fresh documents hold one term that no other holds, as FRESH_WORD would be.
    fresh = [f"~fresh/{i:03}" for i in range(FRESH_DOCS)]
    qdrant_upsert(shard, qe, len(keys), fresh, [{len(vocab): 1.0}] * FRESH_DOCS)
    hits = qdrant_query(shard, qe, [len(vocab)], 2 * FRESH_DOCS)
    found = len({k for k, _ in hits} & set(fresh))
    shard.close()
    return {
        **common("qdrant-edge", importlib.metadata.version("qdrant-edge-py"), corpus,
                 write_secs, index_secs, sizes),
        **timing,
        "size_while_open_bytes": open_bytes,
        "segments": segments,
        "optimize_changed_segments": optimized,
        "fresh_without_reindex": found == FRESH_DOCS,
        "fresh_found": found,
        "config": {
            "batch_docs": BATCH_DOCS,
            "sparse_vector": "bm25, modifier Idf, vocabulary ids from the corpus",
            "k1": reference.K1,
            "b": reference.B,
            "avglen": sum(len(d["terms"]) for d in corpus) / max(len(corpus), 1),
            "payload": "key",
            "max_search_threads": 1,
        },
    }


def qdrant_index(shard, qe, keys, weights):
    """Upsert the points in batches, then flush and optimize: the seconds of the upserts,
    the seconds until all that was done, and whether optimize changed any segment."""
    started = time.perf_counter()
    for i in range(0, len(keys), BATCH_DOCS):
        qdrant_upsert(shard, qe, i, keys[i : i + BATCH_DOCS], weights[i : i + BATCH_DOCS])
    write_secs = time.perf_counter() - started
    shard.flush()
    optimized = shard.optimize()
    index_secs = time.perf_counter() - started
    points = shard.info().points_count
    if points != len(keys):
        sys.exit(f"text-peers: qdrant-edge holds {points}, not {len(keys)} points")
    return write_secs, index_secs, optimized


def qdrant_upsert(shard, qe, first_id, keys, weights):
    """One upsert of points first_id, first_id + 1, ...: each a sparse vector of term
    weights {term id: weight} and its key as payload."""
    points = [
        qe.Point(first_id + i, {"bm25": qe.SparseVector(list(w), list(w.values()))}, {"key": k})
        for i, (k, w) in enumerate(zip(keys, weights))
    ]
    shard.update(qe.UpdateOperation.upsert_points(points))


def qdrant_query(shard, qe, ids, limit):
    """The top `limit` points for the terms `ids`, each weighing 1.0: (key, score)s."""
    request = qe.QueryRequest(
        limit=limit,
        query=qe.Query.Nearest(qe.SparseVector(ids, [1.0] * len(ids)), using="bm25"),
        with_payload=True,
    )
    return [(p.payload["key"], p.score) for p in shard.query(request)]


def bm25_weights(docs):
    """A vocabulary (term -> id, in order of first use) and each document's term weights
    {id: weight}, BM25's without idf: tf (k1 + 1) / (tf + k1 (1 - b + b len / avglen))."""
    k1, b = reference.K1, reference.B
    avglen = sum(map(len, docs)) / max(len(docs), 1)
    vocab, weights = {}, []
    for terms in docs:
        tf = {}
        for t in terms:
            i = vocab.setdefault(t, len(vocab))
            tf[i] = tf.get(i, 0) + 1
        norm = k1 * (1.0 - b + b * len(terms) / avglen)
        weights.append({i: f * (k1 + 1.0) / (f + norm) for i, f in tf.items()})
    return vocab, weights


def common(engine, version, corpus, write_secs, index_secs, sizes):
    n = len(corpus)
    return {
        "engine": engine,
        "version": version,
        "documents": n,
        "index_docs_per_s": n / index_secs,
        "write_docs_per_s": n / write_secs,
        **sizes,
    }


def time_queries(queries, repeat, search):
    """Every query `repeat` times (at least once), one at a time: the median pass's queries
    per second, latency quantiles over all passes, and the first pass's rankings."""
    runs, latencies_ns, rankings = [], [], None
    for _ in range(max(repeat, 1)):
        ranked = []
        started = time.perf_counter()
        for q in queries:
            t = time.perf_counter_ns()
            ranked.append(search(q))
            latencies_ns.append(time.perf_counter_ns() - t)
        runs.append(len(queries) / (time.perf_counter() - started))
        rankings = rankings or ranked
    us = np.array(latencies_ns, dtype=np.float64) / 1e3
    # As shale-bench: the middle of the sorted passes, and HdrHistogram's quantile (the
    # smallest latency at or above the quantile's share of queries).
    return {
        "queries": len(queries),
        "qps": sorted(runs)[len(runs) // 2],
        "p50_us": float(np.quantile(us, 0.5, method="inverted_cdf")),
        "p99_us": float(np.quantile(us, 0.99, method="inverted_cdf")),
        "process_threads": thread_count(),
        "rankings": rankings,
    }


def thread_count():
    """The process's threads now (Linux), else None."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def compare(rankings, shale, same_scores):
    """How the engine's top 10s match Shale's; with `same_scores` (scores on Shale's BM25
    scale), also up to ties and the largest relative score difference of a shared hit."""
    fields = ["top10_same_as_shale", "top10_overlap"]
    if same_scores:
        fields += ["top10_same_up_to_ties", "max_relative_score_difference"]
    if shale is None:
        return dict.fromkeys(fields)
    same = ties = 0
    overlap = worst = 0.0
    for ours, theirs in zip(rankings, shale):
        mine = list(zip(theirs["keys"], theirs["scores"]))
        a, b = {k for k, _ in ours}, set(theirs["keys"])
        same += a == b
        overlap += len(a & b) / max(len(a), len(b)) if a or b else 1.0
        ties += reference.tie_equal(mine, ours)
        for (ka, sa), (kb, sb) in zip(mine, ours):
            if ka == kb:
                worst = max(worst, abs(sa - sb) / max(abs(sa), 1e-12))
    out = {"top10_same_as_shale": same, "top10_overlap": overlap / max(len(shale), 1),
           "top10_same_up_to_ties": ties, "max_relative_score_difference": worst}
    return {k: out[k] for k in fields}


def dir_sizes(path, parts_of=None):
    """The bytes the files under `path` take on disk (allocated blocks: preallocated files
    are mostly holes), their apparent sizes, and the bytes under each entry of `parts_of`
    (default `path`; "." for its own files)."""
    parts_of = parts_of or path
    allocated = apparent = 0
    parts = {}
    for root, _, files in os.walk(path):
        rel = os.path.relpath(root, parts_of)
        part = "." if rel == "." else rel.split(os.sep)[0]
        for f in files:
            st = os.lstat(os.path.join(root, f))
            allocated += st.st_blocks * 512
            apparent += st.st_size
            parts[part] = parts.get(part, 0) + st.st_blocks * 512
    return {"size_bytes": allocated, "size_apparent_bytes": apparent, "size_parts_bytes": parts}


if __name__ == "__main__":
    main()

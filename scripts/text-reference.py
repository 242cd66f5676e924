#!/usr/bin/env python3
"""Shale's BM25 rankings against bm25s, the reference scorer, on the same tokens.

    scripts/fetch-bench-data.sh --peers        # the peers' venv, with bm25s
    ./target/release/shale-bench text --export /tmp/text-export
    ~/.cache/shale/peers-venv/bin/python scripts/text-reference.py /tmp/text-export

Reads what `shale-bench text --export DIR` wrote: corpus.jsonl (each document's key and the
terms Shale's English analyzer made of it, in key order), queries.jsonl (each query's terms)
and shale.jsonl (Shale's top 10 of each query, keys and scores). bm25s indexes those same
terms, so analysis cannot differ, with method "lucene", k1 = 1.2, b = 0.75: Lucene's idf,
ln(1 + (N - df + 0.5) / (df + 0.5)), and its term weight without the constant factor
k1 + 1, which Shale's weight has (so bm25s's scores are Shale's divided by 2.2; the ranking
is the same).

Prints, as JSON: the share of queries whose top 10 keys are the same list as Shale's; the
same, counting as equal two lists that differ only in the order of hits whose scores tie
(bm25s scores in float32, so near ties may swap); the largest relative difference of
scores; and bm25s's queries per second on one thread over the same queries.
"""
import json
import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import bm25s  # noqa: E402
import numpy as np  # noqa: E402

K1, B, K = 1.2, 0.75, 10


def read(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def tie_equal(ours, theirs, tol=1e-5):
    """Equal lengths and, rank by rank, equal scores (within float32's precision): where
    the keys differ, the hits tie."""
    return len(ours) == len(theirs) and all(
        abs(sa - sb) <= tol * max(abs(sa), 1e-9) for (_, sa), (_, sb) in zip(ours, theirs)
    )


def main():
    export = sys.argv[1] if len(sys.argv) > 1 else "/tmp/text-export"
    corpus = read(os.path.join(export, "corpus.jsonl"))
    queries = read(os.path.join(export, "queries.jsonl"))
    shale = read(os.path.join(export, "shale.jsonl"))
    keys = [d["key"] for d in corpus]
    tokens = [d["terms"] for d in corpus]
    vocab = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in tokens]
    retriever = bm25s.BM25(method="lucene", k1=K1, b=B)
    retriever.index(bm25s.tokenization.Tokenized(ids=ids, vocab=vocab), show_progress=False)

    # Distinct terms, in order, as Shale scores them; terms the corpus lacks score nothing.
    qids = []
    for q in queries:
        seen = []
        for t in q["terms"]:
            if t in vocab and vocab[t] not in seen:
                seen.append(vocab[t])
        qids.append(seen)

    def top(q):
        if not q:
            return []
        scores = retriever.get_scores(q)
        n = min(K, int(np.count_nonzero(scores)))
        if n == 0:
            return []
        # Every document tying with the n-th, then by score and key (corpus order is key
        # order), as Shale orders: a partition alone would cut a tie anywhere.
        kth = -np.partition(-scores, n - 1)[n - 1]
        tied = np.nonzero(scores >= kth)[0]
        best = sorted(tied, key=lambda i: (-float(scores[i]), i))[:n]
        return [(keys[i], float(scores[i]) * (K1 + 1.0)) for i in best]

    start = time.perf_counter()
    reference = [top(q) for q in qids]
    qps = len(qids) / (time.perf_counter() - start)

    same = ties = 0
    worst = 0.0
    for ours, theirs in zip(shale, reference):
        mine = list(zip(ours["keys"], ours["scores"]))
        same += [k for k, _ in mine] == [k for k, _ in theirs]
        ties += tie_equal(mine, theirs)
        for (ka, sa), (kb, sb) in zip(mine, theirs):
            if ka == kb:
                worst = max(worst, abs(sa - sb) / max(abs(sa), 1e-12))
    n = len(queries)
    print(
        json.dumps(
            {
                "queries": n,
                "documents": len(corpus),
                "same_top10": same,
                "same_top10_share": same / n,
                "same_top10_up_to_ties": ties,
                "same_top10_up_to_ties_share": ties / n,
                "max_relative_score_difference": worst,
                "bm25s_version": bm25s.__version__,
                "bm25s_qps_one_thread": qps,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

"""A retrieval pipeline over WordNet's glosses, with no network access: Shale's own
embedding model (all-MiniLM-L6-v2, local) and a LangChain store that answers by meaning,
by keywords (BM25) and by both, fused.

    python examples/wordnet_retrieval.py --wordnet "$(scripts/fetch-wordnet.sh)" \\
        --db /tmp/wordnet-db
    python examples/wordnet_retrieval.py --wordnet "$(scripts/fetch-wordnet.sh)" \\
        --cluster 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003

The second line runs the same code against a local three-node cluster
(``scripts/local-cluster.sh start DIR``). The model comes from ``$SHALE_MODEL_DIR`` or
the cache ``scripts/fetch-model.sh`` fills.
"""

import argparse
import os
import time

import shale
from shale.langchain import ShaleEmbeddings, ShaleVectorStore

QUERIES = [
    ("hunting small animals with dogs", "vector"),
    ("inflammation", "keyword"),
    ("games people play in the water", "hybrid"),
]


def glosses(wordnet_dir, limit):
    """``(id, text, metadata)`` for the first ``limit`` synsets of WordNet's data files."""
    n = 0
    for pos in ("noun", "verb", "adj", "adv"):
        path = os.path.join(wordnet_dir, f"data.{pos}")
        with open(path, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                # The licence at the top of each file is indented; a synset line is
                # "offset lex_filenum ss_type w_cnt word ... | gloss".
                if line.startswith(" ") or " | " not in line:
                    continue
                head, gloss = line.rstrip("\n").split(" | ", 1)
                fields = head.split()
                word = fields[4].replace("_", " ")
                yield f"{pos}.{fields[0]}", f"{word}: {gloss}", {"word": word, "pos": pos}
                n += 1
                if n == limit:
                    return


def build(target, wordnet_dir, limit, embeddings=None):
    """A store of ``limit`` glosses over ``target`` (a ``shale.DB`` or a ``shale.Cluster``)."""
    store = ShaleVectorStore(
        embeddings or ShaleEmbeddings(), target, index_name="wordnet", prefix=b"wordnet/",
        keywords="english",
    )
    rows = list(glosses(wordnet_dir, limit))
    for start in range(0, len(rows), 1000):
        chunk = rows[start:start + 1000]
        store.add_texts(
            [text for _, text, _ in chunk],
            metadatas=[meta for _, _, meta in chunk],
            ids=[doc_id for doc_id, _, _ in chunk],
        )
    return store


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wordnet", required=True, help="WordNet's dict directory")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--db", help="a database directory")
    target.add_argument("--cluster", help="host:port of the cluster's nodes, with commas")
    parser.add_argument("--limit", type=int, default=5000, help="glosses to load")
    args = parser.parse_args()

    # A search waits until every write before it is indexed: a generous deadline.
    target = shale.connect(args.cluster, deadline=120.0) if args.cluster else shale.open(args.db)
    started = time.perf_counter()
    store = build(target, args.wordnet, args.limit)
    print(f"{args.limit} glosses in {time.perf_counter() - started:.1f} s")
    for query, mode in QUERIES:
        print(f"\n{query!r} ({mode}):")
        for doc, score in store.similarity_search_with_score(query, k=3, mode=mode):
            print(f"  {score:7.3f}  {doc.page_content[:90]}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The import graph of crates/shale/src: no cycle, and no import up the layers.

Reads every `crate::<module>` path in the crate's sources (use lines and inline paths; test
modules after `#[cfg(test)]` and files named tests.rs are left out) and builds the graph of
top-level modules. It fails (exit 1) on:
- a cycle: a strongly connected component of more than one module;
- an upward import: a module importing one of a higher layer below (STYLE.md section 1:
  codec/fs/error <- wal/memtable/sst <- version/compaction/iter <- db), or a layer over
  `Db` reaching past the public API into the engine's parts;
- a module no layer lists, so that a new one is placed on purpose.

    python3 scripts/check-modules.py [--all]   # --all: print every module's dependencies
    python3 scripts/check-modules.py --self-test   # the negative control
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "shale", "src")

# Bottom to top; a module may import modules of its own layer (the graph stays acyclic) or
# of the layers below it.
LAYERS = [
    ("leaves", ["codec", "error", "filename", "fs", "key", "keyspace", "perf", "sync"]),
    # `iter` is the trait every source implements; `batch` the WAL payload.
    ("parts", ["batch", "cache", "iter", "options", "range_del", "rate_limit", "wal"]),
    ("files", ["memtable", "sst"]),
    ("tree", ["compaction", "version"]),
    ("engine", ["db", "tools"]),
    # The search layer over `Db` is a crate of its own (crates/shale-search), which sees
    # only the public API: the compiler keeps that rule.
    ("over Db", ["ttl"]),
    # Windows for tools and fuzzers onto everything below.
    ("windows", ["fuzzing", "inspect"]),
]

# What the layers over `Db` may use: the public API's modules and the leaves, never the
# engine's parts.
OVER_DB_MAY_USE = set(LAYERS[0][1]) | {"batch", "db", "options"}


def module_of(path):
    rel = os.path.relpath(path, ROOT)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def sources():
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".rs") and f != "tests.rs":
                yield os.path.join(dirpath, f)


def graph():
    edges = {}
    for path in sources():
        m = module_of(path)
        if m in ("lib", "main"):
            continue
        text = open(path, encoding="utf-8").read()
        cut = text.find("#[cfg(test)]")
        if cut >= 0:
            text = text[:cut]
        text = "\n".join(l for l in text.split("\n") if not l.lstrip().startswith("//"))
        deps = edges.setdefault(m, set())
        for d in re.findall(r"\bcrate::([a-z_][a-z0-9_]*)", text):
            if d != m:
                deps.add(d)
        # `use crate::{a, b::c}` groups
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
            for d in re.findall(r"(?:^|[,{\s])([a-z_][a-z0-9_]*)(?:::|\s*[,}]|$)", group):
                if d != m and d not in ("self", "super"):
                    deps.add(d)
    mods = set(edges)
    return {m: {d for d in ds if d in mods} for m, ds in edges.items()}


def components(edges):
    """Tarjan's strongly connected components."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(tuple(sorted(comp)))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def layer_problems(edges):
    rank = {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}
    problems = []
    for m in sorted(edges):
        if m not in rank:
            problems.append(f"module {m} is in no layer of LAYERS")
            continue
        for d in sorted(edges[m]):
            if d not in rank:
                continue
            if rank[d] > rank[m]:
                problems.append(
                    f"upward import: {m} ({LAYERS[rank[m]][0]}) uses {d} ({LAYERS[rank[d]][0]})"
                )
            elif LAYERS[rank[m]][0] == "over Db" and d not in OVER_DB_MAY_USE | set(LAYERS[rank[m]][1]):
                problems.append(f"{m} is a layer over Db but uses the engine's {d}")
    return problems


def self_test():
    """The negative control: a graph with a cycle, an upward import, a layer over Db that
    reaches into the engine and an unplaced module must give one problem each."""
    bad = {
        "codec": {"error"},
        "error": {"codec"},
        "wal": {"version"},
        "version": set(),
        "ttl": {"sst", "db"},
        "sst": set(),
        "db": set(),
        "newmod": set(),
    }
    problems = [" <-> ".join(c) for c in components(bad)] + layer_problems(bad)
    expected = ["codec <-> error", "upward import: wal", "ttl is a layer over Db", "newmod"]
    missing = [e for e in expected if not any(e in p for p in problems)]
    if missing or len(problems) != len(expected):
        print(f"check-modules --self-test: expected {expected}, got {problems}")
        return 1
    print(f"check-modules --self-test: the {len(expected)} planted problems are found")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    edges = graph()
    if "--all" in sys.argv:
        for m in sorted(edges):
            print(f"{m}: {' '.join(sorted(edges[m]))}")
    problems = [f"import cycle: {' <-> '.join(c)}" for c in components(edges)]
    problems += layer_problems(edges)
    for p in problems:
        print(p)
    if problems:
        print(f"check-modules: {len(problems)} problem(s) in the imports of crates/shale/src")
        return 1
    print(f"check-modules: {len(edges)} modules in {len(LAYERS)} layers, no cycle, no upward import")
    return 0


if __name__ == "__main__":
    sys.exit(main())

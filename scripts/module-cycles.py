#!/usr/bin/env python3
"""Import cycles between the top-level modules of crates/shale/src.

Reads every `crate::<module>` path in the crate's sources (use lines and inline paths; test
modules after `#[cfg(test)]` and files named tests.rs are left out), builds the graph of
top-level modules, and prints each strongly connected component of more than one module:
a cycle of dependencies (STYLE.md section 1 wants none). Exits 1 if a cycle is not within one
of the known ones below, so that no new one creeps in while the known ones are untied.

    python3 scripts/module-cycles.py [--all]   # --all: print every module's dependencies
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "shale", "src")

# The cycles the tree had when this check was written, each as its sorted modules. Remove
# one when it is untied; never add one.
KNOWN = {
    tuple(sorted(c))
    for c in [
        # The block cache holds sst blocks and sst reads through it; options name version's
        # level count; version's files hold the table cache, which purges through version.
        ["cache", "iter", "options", "purge", "sst", "table_cache", "version"],
    ]
}


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


def main():
    edges = graph()
    if "--all" in sys.argv:
        for m in sorted(edges):
            print(f"{m}: {' '.join(sorted(edges[m]))}")
    cycles = components(edges)
    # A known cycle that lost modules is progress; one that gained any, or a cycle
    # elsewhere, is new.
    new = [c for c in cycles if not any(set(c) <= set(k) for k in KNOWN)]
    for c in cycles:
        print(("NEW " if c in new else "known ") + "cycle: " + " <-> ".join(c))
    for c in sorted(KNOWN - set(cycles)):
        print("known cycle not found as listed (update KNOWN if it shrank): " + " <-> ".join(c))
    if new:
        print("module-cycles: a new import cycle between modules of crates/shale/src")
        return 1
    print(f"module-cycles: {len(cycles)} known cycle(s), no new one")
    return 0


if __name__ == "__main__":
    sys.exit(main())

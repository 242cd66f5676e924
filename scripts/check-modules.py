#!/usr/bin/env python3
"""The import graph of crates/shale/src: no cycle, and no import up the layers.

Reads every `crate::` and `super::` path in the crate's sources (use lines and inline paths;
comments, strings, test modules after `#[cfg(test)]` and files named tests.rs are left out)
and builds the graph of top-level modules. A path counts for the module it names and, where
it goes through re-exports (`pub use` in lib.rs or any module), for the module that defines
the item: `crate::CompactionFilter` is an import of `compaction`. It fails (exit 1) on:
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
    # `compaction_filter` and `snapshot` are the user's policy and handle that the options
    # carry.
    (
        "parts",
        [
            "batch", "cache", "compaction_filter", "iter", "options", "range_del",
            "rate_limit", "snapshot", "wal",
        ],
    ),
    ("files", ["memtable", "sst"]),
    ("tree", ["compaction", "version"]),
    ("engine", ["db", "verify"]),
    # The search layer over `Db` is a crate of its own (crates/shale-search), which sees
    # only the public API: the compiler keeps that rule.
    ("over Db", ["ttl"]),
    # Windows for tools and fuzzers onto everything below.
    ("windows", ["fuzzing", "inspect"]),
]

# What the layers over `Db` may use: the public API's modules and the leaves, never the
# engine's parts.
OVER_DB_MAY_USE = set(LAYERS[0][1]) | {"batch", "compaction_filter", "db", "options", "snapshot"}


def module_of(rel):
    first = rel.split("/")[0]
    return first[:-3] if first.endswith(".rs") else first


def sources():
    """{path relative to src/: text} of the crate's files, tests.rs left out."""
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".rs") and f != "tests.rs":
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
                out[rel] = open(path, encoding="utf-8").read()
    return out


# Rust text with comments and string and char literals blanked, newlines kept.
NOISE = re.compile(
    r'//[^\n]*|/\*.*?\*/|\bb?r(#*)".*?"\1|"(?:\\.|[^"\\])*"'
    r"|'(?:\\u\{\w*\}|\\.|[^\\'\n])'",
    re.S,
)
# A `use` item (with its visibility), the opening of an inline `mod`, a path from the crate
# root or a parent module, or a brace.
ITEM = re.compile(
    r"\b(pub\b(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);|\bmod\s+(\w+)\s*\{"
    r"|\b(?:crate|super)(?:::\w+)+|[{}]"
)


def blank(text):
    return NOISE.sub(lambda m: "\n" * m.group().count("\n"), text)


def module_path(rel):
    """The module a file is: lib.rs the root (), fs/mod.rs and fs.rs ("fs",)."""
    parts = rel[:-3].split("/")
    if parts[-1] == "mod" or rel == "lib.rs":
        parts.pop()
    return tuple(parts)


def use_leaves(body):
    """The (name, path, offset in body) of each leaf of a use tree: `a::{b::{C, D as E}, self}`
    gives the names and paths (C, a::b::C), (E, a::b::D) and (a, a); a glob the name *."""
    found = list(re.finditer(r"::|[{},*]|\w+", body))
    if found[:1] and found[0].group() == "::":
        found = found[1:]
    toks = [t.group() for t in found]
    out = []

    def tree(pos, prefix):
        path = list(prefix)
        while pos < len(toks):
            t = toks[pos]
            if t == "{":
                pos += 1
                while pos < len(toks) and toks[pos] != "}":
                    pos = tree(pos, path)
                    if pos < len(toks) and toks[pos] == ",":
                        pos += 1
                return pos + 1
            if t == "*":
                out.append(("*", tuple(path), found[pos].start()))
                return pos + 1
            path.append(t)
            pos += 1
            if pos < len(toks) and toks[pos] == "::":
                pos += 1
                continue
            break
        if path[-1:] == ["self"]:
            path.pop()
        name = path[-1] if path else ""
        if pos + 1 < len(toks) and toks[pos] == "as":
            name = toks[pos + 1]
            pos += 2
        if name:
            out.append((name, tuple(path), found[pos - 1].start()))
        return pos

    pos = 0
    while pos < len(toks):
        pos = tree(pos, ())
        if pos < len(toks) and toks[pos] == ",":
            pos += 1
    return out


def absolute(mod, path):
    """A path from the crate root: `crate::`, `self::` and `super::` resolved, any other path
    taken as relative to `mod` (a path into another crate then stays inside `mod`)."""
    if path[:1] == ("crate",):
        return path[1:]
    base = list(mod)
    while path[:1] in (("self",), ("super",)):
        if path[0] == "super" and base:
            base.pop()
        path = path[1:]
    return tuple(base) + path


def scan(rel, text):
    """The modules a file declares (its own and inline ones), its re-exports as
    (module, name, target), and every path it names as (line, module, path)."""
    text = blank(text)
    cut = text.find("#[cfg(test)]")
    if cut >= 0:
        text = text[:cut]
    base = module_path(rel)
    stack, mods, exports, paths = [], {base}, [], []
    for m in ITEM.finditer(text):
        mod = base + tuple(s for s in stack if s)
        if m.group(3):
            stack.append(m.group(3))
            mods.add(mod + (m.group(3),))
        elif m.group() == "{":
            stack.append(None)
        elif m.group() == "}":
            if stack:
                stack.pop()
        elif m.group(2) is None:
            line = text.count("\n", 0, m.start()) + 1
            paths.append((line, mod, tuple(m.group().split("::"))))
        else:
            for name, path, at in use_leaves(m.group(2)):
                line = text.count("\n", 0, m.start(2) + at) + 1
                paths.append((line, mod, path))
                if m.group(1) and name != "*":
                    exports.append((mod, name, absolute(mod, path)))
    return mods, exports, paths


def resolve(path, exports, mods):
    """`path` with re-exports followed to where its item is defined. A segment that names a
    module is that module, even where a function of the same name is re-exported."""
    for _ in range(32):
        for i in range(len(path)):
            head = path[: i + 1]
            target = exports.get(path[:i], {}).get(path[i])
            if target and target != head and head not in mods:
                path = target + path[i + 1 :]
                break
        else:
            break
    return path


def graph(files):
    """The top-level modules' imports, {module: {module}}, and where each import is first
    named, {(module, dependency): "file:line path"}; `files` maps a path relative to the
    crate's src/ to its text."""
    scans = {rel: scan(rel, text) for rel, text in sorted(files.items())}
    mods, exports = set(), {}
    for m, ex, _ in scans.values():
        mods |= m
        for mod, name, target in ex:
            exports.setdefault(mod, {})[name] = target
    edges, sites = {}, {}
    for rel, (_, _, paths) in scans.items():
        m = module_of(rel)
        if m in ("lib", "main"):
            continue
        deps = edges.setdefault(m, set())
        for line, mod, path in paths:
            named = absolute(mod, path)
            defined = resolve(named, exports, mods)
            for d in {named[:1], defined[:1]}:
                if d and d[0] != m:
                    deps.add(d[0])
                    where = f"{rel}:{line} {'::'.join(path)}"
                    if defined[:1] == d and named[:1] != d:
                        where += f" (defined in {'::'.join(defined)})"
                    sites.setdefault((m, d[0]), where)
    top = set(edges)
    return {m: {d for d in ds if d in top} for m, ds in edges.items()}, sites


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


def layer_problems(edges, sites=None):
    sites = sites or {}
    rank = {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}
    problems = []
    for m in sorted(edges):
        if m not in rank:
            problems.append(f"module {m} is in no layer of LAYERS")
            continue
        for d in sorted(edges[m]):
            if d not in rank:
                continue
            where = f": {sites[m, d]}" if (m, d) in sites else ""
            if rank[d] > rank[m]:
                problems.append(
                    f"upward import: {m} ({LAYERS[rank[m]][0]}) uses {d} ({LAYERS[rank[d]][0]})"
                    + where
                )
            elif LAYERS[rank[m]][0] == "over Db" and d not in OVER_DB_MAY_USE | set(LAYERS[rank[m]][1]):
                problems.append(f"{m} is a layer over Db but uses the engine's {d}{where}")
    return problems


# A crate whose upward imports go through re-exports only: `crate::CompactionFilter` (from
# the root through `compaction`'s own re-export) and `crate::Snapshot` (a renamed leaf of
# a nested group). The mentions in a comment and a string are no imports.
REEXPORT_CRATE = {
    "lib.rs": """
pub mod codec;
pub(crate) mod compaction;
mod db;
pub mod error;
pub mod options;
pub(crate) mod wal;

pub use compaction::CompactionFilter;
pub use db::{view::{DbView as Snapshot}, Db};
pub use error::Error;
""",
    "compaction/mod.rs": "mod filter;\npub use self::filter::{CompactionFilter, FilterDecision};\n",
    "compaction/filter.rs": "pub trait CompactionFilter {}\npub enum FilterDecision {}\n",
    "db/mod.rs": "pub mod view;\n\npub struct Db;\n",
    "db/view.rs": "pub struct DbView;\n",
    "error.rs": "//! See [`crate::Snapshot`].\npub struct Error;\n",
    "codec.rs": 'pub const NOTE: &str = "crate::CompactionFilter";\n',
    "options.rs": """use crate::Error;

pub struct Options {
    pub filter: Option<Box<dyn crate::CompactionFilter>>,
}
""",
    "wal/mod.rs": "use crate::{\n    error::Error,\n    Snapshot,\n};\n",
}


def self_test():
    """The negative control: a graph with a cycle, an upward import, a layer over Db that
    reaches into the engine and an unplaced module must give one problem each, and so must
    each upward import of REEXPORT_CRATE."""
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
    edges, sites = graph(REEXPORT_CRATE)
    problems += [" <-> ".join(c) for c in components(edges)] + layer_problems(edges, sites)
    expected += [
        "options (parts) uses compaction (tree): options.rs:4 crate::CompactionFilter",
        "wal (parts) uses db (engine): wal/mod.rs:3 crate::Snapshot (defined in db::view::DbView)",
    ]
    missing = [e for e in expected if not any(e in p for p in problems)]
    if missing or len(problems) != len(expected):
        print(f"check-modules --self-test: expected {expected}, got {problems}")
        return 1
    print(f"check-modules --self-test: the {len(expected)} planted problems are found")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    edges, sites = graph(sources())
    if "--all" in sys.argv:
        for m in sorted(edges):
            print(f"{m}: {' '.join(sorted(edges[m]))}")
    problems = [f"import cycle: {' <-> '.join(c)}" for c in components(edges)]
    problems += layer_problems(edges, sites)
    for p in problems:
        print(p)
    if problems:
        print(f"check-modules: {len(problems)} problem(s) in the imports of crates/shale/src")
        return 1
    print(f"check-modules: {len(edges)} modules in {len(LAYERS)} layers, no cycle, no upward import")
    return 0


if __name__ == "__main__":
    sys.exit(main())

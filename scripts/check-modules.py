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

And for every crate of crates/*/src, the graph of its files, one per crate root (lib.rs,
main.rs, each binary of src/bin/), through the `mod name;` declarations: a file imports the
file that defines what its `use` items and its paths in code name (`crate::`, `super::`,
`self::`, a child module's or an import's name; re-exports and imports followed to where the
item is defined). A `mod` declaration and a `pub use` re-export are no imports, so a mod.rs
that declares and re-exports its children is no circle with them. A circle of files (a
strongly connected component of more than one file) fails too.

    python3 scripts/check-modules.py [--all]   # --all: print every module's dependencies
    python3 scripts/check-modules.py --self-test   # the negative control
"""
import bisect
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "shale", "src")

# Bottom to top; a module may import modules of its own layer (the graph stays acyclic) or
# of the layers below it.
LAYERS = [
    (
        "leaves",
        [
            "codec", "error", "filename", "fs", "key", "keyspace", "perf", "prefetch", "striped",
            "sync", "trend",
        ],
    ),
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


CRATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates")


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
# A `use` item (with its visibility), the opening of an inline `mod` or a `mod` declaration,
# an inline path of two segments or more, or a brace.
ITEM = re.compile(
    r"[{}]|(?<![\w:])(?=[A-Za-z_])(?:(pub\b(?:\s*\([^)]*\))?\s+)?use\s+([^;]*);"
    r"|mod\s+(\w+)\s*([{;])|\w+(?:::\w+)+)"
)
# What `#[cfg(test)]` stands on: an item up to its `;` or its closing brace, or a field or
# statement up to its `,` or `;`.
CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
ITEM_KEYWORD = re.compile(
    r"\s*(?:#\[[^\]]*\]\s*)*(?:pub\b(?:\s*\([^)]*\))?\s*)?"
    r"(?:async\s+|const\s+|unsafe\s+|extern\s+)*"
    r"(?:fn|mod|use|impl|struct|enum|union|const|static|type|trait|macro_rules!|let)\b"
)


def blank(text):
    return NOISE.sub(lambda m: "\n" * m.group().count("\n"), text)


def strip_tests(text):
    """`text` (blanked) with what each `#[cfg(test)]` stands on blanked, newlines kept."""
    while True:
        m = CFG_TEST.search(text)
        if not m:
            return text
        item = ITEM_KEYWORD.match(text, m.end()) is not None
        depth, end = 0, len(text)
        for i in range(m.end(), len(text)):
            c = text[i]
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif depth > 0:
                continue
            elif c == "{":
                close = i
                for close in range(i, len(text)):
                    depth += {"{": 1, "}": -1}.get(text[close], 0)
                    if depth == 0:
                        break
                end = close + 1
                break
            elif c == ";" or (c == "," and not item):
                end = i + 1
                break
            elif c == "}":
                end = i
                break
        cut = text[m.start() : end]
        text = text[: m.start()] + re.sub(r"[^\n]", " ", cut) + text[end:]


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


SCANS = {}


def scan(rel, text, base=None):
    """scan_text(rel, text, base), once for each."""
    key = (rel, text, base if base is not None else module_path(rel))
    if key not in SCANS:
        SCANS[key] = scan_text(*key)
    return SCANS[key]


def scan_text(rel, text, base):
    """The modules a file declares (its own and inline ones), its re-exports and private
    imports as (module, name, target, re-export?), the modules it declares with `mod name;`,
    and every path it names as (line, module, path, kind): kind "use" for a `use`, "export"
    for a `pub use`, "inline" for a path from `crate`, `super` or `self` in code, "relative"
    for any other path in code; `base` is the module of the file.
    What `#[cfg(test)]` stands on is left out."""
    text = strip_tests(blank(text))
    newlines = [m.start() for m in re.finditer("\n", text)]
    stack, mods, aliases, decls, paths = [], {base}, [], [], []
    for m in ITEM.finditer(text):
        mod = base + tuple(s for s in stack if s)
        if m.group(3):
            if m.group(4) == "{":
                stack.append(m.group(3))
                mods.add(mod + (m.group(3),))
            else:
                decls.append(mod + (m.group(3),))
        elif m.group() == "{":
            stack.append(None)
        elif m.group() == "}":
            if stack:
                stack.pop()
        elif m.group(2) is None:
            line = bisect.bisect(newlines, m.start()) + 1
            path = tuple(m.group().split("::"))
            kind = "inline" if path[0] in ("crate", "super", "self") else "relative"
            paths.append((line, mod, path, kind))
        else:
            for name, path, at in use_leaves(m.group(2)):
                line = bisect.bisect(newlines, m.start(2) + at) + 1
                paths.append((line, mod, path, "export" if m.group(1) else "use"))
                if name != "*":
                    aliases.append((mod, name, absolute(mod, path), bool(m.group(1))))
    mods |= set(decls)
    return mods, aliases, decls, paths


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
    for m, al, _, _ in scans.values():
        mods |= m
        for mod, name, target, export in al:
            if export:
                exports.setdefault(mod, {})[name] = target
    edges, sites = {}, {}
    for rel, (_, _, _, paths) in scans.items():
        m = module_of(rel)
        if m in ("lib", "main"):
            continue
        deps = edges.setdefault(m, set())
        for line, mod, path, kind in paths:
            if kind == "relative":
                continue
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


def crate_roots(files):
    """The crate roots among `files` (paths relative to a crate's src/): lib.rs, main.rs
    and each binary of src/bin/."""
    return sorted(
        rel
        for rel in files
        if rel in ("lib.rs", "main.rs")
        or re.fullmatch(r"bin/[^/]+\.rs|bin/[^/]+/main\.rs", rel)
    )


def module_tree(files, root):
    """{path relative to src/: (module, scan)} of the files `root` reaches through
    `mod name;` declarations (a file `a/b.rs` or `a/b/mod.rs` under the root's folder is
    module a::b); files named tests.rs left out. A module whose file is not there (one from
    elsewhere by `#[path]`) maps to None."""
    tree, todo = {}, [(root, ())]
    while todo:
        rel, mod = todo.pop()
        if rel in tree:
            continue
        found = scan(rel, files[rel], mod)
        tree[rel] = (mod, found)
        own = rel == root or rel.endswith("/mod.rs")
        folder = os.path.dirname(rel) if own else rel[:-3]
        for decl in found[2]:
            stem = "/".join((folder,) + decl[len(mod) :]).lstrip("/")
            for child in (stem + ".rs", stem + "/mod.rs"):
                if child in files and os.path.basename(child) != "tests.rs":
                    todo.append((child, decl))
                    break
            else:
                tree.setdefault(decl, None)
    return tree


def file_graph(files, root):
    """The files of `root`'s module tree and their imports, {file: {file}}, with where each
    import is first named, {(file, file): "line path"}. A file imports the file that defines
    what a path of it names, through re-exports and imports of other modules; its `mod`
    declarations and its `pub use` re-exports are no imports."""
    tree = module_tree(files, root)
    mods, aliases, file_of = set(), {}, {}
    for rel, (mod, (m, al, _, _)) in [(r, t) for r, t in tree.items() if t]:
        file_of[mod] = rel
        mods |= m
        for mod_, name, target, _ in al:
            aliases.setdefault(mod_, {})[name] = target
    file_of.update((mod, None) for mod, t in tree.items() if t is None)
    edges, sites = {rel: set() for rel, t in tree.items() if t}, {}
    for rel, (_, (_, _, _, paths)) in sorted((r, t) for r, t in tree.items() if t):
        for line, mod, path, kind in paths:
            if kind == "export":
                continue
            defined = resolve(absolute(mod, path), aliases, mods)
            for i in range(len(defined), -1, -1):
                if defined[:i] in file_of:
                    break
            dep = file_of.get(defined[:i])
            if dep and dep != rel:
                edges[rel].add(dep)
                sites.setdefault((rel, dep), f"{rel}:{line} {'::'.join(path)}")
    return edges, sites


def crate_circles(files):
    """The circles of files of a crate, each the sorted tuple of its files (relative to
    src/), over the module trees of all its roots."""
    out = set()
    for root in crate_roots(files):
        out |= set(components(file_graph(files, root)[0]))
    return sorted(out)


def circle_problems(crate, circles):
    """One problem per circle of files found in `crate`."""
    return [f"crates/{crate}: circle of files: {' <-> '.join(c)}" for c in circles]


def crate_sources(src):
    """{path relative to src/: text} of a crate's .rs files."""
    out = {}
    for dirpath, _, names in os.walk(src):
        for f in names:
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                out[os.path.relpath(path, src).replace(os.sep, "/")] = open(
                    path, encoding="utf-8"
                ).read()
    return out


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


# A crate of two files in a circle (one of them through an import of the root; a module from
# elsewhere by `#[path]` is not the root's), and one whose mod.rs declares and re-exports its
# children, which use each other and it through it: no circle. The test module and the `mod`
# declarations of mod.rs are no imports.
CIRCLE_CRATE = {
    "lib.rs": 'mod a;\nmod b;\nuse b::B;\n#[path = "../../other/src/w.rs"]\nmod w;\n',
    "a.rs": "use crate::B;\npub struct A(B);\nfn f() {\n    crate::w::f();\n}\n",
    "b.rs": "pub struct B;\nfn f() -> Option<crate::a::A> {\n    None\n}\n",
}
MOD_RS_CRATE = {
    "main.rs": "mod m;\npub use m::{X, Y};\n\nfn main() {}\n",
    "m/mod.rs": """mod x;
pub(crate) mod y;
pub use self::x::X;
pub use y::Y;

pub(crate) fn helper() {}

#[cfg(test)]
mod tests {
    use super::x::X;
}
""",
    "m/x.rs": "use super::Y;\npub struct X(Y);\n",
    "m/y.rs": "pub struct Y;\nfn f() {\n    super::helper();\n}\n",
    "m/tests.rs": "use super::x::X;\n",
}


def self_test():
    """The negative control: a graph with a cycle, an upward import, a layer over Db that
    reaches into the engine and an unplaced module must give one problem each, and so must
    each upward import of REEXPORT_CRATE; CIRCLE_CRATE has one circle of files, MOD_RS_CRATE
    none."""
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
    problems += circle_problems("circle", crate_circles(CIRCLE_CRATE))
    if crate_circles(CIRCLE_CRATE) != [("a.rs", "b.rs")]:
        problems.append(f"CIRCLE_CRATE's circles are {crate_circles(CIRCLE_CRATE)}")
    expected.append("crates/circle: circle of files: a.rs <-> b.rs")
    problems += circle_problems("modrs", crate_circles(MOD_RS_CRATE))
    # MOD_RS_CRATE's files do import each other, through mod.rs's re-export.
    edges = file_graph(MOD_RS_CRATE, "main.rs")[0]
    wanted = {"main.rs": set(), "m/mod.rs": set(), "m/x.rs": {"m/y.rs"}, "m/y.rs": {"m/mod.rs"}}
    if edges != wanted:
        problems.append(f"MOD_RS_CRATE's imports are {edges}, not {wanted}")
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
    crates = sorted(
        c for c in os.listdir(CRATES) if os.path.isdir(os.path.join(CRATES, c, "src"))
    )
    for crate in crates:
        files = crate_sources(os.path.join(CRATES, crate, "src"))
        problems += circle_problems(crate, crate_circles(files))
    for p in problems:
        print(p)
    if problems:
        print(f"check-modules: {len(problems)} problem(s) in the imports of crates/*/src")
        return 1
    print(
        f"check-modules: {len(edges)} modules in {len(LAYERS)} layers, no cycle, no upward import;"
        f" {len(crates)} crates, no circle of files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

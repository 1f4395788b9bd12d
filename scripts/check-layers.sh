#!/usr/bin/env bash
# Layers only point down (ARCHITECTURE.md): reads every `crate::<part>` path in bench/src
# (code only: comments and `mod tests` left out) and fails on an import of a part from a
# higher layer, on a circle between parts of one layer, or on a circle between the files of one
# part. Parts of one layer may import each other only one way. The table below is ARCHITECTURE.md's drawing, top to bottom;
# a new part must be placed in it (an unknown part is an error, not a pass).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import collections, os, re, sys

LAYERS = [
    ["main", "lib", "cli"],
    ["reproduce"],
    ["run", "sim"],
    ["clients", "report"],
    ["strategy"],
    ["chaos"],
    ["record"],
    ["workload", "cluster", "check"],
    ["names", "stats", "clock", "logging"],
]
rank = {p: i for i, layer in enumerate(LAYERS) for p in layer}
root = "bench/src"
edges = collections.defaultdict(set)
where = {}
problems = []

def part(path):
    top = os.path.relpath(path, root).split("/")[0]
    return top[:-3] if top.endswith(".rs") else top

for d, _, files in os.walk(root):
    for f in sorted(files):
        if not f.endswith(".rs"):
            continue
        path = os.path.join(d, f)
        src = open(path, encoding="utf-8").read()
        src = re.split(r"#\[cfg\(test\)\]\s*mod tests", src)[0]
        me = part(path)
        if me not in rank:
            problems.append(f"{path}: part `{me}` is in no layer of scripts/check-layers.sh")
            continue
        for n, line in enumerate(src.split("\n"), 1):
            code = line.split("//")[0]
            for m in re.finditer(r"\bcrate::([a-z_]+)", code):
                to = m.group(1)
                if to == me:
                    continue
                if to not in rank:
                    problems.append(f"{path}:{n}: `crate::{to}` is in no layer")
                    continue
                edges[me].add(to)
                where.setdefault((me, to), f"{path}:{n}")
                if rank[to] < rank[me]:
                    problems.append(f"{path}:{n}: `{me}` imports `crate::{to}`, a layer above it")

# Circles between parts (within a layer, the only place one can form now).
def cycles():
    seen, stack, out = {}, [], []
    def visit(v):
        seen[v] = 1
        stack.append(v)
        for w in sorted(edges[v]):
            if seen.get(w) == 1:
                out.append(stack[stack.index(w):] + [w])
            elif w not in seen:
                visit(w)
        stack.pop()
        seen[v] = 2
    for v in sorted(rank):
        if v not in seen:
            visit(v)
    return out

for c in cycles():
    hops = ", ".join(f"{a} → {b} ({where[(a, b)]})" for a, b in zip(c, c[1:]))
    problems.append(f"circle between parts: {hops}")

# Circles inside a part: files of one part that import each other round a loop (a module
# graph, one node a file). `use` trees are expanded, `super::`/`self::`/`crate::` resolved, and
# a name a `mod.rs` re-exports (`pub use sub::Name`) leads to the file that defines it.
def module_of(path):
    rel = os.path.relpath(path, root)[:-3].split("/")
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)

sources = {}
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith(".rs") and f not in ("main.rs", "lib.rs"):
            path = os.path.join(d, f)
            src = open(path, encoding="utf-8").read()
            src = re.split(r"#\[cfg\(test\)\]\s*mod tests", src)[0]
            src = "\n".join(l.split("//")[0] for l in src.split("\n"))
            sources[module_of(path)] = (path, src)

def expand(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e] (as lists of segments)."""
    tree = re.sub(r"\s+", "", tree)
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [[s for s in re.sub(r"\bas\w+$", "", tree).split("::") if s]]
    head, body = m.group(1), m.group(2)
    parts, depth, cur = [], 0, ""
    for ch in body:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [[s for s in head.split("::") if s] + rest for p in parts if p for rest in expand(p)]

def absolute(me, segs):
    if segs[0] == "crate":
        return segs[1:]
    if segs[0] not in ("super", "self"):
        return None
    cur, i = list(me), 0
    while i < len(segs) and segs[i] in ("super", "self"):
        cur, i = (cur[:-1] if segs[i] == "super" else cur), i + 1
    return cur + segs[i:]

reexports = {}
for mod, (path, src) in sources.items():
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", src):
        for segs in expand(m.group(1)):
            if segs and segs[0] not in ("crate", "super", "self", "std"):
                reexports[(mod, segs[-1])] = list(mod) + segs[:-1]

def target(segs):
    for _ in range(4):  # follow a few re-exports
        for k in range(len(segs), 0, -1):
            if tuple(segs[:k]) in sources:
                mod = tuple(segs[:k])
                if k == len(segs) - 1 and (mod, segs[k]) in reexports:
                    segs = reexports[(mod, segs[k])] + [segs[k]]
                    break
                return mod
        else:
            return None
    return None

inner = collections.defaultdict(set)
for mod, (path, src) in sources.items():
    trees = [m.group(1) for m in re.finditer(r"\buse\s+([^;]+);", src)]
    trees += [m.group(0) for m in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", src)]
    for tree in trees:
        for segs in expand(tree):
            if not segs:
                continue
            full = absolute(mod, segs)
            if not full or full[0] != mod[0]:
                continue
            to = target(full)
            if to and to != mod:
                inner[mod].add(to)

# Each strongly connected set of files is one circle, reported with one loop through it.
sys.setrecursionlimit(10000)
index, low, on, stack, comps = {}, {}, set(), [], []
def strong(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in inner[v]:
        if w not in index:
            strong(w)
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
        if len(comp) > 1:
            comps.append(sorted(comp))
for v in sorted(sources):
    if v not in index:
        strong(v)

def loop(comp):
    """A shortest way from the set's first file back to itself, inside the set."""
    start, members = comp[0], set(comp)
    prev, queue = {start: None}, [start]
    for v in queue:
        for w in sorted(inner[v]):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w in members and w not in prev:
                prev[w] = v
                queue.append(w)
    return comp

name = lambda m: "::".join(m)
for comp in comps:
    problems.append("circle inside part `%s`: %d files (%s); e.g. %s" % (
        comp[0][0], len(comp), ", ".join(name(m) for m in comp), " → ".join(name(m) for m in loop(comp))))

for p in problems:
    print(p, file=sys.stderr)
if problems:
    sys.exit(1)
n = sum(len(v) for v in edges.values())
print(f"check-layers: {len(rank)} parts in {len(LAYERS)} layers, {n} imports between parts, all pointing down")
PY

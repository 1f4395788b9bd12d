#!/usr/bin/env bash
# Layers only point down (ARCHITECTURE.md): reads every `crate::<part>` path in bench/src
# (code only: comments and `mod tests` left out) and fails on an import of a part from a
# higher layer, or on a circle between parts of one layer. Parts of one layer may import
# each other only one way. The table below is ARCHITECTURE.md's drawing, top to bottom;
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

for p in problems:
    print(p, file=sys.stderr)
if problems:
    sys.exit(1)
n = sum(len(v) for v in edges.values())
print(f"check-layers: {len(rank)} parts in {len(LAYERS)} layers, {n} imports between parts, all pointing down")
PY

#!/usr/bin/env bash
# No function in bench/src longer than 80 lines (from its `fn` line to its closing brace):
# a long function is split into named steps that each do one thing. Test code is left out
# (`#[cfg(test)] mod tests` and *_tests.rs files). The count is approximate (braces outside
# strings and `//` comments); it is the judge all the same.
# TOP=N also prints the N longest functions and the N largest files (what a restructure's
# before and after compare).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import os, re, sys

LIMIT = 80
root = "bench/src"
fn_re = re.compile(r"\s*(pub(\([a-z]+\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+([a-z_0-9]+)")
long, every, sizes = [], [], []
for d, _, files in os.walk(root):
    for f in sorted(files):
        if not f.endswith(".rs") or f.endswith("_tests.rs"):
            continue
        path = os.path.join(d, f)
        lines = open(path, encoding="utf-8").read().split("\n")
        sizes.append((len(lines) - 1, path))
        end = len(lines)
        for i, l in enumerate(lines):
            if re.match(r"\s*#\[cfg\(test\)\]", l) and i + 1 < len(lines) and re.match(r"\s*mod tests", lines[i + 1]):
                end = i
                break
        i = 0
        while i < end:
            m = fn_re.match(lines[i])
            if not m:
                i += 1
                continue
            depth, started, j = 0, False, i
            while j < end:
                code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j].split("//")[0])
                code = re.sub(r"'(\\.|[^'\\])'", "''", code)
                for ch in code:
                    if ch == "{":
                        depth += 1
                        started = True
                    elif ch == "}":
                        depth -= 1
                if started and depth <= 0:
                    break
                if not started and code.rstrip().endswith(";"):
                    break
                j += 1
            if started:
                n = j - i + 1
                every.append((n, f"{path}:{i + 1}: fn {m.group(6)}"))
                if n > LIMIT:
                    long.append((path, i + 1, m.group(6), n))
                i = j + 1
            else:
                i += 1
top = int(os.environ.get("TOP") or 0)
if top:
    print(f"the {top} longest functions:")
    for n, where in sorted(every, reverse=True)[:top]:
        print(f"  {n:4d} lines  {where}")
    print(f"the {top} largest files:")
    for n, path in sorted(sizes, reverse=True)[:top]:
        print(f"  {n:5d} lines  {path}")
for path, line, name, n in sorted(long):
    print(f"{path}:{line}: fn {name} is {n} lines (limit {LIMIT})")
if long:
    print(f"check-functions: {len(long)} function(s) over {LIMIT} lines; split them", file=sys.stderr)
    sys.exit(1)
print(f"check-functions: every function in {root} is at most {LIMIT} lines")
PY

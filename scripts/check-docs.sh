#!/usr/bin/env bash
# Checks the documentation against the repository and the binary: README.md, ARCHITECTURE.md
# and docs/*.md.
#   1. every relative markdown link points at a file that exists, and a `file.md#anchor` (or
#      `#anchor`) at a heading of that file (GitHub's slugs: lowercase, spaces to '-',
#      punctuation other than '-' and '_' dropped, '-1', '-2' for repeated headings);
#   2. every command in a ``` block that invokes lockbench (`lockbench SUB`,
#      `./target/release/lockbench SUB`, `cargo run --release -- SUB`) names a subcommand that
#      exists, and each `--flag` it passes appears in `$LOCKBENCH_BIN SUB --help`;
#   3. every `scripts/NAME` a ``` block mentions exists.
# Prints each problem as FILE:LINE: what is wrong, and exits 1 if there is any.
# LOCKBENCH_BIN: the build to ask for --help (default target/debug/lockbench, else
# target/release/lockbench). It only runs `--help`: no servers, no load.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${LOCKBENCH_BIN:-}
if [ -z "$bin" ]; then
  if [ -x target/debug/lockbench ]; then bin=target/debug/lockbench; else bin=target/release/lockbench; fi
fi
exec python3 - "$bin" README.md ARCHITECTURE.md docs/*.md <<'PY'
import os
import re
import shlex
import subprocess
import sys
import urllib.parse

BIN = sys.argv[1]
FILES = sys.argv[2:]
problems = []


def problem(path, line, what):
    problems.append(f"{path}:{line}: {what}")


OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def closes(fence, line):
    return re.match(r"^ {0,3}" + re.escape(fence[0]) + "{%d,}\\s*$" % len(fence), line) is not None


def fences(lines):
    """Yields (index, line, in_code) for every line; fence lines themselves count as code."""
    fence = None
    for i, line in enumerate(lines):
        if fence is None:
            m = OPEN.match(line)
            if m:
                fence = m.group(1)
            yield i, line, fence is not None
        else:
            if closes(fence, line):
                fence = None
            yield i, line, True


def code_blocks(lines):
    """Yields [(index, line), ...] for every fenced block, fences excluded."""
    block, fence = None, None
    for i, line in enumerate(lines):
        if fence is None:
            m = OPEN.match(line)
            if m:
                fence, block = m.group(1), []
        elif closes(fence, line):
            yield block
            fence, block = None, None
        else:
            block.append((i, line))


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w: letters, digits, '_' (Unicode)
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        found, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for _, line, in_code in fences(lines):
            if in_code:
                continue
            m = re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(1))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
                found.add(a)
        anchor_cache[path] = found
    return anchor_cache[path]


# 1. Links.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(\S+)")


def check_link(path, lineno, target):
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:, …
        return
    file_part, _, anchor = target.partition("#")
    file_part = urllib.parse.unquote(file_part)
    if file_part:
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        if not os.path.exists(dest):
            problem(path, lineno, f"link to {target}: {dest} does not exist")
            return
    else:
        dest = path
    if anchor and dest.endswith(".md") and os.path.isfile(dest):
        if urllib.parse.unquote(anchor) not in anchors(dest):
            problem(path, lineno, f"link to {target}: no heading of {dest} has the anchor #{anchor}")


for path in FILES:
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line, in_code in fences(lines):
        if in_code:
            continue
        text = re.sub(r"(`+)(?:(?!\1).)+?\1", "", line)  # inline code is not a link
        for m in LINK.finditer(text):
            check_link(path, i + 1, m.group(1))
        m = REFDEF.match(text)
        if m:
            check_link(path, i + 1, m.group(1))

# 2. lockbench commands, 3. scripts.
help_cache = {}


def help_of(words):
    """`BIN words… --help`: (subcommands, long flags), or None when it fails."""
    key = tuple(words)
    if key not in help_cache:
        try:
            out = subprocess.run([BIN, *words, "--help"], capture_output=True, text=True, timeout=30)
        except OSError:
            out = None
        if out is None or out.returncode != 0:
            help_cache[key] = None
        else:
            subs, flags, in_commands = set(), set(), False
            for line in out.stdout.split("\n"):
                if re.match(r"^\S", line):
                    in_commands = line.startswith("Commands:")
                    continue
                if in_commands:
                    m = re.match(r"^  (\S+)", line)
                    if m:
                        subs.add(m.group(1))
                m = re.match(r"^ {2,6}(?:-\w, )?--([A-Za-z0-9][\w-]*)", line)
                if m:
                    flags.add(m.group(1))
            help_cache[key] = (subs, flags)
    return help_cache[key]


OPERATORS = {"|", "||", "&&", ";", "&", "(", ")", "|&", ";;"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
PREFIXES = {"sudo", "env", "time", "exec", "nohup"}


def commands(text):
    """The simple commands of a shell line, as word lists (comments dropped)."""
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words = list(lexer)
    except ValueError:  # unbalanced quotes: fall back to words, comment cut at " #"
        words = re.split(r"\s+", re.split(r"(?:^|\s)#", text, maxsplit=1)[0].strip())
    current = []
    for w in words:
        if w in OPERATORS:
            if current:
                yield current
            current = []
        else:
            current.append(w)
    if current:
        yield current


def lockbench_args(cmd):
    """The arguments after the program when `cmd` invokes lockbench, else None."""
    while cmd and (ASSIGNMENT.match(cmd[0]) or cmd[0] in PREFIXES):
        cmd = cmd[1:]
    if not cmd:
        return None
    if cmd[0] == "lockbench" or cmd[0].endswith("/lockbench"):
        return cmd[1:]
    if cmd[0] == "cargo" and len(cmd) > 1 and cmd[1] == "run" and "--" in cmd:
        return cmd[cmd.index("--") + 1:]
    return None


def check_invocation(path, lineno, args):
    if not args or args[0].startswith("-"):
        return  # `lockbench --help`, `lockbench -V`
    top = help_of([])
    if top is None:
        problem(path, lineno, f"cannot run `{BIN} --help` (set LOCKBENCH_BIN to a build)")
        return
    words, subs, i = [], top[0], 0
    # Subcommands, nested as far as the help lists them (`k8s render`).
    while i < len(args) and not args[i].startswith("-"):
        if args[i] not in subs:
            problem(path, lineno, f"`lockbench {' '.join(words + [args[i]])}`: no such subcommand")
            return
        words.append(args[i])
        h = help_of(words)
        if h is None:
            problem(path, lineno, f"`{BIN} {' '.join(words)} --help` failed")
            return
        subs = h[0]
        i += 1
        if not subs:
            break
    flags = help_of(words)[1]
    for a in args[i:]:
        if a == "--":
            break  # what follows is another program's command line (adapter-check)
        m = re.match(r"^--([A-Za-z0-9][\w-]*)", a)
        if m and m.group(1) not in flags:
            problem(path, lineno, f"`lockbench {' '.join(words)}` has no flag --{m.group(1)}")


SCRIPT = re.compile(r"(?<![\w./-])scripts/([\w.-]+(?:/[\w.-]+)*)")

for path in FILES:
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for block in code_blocks(lines):
        logical, first = "", None
        for i, line in block:
            for m in SCRIPT.finditer(line):
                name = m.group(1).rstrip(".")
                if name and not os.path.exists(os.path.join("scripts", name)):
                    problem(path, i + 1, f"scripts/{name} does not exist")
            # Commands continued with a trailing backslash are one command.
            if first is None:
                first = i
            if line.rstrip().endswith("\\"):
                logical += line.rstrip()[:-1] + " "
                continue
            logical += line
            for cmd in commands(logical):
                args = lockbench_args(cmd)
                if args is not None:
                    check_invocation(path, first + 1, args)
            logical, first = "", None

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
PY

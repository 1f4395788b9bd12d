#!/bin/sh
# Installs the Node.js adapters' pinned packages (package-lock.json) into
# adapters/node/node_modules, for adapters/redis-semaphore, node-redlock and node-redlock-v5.
# Debian packages needed: nodejs npm   (Debian 12: Node 18, npm 9; any Node >= 18 works)
# Idempotent: `npm ci` reinstalls exactly the lockfile's versions; skipped when they are in place.
set -eu
dir=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
cd "$dir"
for tool in node npm; do
    command -v "$tool" >/dev/null 2>&1 || { echo "install.sh: $tool missing (Debian: apt-get install nodejs npm)" >&2; exit 1; }
done
# npm records what it installed in node_modules/.package-lock.json; equal to the lockfile's
# package set means already installed.
if [ -f node_modules/.package-lock.json ] &&
    node -e '
        const a = require("./package-lock.json").packages, b = require("./node_modules/.package-lock.json").packages;
        const v = (p) => JSON.stringify(Object.keys(p).filter((k) => k).sort().map((k) => [k, p[k].version]));
        process.exit(v(a) === v(b) ? 0 : 1);' 2>/dev/null; then
    echo "Node.js adapter packages already installed in $dir/node_modules"
    exit 0
fi
# --omit=dev: none are declared, but nothing else may come in; no audit / fund network calls.
npm ci --omit=dev --no-audit --no-fund --loglevel=error
echo "Node.js adapter packages installed in $dir/node_modules"

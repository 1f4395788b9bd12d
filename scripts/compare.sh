#!/usr/bin/env bash
# The main job: install what is missing, build, and compare every strategy on the default
# flash-sale workload against real servers. Extra arguments go to `lockbench compare`,
# e.g. scripts/compare.sh --strategies none,redis-setnx --set load.duration=5s
# LOCKBENCH_BIN=path uses that build instead of a release build (scripts/test.sh runs a short
# form on the debug build, so CI exercises this script).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ -n "${LOCKBENCH_BIN:-}" ]; then bin=$LOCKBENCH_BIN; else cargo build --release --quiet; bin=./target/release/lockbench; fi
out="results/runs/$(date -u +%Y%m%dT%H%M%SZ)-compare"
"$bin" compare --workload workloads/flash-sale.toml --out "$out" "$@"
echo "report: $out/report.html (charts in $out/charts/); every strategy: $out/compare.json, one folder each with summary.json, timeline.csv, latency.hlog, logs/"

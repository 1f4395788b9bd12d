#!/usr/bin/env bash
# The regression gate as CI runs it: REPS short comparisons on the CI workload, then
# `lockbench gate` against the committed baseline (results/baseline). Exit 1 on a regression or a
# safety change. `scripts/ci-gate.sh --update-baseline` records a new baseline instead (commit
# it; take it on the same kind of machine the gate runs on: speed is only comparable there).
# Knobs: REPS, STRATEGIES, BASELINE (folder, default results/baseline), LOCKBENCH_BIN (a build
# to use instead of a release build; scripts/test.sh runs a short form so CI exercises this).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
BASELINE=${BASELINE:-results/baseline}
STRATEGIES=${STRATEGIES:-none,mysql-atomic,mysql-for-update,redis-setnx-watchdog,redis-lua-decr,redis-get-del}
bash scripts/install-deps.sh
if [ -n "${LOCKBENCH_BIN:-}" ]; then bin=$LOCKBENCH_BIN; else cargo build --release --quiet; bin=./target/release/lockbench; fi
out="results/runs/$(date -u +%Y%m%dT%H%M%SZ)-ci"
for i in $(seq 1 "$REPS"); do
  # workloads/ci.toml: short, contended, with a hold past the ttl so the controls are caught.
  "$bin" compare --workload workloads/ci.toml --strategies "$STRATEGIES" --out "$out/rep-$i" >/dev/null
done
if [ "${1:-}" = "--update-baseline" ]; then
  "$bin" gate --baseline "$BASELINE" --current "$out" --update-baseline
else
  "$bin" gate --baseline "$BASELINE" --current "$out" "$@"
fi
echo "results: $out"

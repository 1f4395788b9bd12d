#!/usr/bin/env bash
# The regression gate as CI runs it: REPS short comparisons on the CI workload, then
# `lockbench gate` against the committed baseline (results/baseline). Exit 1 on a regression or a
# safety change. `scripts/ci-gate.sh --update-baseline` records a new baseline instead (commit
# it; take it on the same kind of machine the gate runs on: speed is only comparable there).
# A speed regression must be significant against the baseline's own spread (one-sided exact
# Mann-Whitney across repetitions, Holm over every strategy and metric at --alpha, default 5%)
# and beyond the tolerance. REPS=6 runs, against a baseline of BASE_REPS=12 (recorded once, so
# its cost is paid once): 12 vs 6 can reach p = 1/18564, so the 12 tests of the 6 default
# strategies (first Holm level 0.05/12 = 0.0042) still decide when a stall of the shared machine
# put a baseline repetition or two among the slow ones; 6 vs 6 missed 4 of 20 planted
# slowdowns that way (scripts/gate-power.sh). 3 vs 3 (p >= 0.05) can never decide, and the
# gate says so (UNTESTED) instead of judging on the tolerance as if it could.
# Knobs: REPS, BASE_REPS (with --update-baseline; default 2 x REPS), STRATEGIES, BASELINE
# (folder, default results/baseline), LOCKBENCH_BIN (a build to use instead of a release build;
# scripts/test.sh runs a short form so CI exercises this).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-6}
if [ "${1:-}" = "--update-baseline" ]; then REPS=${BASE_REPS:-$((2 * REPS))}; fi
BASELINE=${BASELINE:-results/baseline}
STRATEGIES=${STRATEGIES:-none,mysql-atomic,mysql-for-update,redis-setnx-watchdog,redis-lua-decr,redis-get-del}
# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
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

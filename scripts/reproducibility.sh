#!/usr/bin/env bash
# Runs the same capacity sweep N times back to back on this machine and, for each strategy,
# prints every run's capacity interval, whether the intervals overlap, and the ratio of their
# midpoints (geometric): how far a figure moves between two runs of one build, beside how far
# it stands from the others. Exit 1 when a strategy's intervals do not overlap.
# Knobs (environment): RUNS (2), STRATEGIES (comma-separated ids; default every strategy),
# SLO (p99=100ms), OUT (results/runs/<time>-repro), SWEEP_ARGS (extra `lockbench sweep`
# arguments), LOCKBENCH_BIN (a build to use instead of a release build; scripts/test.sh runs a
# short form so CI exercises this script).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
runs=${RUNS:-2}
out=${OUT:-"results/runs/$(date -u +%Y%m%dT%H%M%SZ)-repro"}
only=()
if [ -n "${STRATEGIES:-}" ]; then only=(--strategies "$STRATEGIES"); fi
dirs=()
for i in $(seq 1 "$runs"); do
  echo "== sweep $i of $runs" >&2
  # shellcheck disable=SC2086 # SWEEP_ARGS is a list of words
  "$bin" sweep --workload workloads/flash-sale.toml --slo "${SLO:-p99=100ms}" --out "$out/sweep-$i" \
    "${only[@]}" ${SWEEP_ARGS:-} "$@" >/dev/null
  dirs+=("$out/sweep-$i")
done
"$bin" agreement "${dirs[@]}"

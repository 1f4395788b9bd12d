#!/usr/bin/env bash
# The main job: install what is missing, build, and answer an architect's two questions for
# every strategy, on the default flash-sale workload against real servers, in three parts:
#   1. capacity: `lockbench sweep` finds the highest arrival rate each strategy sustains within
#      the SLO (default p99 <= 100 ms with 99% of arrivals served)          -> <out>/sweep/
#   2. calm: one run of each at one common rate, the lowest capacity among the strategies the
#      sweep saw safe, so every safe strategy is inside its SLO                 -> <out>/calm/
#   3. chaos: each scenario with every strategy it applies to, each loaded at CHAOS_SHARE (70%)
#      of its own capacity, so a fault is measured, not a backlog it never had room to drain
#                                                                      -> <out>/chaos/<scenario>/
# then one report: <out>/report.html (`lockbench report <out>`).
#
# Knobs (environment): SLO (p99=100ms), CHAOS_SHARE (70%), SCENARIOS (kill-master,pause-holder:
# files in chaos/), STRATEGIES (comma-separated ids; default every strategy), NEEDS (the report's
# --needs, e.g. NEEDS=safe-under-pause,capacity>=500), SWEEP_ARGS (extra `lockbench sweep`
# arguments, e.g. "--budget 30s"), CALM_DURATION (5s), CHAOS_DURATION (8s). Extra arguments go to
# every `lockbench sweep` / `compare` (e.g. --set load.clients=32).
# LOCKBENCH_BIN=path uses that build instead of a release build (scripts/test.sh runs a short
# form on the debug build, so CI exercises this script).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ -n "${LOCKBENCH_BIN:-}" ]; then bin=$LOCKBENCH_BIN; else cargo build --release --quiet; bin=./target/release/lockbench; fi
out="results/runs/$(date -u +%Y%m%dT%H%M%SZ)-compare"
slo=${SLO:-p99=100ms}
share=${CHAOS_SHARE:-70%}
scenarios=${SCENARIOS:-kill-master,pause-holder}
workload=workloads/flash-sale.toml
status=0
began=$(date +%s)
only=()
if [ -n "${STRATEGIES:-}" ]; then only=(--strategies "$STRATEGIES"); fi

echo "== 1/3 capacity at $slo"
# shellcheck disable=SC2086 # SWEEP_ARGS is a list of words
"$bin" sweep --workload "$workload" --slo "$slo" --out "$out/sweep" "${only[@]}" ${SWEEP_ARGS:-} "$@" || status=$?
[ -f "$out/sweep/sweep.json" ] || { echo "compare.sh: the sweep wrote no sweep.json" >&2; exit 2; }

echo
echo "== 2/3 calm, every strategy at one rate that every strategy seen safe sustains"
"$bin" compare --workload "$workload" --set "load.duration=\"${CALM_DURATION:-5s}\"" \
  --rate-from "$out/sweep" --common-rate --out "$out/calm" "${only[@]}" "$@" || status=$?

# The chaos runs keep the sweep's workload (its capacity must apply) but never sell out, and
# hold 2 s leases: a pause of "2x ttl" then outlives every kind of lease (etcd grants no less).
chaos_set=(--set inventory.stock=1000000 --set 'lock.ttl="2s"' --set "load.duration=\"${CHAOS_DURATION:-8s}\"")
# Strategies that take a lock (a holder to pause), from `lockbench list`.
locks=$("$bin" list | awk '$2 == "lock" { print $1 }' | paste -sd, -)
IFS=, read -ra names <<< "$scenarios"
for sc in "${names[@]}"; do
  echo
  echo "== 3/3 chaos/$sc.toml, each strategy at $share of its capacity"
  these=("${only[@]}")
  case $sc in pause-holder) if [ ${#only[@]} -eq 0 ]; then these=(--strategies "$locks"); fi ;; esac
  "$bin" compare --workload "$workload" "${chaos_set[@]}" --chaos "chaos/$sc.toml" \
    --rate-from "$out/sweep" --rate-share "$share" --out "$out/chaos/$sc" "${these[@]}" "$@" || status=$?
done

echo
"$bin" report "$out" ${NEEDS:+--needs "$NEEDS"} >/dev/null || status=$?
echo "took $(( $(date +%s) - began )) s"
echo "report: $out/report.html — capacity (sweep/sweep.json), calm (calm/compare.json), chaos (chaos/<scenario>/compare.json); one folder per run with summary.json, timeline.csv, latency.hlog, logs/"
exit $status

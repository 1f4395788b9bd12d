#!/usr/bin/env bash
# Capacity of strategies set side by side, in pairs, from one `lockbench sweep` (one set of
# servers, one after the other): each strategy's capacity interval within the SLO, then the
# ratio of each pair. Answers "does A sustain more load than B on this workload?", e.g.
#   PAIRS="redis-cluster-setnx=redis-setnx" SETS="inventory.skus=16"   does the cluster scale?
#   PAIRS="redis-rwlock=redis-reentrant zookeeper-rwlock=zookeeper" SETS="load.read_fraction=0.9"
# A capacity is an interval, not a point (`≥ X`: even the highest rate passed, `< X`: even the
# lowest failed), so a ratio is an interval too; `lockbench versus` prints them and calls a
# pair higher or lower only when the interval excludes 1.
# One sweep rests on one short step per rate; REPS=3 repeats it and prints each ratio.
# Knobs (environment): PAIRS (required), SETS (space-separated key=value for --set),
# WORKLOAD=workloads/flash-sale.toml, REPS=1, OUT=results/runs/<time>-versus, SWEEP_ARGS
# (extra `lockbench sweep` arguments, e.g. "--slo p99=50ms"). LOCKBENCH_BIN=path uses that
# build instead of a release build (scripts/test.sh runs a short form on the debug build).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PAIRS:?PAIRS=\"a=b c=d\" names the pairs to set side by side}"
WORKLOAD=${WORKLOAD:-workloads/flash-sale.toml}
REPS=${REPS:-1}

# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
pairs=$(for p in $PAIRS; do echo "$p"; done | paste -sd,)
strategies=$(for p in $PAIRS; do echo "${p%%=*}"; echo "${p#*=}"; done | awk '!seen[$0]++' | paste -sd,)
out=${OUT:-results/runs/$(date +%Y%m%d-%H%M%S)-versus}
sets=()
for s in ${SETS:-}; do sets+=(--set "$s"); done

sweeps=()
for rep in $(seq 1 "$REPS"); do
  echo "versus.sh: sweep $rep of $REPS: $strategies ${SETS:-}" >&2
  # shellcheck disable=SC2086 # SWEEP_ARGS is a list of arguments
  "$bin" sweep --strategies "$strategies" --workload "$WORKLOAD" "${sets[@]}" \
    --out "$out/sweep-$rep" ${SWEEP_ARGS:-} >/dev/null
  sweeps+=("$out/sweep-$rep")
done
"$bin" versus "${sweeps[@]}" --pairs "$pairs"
echo "versus.sh: results in $out" >&2

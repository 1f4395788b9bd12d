#!/usr/bin/env bash
# How close does a lock come to what the workload allows, by the way its waiters wait?
# On one set of servers (one `lockbench serve`), redis-setnx on 1 SKU, closed loop, 32 buyers,
# a 2 ms hold, stock that never runs out, with each way of waiting, alternating rounds:
#   notify            Redisson: the release publishes, a waiter wakes on it
#   poll 100ms        redis-py's Lock (sleep=0.1)
#   poll 200ms±100ms  node-redlock (retryDelay 200, retryJitter 100)
# and prints the medians of utilization (share of the window a holder was inside its lease),
# sales/s, p99 and lock timeouts, then of how the lock shared the key (docs/reading.md,
# "Contention"): acquire p99, Jain's fairness index, barges per handoff with a waiter and missed
# wake-ups per give-up. Target: notify utilization >= 0.85.
# Knobs (environment): SECONDS_PER=6 ROUNDS=3; LOCKBENCH_BIN=path uses that build instead of a
# release build (scripts/test.sh runs a short form on the debug build, so the script is
# exercised in CI; its numbers then mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${SECONDS_PER:-6}
ROUNDS=${ROUNDS:-3}

# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
# shellcheck source=lib/serve.sh
source scripts/lib/serve.sh
serve_up bench-wait "$bin" redis-setnx

# One run into $work/runs/<wait>/round-<r>: `run WAIT ROUND`, then --set arguments for the wait.
run() {
  local name=$1 round=$2; shift 2
  "$bin" run --strategy redis-setnx --endpoints "$ep" --json --out "$work/runs/$name/round-$round" \
    --set load.mode=closed --set load.clients=32 --set load.duration="${SECONDS_PER}s" \
    --set inventory.skus=1 --set inventory.stock=1000000000 --set critical_section.hold=2ms \
    "$@" >/dev/null 2>&1
}

modes=(notify poll-100ms poll-200ms)
declare -A args=(
  [notify]="--set lock.wait=notify"
  [poll-100ms]="--set lock.wait=poll --set lock.poll_interval=100ms --set lock.poll_jitter=0s"
  [poll-200ms]="--set lock.wait=poll --set lock.poll_interval=200ms --set lock.poll_jitter=100ms"
)
for r in $(seq 1 "$ROUNDS"); do
  for m in "${modes[@]}"; do
    echo "   round $r: $m" >&2
    # shellcheck disable=SC2086 # the --set pairs split on purpose
    run "$m" "$r" ${args[$m]}
  done
done

# Medians (and ranges) over the rounds, by way of waiting; notify's sales/s over each poll's.
"$bin" rounds "${modes[@]/#/$work/runs/}"
echo "target: notify utilization >= 0.85"

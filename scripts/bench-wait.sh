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

bash scripts/install-deps.sh
if [ -n "${LOCKBENCH_BIN:-}" ]; then
  LB=$(realpath "$LOCKBENCH_BIN")
else
  cargo build --release --quiet
  LB=$PWD/target/release/lockbench
fi
# shellcheck source=lib/serve.sh
source scripts/lib/serve.sh
serve_up bench-wait "$LB" redis-setnx

# One run; prints "utilization sales/s p99_ms lock_timeouts acquire_p99_ms jain barge_share
# missed_share" (a share is "nan" without handoffs or give-ups).
run() { # name, then --set arguments for the wait
  local name=$1; shift
  "$LB" run --strategy redis-setnx --endpoints "$ep" --json --out "$work/run-$name" \
    --set load.mode=closed --set load.clients=32 --set load.duration="${SECONDS_PER}s" \
    --set inventory.skus=1 --set inventory.stock=1000000000 --set critical_section.hold=2ms \
    "$@" >"$work/$name.json" 2>/dev/null
  python3 - "$work/$name.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
if isinstance(s, list):
    s = s[0]
c = s["contention"]
share = lambda a, b: round(a / b, 3) if b else "nan"
print(s["utilization"]["overall"], s["throughput"]["sales_per_s"],
      s["latency_us"]["p99"] / 1000, s["outcomes"].get("lock_timeout", 0),
      c["acquire"]["p99"] / 1000, (c["fairness"] or {}).get("jain", "nan"),
      share(c["barges"], c["handoffs_with_waiter"]), share(c["missed_wakeups"], c["give_ups"]))
EOF
}
median() { sort -g | awk '{a[NR]=$1} END {if (!NR) print "-"; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

modes=(notify poll-100ms poll-200ms)
declare -A args=(
  [notify]="--set lock.wait=notify"
  [poll-100ms]="--set lock.wait=poll --set lock.poll_interval=100ms --set lock.poll_jitter=0s"
  [poll-200ms]="--set lock.wait=poll --set lock.poll_interval=200ms --set lock.poll_jitter=100ms"
)
declare -A rows
for r in $(seq 1 "$ROUNDS"); do
  for m in "${modes[@]}"; do
    # shellcheck disable=SC2086 # the --set pairs split on purpose
    line=$(run "$m" ${args[$m]})
    echo "   round $r: $m: utilization sales/s p99_ms lock_timeouts acquire_p99_ms jain barges missed = $line" >&2
    rows[$m]+="$line"$'\n'
  done
done

col() { printf '%s' "${rows[$1]}" | awk -v c="$2" 'NF && $c != "nan" {print $c}' | median; }
# The range over rounds: "lo–hi".
span() { printf '%s' "${rows[$1]}" | awk -v c="$2" 'NF && $c != "nan" {print $c}' | sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {if (NR) printf "%s-%s", lo, hi; else printf "-"}'; }
printf '\n%-18s %12s %10s %10s %14s  %s\n' "wait" "utilization" "sales/s" "p99 ms" "lock timeouts" "target"
for m in "${modes[@]}"; do
  target=""
  [ "$m" = notify ] && target=">= 0.85"
  printf '%-18s %12s %10s %10s %14s  %s\n' "$m" "$(col "$m" 1)" "$(col "$m" 2)" "$(col "$m" 3)" "$(col "$m" 4)" "$target"
done
printf '\nhow the key was shared (median, range over %s rounds):\n%-18s %16s %16s %18s %18s\n' "$ROUNDS" "wait" "acquire p99 ms" "fairness (Jain)" "barges/handoff" "missed/give-up"
for m in "${modes[@]}"; do
  printf '%-18s %16s %16s %18s %18s\n' "$m" "$(col "$m" 5) [$(span "$m" 5)]" "$(col "$m" 6) [$(span "$m" 6)]" "$(col "$m" 7) [$(span "$m" 7)]" "$(col "$m" 8) [$(span "$m" 8)]"
done
printf '\nratios of sales/s: notify / poll-100ms = %s, notify / poll-200ms = %s\n' \
  "$(awk -v a="$(col notify 2)" -v b="$(col poll-100ms 2)" 'BEGIN {printf "%.2f", a/b}')" \
  "$(awk -v a="$(col notify 2)" -v b="$(col poll-200ms 2)" 'BEGIN {printf "%.2f", a/b}')"

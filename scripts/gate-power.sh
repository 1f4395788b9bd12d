#!/usr/bin/env bash
# How often the gate is wrong, measured on this machine:
#   false alarms: TRIALS trials of the same build against itself (the gate should pass);
#   power:        TRIALS trials of a planted slowdown, the critical section held SLOW (1.3) times
#                 longer (LOCKBENCH_FAILPOINTS=critical-section.slow=1.3), against the normal
#                 build (the gate should fail).
# A trial is what CI does (scripts/ci-gate.sh): BASE_REPS comparisons on workloads/ci.toml
# recorded as the baseline, then REPS more judged by `lockbench gate`. Every trial has runs of
# its own (2 x TRIALS x (BASE_REPS + REPS) comparisons; no run serves two trials), its baseline
# recorded just before its current runs, as a committed baseline is recorded before CI runs.
# The servers are started once (`lockbench serve`; each run recreates its tables and keys) to
# fit the budget: 3.5 s a strategy instead of 9 s on a busy 2-core machine. CI's 12 vs 6 takes
# about 42 min here with one strategy; BASE_REPS=6 about 28 min.
# Resumable: runs already in OUT are kept, so a second call only gates (e.g. after a rebuild).
# Knobs: TRIALS (20), REPS (6), BASE_REPS (12), STRATEGIES (redis-setnx-watchdog: CI's lock
# strategy, which the plant slows), SLOW (1.3), OUT (results/runs/<time>-gate-power),
# LOCKBENCH_BIN (a build to use instead of the release build). Extra arguments go to every
# `lockbench gate`.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${TRIALS:-20}
REPS=${REPS:-6}
BASE_REPS=${BASE_REPS:-12}
STRATEGIES=${STRATEGIES:-redis-setnx-watchdog}
SLOW=${SLOW:-1.3}
OUT=${OUT:-results/runs/$(date -u +%Y%m%dT%H%M%SZ)-gate-power}
# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
mkdir -p "$OUT"

# The servers, once; stopped on every way out.
servers=""
start_servers() {
  [ -n "$servers" ] && return
  "$bin" serve --strategies "$STRATEGIES" --out "$OUT/servers" --for 2h >"$OUT/serve.log" 2>&1 &
  servers=$!
  trap 'kill "$servers" 2>/dev/null || true; wait "$servers" 2>/dev/null || true' EXIT
  for _ in $(seq 1 120); do
    [ -f "$OUT/servers/endpoints.json" ] && return
    kill -0 "$servers" 2>/dev/null || { cat "$OUT/serve.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "gate-power.sh: the servers did not start (see $OUT/serve.log)" >&2
  exit 1
}

# rep DIR [ENV=VALUE]: one comparison into DIR unless it is already there.
rep() {
  local dir=$1
  shift
  [ -f "$dir/compare.json" ] && return
  start_servers
  env "$@" "$bin" compare --workload workloads/ci.toml --strategies "$STRATEGIES" \
    --endpoints "$OUT/servers/endpoints.json" --out "$dir" >/dev/null 2>"$dir.log"
}

began=$(date +%s)
ran=0
for t in $(seq 1 "$TRIALS"); do
  for set in same/$t/base same/$t/current slow/$t/base slow/$t/current; do
    plant=()
    [ "$set" = "slow/$t/current" ] && plant=("LOCKBENCH_FAILPOINTS=critical-section.slow=$SLOW")
    n=$REPS
    [ "${set##*/}" = base ] && n=$BASE_REPS
    for r in $(seq 1 "$n"); do
      mkdir -p "$OUT/$set"
      [ -f "$OUT/$set/rep-$r/compare.json" ] || ran=$((ran + 1))
      rep "$OUT/$set/rep-$r" "${plant[@]}"
    done
  done
  echo "trial $t of $TRIALS: runs done ($(($(date +%s) - began)) s)" >&2
done
took=$(($(date +%s) - began))

# gate KIND T: 0 when the gate passed, 1 when it failed; its output in OUT/KIND/T/gate.txt.
gate() {
  local code=0
  "$bin" gate --baseline "$OUT/$1/$2/base" --current "$OUT/$1/$2/current" "${@:3}" \
    >"$OUT/$1/$2/gate.txt" || code=$?
  case $code in
    0) return 0 ;;
    1) return 1 ;;
    *) echo "gate-power.sh: lockbench gate failed to run ($OUT/$1/$2)" >&2; exit "$code" ;;
  esac
}
# A failure is counted by its kind: the plant is a speed regression, so only a speed FAIL
# detects it; a safety FAIL (a lock that broke) is reported apart.
speed() { grep -q '^FAIL .*: median' "$OUT/$1/$2/gate.txt"; }
safety() { grep -q '^FAIL .*: \(was safe\|control not caught\)' "$OUT/$1/$2/gate.txt"; }
passed=0 speed=0 safety=0 untested=0 caught=0 failed=0
for t in $(seq 1 "$TRIALS"); do
  if gate same "$t" "$@"; then passed=$((passed + 1)); else
    speed same "$t" && speed=$((speed + 1))
    safety same "$t" && safety=$((safety + 1))
  fi
  gate slow "$t" "$@" || failed=$((failed + 1))
  speed slow "$t" && caught=$((caught + 1))
  grep -q "^UNTESTED" "$OUT/same/$t/gate.txt" "$OUT/slow/$t/gate.txt" && untested=$((untested + 1))
done
# Time per trial from the runs made now, or kept from the call that made them.
[ "$ran" -gt 0 ] && echo "$ran $took" >"$OUT/timing"
read -r ran took <"$OUT/timing"
per_trial=$((took * 2 * (BASE_REPS + REPS) / ran))
echo "strategies $STRATEGIES, $BASE_REPS baseline vs $REPS current repetitions, workloads/ci.toml: $ran comparisons in ${took}s, a trial (2 x ($BASE_REPS + $REPS) runs) ${per_trial}s"
echo "same build against itself: passed $passed of $TRIALS (failed $((TRIALS - passed)): speed $speed, safety $safety)"
echo "planted ${SLOW}x critical section: failed on speed in $caught of $TRIALS (failed at all: $failed)"
[ "$untested" -eq 0 ] || echo "WARNING: $untested trials had too few repetitions for the test (UNTESTED in gate.txt)"
echo "results: $OUT"

#!/usr/bin/env bash
# How often the paired gate (`lockbench gate --a --b`) is wrong on this machine (docs/gate.md
# "How often the paired gate is wrong"):
#   MODE=drift  TRIALS paired gates of this build against itself (A = B = current), a CPU hog
#               (a busy loop per core) starting HOG_AFTER seconds into each, about halfway; the
#               gate should pass. Beside each, the stored-baseline gate judges the same trial's
#               B runs against a baseline of BASE_REPS comparisons recorded at the start, while
#               the machine was quiet: what a committed baseline meets on a drifting runner.
#   MODE=power  TRIALS paired gates of B = set:critical_section.hold=PLANT_HOLD against A =
#               current, no hog (workloads/ci.toml holds 90 ms: 99ms is 10 % slower, 117ms 30 %);
#               the gate should fail.
# Knobs: MODE (drift), TRIALS (20), STRATEGIES (redis-setnx-watchdog), HOG_AFTER (35 s),
# PLANT_HOLD (99ms), BASE_REPS (6), SETS (space-separated overrides of every run, e.g.
# load.duration=1s for a short form), GATE_ARGS (more paired-gate flags, e.g. --max-pairs 2),
# OUT (results/runs/<time>-gate-<mode>), LOCKBENCH_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${MODE:-drift}
TRIALS=${TRIALS:-20}
STRATEGIES=${STRATEGIES:-redis-setnx-watchdog}
HOG_AFTER=${HOG_AFTER:-35}
PLANT_HOLD=${PLANT_HOLD:-99ms}
BASE_REPS=${BASE_REPS:-6}
OUT=${OUT:-results/runs/$(date -u +%Y%m%dT%H%M%SZ)-gate-$MODE}
case "$MODE" in drift | power) ;; *) echo "gate-drift: MODE=$MODE: expected drift or power" >&2; exit 2 ;; esac
# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
mkdir -p "$OUT"
read -r -a gate_args <<<"${GATE_ARGS:-}"
sets=()
for s in ${SETS:-}; do sets+=(--set "$s"); done

# The hog: one busy loop per core, from HOG_AFTER seconds on, killed with the trial (and on
# every way out).
hog=""
stop_hog() { [ -z "$hog" ] || { kill -- "-$hog" 2>/dev/null || kill "$hog" 2>/dev/null || true; wait "$hog" 2>/dev/null || true; hog=""; }; }
trap stop_hog EXIT
start_hog() {
  set -m
  ( sleep "$HOG_AFTER"; for _ in $(seq 1 "$(nproc)"); do ( while :; do :; done ) & done; wait ) &
  hog=$!
  set +m
}

if [ "$MODE" = drift ] && [ ! -d "$OUT/baseline" ]; then
  for i in $(seq 1 "$BASE_REPS"); do
    "$bin" compare --workload workloads/ci.toml --strategies "$STRATEGIES" --set "seed=$((1000 + i))" \
      "${sets[@]}" --out "$OUT/baseline-runs/rep-$i" >/dev/null 2>&1
  done
  "$bin" gate --baseline "$OUT/baseline" --current "$OUT/baseline-runs" --update-baseline 2>/dev/null
fi

passed=0; stored_passed=0; pairs_total=0
for t in $(seq 1 "$TRIALS"); do
  dir="$OUT/trial-$t"
  rm -rf "$dir"
  b=current
  [ "$MODE" = power ] && b="set:critical_section.hold=$PLANT_HOLD"
  [ "$MODE" = drift ] && start_hog
  began=$SECONDS
  rc=0
  "$bin" gate --a current --b "$b" --strategies "$STRATEGIES" --seed $((100 * t)) --out "$dir" \
    --json "${sets[@]}" "${gate_args[@]}" >"$dir.json" 2>"$dir.log" || rc=$?
  stop_hog
  [ "$rc" -le 1 ] || { echo "gate-drift: trial $t: the gate failed to run (exit $rc): $dir.log" >&2; exit 1; }
  pairs=$(grep -m1 '"pairs":' "$dir.json" | grep -o '[0-9]*')
  pairs_total=$((pairs_total + pairs))
  # The first strategy's sales/s (the first figure of gate.json's first row).
  ratio=$(tr -d ' \n' <"$dir.json" | grep -o '"ratio":{"estimate":[0-9.e-]*,"lower":[0-9.e-]*,"upper":[0-9.e-]*' \
          | head -1 | sed 's/"ratio":{//' | tr -d '"' || true)
  line="trial $t: paired $([ "$rc" = 0 ] && echo pass || echo FAIL) after $pairs pairs, $((SECONDS - began)) s (sales/s B/A $ratio)"
  [ "$rc" = 0 ] && passed=$((passed + 1))
  if [ "$MODE" = drift ]; then
    # The stored-baseline gate on this trial's B runs.
    cur="$dir/b-runs"; mkdir -p "$cur"
    for p in "$dir"/pair-*/b; do ln -s "$(realpath "$p")" "$cur/$(basename "$(dirname "$p")")"; done
    src=0
    "$bin" gate --baseline "$OUT/baseline" --current "$cur" >"$dir.stored" 2>&1 || src=$?
    [ "$src" -le 1 ] || { echo "gate-drift: trial $t: the stored-baseline gate failed to run: $dir.stored" >&2; exit 1; }
    [ "$src" = 0 ] && stored_passed=$((stored_passed + 1))
    line="$line; stored-baseline $([ "$src" = 0 ] && echo pass || echo FAIL)"
  fi
  echo "$line"
done
case "$MODE" in
  drift) echo "A = B under a CPU hog from ${HOG_AFTER} s: the paired gate passed $passed of $TRIALS trials ($pairs_total pairs); the stored-baseline gate (baseline of $BASE_REPS, recorded quiet) passed $stored_passed of $TRIALS" ;;
  power) echo "B's critical section $PLANT_HOLD (ci.toml: 90 ms): the paired gate failed $((TRIALS - passed)) of $TRIALS trials ($pairs_total pairs)" ;;
esac
echo "results: $OUT"

#!/usr/bin/env bash
# Capacity of strategies set side by side, in pairs, from one `lockbench sweep` (one set of
# servers, one after the other): each strategy's highest offered rate within the SLO, then the
# ratio of each pair. Answers "does A sustain more load than B on this workload?", e.g.
#   PAIRS="redis-cluster-setnx=redis-setnx" SETS="inventory.skus=16"   does the cluster scale?
#   PAIRS="redis-rwlock=redis-reentrant zookeeper-rwlock=zookeeper" SETS="load.read_fraction=0.9"
# A capacity is a bracket, not a point: `>= X` means even the highest rate passed, `< X` that
# even the lowest failed, and a ratio of two bounds is a bound too (printed with its sign).
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

bash scripts/install-deps.sh
if [ -n "${LOCKBENCH_BIN:-}" ]; then
  LB=$(realpath "$LOCKBENCH_BIN")
else
  cargo build --release --quiet
  LB=$PWD/target/release/lockbench
fi
strategies=$(for p in $PAIRS; do echo "${p%%=*}"; echo "${p#*=}"; done | awk '!seen[$0]++' | paste -sd,)
out=${OUT:-results/runs/$(date +%Y%m%d-%H%M%S)-versus}
sets=()
for s in ${SETS:-}; do sets+=(--set "$s"); done

for rep in $(seq 1 "$REPS"); do
  echo "versus.sh: sweep $rep of $REPS: $strategies ${SETS:-}" >&2
  # shellcheck disable=SC2086 # SWEEP_ARGS is a list of arguments
  "$LB" sweep --strategies "$strategies" --workload "$WORKLOAD" "${sets[@]}" \
    --out "$out/sweep-$rep" ${SWEEP_ARGS:-} >/dev/null
done

python3 - "$out" "$REPS" "$PAIRS" <<'PY'
import json, sys
out, reps, pairs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
def capacity(e):
    """(rate, sign): '>=' when even the highest rate passed, '<' when even the lowest failed."""
    if e.get("error"):
        return None, e["error"]
    if e["bound"] == "below-lowest" or (e["bound"] == "unbracketed" and not e["capacity_per_s"]):
        return e["first_failing_per_s"], "<"
    if e["bound"] == "unbracketed":
        return e["capacity_per_s"], ">="
    # An incomplete search (stopped early) is marked "?": its best pass, not a bracket.
    return e["capacity_per_s"], {"found": "", "at-least-max": ">="}.get(e["bound"], "?")
def text(c):
    rate, sign = c
    return f"{sign}{rate:g}/s" if rate is not None else f"({sign})"
for rep in range(1, reps + 1):
    sweep = json.load(open(f"{out}/sweep-{rep}/sweep.json"))
    slo = sweep["slo"]
    entries = {e["strategy"]: e for e in sweep["entries"]}
    print(f"\nsweep {rep}: capacity at p{slo['quantile'] * 100:g} <= {slo['latency_ms']:g} ms, "
          f">= {slo['min_served'] * 100:g}% served ({out}/sweep-{rep})")
    print(f'{"strategy":<26} {"capacity":>12} {"safe":>6}   {"versus":<26} {"capacity":>12} {"safe":>6} {"ratio":>8}')
    for pair in pairs:
        a, b = pair.split("=")
        if a not in entries or b not in entries:
            print(f"{a:<26} (not measured: {', '.join(x for x in (a, b) if x not in entries)})")
            continue
        ca, cb = capacity(entries[a]), capacity(entries[b])
        if ca[0] is None or cb[0] is None or cb[0] == 0:
            ratio = "-"
        else:
            # A lower bound over an upper bound is a lower bound, and so on; mixed is unknown.
            sign = {("", ""): "", (">=", ""): ">=", ("", "<"): ">=", (">=", "<"): ">=",
                    ("<", ""): "<", ("", ">="): "<", ("<", ">="): "<"}.get((ca[1], cb[1]), "~")
            ratio = f"{sign}{ca[0] / cb[0]:.2f}"
        safe = lambda e: "yes" if e.get("safe") else "NO"
        print(f"{a:<26} {text(ca):>12} {safe(entries[a]):>6}   {b:<26} {text(cb):>12} "
              f"{safe(entries[b]):>6} {ratio:>8}")
PY
echo "versus.sh: results in $out" >&2

#!/usr/bin/env bash
# Every real lock library next to lockbench's own strategy for the same recipe, in one
# comparison on the default workload and one under pause-holder (a holder stopped for 2x the
# lease after its read), then the sales/s ratio of each pair. A ratio far from 1 means the
# re-implementation waits or pays unlike the library it stands for (docs/libraries.md,
# "Beside lockbench's own strategies", explains the known gaps).
#   lib:redis-py            redis-setnx            (redis-py's Lock: SET NX PX, poll 100 ms)
#   lib:redis-semaphore     redis-setnx-watchdog   (renewal while held)
#   lib:node-redlock(-v5)   redlock                (node-redlock's retry 200 ms ± 100 ms)
#   lib:curator, lib:kazoo  zookeeper              (ephemeral sequential node, watch predecessor)
#   lib:aetcd               etcd
#   lib:*-fenced            zookeeper-fenced / etcd-fenced
# Knobs (environment): WORKLOAD=workloads/flash-sale.toml; PAIRS="lib:x=own ..." replaces the
# pairs below; SKIP_CHAOS=1 skips the pause-holder comparison; extra arguments go to both `lockbench compare` calls (e.g. --set load.duration=4s).
# LOCKBENCH_BIN=path uses that build instead of a release build (scripts/test.sh runs a short
# form on the debug build, so the script is exercised in CI; its numbers then mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
WORKLOAD=${WORKLOAD:-workloads/flash-sale.toml}

bash scripts/install-deps.sh --adapters
if [ -n "${LOCKBENCH_BIN:-}" ]; then
  LB=$(realpath "$LOCKBENCH_BIN")
else
  cargo build --release --quiet
  LB=$PWD/target/release/lockbench
fi

pairs=${PAIRS:-"lib:redis-py=redis-setnx lib:redis-semaphore=redis-setnx-watchdog lib:node-redlock=redlock
lib:node-redlock-v5=redlock lib:curator=zookeeper lib:kazoo=zookeeper lib:aetcd=etcd
lib:example=redis-setnx lib:curator-fenced=zookeeper-fenced lib:kazoo-fenced=zookeeper-fenced
lib:aetcd-fenced=etcd-fenced lib:advisory-lock=pg-advisory"}
strategies=$(for p in $pairs; do echo "${p%%=*}"; echo "${p#*=}"; done | awk '!seen[$0]++' | paste -sd,)
out=${OUT:-results/runs/$(date +%Y%m%d-%H%M%S)-libraries}

# One comparison, then the pairs' ratios from its compare.json.
compare() { # name, then compare arguments
  local name=$1; shift
  echo "libraries.sh: $name: $strategies" >&2
  # A failed strategy (an adapter not installed, a broken one) is named by compare; the table
  # and the ratios still cover the others.
  "$LB" compare --strategies "$strategies" --workload "$WORKLOAD" --out "$out/$name" "$@" || true
  python3 - "$out/$name/compare.json" "$pairs" <<'PY'
import json, sys
runs = {s["strategy"]: s for s in json.load(open(sys.argv[1]))}
def cell(s):
    lock = s.get("lock_verdict") or "-"
    return (s["throughput"]["sales_per_s"], s["latency_us"]["p99"] / 1000,
            (s.get("utilization") or {}).get("overall"), f'{lock}/{s["store_verdict"]}')
print(f'\n{"library":<22} {"sales/s":>8} {"p99 ms":>8} {"util":>5} {"verdict":<22} '
      f'{"own strategy":<22} {"sales/s":>8} {"p99 ms":>8} {"util":>5} {"verdict":<22} {"ratio":>6}')
for pair in sys.argv[2].split():
    lib, own = pair.split("=")
    if lib not in runs or own not in runs:
        print(f'{lib:<22} (not measured: {", ".join(x for x in (lib, own) if x not in runs)})')
        continue
    a, b = cell(runs[lib]), cell(runs[own])
    ratio = a[0] / b[0] if b[0] else float("nan")
    util = lambda u: "-" if u is None else f"{u:.2f}"
    fmt = lambda c: f'{c[0]:>8.0f} {c[1]:>8.1f} {util(c[2]):>5} {c[3]:<22}'
    print(f'{lib:<22} {fmt(a)} {own:<22} {fmt(b)} {ratio:>6.2f}')
PY
}

compare default "$@"
if [ -z "${SKIP_CHAOS:-}" ]; then
  compare pause-holder --chaos chaos/pause-holder.toml "$@"
fi
echo "libraries.sh: results in $out" >&2

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

# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin --adapters

pairs=${PAIRS:-"lib:redis-py=redis-setnx lib:redis-semaphore=redis-setnx-watchdog lib:node-redlock=redlock
lib:node-redlock-v5=redlock lib:curator=zookeeper lib:kazoo=zookeeper lib:aetcd=etcd
lib:example=redis-setnx lib:curator-fenced=zookeeper-fenced lib:kazoo-fenced=zookeeper-fenced
lib:aetcd-fenced=etcd-fenced lib:advisory-lock=pg-advisory"}
strategies=$(for p in $pairs; do echo "${p%%=*}"; echo "${p#*=}"; done | awk '!seen[$0]++' | paste -sd,)
out=${OUT:-results/runs/$(date +%Y%m%d-%H%M%S)-libraries}

# One comparison, then the pairs' ratios from its compare.json (`lockbench versus`).
compare() { # name, then compare arguments
  local name=$1; shift
  echo "libraries.sh: $name: $strategies" >&2
  # A failed strategy (an adapter not installed, a broken one) is named by compare; the table
  # and the ratios still cover the others.
  "$bin" compare --strategies "$strategies" --workload "$WORKLOAD" --out "$out/$name" "$@" || true
  "$bin" versus "$out/$name" --pairs "$(for p in $pairs; do echo "$p"; done | paste -sd,)"
}

compare default "$@"
if [ -z "${SKIP_CHAOS:-}" ]; then
  compare pause-holder --chaos chaos/pause-holder.toml "$@"
fi
echo "libraries.sh: results in $out" >&2

#!/usr/bin/env bash
# The chaos scenarios side by side: each chaos/*.toml against the strategies it is about, on
# workloads/chaos.toml (steady demand that never sells out, 2 s leases). Prints, per scenario,
# the usual table plus one row per fault (sales/s and p99 before / during / after, recovery).
# Partition and network faults need root (network namespaces); without it those scenarios are
# skipped.
# Extra arguments go to every `lockbench compare`, e.g. scripts/chaos.sh --set load.rate=200
# Knobs: CHAOS_ONLY=name,name (scenarios to run), CHAOS_STRATEGIES=id,id (instead of each
# scenario's own), LOCKBENCH_BIN (a build to use instead of a release build; scripts/test.sh
# runs a short form so CI exercises this script).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
out="results/runs/$(date -u +%Y%m%dT%H%M%SZ)-chaos"
status=0
scenario() {
  local name=$1 strategies=${CHAOS_STRATEGIES:-$2}
  shift 2
  if [ -n "${CHAOS_ONLY:-}" ] && [[ ",$CHAOS_ONLY," != *",$name,"* ]]; then return 0; fi
  echo
  echo "== chaos/$name.toml: $strategies"
  "$bin" compare --workload workloads/chaos.toml --chaos "chaos/$name.toml" \
    --strategies "$strategies" --out "$out/$name" "$@" || status=$?
}
# Every expiring lock, unfenced (each must lose an update) and fenced (each must refuse it).
scenario pause-holder redis-setnx,redis-setnx-watchdog,redis-reentrant,redlock,etcd,zookeeper,mysql-lock-table,redis-setnx-fenced,mysql-lock-table-fenced,etcd-fenced,zookeeper-fenced "$@"
# One SKU and a 50 ms critical section: a jump always finds a holder inside it.
scenario clock-jump redlock --set inventory.skus=1 --set 'critical_section.hold="50ms"' "$@"
scenario kill-master mysql-for-update,mysql-atomic,redis-setnx,redis-sentinel,redlock,etcd,zookeeper "$@"
scenario pause-server mysql-for-update,redis-setnx,redis-sentinel,etcd,zookeeper "$@"
if [ "$(id -u)" = 0 ]; then
  scenario partition-master redis-sentinel,etcd,zookeeper "$@"
  # Network faults (NFQUEUE in the nodes' namespaces): slow, jittery and lossy links.
  scenario slow-redlock-node redlock "$@"
  scenario jittery-zookeeper zookeeper "$@"
  scenario lossy-sentinel-master redis-sentinel "$@"
else
  echo "== chaos/partition-master.toml and the network faults: skipped (need root for network namespaces)"
fi
scenario random redis-setnx,etcd "$@"
echo
echo "results: $out (one folder per scenario, one per strategy inside)"
exit $status

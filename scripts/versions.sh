#!/usr/bin/env bash
# Server versions side by side: the same strategies, workload and SLO on each server build a
# workload's [servers] table can choose (scripts/servers.lock), one after the other on this
# machine. For each strategy and build: the build the servers reported, the capacity interval
# (`lockbench sweep`), then a calm run at one rate common to every build of that strategy (half
# the lowest capacity any build showed) with its p99, 95% interval and sample count, after a
# 3 s warm-up on the same servers (load.warmup: a ZooKeeper ensemble just started served its
# first 2 s at p99 ~500 ms, then 18-70 ms).
# Knobs (environment): REDIS_BUILDS (7.0,valkey-8.0,valkey-9.1), REDIS_STRATEGIES
# (redis-setnx-watchdog,redis-lua-decr), ETCD_BUILDS (3.4,3.5), ETCD_STRATEGIES (etcd),
# ZOOKEEPER_BUILDS (3.8,3.9), ZOOKEEPER_STRATEGIES (zookeeper), MYSQL_BUILDS
# (mariadb-10.11,mysql-9), MYSQL_STRATEGIES (mysql-for-update); an empty *_BUILDS skips that
# service. FAULTS (kill-master,pause-holder; empty: none): chaos/<fault>.toml on
# workloads/chaos.toml for every strategy and build at its calm rate, each verdict in the table.
# Both database builds run in containers (MySQL 9 needs sid's glibc; MariaDB runs there
# too so that the two are measured alike): that part needs root and starts the private dockerd
# of scripts/container-images.sh, stopped again at the end. OUT (results/runs/<time>-versions), SWEEP_ARGS (extra
# `lockbench sweep` arguments), CALM_SAMPLES (1000: a calm run lasts until about that many
# arrivals, 5 to 30 s). Extra arguments go to every sweep and run. LOCKBENCH_BIN=path uses
# that build instead of a release build (scripts/test.sh runs a short form).
set -euo pipefail
cd "$(dirname "$0")/.."
redis_builds=${REDIS_BUILDS-7.0,valkey-8.0,valkey-9.1}
etcd_builds=${ETCD_BUILDS-3.4,3.5}
zookeeper_builds=${ZOOKEEPER_BUILDS-3.8,3.9}
mysql_builds=${MYSQL_BUILDS-mariadb-10.11,mysql-9}
if [ -n "$mysql_builds" ] && [ "$(id -u)" != 0 ]; then
  echo "versions.sh: the MySQL builds run in containers, which need root; MYSQL_BUILDS= skips them" >&2
  exit 2
fi
servers=""
for b in ${redis_builds//,/ }; do [ "$b" = 7.0 ] || servers+="redis=$b,"; done
for b in ${etcd_builds//,/ }; do [ "$b" = 3.4 ] || servers+="etcd=$b,"; done
for b in ${zookeeper_builds//,/ }; do [ "$b" = 3.8 ] || servers+="zookeeper=$b,"; done
# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
if [ -n "$servers" ]; then lockbench_bin --servers "${servers%,}"; else lockbench_bin; fi
out=${OUT:-"results/runs/$(date -u +%Y%m%dT%H%M%SZ)-versions"}
workload=workloads/flash-sale.toml
mkdir -p "$out"

# The provisioner of a key's runs: containers for the databases, local processes otherwise.
provision() { if [ "$1" = mysql ]; then echo containers; else echo local; fi; }

# Sweeps every build of one service: `sweep KEY BUILDS STRATEGIES`.
sweep() {
  local key=$1 builds=$2 strategies=$3
  for b in ${builds//,/ }; do
    echo "== capacity: servers.$key = $b: $strategies" >&2
    # shellcheck disable=SC2086 # SWEEP_ARGS is a list of words
    "$bin" sweep --workload "$workload" --strategies "$strategies" --set "servers.$key=$b" \
      --provision "$(provision "$key")" --out "$out/$key-$b/sweep" ${SWEEP_ARGS:-} "${extra[@]}" >/dev/null
  done
}

# The calm rate of each strategy of one service: half the lowest capacity of any of its builds
# (half the lowest failing rate when no build passed any), and how long to run to reach about
# CALM_SAMPLES arrivals. Prints "strategy rate duration" lines.
calm_rates() {
  "$bin" versions "$out" --calm-rates "$1" --builds "$2" --strategies "$3" --samples "${CALM_SAMPLES:-1000}"
}

# Calm runs of every build at the common rates: `calm KEY BUILDS STRATEGIES`.
calm() {
  local key=$1 builds=$2 strategies=$3
  calm_rates "$key" "$builds" "$strategies" | while read -r s rate duration; do
    for b in ${builds//,/ }; do
      echo "== calm: servers.$key = $b: $s at $rate/s for $duration" >&2
      "$bin" run --strategy "$s" --workload "$workload" --set "servers.$key=$b" \
        --provision "$(provision "$key")" --set "load.rate=$rate" --set "load.duration=\"$duration\"" --set 'load.warmup="3s"' \
        --out "$out/$key-$b/calm/$s" "${extra[@]}" >/dev/null || true
    done
  done
}

# Every fault of FAULTS on every build at the calm rates: `faults KEY BUILDS STRATEGIES`. A
# fault the strategy cannot take (a holder pause of a lock-free one) is refused: no verdict.
faults() {
  local key=$1 builds=$2 strategies=$3 all=${FAULTS-kill-master,pause-holder}
  [ -n "$all" ] || return 0
  calm_rates "$key" "$builds" "$strategies" | while read -r s rate _; do
    for b in ${builds//,/ }; do
      for f in ${all//,/ }; do
        echo "== fault: servers.$key = $b: $s under chaos/$f.toml at $rate/s" >&2
        "$bin" run --strategy "$s" --workload workloads/chaos.toml --chaos "chaos/$f.toml" \
          --set "servers.$key=$b" --provision "$(provision "$key")" --set "load.rate=$rate" \
          --out "$out/$key-$b/chaos/$f/$s" "${extra[@]}" >/dev/null 2>&1 || true
      done
    done
  done
}

extra=("$@")
# The three parts of one service: `each KEY BUILDS STRATEGIES`.
each() { sweep "$@"; calm "$@"; faults "$@"; }
[ -z "$redis_builds" ] || each redis "$redis_builds" "${REDIS_STRATEGIES:-redis-setnx-watchdog,redis-lua-decr}"
[ -z "$etcd_builds" ] || each etcd "$etcd_builds" "${ETCD_STRATEGIES:-etcd}"
if [ -n "$mysql_builds" ]; then
  # The private dockerd: stopped at the end unless it was already running (scripts/test.sh's).
  . scripts/lib/docker.sh
  docker_answering || trap 'bash scripts/container-images.sh --stop' EXIT
  docker_up scripts
  each mysql "$mysql_builds" "${MYSQL_STRATEGIES:-mysql-for-update}"
fi
[ -z "$zookeeper_builds" ] || each zookeeper "$zookeeper_builds" "${ZOOKEEPER_STRATEGIES:-zookeeper}"
"$bin" versions "$out" | tee "$out/versions.txt"
"$bin" report "$out" >/dev/null
echo "report: $out/report.html" >&2

#!/usr/bin/env bash
# The whole test suite: installs what is missing, checks formatting and lints, then runs the
# unit tests and the integration tests against real MariaDB, Redis, ZooKeeper and etcd servers
# (and report.html loaded in headless Chromium) — as local processes, and as containers on a
# private Docker daemon with images built here (scripts/container-images.sh; no registry).
set -euo pipefail
cd "$(dirname "$0")/.."
# Seconds per stage on stderr: the suite has a 20-minute goal, and this says where it goes.
lap_start=$SECONDS
lap() { echo "test.sh: [$((SECONDS - lap_start)) s] $1" >&2; lap_start=$SECONDS; }
# The server builds besides bookworm's too (scripts/servers.lock; about 11 s and 32 MB).
bash scripts/install-deps.sh --for-tests --servers all
lap install-deps
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
lap "fmt and clippy"
# Layers only point down, and no circle between parts (ARCHITECTURE.md).
bash scripts/check-layers.sh
# No function over 80 lines in bench/src outside tests.
bash scripts/check-functions.sh
lap "layer and function checks"

if [ "$(id -u)" = 0 ]; then
  # The daemon is stopped again on every way out; its images stay for the next run.
  trap 'bash scripts/container-images.sh --stop' EXIT
  . scripts/lib/docker.sh
  docker_up scripts
  lap "container images"
elif [ -n "${CI:-}" ]; then
  echo "test.sh: CI runs as root (a private dockerd for the containers tests)" >&2
  exit 1
else
  echo "test.sh: not root: the containers tests will be skipped (they start a private dockerd)" >&2
fi
# Every script the README shows must keep working: each in a short form on the debug build
# (its numbers mean nothing there; a renamed table once broke bench-overhead.sh unnoticed).
cargo build --workspace --quiet
lap "debug build"
export LOCKBENCH_BIN=target/debug/lockbench
bash scripts/check-docs.sh
lap check-docs
ROUNDS=1 SECONDS_PER=1 RSS_ATTEMPTS=5000 bash scripts/bench-overhead.sh >/dev/null
ROUNDS=1 SECONDS_PER=1 bash scripts/bench-wait.sh >/dev/null
COMPLETIONS=20000 ROUNDS=1 bash scripts/bench-ingest.sh >/dev/null
lap "bench-overhead, bench-wait, bench-ingest"
# The main job's three parts (sweep, calm, chaos) and its report, on two strategies.
STRATEGIES=mysql-atomic,redis-setnx-watchdog SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
  CALM_DURATION=1s CHAOS_DURATION=6s NEEDS="safe-under-pause,fenced-ok,capacity>=10" bash scripts/compare.sh >/dev/null
lap compare.sh
PAIRS="redis-rwlock=redis-reentrant" SETS="load.read_fraction=0.9" SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
  bash scripts/versus.sh >/dev/null
# Two sweeps of one strategy and their agreement table; exit 1 (intervals apart) is an answer
# the script may give on a busy debug build, anything else is the script broken.
repro_out=$(mktemp -d)
repro_rc=0
RUNS=2 STRATEGIES=mysql-atomic OUT="$repro_out" SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
  bash scripts/reproducibility.sh >/dev/null || repro_rc=$?
[ "$repro_rc" -le 1 ] || { echo "test.sh: reproducibility.sh exited $repro_rc" >&2; exit 1; }
rm -rf "$repro_out"
# Server builds side by side: Redis 7.0 and Valkey 9.1, one strategy, a short sweep and calm run.
versions_out=$(mktemp -d)
versions=$(REDIS_BUILDS=7.0,valkey-9.1 ETCD_BUILDS= ZOOKEEPER_BUILDS= MYSQL_BUILDS= REDIS_STRATEGIES=redis-lua-decr CALM_SAMPLES=50 FAULTS=kill-master \
  SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
  OUT="$versions_out" bash scripts/versions.sh)
grep -q 'redis=valkey-9.1 *valkey 9.1.2 (libc)' <<<"$versions" || {
  echo "test.sh: versions.sh did not show the Valkey 9.1 build:" >&2; echo "$versions" >&2; exit 1; }
grep -Eq 'redis=valkey-9.1 .* kill-master [A-Za-z]+' <<<"$versions" || {
  echo "test.sh: versions.sh gave Valkey 9.1 no kill-master verdict:" >&2; echo "$versions" >&2; exit 1; }
grep -q '<td>redis=valkey-9.1</td><td>valkey 9.1.2 (libc)</td>' "$versions_out/report.html" || {
  echo "test.sh: versions.sh's report.html lacks the Valkey 9.1 row" >&2; exit 1; }
# The database builds in containers (root only: the containers tests need it too): MySQL 9 alone.
if [ "$(id -u)" = 0 ]; then
  versions=$(REDIS_BUILDS= ETCD_BUILDS= ZOOKEEPER_BUILDS= MYSQL_BUILDS=mysql-9 MYSQL_STRATEGIES=mysql-atomic CALM_SAMPLES=50 FAULTS= \
    SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
    OUT="$versions_out/mysql" bash scripts/versions.sh)
  grep -q 'mysql=mysql-9 *9\.7\.' <<<"$versions" || {
    echo "test.sh: versions.sh did not show the MySQL 9 build:" >&2; echo "$versions" >&2; exit 1; }
fi
# docs/servers.md's runs on other builds, as shown there (shorter).
"$LOCKBENCH_BIN" run --strategy redis-setnx --set servers.redis=valkey-8.0 --set 'load.duration="1s"' \
  --out "$versions_out/valkey" >/dev/null
"$LOCKBENCH_BIN" run --strategy etcd --set servers.etcd=3.5 --set 'load.duration="1s"' \
  --out "$versions_out/etcd" >/dev/null
"$LOCKBENCH_BIN" run --strategy zookeeper --set servers.zookeeper=3.9 --set 'load.duration="1s"' \
  --out "$versions_out/zookeeper" >/dev/null
# docs/reproduce.md's commands, short: the list, and one round of etcd-11456 (every scenario's
# verdicts are judged by the real-server tests `reproduce::`, beside the other tests).
"$LOCKBENCH_BIN" reproduce etcd-11456 --rounds 1 --out "$versions_out/reproduce" >/dev/null
"$LOCKBENCH_BIN" reproduce --list >/dev/null
rm -rf "$versions_out"
lap "versus.sh, reproducibility.sh, versions.sh, reproduce"
CHAOS_ONLY=kill-master CHAOS_STRATEGIES=mysql-atomic bash scripts/chaos.sh \
  --set load.duration=5s >/dev/null
# The gate against a baseline of its own (the committed one is for release builds), with
# tolerances a debug build on a busy machine cannot miss: this checks the script, not speed.
# One repetition a side cannot be tested, and the gate must say so.
gate_dir=$(mktemp -d)
BASE_REPS=1 STRATEGIES=none,mysql-atomic BASELINE="$gate_dir" bash scripts/ci-gate.sh --update-baseline >/dev/null
gate_out=$(REPS=1 STRATEGIES=none,mysql-atomic BASELINE="$gate_dir" bash scripts/ci-gate.sh \
  --max-throughput-drop 99% --max-p99-rise 1000%)
grep -q '^UNTESTED: 1 vs 1 repetitions cannot show a regression' <<<"$gate_out"
rm -rf "$gate_dir"
power_out=$(mktemp -d)
TRIALS=1 REPS=2 BASE_REPS=2 STRATEGIES=mysql-atomic OUT="$power_out" bash scripts/gate-power.sh >/dev/null
rm -rf "$power_out"
lap "chaos.sh, ci-gate.sh, gate-power.sh"
lib_out=$(mktemp -d)
PAIRS=lib:example=redis-setnx SKIP_CHAOS=1 OUT="$lib_out" bash scripts/libraries.sh \
  --set load.duration=1s >/dev/null
rm -rf "$lib_out"
"$LOCKBENCH_BIN" adapter-check --lib example >/dev/null
remote_out=$(mktemp -d)
WORKERS=2 OUT="$remote_out" bash scripts/remote.sh --set load.duration=1s --set load.rate=100 \
  --set inventory.skus=50 >/dev/null
rm -rf "$remote_out"
lap "libraries.sh, adapter-check, remote.sh"
unset LOCKBENCH_BIN
echo "test.sh: the README's scripts ran (short forms): bench-overhead, bench-wait, bench-ingest, compare, versus, reproducibility, versions, reproduce, chaos, ci-gate, gate-power, libraries, adapter-check, remote" >&2
# Three tests at a time on 2 cores, but the chaos tests two at a time: the real-server tests
# mostly wait on servers and loads of fixed length, and with 2 threads everywhere the suite took
# 21.4 min (Nov 27, 2026). Three chaos tests at once (ZooKeeper ensembles paused and killed
# beside each other) starved the ensembles past the orphaned-node test's margin in two of three
# full runs; nothing else failed that the test did not get wrong itself.
cargo test --workspace -- --test-threads 3 --skip chaos::
cargo test --workspace -- --test-threads 2 chaos::
lap "cargo test --workspace"

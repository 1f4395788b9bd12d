#!/usr/bin/env bash
# The short forms of every script README.md and docs/ show, on the debug build (their numbers
# mean nothing there; a renamed table once broke bench-overhead.sh unnoticed). Three groups run
# side by side: the scripts mostly wait on servers starting and on loads of fixed length, and
# one after another they took 371 s of the suite's 20-minute budget (Nov 27, 2026, warm cache);
# side by side 255 s with compare.sh in the benchmarks group, 193 s as the groups were then;
# the gates later made the jobs' group the longest (294 s in all, Nov 28; 342 s against the
# benchmarks' 117 on a loaded machine), so the library table, remote workers and the baseline
# gate moved to the benchmarks' group.
# Each group's output goes to a log of its own, printed when it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${LOCKBENCH_BIN:=target/debug/lockbench}"
export LOCKBENCH_BIN

# The benchmarks, the baseline gate and its power, the library table, an adapter check,
# remote workers.
benchmarks_gate_libraries() {
  ROUNDS=1 SECONDS_PER=1 RSS_ATTEMPTS=5000 bash scripts/bench-overhead.sh >/dev/null
  ROUNDS=1 SECONDS_PER=1 bash scripts/bench-wait.sh >/dev/null
  COMPLETIONS=20000 ROUNDS=1 bash scripts/bench-ingest.sh >/dev/null
  lib_out=$(mktemp -d)
  PAIRS=lib:example=redis-setnx SKIP_CHAOS=1 OUT="$lib_out" bash scripts/libraries.sh \
    --set load.duration=1s >/dev/null
  rm -rf "$lib_out"
  "$LOCKBENCH_BIN" adapter-check --lib example >/dev/null
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
  # docs/main-job.md's job under the disk faults (root: lazyfs mounts through /dev/fuse), short.
  if [ "$(id -u)" = 0 ] && [ -e /dev/fuse ]; then
    disk_out=$(mktemp -d)
    disk=$("$LOCKBENCH_BIN" job --strategies redis-lua-decr,etcd --scenarios power-loss,slow-disk --sale none \
      --calm-duration 1s --chaos-duration 4s --confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s \
      --revisit-budget 5s --out "$disk_out/disk" 2>&1) || true
    grep -q '^power loss: etcd: fault 1: dropped' <<<"$disk" && test -s "$disk_out/disk/chaos/slow-disk/etcd/summary.json" || {
      echo "test.sh: the job under power-loss and slow-disk did not run both:" >&2; echo "$disk" >&2; exit 1; }
    rm -rf "$disk_out"
  fi
  remote_out=$(mktemp -d)
  WORKERS=2 OUT="$remote_out" bash scripts/remote.sh --set load.duration=1s --set load.rate=100 \
    --set inventory.skus=50 >/dev/null
  rm -rf "$remote_out"
}

# Comparisons of pairs, of repeated sweeps, of server builds; the published failures.
comparisons_and_builds() {
  PAIRS="redis-rwlock=redis-reentrant" SETS="load.read_fraction=0.9" SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
    bash scripts/versus.sh >/dev/null
  # Two sweeps of one strategy and their agreement table; exit 1 (intervals apart) is an answer
  # the script may give on a busy debug build, anything else is the script broken.
  repro_out=$(mktemp -d)
  repro_rc=0
  RUNS=2 STRATEGIES=mysql-atomic OUT="$repro_out" SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
    bash scripts/reproducibility.sh >/dev/null || repro_rc=$?
  [ "$repro_rc" -le 1 ] || { echo "test.sh: reproducibility.sh exited $repro_rc" >&2; exit 1; }
  # docs/predict.md's commands, short (root: slow links and disks): a model of one lock from
  # three points, a prediction from it, and the two sweeps above told apart by it (mysql-atomic
  # has no fit: "cannot tell", exit 1, is the answer; anything above 1 is the command broken).
  if [ "$(id -u)" = 0 ] && [ -e /dev/fuse ]; then
    "$LOCKBENCH_BIN" calibrate --strategies redis-setnx --points 0:0,2ms:0,0:2ms --check none \
      --trials 2 --duration 300ms --warm-up 0s --out "$repro_out/cal" >/dev/null 2>&1
    "$LOCKBENCH_BIN" predict --model "$repro_out/cal" --rtt 1ms --fsync 2ms | grep -q '^redis-setnx ' || {
      echo "test.sh: predict printed no redis-setnx row" >&2; exit 1; }
    agree_rc=0
    "$LOCKBENCH_BIN" agreement "$repro_out/sweep-1" "$repro_out/sweep-2" --model "$repro_out/cal" \
      >/dev/null || agree_rc=$?
    [ "$agree_rc" -le 1 ] || { echo "test.sh: agreement --model exited $agree_rc" >&2; exit 1; }
  fi
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
}

# The main job's parts and its report, one chaos scenario, the paired gate, the CI formats.
jobs_and_gates() {
  # The main job's four parts (the sale without its fault, sweep, calm, chaos) and its report,
  # on two strategies (the sale's fault runs in the sim job test of tests/pipeline.rs).
  job_out=$(mktemp -d)
  SALE_SCENARIOS= STRATEGIES=mysql-atomic,redis-setnx-watchdog SWEEP_ARGS="--confidence 80% --start 50 --max 50 --step-budget 6s --budget 8s --revisit-budget 5s" \
    CALM_DURATION=1s CHAOS_DURATION=6s NEEDS="safe-under-pause,fenced-ok,capacity>=10" bash scripts/compare.sh \
    --out "$job_out" --junit "$job_out/junit.xml" --bmf "$job_out/bmf.json" >/dev/null
  # Its CI files (docs/ci-formats.md, "The main job"): a suite per part that ran, named by its
  # part; figures under names that say the part (tests/ci_tools.rs reads JUnit with junitparser).
  for part in sale calm chaos/kill-master; do
    grep -q "<testsuite name=\"lockbench job [^\"]*: $part\"" "$job_out/junit.xml" || {
      echo "test.sh: the job's JUnit has no suite for $part" >&2; exit 1; }
  done
  grep -q '"calm/mysql-atomic"' "$job_out/bmf.json"
  # The advice on it (docs/choosing.md): mysql-atomic sells the sale's hot item out in about
  # 0.6 s (release) and is safe in every part, so it meets both.
  advice=$("$LOCKBENCH_BIN" advise "$job_out" --needs "safe,sold-out<=5s")
  awk '/^meet every need/{g=1} /^miss a need/{g=0} g && /^  mysql-atomic$/' <<<"$advice" | grep -q . || {
    echo "test.sh: advise did not find mysql-atomic meeting safe,sold-out<=5s:" >&2; echo "$advice" >&2; exit 1; }
  rm -rf "$job_out"
  CHAOS_ONLY=kill-master CHAOS_STRATEGIES=mysql-atomic bash scripts/chaos.sh \
    --set load.duration=5s >/dev/null
  # The paired gate (docs/gate.md): a critical section 3x longer must fail on sales/s, in
  # its JUnit file too; the drift script's short form; two versions of one shipped library.
  paired=$(mktemp -d)
  paired_rc=0
  "$LOCKBENCH_BIN" gate --a current --b set:critical_section.hold=270ms --strategies redis-setnx-watchdog \
    --set load.duration=1s --min-pairs 6 --max-pairs 6 --out "$paired/gate" --junit "$paired/junit.xml" \
    --markdown "$paired/summary.md" >"$paired/table" 2>&1 || paired_rc=$?
  [ "$paired_rc" = 1 ] && grep -q 'failure message="sales_per_s B/A 0\.[0-5]' "$paired/junit.xml" || {
    echo "test.sh: the paired gate did not fail a 3x longer critical section on sales/s (exit $paired_rc):" >&2
    cat "$paired/table" "$paired/junit.xml" >&2; exit 1; }
  TRIALS=1 MODE=drift HOG_AFTER=4 BASE_REPS=1 SETS="load.duration=1s" GATE_ARGS="--min-pairs 2 --max-pairs 2" \
    OUT="$paired/drift" bash scripts/gate-drift.sh >/dev/null
  TRIALS=1 MODE=power SETS="load.duration=1s" GATE_ARGS="--min-pairs 1 --max-pairs 1" \
    OUT="$paired/power" bash scripts/gate-drift.sh >/dev/null
  "$LOCKBENCH_BIN" gate --a adapter:curator --b adapter:curator-5.7 --set load.duration=1s --min-pairs 1 \
    --max-pairs 1 --out "$paired/adapters" >"$paired/adapters.table" 2>&1 || {
    echo "test.sh: the paired gate of Curator 5.4 against 5.7 failed:" >&2; cat "$paired/adapters.table" >&2; exit 1; }
  grep -q '^lib:curator → lib:curator-5.7 *verdicts *1/1 ok *1/1 ok' "$paired/adapters.table"
  # docs/gate.md's other variants, one pair each: another build, another server build.
  "$LOCKBENCH_BIN" gate --a "bin:$(realpath "$LOCKBENCH_BIN")" --b current --strategies redis-lua-decr \
    --set load.duration=1s --min-pairs 1 --max-pairs 1 --out "$paired/bin" >/dev/null 2>&1
  "$LOCKBENCH_BIN" gate --a current --b server:redis=valkey-8.0 --strategies redis-lua-decr \
    --set load.duration=1s --min-pairs 1 --max-pairs 1 --out "$paired/server" >/dev/null 2>&1
  grep -q '"valkey' "$paired/server/pair-01/b/redis-lua-decr/summary.json"
  rm -rf "$paired"
  # The CI formats (docs/ci-formats.md) on a short sale: every file written, JUnit with a
  # passing safety case per strategy.
  ci_out=$(mktemp -d)
  "$LOCKBENCH_BIN" compare --strategies mysql-atomic,redis-setnx-watchdog --workload workloads/sale.toml \
    --set load.duration=4s --out "$ci_out/run" --junit "$ci_out/junit.xml" --markdown "$ci_out/summary.md" \
    --bmf "$ci_out/bmf.json" --github-benchmark "$ci_out/bench.json" >/dev/null
  test -s "$ci_out/bench-bigger.json" && test -s "$ci_out/bmf.json" && grep -q '| mysql-atomic | safe |' "$ci_out/summary.md"
  grep -q 'classname="mysql-atomic"' "$ci_out/junit.xml"
  # The sale's sell-out time (mysql-atomic sells out within the 4 s) reaches the trend files
  # (their fields: report/ci.rs's tests; JUnit read by junitparser: tests/ci_tools.rs).
  grep -q '"sold_out_s"' "$ci_out/bmf.json" && grep -q '"mysql-atomic sold_out_s"' "$ci_out/bench.json"
  # mysql-atomic sells out within the 4 s (1.96 s on a debug build): its sales chart marks it, and the page renders in a
  # headless browser (where one is installed) to a screenshot of real size.
  grep -qx 'sold out' "$ci_out/run/charts/throughput.svg"
  if command -v chromium >/dev/null; then
    chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,2400 \
      --screenshot="$ci_out/report.png" "file://$(realpath "$ci_out/run/report.html")" >/dev/null 2>&1
    test "$(stat -c %s "$ci_out/report.png")" -gt 50000
  else
    echo "test.sh: no chromium: the report's screenshot is not taken" >&2
  fi
  rm -rf "$ci_out"
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
groups=(benchmarks_gate_libraries comparisons_and_builds jobs_and_gates)
declare -A pids
for g in "${groups[@]}"; do
  ( set -euo pipefail; start=$SECONDS; "$g"; echo "test-scripts: [$((SECONDS - start)) s] $g" ) \
    >"$logs/$g.log" 2>&1 &
  pids[$g]=$!
done
failed=0
for g in "${groups[@]}"; do
  if wait "${pids[$g]}"; then
    tail -n 1 "$logs/$g.log" >&2
  else
    echo "test-scripts: $g failed; its output:" >&2
    tail -n 60 "$logs/$g.log" >&2
    failed=1
  fi
done
[ "$failed" = 0 ] || exit 1
echo "test-scripts: the README's scripts ran (short forms): bench-overhead, bench-wait, bench-ingest, compare, versus, reproducibility, versions, reproduce, chaos, ci-gate, gate-power, libraries, adapter-check, remote (history with Otava: tests/ci_tools.rs)" >&2

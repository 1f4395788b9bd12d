#!/usr/bin/env bash
# Is the harness ever the bottleneck? Measures, side by side on the same servers (one
# `lockbench serve`), the reference tool and lockbench doing the same work at the same
# concurrency, alternating rounds, and prints medians and ratios (target >= 0.9):
#   1. redis-benchmark EVALSHA <the redis-lua-decr script>  vs  lockbench run --strategy redis-lua-decr
#   2. mysqlslap with the mysql-atomic transaction          vs  lockbench run --strategy mysql-atomic
#   3. one uncontended redis-setnx lock cycle (1 client): redis-benchmark timing SET NX PX and
#      the unlock script separately (cycle rate = 1 / (1/set + 1/unlock)) vs lockbench with
#      critical_section.touch_store = false (acquire then release, nothing else); then the
#      same cycle with nothing around it through each redis-rs connection type
#      (bench/examples/lock_cycle.rs), to tell the client crate's cost from the harness's
# Then the peak RSS of lockbench for RSS_ATTEMPTS attempts and for a tenth of that: memory must
# not grow with the number of attempts.
# Knobs (environment): CLIENTS=50 SECONDS_PER=8 ROUNDS=3 RSS_ATTEMPTS=1000000; LOCKBENCH_BIN=path
# uses that build instead of a release build (scripts/test.sh runs a short form on the debug
# build, so the script is exercised in CI; its ratios then mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-50}
SECONDS_PER=${SECONDS_PER:-8}
ROUNDS=${ROUNDS:-3}
RSS_ATTEMPTS=${RSS_ATTEMPTS:-1000000}

# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
command -v /usr/bin/time >/dev/null || { echo "bench-overhead: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
CYCLE=$(example_bin lock_cycle)
# shellcheck source=lib/serve.sh
source scripts/lib/serve.sh
serve_up bench-overhead "$bin" redis-setnx,redis-lua-decr,mysql-atomic
redis_port=$(grep -A1 '"redis": \[' "$ep" | grep -o '127.0.0.1:[0-9]*' | cut -d: -f2)
mysql_port=$(grep -A1 '"mysql": {' "$ep" | grep -o '127.0.0.1:[0-9]*' | cut -d: -f2)
mysql_pw=$(grep -o '"mysql_password": "[^"]*"' "$ep" | cut -d'"' -f4)
sql() { mariadb --no-defaults -h127.0.0.1 -P"$mysql_port" -ulockbench -p"$mysql_pw" lockbench -N -e "$1"; }

# Closed loop, one hot SKU, stock that never runs out: every attempt does the full sale.
lockbench_rate() { # strategy -> attempts/s
  # A fresh folder each time: run refuses to write into one that holds results.
  "$bin" run --strategy "$1" --endpoints "$ep" --json --out "$(mktemp -d -p "$work" "run-$1.XXXX")" \
    --set load.mode=closed --set load.clients="$CLIENTS" --set load.duration="${SECONDS_PER}s" \
    --set inventory.skus=1 --set inventory.stock=1000000000 --set critical_section.hold=0s \
    2>/dev/null | grep -o '"attempts_per_s": [0-9.]*' | head -1 | awk '{print $2}'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a/b}'; }

echo "== redis-lua-decr: redis-benchmark vs lockbench, $CLIENTS connections, $ROUNDS rounds" >&2
lockbench_rate redis-lua-decr >/dev/null # seeds the stock and loads the script
sha=$(redis-cli -p "$redis_port" SCRIPT LOAD "$(cat bench/src/strategy/lua/decrement.lua)")
ref=(); ours=()
for r in $(seq 1 "$ROUNDS"); do
  lb=$(lockbench_rate redis-lua-decr)
  # Enough requests for about SECONDS_PER seconds at the rate lockbench just reached.
  n=$(awk -v r="$lb" -v s="$SECONDS_PER" 'BEGIN {printf "%d", r * s}')
  rb=$(redis-benchmark -p "$redis_port" -c "$CLIENTS" -n "$n" -q \
         EVALSHA "$sha" 2 lockbench:stock:0 lockbench:orders:0 1 2>/dev/null \
       | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | awk '{print $1}')
  echo "   round $r: redis-benchmark $rb/s, lockbench $lb/s" >&2
  ref+=("$rb"); ours+=("$lb")
done
redis_ref=$(printf '%s\n' "${ref[@]}" | median); redis_lb=$(printf '%s\n' "${ours[@]}" | median)

echo "== mysql-atomic: mysqlslap vs lockbench, $CLIENTS connections, $ROUNDS rounds" >&2
txn="START TRANSACTION;UPDATE lockbench_stock SET qty = qty - 1, version = version + 1 WHERE sku = 0 AND qty > 0;INSERT INTO lockbench_orders (sku, buyer, token, created_us) VALUES (0, 1, 'b1', 0);COMMIT"
ref=(); ours=()
for r in $(seq 1 "$ROUNDS"); do
  lb=$(lockbench_rate mysql-atomic) # also recreates the tables with a huge stock
  # --number-of-queries is the total over all clients; four statements per transaction.
  queries=$(awk -v r="$lb" -v s="$SECONDS_PER" 'BEGIN {printf "%d", 4 * r * s}')
  before=$(sql "SELECT COUNT(*) FROM lockbench_orders")
  secs=$(mysqlslap --no-defaults -h127.0.0.1 -P"$mysql_port" -ulockbench -p"$mysql_pw" \
           --create-schema=lockbench --no-drop --concurrency="$CLIENTS" --iterations=1 \
           --number-of-queries="$queries" --delimiter=";" --query="$txn" 2>/dev/null \
         | awk -F': ' '/Average number of seconds/ {print $2 + 0}')
  after=$(sql "SELECT COUNT(*) FROM lockbench_orders")
  ms=$(awk -v n="$((after - before))" -v s="$secs" 'BEGIN {printf "%.1f", n / s}')
  echo "   round $r: mysqlslap $ms/s ($((after - before)) transactions in ${secs}s), lockbench $lb/s" >&2
  ref+=("$ms"); ours+=("$lb")
done
mysql_ref=$(printf '%s\n' "${ref[@]}" | median); mysql_lb=$(printf '%s\n' "${ours[@]}" | median)

echo "== uncontended lock cycle: redis-benchmark (SET NX PX + unlock) vs lockbench redis-setnx, 1 client" >&2
unlock_sha=$(redis-cli -p "$redis_port" SCRIPT LOAD "$(cat bench/src/strategy/lua/unlock.lua)")
rb_rate() { # redis-benchmark args... -> requests/s
  redis-benchmark -p "$redis_port" -c 1 -n 60000 -r 100000000 -q "$@" 2>/dev/null \
    | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | awk '{print $1}'
}
ref=(); ours=()
for r in $(seq 1 "$ROUNDS"); do
  lb=$("$bin" run --strategy redis-setnx --endpoints "$ep" --json --out "$(mktemp -d -p "$work" run-cycle.XXXX)" \
         --set load.mode=closed --set load.clients=1 --set load.duration="${SECONDS_PER}s" \
         --set critical_section.touch_store=false 2>/dev/null \
       | grep -o '"attempts_per_s": [0-9.]*' | head -1 | awk '{print $2}')
  # Fresh random keys, so every SET NX succeeds as a real acquire does.
  set_rate=$(rb_rate SET lockbench:lock:__rand_int__ token NX PX 5000)
  unlock_rate=$(rb_rate EVALSHA "$unlock_sha" 1 lockbench:lock:__rand_int__ token)
  cycle=$(awk -v a="$set_rate" -v b="$unlock_rate" 'BEGIN {printf "%.1f", 1 / (1 / a + 1 / b)}')
  echo "   round $r: redis-benchmark SET NX PX $set_rate/s, unlock $unlock_rate/s -> cycle $cycle/s; lockbench $lb/s" >&2
  ref+=("$cycle"); ours+=("$lb")
done
cycle_ref=$(printf '%s\n' "${ref[@]}" | median); cycle_lb=$(printf '%s\n' "${ours[@]}" | median)

echo "== the same cycle through each redis-rs connection type, nothing else (bench/examples/lock_cycle.rs)" >&2
"$CYCLE" "$redis_port" "$SECONDS_PER" "$ROUNDS" >"$work/cycle"

echo "== peak RSS of lockbench (redis-lua-decr, closed loop, history off)" >&2
rss() { # attempts -> max RSS in KiB
  /usr/bin/time -f '%M' -o "$work/rss" "$bin" run --strategy redis-lua-decr --endpoints "$ep" --json \
    --out "$work/rss-$1" --set load.mode=closed --set load.clients="$CLIENTS" --set load.duration=10m \
    --set load.max_attempts="$1" --set inventory.skus=1 --set inventory.stock=1000000000 >/dev/null 2>&1
  cat "$work/rss"
}
small=$((RSS_ATTEMPTS / 10))
rss_small=$(rss "$small"); rss_big=$(rss "$RSS_ATTEMPTS")

printf '\n%-34s %14s %14s %7s  %s\n' "comparison" "reference/s" "lockbench/s" "ratio" "target"
printf '%-34s %14s %14s %7s  %s\n' "redis-benchmark vs redis-lua-decr" "$redis_ref" "$redis_lb" "$(ratio "$redis_lb" "$redis_ref")" ">= 0.90"
printf '%-34s %14s %14s %7s  %s\n' "mysqlslap vs mysql-atomic" "$mysql_ref" "$mysql_lb" "$(ratio "$mysql_lb" "$mysql_ref")" ">= 0.90"
printf '%-34s %14s %14s %7s  %s\n' "lock cycle: redis-benchmark vs redis-setnx" "$cycle_ref" "$cycle_lb" "$(ratio "$cycle_lb" "$cycle_ref")" ">= 0.90"
printf '\nthe 1-client lock cycle without the harness, by connection (redis-benchmark cycle = %s/s):\n' "$cycle_ref"
while IFS=$'\t' read -r name r; do
  printf '  %-52s %10s/s  ratio %s\n' "$name" "$r" "$(ratio "$r" "$cycle_ref")"
done <"$work/cycle"
printf '\npeak RSS: %s KiB for %s attempts, %s KiB for %s attempts (ratio %s)\n' \
  "$rss_small" "$small" "$rss_big" "$RSS_ATTEMPTS" "$(ratio "$rss_big" "$rss_small")"

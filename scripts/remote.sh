#!/usr/bin/env bash
# Workers over TCP, tried on one machine: the same run (one seed) three ways, totals side by side.
#   pipe:      `lockbench run --workers N` (load processes over pipes);
#   netns-tcp: `run --workers N --private-network --worker-link tcp`: servers and each worker on
#              hosts of their own (network namespaces of the run), agents over TCP across its
#              bridge (needs root; skipped otherwise);
#   coordinate: `lockbench coordinate --listen` plus N `lockbench worker --connect` started here
#              as separate processes, the way Pods of an Indexed Job connect (see docs/distributed.md).
# Env: STRATEGY (redis-setnx), WORKERS (4), OUT (results/runs/<time>-remote), LOCKBENCH_BIN.
# Extra arguments go to every run (e.g. --set load.rate=1000 --set load.duration=10s).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
lockbench_bin
strategy=${STRATEGY:-redis-setnx}
n=${WORKERS:-4}
out=${OUT:-results/runs/$(date -u +%Y%m%dT%H%M%SZ)-remote}
mkdir -p "$out"
common=(--strategy "$strategy" --workers "$n" --json "$@")

"$bin" run "${common[@]}" --out "$out/pipe" >/dev/null
modes=(pipe)
if [ "$(id -u)" = 0 ]; then
  "$bin" run "${common[@]}" --private-network --worker-link tcp --out "$out/netns-tcp" >/dev/null
  modes+=(netns-tcp)
else
  echo "remote.sh: not root: no network namespaces, netns-tcp skipped" >&2
fi

# The coordinator and its workers share a token and (for the MariaDB this coordinator starts)
# a password; neither crosses the link.
LOCKBENCH_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
LOCKBENCH_MYSQL_PASSWORD=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export LOCKBENCH_TOKEN LOCKBENCH_MYSQL_PASSWORD
port=$("$bin" free-port)
"$bin" coordinate --listen "127.0.0.1:$port" --wait 120s "${common[@]}" --out "$out/coordinate" \
  >/dev/null &
coordinator=$!
agents=()
for ((k = 0; k < n; k++)); do
  "$bin" worker --connect "127.0.0.1:$port" --index "$k" 2>"$out/agent-$k.log" &
  agents+=($!)
done
trap 'kill "$coordinator" "${agents[@]}" 2>/dev/null || true' EXIT
status=0
wait "$coordinator" || status=$?
for a in "${agents[@]}"; do wait "$a" || status=$?; done
trap - EXIT
[ "$status" = 0 ] || { echo "remote.sh: coordinate or a worker failed ($status); see $out" >&2; exit 1; }
modes+=(coordinate)

"$bin" totals "${modes[@]/#/$out/}" || status=$?
echo "results: $out" >&2
exit "$status"

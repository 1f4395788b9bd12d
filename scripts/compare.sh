#!/usr/bin/env bash
# The main job (docs/main-job.md): install what is missing, build, then `lockbench job`, which
# answers an architect's two questions for every strategy on the default flash-sale workload
# against real servers: the flash sale's surge, calm and under a fault (<out>/sale/<calm|scenario>/),
# its capacity within the SLO (<out>/sweep/), a calm run at one common
# rate (<out>/calm/), each chaos scenario at a share of its own capacity
# (<out>/chaos/<scenario>/), then one report, <out>/report.html.
#
# Knobs (environment), each a `lockbench job` flag (`lockbench job --help`): SLO (p99=100ms),
# CHAOS_SHARE (70%), SCENARIOS (kill-master,pause-holder: files in chaos/), STRATEGIES
# (comma-separated ids; default every strategy), NEEDS (the report's --needs, e.g.
# NEEDS=safe-under-pause,capacity>=500), SWEEP_ARGS (extra sweep flags, e.g. "--budget 30s"),
# CALM_DURATION (5s), CHAOS_DURATION (8s), SALE (workloads/sale.toml; none: no sale part),
# SALE_SCENARIOS (kill-master-in-surge; empty: none). Extra arguments go to `lockbench job`, which gives
# --set to every part (e.g. --set load.clients=32).
# LOCKBENCH_BIN=path uses that build instead of a release build (scripts/test.sh runs a short
# form on the debug build, so CI exercises this script).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
if [ -n "${LOCKBENCH_BIN:-}" ]; then bin=$LOCKBENCH_BIN; else cargo build --release --quiet; bin=./target/release/lockbench; fi
flags=()
for knob in SLO=slo CHAOS_SHARE=chaos-share SCENARIOS=scenarios STRATEGIES=strategies NEEDS=needs \
  CALM_DURATION=calm-duration CHAOS_DURATION=chaos-duration SALE=sale; do
  var=${knob%%=*}
  if [ -n "${!var:-}" ]; then flags+=("--${knob#*=}" "${!var}"); fi
done
if [ -n "${SALE_SCENARIOS+set}" ]; then flags+=(--sale-scenarios "$SALE_SCENARIOS"); fi # empty: none
# shellcheck disable=SC2086 # SWEEP_ARGS is a list of words
exec "$bin" job "${flags[@]}" ${SWEEP_ARGS:-} "$@"

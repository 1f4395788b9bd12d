#!/usr/bin/env bash
# How many completions per second does the coordinator take in from 8 workers? Today's one JSON
# `Done` line per attempt (read, decoded, recorded) against the workers' intervals (HdrHistogram
# interval logs + lease rows: read, decoded, merged), on the same seeded completions, side by
# side, with the ratio (target >= 10x). Two mixes: a lock strategy's run (a lease per attempt
# that got the lock) and a lock-free one (no leases). The streams are encoded before timing;
# the workers' own cost per completion (encoding a line, or folding) is printed beside, since
# that work moved to them. bench/examples/ingest.rs does the work.
# Knobs (environment): COMPLETIONS=1000000 ROUNDS=3; LOCKBENCH_BIN=path (any value) builds and
# runs the debug example instead of a release one (scripts/test.sh runs a short form, so the
# script is exercised in CI; its ratios then mean nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
COMPLETIONS=${COMPLETIONS:-1000000}
ROUNDS=${ROUNDS:-3}

# shellcheck source=lib/bin.sh
. scripts/lib/bin.sh
"$(example_bin ingest)" "$COMPLETIONS" "$ROUNDS"

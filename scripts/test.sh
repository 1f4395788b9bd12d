#!/usr/bin/env bash
# The whole test suite: installs what is missing, checks formatting and lints, then runs the
# unit tests and the integration tests against real MariaDB, Redis, ZooKeeper and etcd servers
# (and report.html loaded in headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --for-tests
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace

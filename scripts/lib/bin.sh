# Sourced by the scripts that run lockbench, from the repository's root: what they all do first.
#   lockbench_bin [install-deps.sh arguments]
# installs what is missing, then sets $bin: LOCKBENCH_BIN when set (scripts/test-scripts.sh
# runs each script's short form on the debug build), else a fresh release build.
lockbench_bin() {
  bash scripts/install-deps.sh "$@"
  if [ -n "${LOCKBENCH_BIN:-}" ]; then
    bin=$(realpath "$LOCKBENCH_BIN")
  else
    cargo build --release --quiet
    bin=$PWD/target/release/lockbench
  fi
}

# Builds an example of bench/examples/ in the same profile and prints its path: the debug one
# beside LOCKBENCH_BIN (whatever its value), else a release one.
#   example_bin NAME
example_bin() {
  if [ -n "${LOCKBENCH_BIN:-}" ]; then
    cargo build --quiet --example "$1" && echo "$PWD/target/debug/examples/$1"
  else
    cargo build --release --quiet --example "$1" && echo "$PWD/target/release/examples/$1"
  fi
}

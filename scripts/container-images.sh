#!/usr/bin/env bash
# A private Docker daemon with local images for the containers provisioner (tests and CI).
#
#   export $(scripts/container-images.sh)   # start it (if needed), build/import images (if needed)
#   scripts/container-images.sh --stop      # stop the daemon, unmount what it leaves; keeps images
#
# What it does, idempotently (a warm re-run only checks the socket and the image tags):
#  1. installs docker.io and debootstrap with apt-get when missing;
#  2. starts a dockerd of its own unless one already answers on $DIR/docker.sock: data and exec
#     roots under $DIR, no iptables (dockerd's would set the FORWARD policy to DROP and break the
#     harness's namespace bridge), no default bridge, user-defined networks from 10.214.0.0/16;
#     the daemon keeps running after this script exits;
#  3. unless the images exist: debootstraps ONE Debian bookworm rootfs with Redis, Sentinel,
#     MariaDB, ZooKeeper (+ headless JRE) and etcd, adds /usr/local/bin/zkServer.sh (runs
#     `zkServer.sh start-foreground CFG` like the official zookeeper image), imports it and tags
#     it under the four image names below. The mirror is read from this machine's apt sources.
#  4. unless it exists: a Debian sid rootfs with MySQL 9 (servers.mysql = "mysql-9"), its
#     package pinned by version and sha256 in scripts/servers.lock, as LOCKBENCH_IMAGE_MYSQL.
#  5. unless it exists: a Debian bookworm rootfs with PostgreSQL 15 (postgresql-15, its default
#     cluster removed: lockbench makes its own), as LOCKBENCH_IMAGE_POSTGRES. An image of its
#     own, so adding it left the shared image of step 3 (and its recipe) as it was.
#
# Only `DOCKER_HOST=unix://…/docker.sock` and a `LOCKBENCH_IMAGE_*=<image>` line per image go
# to stdout (scripts/lib/docker.sh exports them); progress goes to stderr.
#
# Environment:
#   LOCKBENCH_DOCKER_DIR      daemon directory (default /var/lib/lockbench-docker)
#   LOCKBENCH_IMAGE_REDIS     default lockbench-local/redis:7.0
#   LOCKBENCH_IMAGE_MARIADB   default lockbench-local/mariadb:10.11
#   LOCKBENCH_IMAGE_ZOOKEEPER default lockbench-local/zookeeper:3.8
#   LOCKBENCH_IMAGE_ETCD      default lockbench-local/etcd:3.4
#   LOCKBENCH_IMAGE_MYSQL     default lockbench-local/mysql:9
#   LOCKBENCH_IMAGE_POSTGRES  default lockbench-local/postgres:15
#   LOCKBENCH_DEBIAN_MIRROR   mirror URL for debootstrap (default: read from the apt sources)
set -euo pipefail

DIR=${LOCKBENCH_DOCKER_DIR:-/var/lib/lockbench-docker}
SOCK="$DIR/docker.sock"
HOST_URL="unix://$SOCK"
PIDFILE="$DIR/dockerd.pid"
LOG="$DIR/dockerd.log"
ROOTFS="$DIR/rootfs.build"
ROOTFS_SID="$DIR/rootfs-sid.build"
ROOTFS_PG="$DIR/rootfs-pg.build"
ADDRESS_POOL="base=10.214.0.0/16,size=24"
SUITE=bookworm
# Bump when the rootfs recipe below changes: images with another label are rebuilt.
RECIPE=2
IMAGES=(
  "${LOCKBENCH_IMAGE_REDIS:-lockbench-local/redis:7.0}"
  "${LOCKBENCH_IMAGE_MARIADB:-lockbench-local/mariadb:10.11}"
  "${LOCKBENCH_IMAGE_ZOOKEEPER:-lockbench-local/zookeeper:3.8}"
  "${LOCKBENCH_IMAGE_ETCD:-lockbench-local/etcd:3.4}"
)
# MySQL 9 (servers.mysql = "mysql-9") needs sid's glibc: an image of its own, from a sid rootfs
# with the one package pinned in scripts/servers.lock (version and sha256 of its .deb).
MYSQL_IMAGE=${LOCKBENCH_IMAGE_MYSQL:-lockbench-local/mysql:9}
POSTGRES_IMAGE=${LOCKBENCH_IMAGE_POSTGRES:-lockbench-local/postgres:15}
MYSQL_PIN=$(awk '$1 == "mysql" && $2 == "mysql-9" && $3 == "image:sid"' "$(dirname "$0")/servers.lock")
# ZooKeeper comes as libzookeeper-java + a headless JRE: the `zookeeper` package only adds
# init scripts and config but depends on the full (X11) default-jre. etcd-client (etcdctl)
# and the clients that come with the servers help when debugging inside a container.
PACKAGES=redis-server,redis-sentinel,mariadb-server,libzookeeper-java,default-jre-headless,etcd-server,etcd-client

# stdout is reserved for the DOCKER_HOST and image lines (fd 3); everything else goes to stderr.
exec 3>&1 1>&2
log() { echo "container-images [${SECONDS}s]: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
sbin() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || echo "/sbin/$1"; }

# The client that came with the daemon (docker.io), else whatever `docker` is on PATH.
docker_bin() { if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; else echo docker; fi; }
docker_cli() { "$(docker_bin)" -H "$HOST_URL" "$@"; }
answering() { [ -S "$SOCK" ] && timeout 10 "$(docker_bin)" -H "$HOST_URL" info >/dev/null 2>&1; }

# Mountpoints under a directory, deepest first (/proc/mounts escapes spaces as \040).
mounts_under() {
  awk -v d="$1" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r
}
unmount_under() {
  local m
  for m in $(mounts_under "$1"); do
    m=$(printf '%b' "$m")
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "warning: could not unmount $m"
  done
}

# A process that exists and is not a zombie (an exited daemon whose parent is gone may stay a
# zombie for a while when PID 1 reaps slowly).
alive() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "${st%% *}" != Z ]
}
# The pid in $1 if that process is alive and is named $2.
pid_named() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] || return 1
  echo "$pid"
}
dockerd_pid() { pid_named "$PIDFILE" dockerd; }

stop_daemon() {
  local pid i
  if pid=$(dockerd_pid); then
    log "stopping dockerd (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    # dockerd stops running containers first (up to its shutdown timeout, 10 s here)
    for i in $(seq 1 300); do alive "$pid" || break; sleep 0.1; done
    if alive "$pid"; then
      log "dockerd still running after 30 s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for i in $(seq 1 50); do alive "$pid" || break; sleep 0.1; done
    fi
  else
    log "no dockerd running for $DIR"
  fi
  # dockerd's own containerd stops with it (it also gets SIGKILL when dockerd dies); in case
  # it did not:
  local cpid
  if cpid=$(pid_named "$DIR/exec/containerd/containerd.pid" containerd); then
    log "stopping leftover containerd (pid $cpid)"
    kill -TERM "$cpid" 2>/dev/null || true
    for i in $(seq 1 50); do alive "$cpid" || break; sleep 0.1; done
    if alive "$cpid"; then kill -KILL "$cpid" 2>/dev/null || true; fi
  fi
  unmount_under "$DIR"
  rm -f "$SOCK" "$PIDFILE"
}

case "${1:-}" in
  --stop) stop_daemon; exit 0 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' ; exit 0 ;;
  "") ;;
  *) die "unknown argument $1 (use --stop or --help)" ;;
esac

mkdir -p "$DIR"
# Serialise concurrent runs (parallel test jobs): one starts the daemon / builds, the rest wait.
exec 9>"$DIR/lock"
flock 9

# ---- 1. packages ---------------------------------------------------------------------------
missing=()
have dockerd || missing+=(docker.io)
have debootstrap || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  # Keep the packages' own services (the system dockerd/containerd) from starting: that dockerd
  # would manage iptables. A policy-rc.d that already exists is left as it is.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
    trap 'rm -f "$policy"' EXIT
    own_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
  if [ -n "${own_policy:-}" ]; then rm -f "$policy"; trap - EXIT; fi
fi

# ---- 2. the daemon -------------------------------------------------------------------------
if answering; then
  log "dockerd already answering on $SOCK"
else
  if pid=$(dockerd_pid); then
    log "dockerd (pid $pid) is running but not answering yet; waiting"
  else
    rm -f "$PIDFILE" "$SOCK"
    # dockerd reuses a containerd whose pidfile names a live process; a dead (or zombie) one
    # would make it wait for a socket nobody serves and give up.
    if ! pid_named "$DIR/exec/containerd/containerd.pid" containerd >/dev/null; then
      rm -f "$DIR/exec/containerd/containerd.pid" "$DIR/exec/containerd/containerd.sock"
    fi
    mkdir -p "$DIR/data" "$DIR/exec"
    log "starting dockerd (log: $LOG)"
    log_start=$(stat -c %s "$LOG" 2>/dev/null || echo 0)
    # setsid + nohup + no inherited fds: the daemon outlives this script and its caller.
    setsid nohup "$(sbin dockerd)" \
      --data-root "$DIR/data" --exec-root "$DIR/exec" --pidfile "$PIDFILE" -H "$HOST_URL" \
      --iptables=false --bridge=none --default-address-pool "$ADDRESS_POOL" \
      --containerd-namespace lockbench --containerd-plugins-namespace lockbench-plugins \
      --shutdown-timeout 10 \
      </dev/null >>"$LOG" 2>&1 9>&- 3>&- &
    started=$!
  fi
  deadline=$((SECONDS + 30))
  until answering; do
    if [ -n "${started:-}" ] && ! alive "$started" && ! dockerd_pid >/dev/null; then
      tail -c +"$((${log_start:-0} + 1))" "$LOG" | grep -v 'module=grpc' | tail -n 15 >&2 || true
      die "dockerd exited during start-up (log above, all of it in $LOG)"
    fi
    if [ $SECONDS -ge $deadline ]; then
      tail -n 15 "$LOG" >&2 || true
      die "dockerd did not answer on $SOCK within 30 s (log above; '$0 --stop' to clean up)"
    fi
    sleep 0.2
  done
  log "dockerd answering on $SOCK"
fi

# ---- 3. images -----------------------------------------------------------------------------
image_ok() {
  [ "$(docker_cli image inspect -f '{{index .Config.Labels "lockbench.recipe"}}' "$1" 2>/dev/null)" = "$RECIPE" ]
}

# The mirror this machine's apt uses for Debian (not its security archive): deb822 sources
# first, then one-line sources. Never a built-in host name.
find_mirror() {
  if [ -n "${LOCKBENCH_DEBIAN_MIRROR:-}" ]; then echo "$LOCKBENCH_DEBIAN_MIRROR"; return; fi
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    uri=$(awk '
      function flush() {
        if (uris != "" && types ~ /(^|[ \t])deb([ \t]|$)/ && enabled !~ /^[ \t]*no/ &&
            suites !~ /-security|\/updates/) { split(uris, u, /[ \t]+/); print u[1]; found = 1; exit }
        types = ""; uris = ""; suites = ""; enabled = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      tolower($1) == "types:"   { sub(/^[^:]*:[ \t]*/, ""); types = $0 }
      tolower($1) == "uris:"    { sub(/^[^:]*:[ \t]*/, ""); uris = $0 }
      tolower($1) == "suites:"  { sub(/^[^:]*:[ \t]*/, ""); suites = $0 }
      tolower($1) == "enabled:" { sub(/^[^:]*:[ \t]*/, ""); enabled = $0 }
      END { if (!found) flush() }' "$f")
    case "$uri" in http://* | https://* | file:/*) echo "$uri"; return ;; esac
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    uri=$(sed -E -n 's/^[[:space:]]*deb[[:space:]]+(\[[^]]*\][[:space:]]+)?//p' "$f" |
      awk '$2 !~ /-security|\/updates/ && $1 ~ /^(https?:\/\/|file:\/)/ { print $1; exit }')
    if [ -n "$uri" ]; then echo "$uri"; return; fi
  done
  return 1
}

cleanup_rootfs() {
  local r
  for r in "$ROOTFS" "$ROOTFS_SID" "$ROOTFS_PG"; do
    [ -e "$r" ] || continue
    unmount_under "$r"
    rm -rf --one-file-system "$r"
  done
}

# The wrapper the official zookeeper image provides: `zkServer.sh start-foreground [CFG]`.
write_zk_wrapper() {
  local jar cp=""
  for jar in zookeeper.jar slf4j-log4j12.jar log4j-1.2.jar; do
    [ -e "$ROOTFS/usr/share/java/$jar" ] || die "rootfs lacks /usr/share/java/$jar"
    cp="$cp:/usr/share/java/$jar"
  done
  mkdir -p "$ROOTFS/usr/local/share/zookeeper" "$ROOTFS/conf"
  cat >"$ROOTFS/usr/local/share/zookeeper/log4j.properties" <<'EOF'
# ZooKeeper logs to the console (docker logs), like the official image.
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.Threshold=INFO
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n
EOF
  cat >"$ROOTFS/usr/local/bin/zkServer.sh" <<EOF
#!/bin/sh
# Like the official zookeeper image's zkServer.sh, for Debian's ZooKeeper jars:
#   zkServer.sh start-foreground [CFG]   (CFG: a path, or a name under \$ZOOCFGDIR, default zoo.cfg)
# JVMFLAGS / SERVER_JVMFLAGS add JVM options (the heap default is small: -Xmx128m).
ZOOCFGDIR=\${ZOOCFGDIR:-/conf}
ZOO_LOG_DIR=\${ZOO_LOG_DIR:-/tmp}
case "\$1" in
  start-foreground) ;;
  *) echo "usage: \$0 start-foreground [zoo.cfg]" >&2; exit 2 ;;
esac
case "\${2:-zoo.cfg}" in
  */*) ZOOCFG=\$2 ;;
  *) ZOOCFG=\$ZOOCFGDIR/\${2:-zoo.cfg} ;;
esac
exec java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \\
  -Dzookeeper.log.dir="\$ZOO_LOG_DIR" -Dlog4j.configuration=file:/usr/local/share/zookeeper/log4j.properties \\
  -XX:+HeapDumpOnOutOfMemoryError -XX:OnOutOfMemoryError='kill -9 %p' \\
  -cp "\$ZOOCFGDIR${cp}" \$JVMFLAGS \$SERVER_JVMFLAGS \\
  org.apache.zookeeper.server.quorum.QuorumPeerMain "\$ZOOCFG"
EOF
  chmod 755 "$ROOTFS/usr/local/bin/zkServer.sh"
}

# Keeps an image small: no package caches, lists, docs, man pages, translations, logs or
# debootstrap's own files, nor what else under the rootfs the caller names (globs allowed).
slim_rootfs() { # rootfs [path...]
  local r=$1 p; shift
  find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
  rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/cache/apt/*.bin "$r"/var/lib/apt/lists/* \
    "$r"/usr/share/doc/* "$r"/usr/share/man/* "$r"/var/log/*.log "$r"/debootstrap
  for p in "$@"; do rm -rf "${r:?}"/$p; done
}

# Imports a rootfs as an image labelled with this recipe and any more `key=value` labels;
# prints the image's id.
import_rootfs() { # rootfs image [label...]
  local r=$1 image=$2 l changes=(); shift 2
  for l in "lockbench.recipe=$RECIPE" "$@"; do changes+=(--change "LABEL $l"); done
  tar -C "$r" --numeric-owner -c . | docker_cli import \
    --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    --change "ENV LANG=C.UTF-8" "${changes[@]}" --change 'CMD ["/bin/bash"]' - "$image"
}

# Ends a rootfs build: imports the rootfs as the first name (with the label, if not empty),
# tags the other names, removes the rootfs, and removes the images those names held before
# when they are not this one. Sets the caller's `id` to the new image's.
replace_image() { # rootfs label name...
  local r=$1 label=$2 n o old; shift 2
  old=$(for n in "$@"; do docker_cli image inspect -f '{{.Id}}' "$n" 2>/dev/null || true; done | sort -u)
  id=$(import_rootfs "$r" "$1" ${label:+"$label"})
  cleanup_rootfs
  trap - EXIT
  for n in "${@:2}"; do docker_cli tag "$id" "$n"; done
  # images of an older pin or recipe, no longer tagged
  for o in $old; do [ "$o" = "$id" ] || docker_cli image rm "$o" >/dev/null 2>&1 || true; done
}

build_images() {
  local mirror t0 id
  mirror=$(find_mirror) || die "no Debian mirror found in /etc/apt/sources.list{,.d/*} (set LOCKBENCH_DEBIAN_MIRROR)"
  cleanup_rootfs
  trap cleanup_rootfs EXIT
  mkdir -p "$ROOTFS/usr/sbin"
  # No service may start inside the rootfs while packages are configured.
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"
  chmod +x "$ROOTFS/usr/sbin/policy-rc.d"
  log "debootstrap $SUITE from $mirror (a few minutes)"
  t0=$SECONDS
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOTFS" "$mirror" >&2 ||
    die "debootstrap failed (see $ROOTFS/debootstrap/debootstrap.log)"
  log "debootstrap took $((SECONDS - t0)) s"
  unmount_under "$ROOTFS"
  local b
  for b in redis-server redis-sentinel mariadbd mariadb-install-db etcd java; do
    [ -n "$(find "$ROOTFS/usr/bin" "$ROOTFS/usr/sbin" -maxdepth 1 -name "$b" 2>/dev/null)" ] ||
      die "rootfs lacks $b"
  done
  write_zk_wrapper
  # mariadbd's Debian config puts its socket and pid file here
  mkdir -p "$ROOTFS/run/mysqld" && chmod 1777 "$ROOTFS/run/mysqld"
  rm -f "$ROOTFS/usr/sbin/policy-rc.d"
  # keep the image small: no package caches, lists, docs, man pages, translations, and no
  # datadir from mariadb-server's postinst (113 MB; the harness makes its own, as the official
  # image starts with an empty /var/lib/mysql)
  slim_rootfs "$ROOTFS" 'usr/share/info/*' 'var/lib/mysql/*'
  log "importing ${IMAGES[0]}"
  t0=$SECONDS
  replace_image "$ROOTFS" "" "${IMAGES[@]}"
  log "import took $((SECONDS - t0)) s"
}

# The MySQL 9 image: sid minbase plus the pinned mysql-server-core, its .deb checked against the
# pin before anything is imported (sid moves on: a newer version fails here, naming the pin).
build_mysql_image() {
  local mirror t0 id pkg version sum deb
  read -r _ _ _ pkg version sum <<<"$MYSQL_PIN"
  [ -n "${sum:-}" ] || die "no 'mysql mysql-9 image:sid' line in scripts/servers.lock"
  mirror=$(find_mirror) || die "no Debian mirror found in /etc/apt/sources.list{,.d/*} (set LOCKBENCH_DEBIAN_MIRROR)"
  cleanup_rootfs
  trap cleanup_rootfs EXIT
  mkdir -p "$ROOTFS_SID/usr/sbin"
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS_SID/usr/sbin/policy-rc.d"
  chmod +x "$ROOTFS_SID/usr/sbin/policy-rc.d"
  log "debootstrap sid with $pkg from $mirror (about a minute)"
  t0=$SECONDS
  debootstrap --variant=minbase --include="$pkg" sid "$ROOTFS_SID" "$mirror" >&2 ||
    die "debootstrap sid failed (see $ROOTFS_SID/debootstrap/debootstrap.log)"
  unmount_under "$ROOTFS_SID"
  deb="$ROOTFS_SID/var/cache/apt/archives/${pkg}_${version}_amd64.deb"
  [ -f "$deb" ] || die "sid no longer carries $pkg $version (fetched: $(cd "$ROOTFS_SID/var/cache/apt/archives" && ls ${pkg}_* 2>/dev/null)); update its line in scripts/servers.lock"
  echo "$sum  $deb" | sha256sum -c --quiet - >&2 || die "$deb does not match the sha256 pinned in scripts/servers.lock"
  chroot "$ROOTFS_SID" mysqld --version >&2 || die "mysqld does not run in the sid rootfs"
  # A datadir initialised once here, copied by each container: initialising takes ~8 s a run.
  chroot "$ROOTFS_SID" mysqld --no-defaults --initialize-insecure --user=root \
    --datadir=/var/lib/lockbench-mysql --innodb-redo-log-capacity=64M >&2 ||
    die "mysqld --initialize-insecure failed in the sid rootfs"
  log "debootstrap sid took $((SECONDS - t0)) s"
  rm -f "$ROOTFS_SID/usr/sbin/policy-rc.d"
  slim_rootfs "$ROOTFS_SID" 'var/lib/mysql/*'
  replace_image "$ROOTFS_SID" "lockbench.mysql=$pkg=$version+datadir" "$MYSQL_IMAGE"
  log "imported $MYSQL_IMAGE ($pkg $version, $id)"
}

# The PostgreSQL 15 image: bookworm minbase plus postgresql-15. The server runs as the package's
# `postgres` user (lockbench's start script switches to it with util-linux's setpriv).
build_postgres_image() {
  local mirror t0 id b
  mirror=$(find_mirror) || die "no Debian mirror found in /etc/apt/sources.list{,.d/*} (set LOCKBENCH_DEBIAN_MIRROR)"
  cleanup_rootfs
  trap cleanup_rootfs EXIT
  mkdir -p "$ROOTFS_PG/usr/sbin" "$ROOTFS_PG/etc/postgresql-common"
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS_PG/usr/sbin/policy-rc.d"
  chmod +x "$ROOTFS_PG/usr/sbin/policy-rc.d"
  # No default cluster from the package's postinst: the harness runs initdb itself.
  echo "create_main_cluster = false" >"$ROOTFS_PG/etc/postgresql-common/createcluster.conf"
  log "debootstrap $SUITE with postgresql-15 from $mirror (a few minutes)"
  t0=$SECONDS
  debootstrap --variant=minbase --include=postgresql-15 "$SUITE" "$ROOTFS_PG" "$mirror" >&2 ||
    die "debootstrap of the postgres rootfs failed (see $ROOTFS_PG/debootstrap/debootstrap.log)"
  unmount_under "$ROOTFS_PG"
  for b in initdb postgres pg_basebackup; do
    [ -x "$ROOTFS_PG/usr/lib/postgresql/15/bin/$b" ] || die "postgres rootfs lacks $b"
  done
  [ -x "$ROOTFS_PG/usr/bin/setpriv" ] || die "postgres rootfs lacks setpriv (util-linux)"
  chroot "$ROOTFS_PG" id postgres >&2 || die "postgres rootfs has no postgres user"
  log "debootstrap took $((SECONDS - t0)) s"
  rm -f "$ROOTFS_PG/usr/sbin/policy-rc.d"
  slim_rootfs "$ROOTFS_PG"
  replace_image "$ROOTFS_PG" "lockbench.postgres=postgresql-15" "$POSTGRES_IMAGE"
  log "imported $POSTGRES_IMAGE ($id)"
}

ready=() absent=()
for n in "${IMAGES[@]}"; do
  if image_ok "$n"; then ready+=("$n"); else absent+=("$n"); fi
done
if [ ${#absent[@]} -eq 0 ]; then
  log "images present: ${IMAGES[*]}"
elif [ ${#ready[@]} -gt 0 ]; then
  # all names are one image: tag the missing names from a present one
  for n in "${absent[@]}"; do docker_cli tag "${ready[0]}" "$n"; done
  log "tagged ${absent[*]}"
else
  build_images
  log "images ready: ${IMAGES[*]}"
fi

read -r _ _ _ mysql_pkg mysql_version _ <<<"$MYSQL_PIN"
if [ "$(docker_cli image inspect -f '{{index .Config.Labels "lockbench.mysql"}}' "$MYSQL_IMAGE" 2>/dev/null)" = "$mysql_pkg=$mysql_version+datadir" ] && image_ok "$MYSQL_IMAGE"; then
  log "image present: $MYSQL_IMAGE"
else
  build_mysql_image
fi

if [ "$(docker_cli image inspect -f '{{index .Config.Labels "lockbench.postgres"}}' "$POSTGRES_IMAGE" 2>/dev/null)" = postgresql-15 ] && image_ok "$POSTGRES_IMAGE"; then
  log "image present: $POSTGRES_IMAGE"
else
  build_postgres_image
fi

echo "DOCKER_HOST=$HOST_URL" >&3
# Each image by the variable lockbench reads it from (one already set keeps its value).
printf 'LOCKBENCH_IMAGE_%s\n' "REDIS=${IMAGES[0]}" "MARIADB=${IMAGES[1]}" "ZOOKEEPER=${IMAGES[2]}" \
  "ETCD=${IMAGES[3]}" "MYSQL=$MYSQL_IMAGE" "POSTGRES=$POSTGRES_IMAGE" >&3

# Sourced by the scripts that use the private dockerd of scripts/container-images.sh.

# Whether that daemon answers on its socket now.
docker_answering() {
  local sock=${LOCKBENCH_DOCKER_DIR:-/var/lib/lockbench-docker}/docker.sock
  [ -S "$sock" ] && docker -H "unix://$sock" info >/dev/null 2>&1
}

# docker_up <scripts dir>: starts it if needed, builds or imports the local images if needed,
# and exports DOCKER_HOST and each LOCKBENCH_IMAGE_* not already set. The daemon keeps running.
docker_up() {
  local docker_host
  # Assigned first: `export $(…)` would hide the script's failure from `set -e`.
  docker_host=$(bash "$1/container-images.sh")
  export "$docker_host"
  export LOCKBENCH_IMAGE_REDIS=${LOCKBENCH_IMAGE_REDIS:-lockbench-local/redis:7.0}
  export LOCKBENCH_IMAGE_MARIADB=${LOCKBENCH_IMAGE_MARIADB:-lockbench-local/mariadb:10.11}
  export LOCKBENCH_IMAGE_ZOOKEEPER=${LOCKBENCH_IMAGE_ZOOKEEPER:-lockbench-local/zookeeper:3.8}
  export LOCKBENCH_IMAGE_ETCD=${LOCKBENCH_IMAGE_ETCD:-lockbench-local/etcd:3.4}
  export LOCKBENCH_IMAGE_MYSQL=${LOCKBENCH_IMAGE_MYSQL:-lockbench-local/mysql:9}
  export LOCKBENCH_IMAGE_POSTGRES=${LOCKBENCH_IMAGE_POSTGRES:-lockbench-local/postgres:15}
}

# Sourced by the scripts that use the private dockerd of scripts/container-images.sh.

# Whether that daemon answers on its socket now.
docker_answering() {
  local sock=${LOCKBENCH_DOCKER_DIR:-/var/lib/lockbench-docker}/docker.sock
  [ -S "$sock" ] && docker -H "unix://$sock" info >/dev/null 2>&1
}

# docker_up <scripts dir>: starts it if needed, builds or imports the local images if needed,
# and exports DOCKER_HOST and each LOCKBENCH_IMAGE_* (one already set keeps its value), as
# that script prints them: it names the images it builds. The daemon keeps running.
docker_up() {
  local lines line
  # Assigned first: `export $(…)` would hide the script's failure from `set -e`.
  lines=$(bash "$1/container-images.sh")
  while read -r line; do
    export "${line?}"
  done <<<"$lines"
}

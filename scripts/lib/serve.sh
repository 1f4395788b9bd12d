# Sourced by the benchmark scripts: one `lockbench serve` for the whole script, stopped (with
# its servers) and its scratch folder removed on every way out.
#   serve_up <script name> <lockbench binary> <strategies>
# sets $work (scratch folder) and $ep (endpoints.json of the running servers).
serve_up() {
  local name=$1 lb=$2 strategies=$3
  work=$(mktemp -d)
  serve_pid=""
  trap 'serve_down' EXIT
  "$lb" serve --strategies "$strategies" --out "$work/serve" --for 30m >"$work/serve.out" 2>"$work/serve.err" &
  serve_pid=$!
  for _ in $(seq 1 600); do [ -s "$work/serve.out" ] && break; sleep 0.2; done
  ep="$work/serve/endpoints.json"
  [ -f "$ep" ] || { echo "$name: lockbench serve did not come up:" >&2; cat "$work/serve.err" >&2; exit 1; }
}

serve_down() {
  [ -n "${serve_pid:-}" ] && kill -INT "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  rm -rf "${work:-}"
}

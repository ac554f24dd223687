# Sourced by the e2e scripts: starts `talaria serve --config "$1"` (and any
# further flags) with the binary in $bin, sets $port to the port it printed,
# and stops it on exit (then runs the caller's `extra_cleanup`, if defined).
start_server() {
  local config=$1
  shift
  server_log=$(mktemp)
  "$bin" serve --config "$config" "$@" > "$server_log" 2>&1 &
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -f "$server_log"; ! declare -F extra_cleanup > /dev/null || extra_cleanup' EXIT
  port=""
  for _ in $(seq 200); do
    port=$(grep -o 'http://127.0.0.1:[0-9]*' "$server_log" | head -1 | sed 's/.*://' || true)
    [[ -n "$port" ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$server_log" >&2; exit 1; }
    sleep 0.05
  done
  echo "the server did not start" >&2
  cat "$server_log" >&2
  exit 1
}

#!/usr/bin/env bash
# Starts `talaria serve` (two emulated TP=4 workers) on an ephemeral port and
# replays traces/router-120.jsonl against it over HTTP.
# Usage: tests/e2e/http_replay.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
"$bin" serve --config "$dir/serve-router.toml" > "$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 200); do
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://' || true)
  [[ -n "$port" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.05
done
[[ -n "$port" ]] || { echo "http_replay.sh: the server did not start" >&2; cat "$log" >&2; exit 1; }
"$bin" replay --target "http://127.0.0.1:$port" --trace "$dir/../../traces/router-120.jsonl" --time-scale 200

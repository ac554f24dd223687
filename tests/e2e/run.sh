#!/usr/bin/env bash
# Starts `talaria serve` on an ephemeral port and runs the openai npm client
# against it. Usage: tests/e2e/run.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
if [[ ! -d "$dir/node_modules/openai" ]]; then
  echo "run.sh: the openai package is missing: run 'npm ci' in $dir (scripts/test.sh does)" >&2
  exit 1
fi
log=$(mktemp)
"$bin" serve --config "$dir/serve.toml" > "$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT
port=""
for _ in $(seq 200); do
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$log" | head -1 | sed 's/.*://' || true)
  [[ -n "$port" ]] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.05
done
[[ -n "$port" ]] || { echo "run.sh: the server did not start" >&2; cat "$log" >&2; exit 1; }
node "$dir/openai_chat.mjs" "http://127.0.0.1:$port/v1"

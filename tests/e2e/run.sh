#!/usr/bin/env bash
# Starts `talaria serve` on an ephemeral port and runs the openai npm client
# against it. Usage: tests/e2e/run.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
if [[ ! -d "$dir/node_modules/openai" ]]; then
  echo "run.sh: the openai package is missing: run 'npm install' in $dir (scripts/test.sh does)" >&2
  exit 1
fi
source "$dir/start_server.sh"
start_server "$dir/serve.toml"
node "$dir/openai_chat.mjs" "http://127.0.0.1:$port/v1"

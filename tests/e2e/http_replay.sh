#!/usr/bin/env bash
# Starts `talaria serve` (two emulated TP=4 workers) on an ephemeral port and
# replays traces/router-120.jsonl against it over HTTP.
# Usage: tests/e2e/http_replay.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
source "$dir/start_server.sh"
start_server "$dir/serve-router.toml"
"$bin" replay --target "http://127.0.0.1:$port" --trace "$dir/../../traces/router-120.jsonl" --time-scale 200

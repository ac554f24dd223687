#!/usr/bin/env bash
# `talaria serve --engine cpu` as a user runs it: a config of the sim
# engine switched to the cpu engine by the flag, one catalogue model; a
# streamed chat completion carries real generated text (not the sim
# engine's filler) and ends with [DONE]; the session's next turn reuses
# its KV (cached_tokens > 0, kv_source device).
# Usage: tests/e2e/cpu_serve.sh path/to/talaria
set -euo pipefail
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
pid=""
trap '[[ -n "$pid" ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
cat > "$tmp/cluster.toml" <<TOML
profiles = "$root/profiles"

[router]
admission_control = false

[[instance]]
name = "cpu-0"
tp = 1
models = ["cpu-11m"]
bump_fraction = 1.0
non_bump_reserved_gib = 0
runtime_gib = 0.25
graph_pool_gib = 0.25
min_kv_gib = 1
block_tokens = 16
host_kv_gib_per_rank = 0.25
TOML
"$bin" serve --config "$tmp/cluster.toml" --engine cpu --port 0 --port-file "$tmp/port" > "$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -s "$tmp/port" ]] && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
[[ -s "$tmp/port" ]] || { cat "$tmp/log" >&2; exit 1; }
grep -q "cpu engine computing real tokens" "$tmp/log" || { cat "$tmp/log" >&2; echo "no cpu engine in the start-up line" >&2; exit 1; }
url="http://127.0.0.1:$(cat "$tmp/port")/v1/chat/completions"
system=$(printf 'You are a careful coding agent. %.0s' $(seq 8))
turn1="{\"model\":\"cpu-11m\",\"max_tokens\":16,\"stream\":true,\"messages\":[{\"role\":\"system\",\"content\":\"$system\"},{\"role\":\"user\",\"content\":\"run the tests\"}]}"
curl -sfN "$url" -H 'X-Session-Id: e2e' -d "$turn1" > "$tmp/turn1"
grep -q '^data: \[DONE\]' "$tmp/turn1" || { cat "$tmp/turn1" >&2; echo "no [DONE]" >&2; exit 1; }
if grep -q 'filler' "$tmp/turn1"; then echo "sim engine filler from the cpu engine" >&2; exit 1; fi
deltas=$(grep -o '"content":"[^"]*"' "$tmp/turn1" | wc -l)
[[ "$deltas" -eq 16 ]] || { cat "$tmp/turn1" >&2; echo "expected 16 streamed tokens, got $deltas" >&2; exit 1; }
turn2="{\"model\":\"cpu-11m\",\"max_tokens\":4,\"messages\":[{\"role\":\"system\",\"content\":\"$system\"},{\"role\":\"user\",\"content\":\"run the tests\"},{\"role\":\"assistant\",\"content\":\"ok\"},{\"role\":\"tool\",\"content\":\"3 passed\"}]}"
curl -sf "$url" -H 'X-Session-Id: e2e' -d "$turn2" > "$tmp/turn2"
cached=$(grep -o '"cached_tokens":[0-9]*' "$tmp/turn2" | sed 's/.*://')
[[ "${cached:-0}" -gt 0 ]] || { cat "$tmp/turn2" >&2; echo "turn 2 reused nothing" >&2; exit 1; }
grep -q '"kv_source":"device"' "$tmp/turn2" || { cat "$tmp/turn2" >&2; exit 1; }
echo "cpu serve e2e: ok (cached_tokens $cached)"

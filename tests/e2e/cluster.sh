#!/usr/bin/env bash
# Two `talaria instance` processes and a `talaria gateway` on ephemeral
# loopback ports. Checks: a session's second call inside tau lands on the
# same instance and reports cached tokens; after `kill -9` of that instance
# the gateway stops placing calls on it within one heartbeat (no retry is
# needed) and the session's next call succeeds on the other instance. And
# the gateway's /v1/timeline shows the remote instances' segments once asked.
# Usage: tests/e2e/cluster.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
config="$dir/cluster.toml"
tmp=$(mktemp -d)
declare -A pid
cleanup() {
  for p in "${pid[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
  echo "cluster e2e: FAILED: $*" >&2
  for f in "$tmp"/*.log; do echo "--- $f" >&2; cat "$f" >&2; done
  exit 1
}

# Waits for a server to write its bound port; prints it.
wait_port() {
  local name=$1
  for _ in $(seq 200); do
    if [[ -s "$tmp/$name.port" ]]; then cat "$tmp/$name.port"; return 0; fi
    kill -0 "${pid[$name]}" 2>/dev/null || fail "$name exited"
    sleep 0.05
  done
  fail "$name did not start"
}

for w in worker-0 worker-1; do
  "$bin" instance --config "$config" --name "$w" --port 0 --port-file "$tmp/$w.port" > "$tmp/$w.log" 2>&1 &
  pid[$w]=$!
done
p0=$(wait_port worker-0)
p1=$(wait_port worker-1)
"$bin" gateway --config "$config" --port 0 --port-file "$tmp/gateway.port" \
  --instance-address "worker-0=127.0.0.1:$p0" --instance-address "worker-1=127.0.0.1:$p1" > "$tmp/gateway.log" 2>&1 &
pid[gateway]=$!
gw=$(wait_port gateway)
url="http://127.0.0.1:$gw"

chat() {  # session, JSON messages
  curl -sS --max-time 30 -H "X-Session-Id: $1" -H 'Content-Type: application/json' \
    -d "{\"model\":\"qwen3-32b\",\"max_tokens\":8,\"messages\":$2}" "$url/v1/chat/completions"
}
field() { grep -o "\"$1\":\"[^\"]*\"" | head -1 | sed 's/.*:"\(.*\)"/\1/'; }
number() { grep -o "\"$1\":[0-9]*" | head -1 | sed 's/.*://'; }

system=$(printf 'you are a coding agent %.0s' $(seq 40))
turn1="[{\"role\":\"system\",\"content\":\"$system\"},{\"role\":\"user\",\"content\":\"fix the bug\"}]"
r1=$(chat agent-1 "$turn1")
first=$(echo "$r1" | field instance)
answer=$(echo "$r1" | field content)
[[ -n "$first" && -n "$answer" ]] || fail "first call: $r1"
turn2="${turn1%]},{\"role\":\"assistant\",\"content\":\"$answer\"},{\"role\":\"tool\",\"content\":\"tests pass\"}]"
r2=$(chat agent-1 "$turn2")
second=$(echo "$r2" | field instance)
cached=$(echo "$r2" | number cached_tokens)
[[ "$second" == "$first" ]] || fail "second call went to '$second', not '$first': $r2"
[[ "${cached:-0}" -gt 512 ]] || fail "second call reported $cached cached tokens: $r2"
echo "same instance inside tau: $first, cached_tokens $cached"

# The gateway's /v1/timeline shows what the remote instances' GPUs did: the
# first ask starts its polls of their timelines (with telemetry).
curl -sS "$url/v1/timeline" > /dev/null
sleep 0.3  # a few heartbeats of 50 ms
timeline=$(curl -sS "$url/v1/timeline")
grep -q '"phase":"prefill"' <<< "$timeline" || fail "the gateway's timeline shows no prefill: $timeline"
grep -q "\"instance\":\"$first\"" <<< "$timeline" || fail "the gateway's timeline lacks $first: $timeline"
echo "timeline through the gateway: $(echo "$timeline" | grep -o '"seq"' | wc -l) segments"

kill -9 "${pid[$first]}"
wait "${pid[$first]}" 2>/dev/null || true
unset "pid[$first]"
sleep 0.2  # a heartbeat is 50 ms of wall time
telemetry=$(curl -sS "$url/v1/telemetry")
grep -q "\"healthy\":false" <<< "$telemetry" || fail "the gateway still thinks every instance is healthy: $telemetry"
turn3="${turn2%]},{\"role\":\"assistant\",\"content\":\"$answer\"},{\"role\":\"tool\",\"content\":\"next\"}]"
r3=$(chat agent-1 "$turn3")
third=$(echo "$r3" | field instance)
[[ -n "$third" && "$third" != "$first" ]] || fail "after the kill the call got: $r3"
metrics=$(curl -sS "$url/metrics")
retried=$(echo "$metrics" | grep '^talaria_calls_retried_total ' | awk '{print $2}')
[[ "$retried" == "0" ]] || fail "a call was still placed on the killed instance ($retried retries)"
echo "after kill -9 of $first: next call served by $third with no retry"
echo "cluster e2e: ok"

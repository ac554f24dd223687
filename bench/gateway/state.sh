#!/usr/bin/env bash
# What sharing session state on Redis costs a routed call, measured side by
# side in one run: wrk against (1) a `talaria instance` directly, (2) a
# `talaria gateway` with in-process state, (3) a `talaria gateway --state
# redis://...` in front of the same instance, with a redis-server on
# loopback. Every request carries a session id, so each routed call takes
# its session's record from Redis before routing and writes it after the
# completion. Rounds interleave the targets; each figure is the median over
# rounds. Also prints how many store operations each round trip carried.
# Installs redis-server and wrk from Debian if missing.
# Usage: bench/gateway/state.sh [path/to/talaria] [seconds per run (default 5)] [rounds (default 3)]
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$dir/../../build/talaria}
secs=${2:-5}
rounds=${3:-3}
source "$dir/lib.sh"
ensure_packages wrk=wrk redis-server=redis-server
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

rp=$((20000 + RANDOM % 30000))
while (echo > "/dev/tcp/127.0.0.1/$rp") 2>/dev/null; do rp=$((rp + 1)); done
redis-server --port "$rp" --bind 127.0.0.1 --save "" --appendonly no > "$tmp/redis.log" 2>&1 &
pids+=($!)
"$bin" instance --config "$dir/bench.toml" --port 0 --port-file "$tmp/instance.port" > "$tmp/instance.log" 2>&1 &
pids+=($!)
ip=$(wait_port "$tmp/instance.port")
for g in local redis; do
  state=()
  [[ $g == redis ]] && state=(--state "redis://127.0.0.1:$rp")
  "$bin" gateway --config "$dir/bench.toml" --port 0 --port-file "$tmp/$g.port" "${state[@]}" \
    --instance-address "worker-0=127.0.0.1:$ip" > "$tmp/$g.log" 2>&1 &
  pids+=($!)
done
lp=$(wait_port "$tmp/local.port")
sp=$(wait_port "$tmp/redis.port")

for port in "$ip" "$lp" "$sp"; do wrk -t1 -c4 -d1s -s "$dir/request.lua" "http://127.0.0.1:$port" > /dev/null; done

printf "%-36s %10s %10s %12s\n" "target (wrk connections)" "p50 us" "p99 us" "requests/s"
for conns in 1 32; do
  measure "direct:$ip local:$lp redis:$sp" "$conns"
  printf "%-36s %10s %10s %12s\n" "instance directly ($conns)" "$direct_p50" "$direct_p99" "$direct_rps"
  printf "%-36s %10s %10s %12s\n" "gateway, in-process state ($conns)" "$local_p50" "$local_p99" "$local_rps"
  printf "%-36s %10s %10s %12s\n" "gateway, state on Redis ($conns)" "$redis_p50" "$redis_p99" "$redis_rps"
  echo "  Redis adds p50 $((redis_p50 - local_p50)) us, p99 $((redis_p99 - local_p99)) us per routed call"
  awk -v r="$redis_rps" -v l="$local_rps" 'BEGIN { printf "  throughput Redis state / in-process state: %.2f\n", r / l }'
done
m=$(curl -s "http://127.0.0.1:$sp/metrics")
routed=$(echo "$m" | awk '$1 == "talaria_calls_completed_total" { print $2 }')
ops=$(echo "$m" | awk '/^talaria_state_operations_total\{op="(take|complete)",result="ok"\}/ { n += $2 } END { print n + 0 }')
batches=$(echo "$m" | awk '$1 == "talaria_state_batch_seconds_count" { print $2 }')
failed=$(echo "$m" | awk '/^talaria_state_operations_total\{.*result="(failed|skipped)"\}/ { n += $2 } END { print n + 0 }')
cpu=$(redis-cli -p "$rp" info cpu | awk -F: '/^used_cpu_(sys|user):/ { s += $2 } END { print s }')
key=$(redis-cli -p "$rp" --scan --pattern 'talaria:s:*' | head -1)
bytes=$(redis-cli -p "$rp" memory usage "$key")
awk -v c="$cpu" -v r="$routed" -v b="$bytes" 'BEGIN { printf "Redis CPU per routed call: %.1f us (one Redis core: %.0f routed calls/s); one session record: %d bytes\n", c / r * 1e6, r / c, b }'
awk -v o="$ops" -v b="$batches" -v f="$failed" 'BEGIN { printf "store operations %d in %d round trips (%.2f per round trip), %d failed or skipped\n", o, b, o / b, f }'

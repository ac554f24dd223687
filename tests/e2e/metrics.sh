#!/usr/bin/env bash
# Scrapes a loaded `talaria serve` (tests/e2e/metrics.toml: two instances,
# three models, so calls queue, switch and return; session state shared on
# a redis-server the script starts, so the state families are there too) and
# lints the page with Prometheus' own `promtool check metrics`: it must
# report nothing. Then checks that the families an operator reads are there
# and populated, so the lint cannot pass on an empty page, and that every
# metric the Grafana dashboard (deploy/grafana/talaria.json) queries exists.
# Usage: tests/e2e/metrics.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
command -v promtool > /dev/null || { echo "metrics e2e: promtool is missing (scripts/test.sh installs Debian's prometheus)" >&2; exit 1; }
command -v redis-server > /dev/null || { echo "metrics e2e: redis-server is missing (scripts/test.sh installs it)" >&2; exit 1; }
source "$dir/ports.sh"
redis_log=$(mktemp)
launch_redis() { redis-server --port "$1" --bind 127.0.0.1 --save "" --appendonly no & }
start_on_free_port "$redis_log" launch_redis || { echo "metrics e2e: redis-server did not start:" >&2; cat "$redis_log" >&2; exit 1; }
redis_pid=$started_pid
redis_port=$started_port
extra_cleanup() { kill "$redis_pid" 2> /dev/null || true; wait "$redis_pid" 2> /dev/null || true; rm -f "$redis_log"; }
source "$dir/start_server.sh"
start_server "$dir/metrics.toml" --state "redis://127.0.0.1:$redis_port"
url="http://127.0.0.1:$port"

# Three sessions per model, two turns each, concurrently. The first turn is
# several KV blocks long, so its prefix outlives a switch in host KV and the
# second turn's lease is honoured whichever model is active by then (a
# prefix under one block is kept nowhere once its model switches out, and
# its lease is rightly discarded).
task=$(printf 'step %02d of a long agent task, with its tool output. ' $(seq 20))
call() {  # session, model, content
  curl -sS --max-time 60 -H "X-Session-Id: $1" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$2\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":\"$3\"}]}" \
    "$url/v1/chat/completions" > /dev/null
}
clients=()
for model in qwen3-235b-a22b glm-5-nvfp4 qwen3.5-122b-a10b; do
  for s in 1 2 3; do
    (call "$model-$s" "$model" "$task" && call "$model-$s" "$model" "second turn") &
    clients+=($!)
  done
done
for c in "${clients[@]}"; do wait "$c" || { echo "metrics e2e: FAILED: a call failed" >&2; exit 1; }; done
sleep 0.3  # a heartbeat (0.05 s of wall time) brings the snapshots in

page=$(curl -sS "$url/metrics")
problems=$(echo "$page" | promtool check metrics 2>&1) || { echo "metrics e2e: FAILED: promtool: $problems" >&2; exit 1; }
[[ -z "$problems" ]] || { echo "metrics e2e: FAILED: promtool reported: $problems" >&2; exit 1; }

# A family is there and one of its samples is above zero.
populated() {
  echo "$page" | grep "^$1" | awk '{ if ($2 > 0) found = 1 } END { exit !found }' ||
    { echo "metrics e2e: FAILED: $1 is missing or zero" >&2; echo "$page" | grep "^$1" >&2; exit 1; }
}
for family in talaria_calls_completed_total talaria_route_decision_seconds_count 'talaria_route_decisions_total{outcome="lease"}' \
  talaria_leases_total talaria_model_resident talaria_model_active talaria_hbm_bytes talaria_switch_seconds_count \
  talaria_round_seconds_count talaria_phase_seconds_total talaria_slot_holds_total talaria_rounds_total talaria_hold_wait_scale \
  talaria_telemetry_age_seconds talaria_instance_healthy talaria_host_kv_capacity_bytes talaria_ttft_seconds_count \
  talaria_state_up 'talaria_state_operations_total{op="complete",result="ok"}' talaria_state_leases_taken_total; do
  populated "$family"
done

# Every metric the Grafana dashboard queries is a family of the page (a
# histogram's _bucket, _sum and _count name its family).
dashboard="$dir/../../deploy/grafana/talaria.json"
queried=$(grep -o 'talaria_[a-z0-9_]*' "$dashboard" | sort -u)
[[ $(echo "$queried" | wc -l) -ge 20 ]] || { echo "metrics e2e: FAILED: the dashboard queries too few metrics" >&2; exit 1; }
for m in $queried; do
  family=${m%_bucket}
  # A here-string, not `echo | grep -q`: grep -q stops at the first match,
  # and under pipefail the echo it cut off (SIGPIPE) would fail the check.
  grep -q -e "^# TYPE $m " -e "^# TYPE $family histogram" <<< "$page" ||
    { echo "metrics e2e: FAILED: the dashboard queries $m, which the page does not have" >&2; exit 1; }
done
echo "metrics e2e: ok ($(echo "$page" | grep -c '^# TYPE') families, promtool clean, $(echo "$queried" | wc -l) dashboard metrics present)"

#!/usr/bin/env bash
# The process-level fault test: two `talaria instance` processes and a
# `talaria gateway` (tests/e2e/faults.toml) under a streaming agent load
# (fault_load.mjs), through five faults in turn:
#   1. SIGSTOP of an instance for 4.5 s, then SIGCONT (a hung instance:
#      its calls must go elsewhere or end, not wait out the stop);
#   2. kill -9 of an instance, restarted on its port;
#   3. kill -9 of the gateway, restarted on its port;
#   4. SIGTERM of an instance (it drains and exits 0), restarted;
#   5. SIGTERM of the gateway (it drains and exits 0), then of the instances.
# After every fault: no call hangs, no stream ends without [DONE] (an error
# ends with an error event, then [DONE]), and only a killed process breaks
# connections. Once the load stops, every process balances: accepted =
# completed + failed on its /metrics.
# Usage: tests/e2e/faults.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
config="$dir/faults.toml"
tmp=$(mktemp -d)
declare -A pid port
load_pid=""
cleanup() {
  [[ -n "$load_pid" ]] && kill "$load_pid" 2>/dev/null || true
  for p in "${pid[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

phase="start"
fail() {
  echo "faults e2e: FAILED in $phase: $*" >&2
  for f in "$tmp"/*.log; do echo "--- $f" >&2; tail -20 "$f" >&2; done
  exit 1
}

# Starts a server: NAME PORT (0: any) then the subcommand and its flags.
start() {
  local name=$1 p=$2
  shift 2
  rm -f "$tmp/$name.port"
  "$bin" "$@" --config "$config" --port "$p" --port-file "$tmp/$name.port" >> "$tmp/$name.log" 2>&1 &
  pid[$name]=$!
  for _ in $(seq 200); do
    if [[ -s "$tmp/$name.port" ]]; then port[$name]=$(cat "$tmp/$name.port"); return 0; fi
    kill -0 "${pid[$name]}" 2>/dev/null || fail "$name exited at start"
    sleep 0.05
  done
  fail "$name did not start"
}
start_instance() { start "$1" "${2:-0}" instance --name "$1"; }
start_gateway() {
  start gateway "${1:-0}" gateway --instance-address "worker-0=127.0.0.1:${port[worker-0]}" \
    --instance-address "worker-1=127.0.0.1:${port[worker-1]}"
}

# Load in the background for SECONDS; AFTER_S marks calls that count as
# completed after a restart.
load() {
  node "$dir/fault_load.mjs" "http://127.0.0.1:${port[gateway]}" "$1" 6 "${2:-1000000}" > "$tmp/load.json" &
  load_pid=$!
}
finish_load() {
  wait "$load_pid" || fail "the load generator failed"
  load_pid=""
  echo "$phase: $(cat "$tmp/load.json")"
}
count() { grep -o "\"$1\":[0-9]*" "$tmp/load.json" | sed 's/.*://'; }
expect_none() { for k in "$@"; do [[ "$(count "$k")" == 0 ]] || fail "$k = $(count "$k"): $(cat "$tmp/load.json")"; done; }
expect_some() { [[ "$(count "$1")" -gt 0 ]] || fail "no $1: $(cat "$tmp/load.json")"; }

metric() { echo "$1" | grep "^$2 " | awk '{print $2}'; }
# Waits until NAME's accepted = completed + failed (calls a fault cut are
# noticed at the server's next write).
expect_balanced() {
  local m a c f
  for _ in $(seq 100); do
    m=$(curl -sS --max-time 5 "http://127.0.0.1:${port[$1]}/metrics") || fail "$1 does not answer /metrics"
    a=$(metric "$m" talaria_calls_accepted_total); c=$(metric "$m" talaria_calls_completed_total)
    f=$(metric "$m" talaria_calls_failed_total)
    [[ "$a" -eq $((c + f)) ]] && { echo "$1: accepted $a = completed $c + failed $f"; return 0; }
    sleep 0.1
  done
  fail "$1: accepted $a != completed $c + failed $f"
}
# Sends SIGTERM to NAME and expects a drained exit 0.
terminate() {
  kill -TERM "${pid[$1]}"
  local rc=0
  wait "${pid[$1]}" || rc=$?
  unset "pid[$1]"
  [[ $rc -eq 0 ]] || fail "$1 exited $rc after SIGTERM"
  grep -q "drained" "$tmp/$1.log" || fail "$1 did not report its drain"
}

start_instance worker-0
start_instance worker-1
start_gateway

phase="1 (SIGSTOP of an instance)"
load 7
sleep 1
kill -STOP "${pid[worker-0]}"
sleep 4.5
kill -CONT "${pid[worker-0]}"
finish_load
expect_none hung unterminated broken refused
expect_some completed

phase="2 (kill -9 of an instance, restarted)"
load 5 2.5
sleep 1
kill -9 "${pid[worker-0]}"
wait "${pid[worker-0]}" 2>/dev/null || true
sleep 1
start_instance worker-0 "${port[worker-0]}"
finish_load
expect_none hung unterminated broken
expect_some completed_after_s

phase="3 (kill -9 of the gateway, restarted)"
load 5 2.5
sleep 1
kill -9 "${pid[gateway]}"
wait "${pid[gateway]}" 2>/dev/null || true
sleep 0.5
start_gateway "${port[gateway]}"
finish_load
expect_none hung unterminated
expect_some completed_after_s
expect_balanced gateway
expect_balanced worker-0
expect_balanced worker-1

phase="4 (SIGTERM of an instance, restarted)"
load 4
sleep 1
terminate worker-1
start_instance worker-1 "${port[worker-1]}"
finish_load
expect_none hung unterminated broken refused
expect_some completed

phase="5 (SIGTERM of the gateway, then of the instances)"
load 3
sleep 1
terminate gateway
finish_load
expect_none hung unterminated broken
expect_balanced worker-0
expect_balanced worker-1
terminate worker-0
terminate worker-1
echo "faults e2e: ok"

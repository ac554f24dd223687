#!/usr/bin/env bash
# The gateway-replica deployment test: a redis-server, two `talaria
# instance` servers, two `talaria gateway` replicas sharing session state on
# the Redis (--state), and nginx in front of the replicas as the load
# balancer (round-robin, no stickiness), all on loopback ports chosen at run
# time and all stopped at the end. Agent sessions (replica_load.mjs) run:
#   1. against one replica directly: the affinity baseline (returns served
#      by their previous call's instance with cached tokens);
#   2. through nginx, so a session's calls alternate replicas: the same
#      affinity, within 2 points, and no call fails;
#   3. through nginx while one replica is killed with kill -9: no call fails
#      (nginx sends a call whose replica died before answering to the other)
#      and affinity holds;
#   4. through nginx while Redis is stopped: no call fails; the replica
#      counts the outage in /metrics and, once Redis is back, resynchronises.
# Then every live process balances: accepted = completed + failed.
# Usage: tests/e2e/replicas.sh path/to/talaria
set -euo pipefail
bin=$1
dir=$(cd "$(dirname "$0")" && pwd)
config="$dir/replicas.toml"
tmp=$(mktemp -d)
declare -A pid port
cleanup() {
  # nginx's master stops its workers on TERM (kill -9 would orphan them).
  [[ -n "${pid[nginx]:-}" ]] && kill -TERM "${pid[nginx]}" 2>/dev/null || true
  for p in "${pid[@]}"; do [[ "$p" == "${pid[nginx]:-}" ]] || kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

phase="start"
fail() {
  echo "replicas e2e: FAILED in $phase: $*" >&2
  for f in "$tmp"/*.log; do echo "--- $f" >&2; tail -15 "$f" >&2; done
  exit 1
}
command -v redis-server > /dev/null || fail "redis-server is not installed (scripts/test.sh installs it)"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x "$nginx_bin" ]] || fail "nginx is not installed (scripts/test.sh installs it)"

source "$dir/ports.sh"
launch_redis() { redis-server --port "$1" --bind 127.0.0.1 --save "" --appendonly no & }
# Starts NAME with LAUNCH on a free port (tests/e2e/ports.sh), its output in
# $tmp/NAME.log, and records its pid and port.
start_listening() {
  local status=0
  start_on_free_port "$tmp/$1.log" "$2" || status=$?
  ((status == 0)) || fail "$1 $( ((status == 1)) && echo "exited at start" || echo "did not start")"
  pid[$1]=$started_pid
  port[$1]=$started_port
}
# Starts a talaria server: NAME then the subcommand and its flags.
start() {
  local name=$1
  shift
  "$bin" "$@" --config "$config" --port 0 --port-file "$tmp/$name.port" >> "$tmp/$name.log" 2>&1 &
  pid[$name]=$!
  for _ in $(seq 200); do
    if [[ -s "$tmp/$name.port" ]]; then port[$name]=$(cat "$tmp/$name.port"); return 0; fi
    kill -0 "${pid[$name]}" 2> /dev/null || fail "$name exited at start"
    sleep 0.05
  done
  fail "$name did not start"
}
metric() {  # port, series
  curl -sS --max-time 5 "http://127.0.0.1:$1/metrics" | awk -v s="$2" '$1 == s { print $2 }'
}
load() {  # url, seconds, log
  node "$dir/replica_load.mjs" run "$1" "$2" 6 6 "$3"
}
summary() { node "$dir/replica_load.mjs" summarize "$1"; }
field() { echo "$1" | grep -o "\"$2\":[0-9.e-]*" | head -1 | sed 's/.*://'; }

start_listening redis launch_redis
start worker-0 instance --name worker-0
start worker-1 instance --name worker-1
state="redis://127.0.0.1:${port[redis]}"
for g in gateway-a gateway-b; do
  start "$g" gateway --state "$state" --instance-address "worker-0=127.0.0.1:${port[worker-0]}" \
    --instance-address "worker-1=127.0.0.1:${port[worker-1]}"
done
launch_nginx() {
  cat > "$tmp/nginx.conf" << NGINX
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $tmp/body;
  proxy_temp_path $tmp/proxy;
  upstream gateways {
    server 127.0.0.1:${port[gateway-a]};
    server 127.0.0.1:${port[gateway-b]};
  }
  server {
    listen 127.0.0.1:$1;
    location / {
      proxy_pass http://gateways;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      # A call whose replica died before answering goes to the other.
      proxy_next_upstream error timeout non_idempotent;
      proxy_connect_timeout 1s;
      proxy_read_timeout 30s;
      add_header X-Talaria-Replica \$upstream_addr always;
    }
  }
}
NGINX
  "$nginx_bin" -c "$tmp/nginx.conf" -p "$tmp" &
}
start_listening nginx launch_nginx
lb="http://127.0.0.1:${port[nginx]}"

phase="1 (one replica)"
load "http://127.0.0.1:${port[gateway-a]}" 4 "$tmp/one.jsonl"
one=$(summary "$tmp/one.jsonl")
echo "one replica:        $one"
base=$(field "$one" affinity)
[[ $(field "$one" failed) == 0 ]] || fail "calls failed: $one"
[[ $(field "$one" returns) -ge 50 ]] || fail "too few returns to compare: $one"

phase="2 (two replicas behind nginx)"
load "$lb" 4 "$tmp/two.jsonl"
two=$(summary "$tmp/two.jsonl")
echo "two replicas:       $two"
[[ $(field "$two" failed) == 0 ]] || fail "calls failed: $two"
[[ $(field "$two" replicas) == 2 && $(field "$two" sessions_on_both) -gt 0 ]] || fail "nginx did not alternate replicas: $two"
awk -v a="$(field "$two" affinity)" -v b="$base" 'BEGIN { exit !(a >= b - 0.02) }' ||
  fail "affinity $(field "$two" affinity) through two replicas, $base through one"
taken=$(( $(metric "${port[gateway-a]}" talaria_state_leases_taken_total) + $(metric "${port[gateway-b]}" talaria_state_leases_taken_total) ))
[[ $taken -gt 0 ]] || fail "no replica took a lease from the store"

phase="3 (kill -9 of a replica)"
load "$lb" 5 "$tmp/kill.jsonl" &
load_pid=$!
sleep 1.5
kill -9 "${pid[gateway-b]}"
wait "${pid[gateway-b]}" 2> /dev/null || true
unset "pid[gateway-b]"
wait "$load_pid" || fail "the load failed"
killed=$(summary "$tmp/kill.jsonl")
echo "replica killed:     $killed"
[[ $(field "$killed" failed) == 0 ]] || fail "calls failed: $killed"
awk -v a="$(field "$killed" affinity)" -v b="$base" 'BEGIN { exit !(a >= b - 0.02) }' ||
  fail "affinity $(field "$killed" affinity) after the kill, $base before"

phase="4 (Redis stopped)"
load "$lb" 5 "$tmp/redis.jsonl" &
load_pid=$!
sleep 1.5
kill -TERM "${pid[redis]}"
wait "${pid[redis]}" 2> /dev/null || true
sleep 1
[[ $(metric "${port[gateway-a]}" talaria_state_up) == 0 ]] || fail "the replica did not notice Redis stopped"
wait "$load_pid" || fail "the load failed"
stopped=$(summary "$tmp/redis.jsonl")
echo "redis stopped:      $stopped"
[[ $(field "$stopped" failed) == 0 ]] || fail "calls failed: $stopped"
# Back on the same port: the replicas know that one. It is below the
# ephemeral range, so only another test's pick could have taken it since.
launch_redis "${port[redis]}" > "$tmp/redis.log" 2>&1
pid[redis]=$!
wait_accepting "${pid[redis]}" "${port[redis]}" || fail "redis did not restart on port ${port[redis]}"
for _ in $(seq 100); do [[ $(metric "${port[gateway-a]}" talaria_state_up) == 1 ]] && break; sleep 0.05; done
[[ $(metric "${port[gateway-a]}" talaria_state_up) == 1 ]] || fail "the replica did not come back to Redis"
resynced=$(metric "${port[gateway-a]}" talaria_state_resynced_sessions_total)
[[ $resynced -gt 0 ]] || fail "nothing resynchronised after the outage"
echo "redis back: $resynced sessions resynchronised"

phase="accounting"
sleep 0.5
for name in gateway-a worker-0 worker-1; do
  p=${port[$name]}
  a=$(metric "$p" talaria_calls_accepted_total)
  c=$(metric "$p" talaria_calls_completed_total)
  f=$(metric "$p" talaria_calls_failed_total)
  [[ $a -eq $((c + f)) ]] || fail "$name: accepted $a != completed $c + failed $f"
  echo "$name: accepted $a = completed $c + failed $f"
done
echo "replicas e2e: ok"

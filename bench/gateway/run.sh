#!/usr/bin/env bash
# Added latency and throughput of the gateway, measured side by side in one
# run: wrk against (1) a `talaria instance` directly, (2) a `talaria gateway`
# in front of it (calls over the instance link), (3) a second gateway in
# front of it with upstream_protocol = "http" (a request per call), (4)
# Debian's nginx as a reverse proxy in front of the same instance
# (keep-alive upstream, one worker process). Installs nginx-light
# and wrk from Debian if missing.
# Usage: bench/gateway/run.sh [path/to/talaria] [seconds per run (default 5)] [rounds (default 3)]
#                             [wrk connection counts (default "1 32 128")]
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
bin=${1:-$dir/../../build/talaria}
secs=${2:-5}
rounds=${3:-3}
conn_counts=${4:-1 32 128}
source "$dir/lib.sh"
ensure_packages wrk=wrk nginx=nginx-light
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -f "$tmp/nginx.pid" ]] && kill "$(cat "$tmp/nginx.pid")" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" instance --config "$dir/bench.toml" --port 0 --port-file "$tmp/instance.port" > "$tmp/instance.log" 2>&1 &
pids+=($!)
ip=$(wait_port "$tmp/instance.port")
"$bin" gateway --config "$dir/bench.toml" --port 0 --port-file "$tmp/gateway.port" \
  --instance-address "worker-0=127.0.0.1:$ip" > "$tmp/gateway.log" 2>&1 &
pids+=($!)
gp=$(wait_port "$tmp/gateway.port")
# The same gateway with a request per call (the profiles path made absolute).
sed -e "s|^profiles = .*|profiles = \"$dir/../../profiles\"|" -e '/^\[serve\]/a upstream_protocol = "http"' \
  "$dir/bench.toml" > "$tmp/bench-http.toml"
"$bin" gateway --config "$tmp/bench-http.toml" --port 0 --port-file "$tmp/gateway-http.port" \
  --instance-address "worker-0=127.0.0.1:$ip" > "$tmp/gateway-http.log" 2>&1 &
pids+=($!)
hp=$(wait_port "$tmp/gateway-http.port")
# nginx's port: below the ephemeral range (a port next to the instance's
# may be the local end of one of the gateway's connections, which nothing
# listens on but bind refuses), the first one nginx can bind.
write_nginx_conf() {
  cat > "$tmp/nginx.conf" <<NGINX
worker_processes 1;
pid $tmp/nginx.pid;
error_log $tmp/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/body;
  proxy_temp_path $tmp/proxy;
  upstream instance { server 127.0.0.1:$ip; keepalive 64; }
  server {
    listen 127.0.0.1:$np;
    location / {
      proxy_pass http://instance;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
NGINX
}
np=$((20000 + RANDOM % 5000))
for attempt in $(seq 20); do
  while (echo > "/dev/tcp/127.0.0.1/$np") 2>/dev/null; do np=$((np + 1)); done
  write_nginx_conf
  nginx -c "$tmp/nginx.conf" -p "$tmp" 2>> "$tmp/nginx-start.log" && break
  [[ $attempt -eq 20 ]] && { cat "$tmp/nginx-start.log" >&2; exit 1; }
  np=$((np + 1))
done
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$np") 2>/dev/null && break; sleep 0.05; done

# Warm up every path (connections, session tables).
for port in "$ip" "$gp" "$hp" "$np"; do wrk -t1 -c4 -d1s -s "$dir/request.lua" "http://127.0.0.1:$port" > /dev/null; done

# Rounds interleave the three targets so drift on a shared machine hits
# each alike; each figure is the median over rounds.
printf "%-34s %10s %10s %12s\n" "target (wrk connections)" "p50 us" "p99 us" "requests/s"
for conns in $conn_counts; do
  measure "direct:$ip gateway:$gp http:$hp nginx:$np" "$conns"
  printf "%-34s %10s %10s %12s\n" "instance directly ($conns)" "$direct_p50" "$direct_p99" "$direct_rps"
  printf "%-34s %10s %10s %12s\n" "gateway -> instance ($conns)" "$gateway_p50" "$gateway_p99" "$gateway_rps"
  printf "%-34s %10s %10s %12s\n" "gateway -> instance, http ($conns)" "$http_p50" "$http_p99" "$http_rps"
  printf "%-34s %10s %10s %12s\n" "nginx -> instance ($conns)" "$nginx_p50" "$nginx_p99" "$nginx_rps"
  echo "  added p50: gateway $((gateway_p50 - direct_p50)) us (over http $((http_p50 - direct_p50)) us)," \
       "nginx $((nginx_p50 - direct_p50)) us;" \
       "added p99: gateway $((gateway_p99 - direct_p99)) us, nginx $((nginx_p99 - direct_p99)) us"
  awk -v g="$gateway_rps" -v h="$http_rps" -v n="$nginx_rps" \
    'BEGIN { printf "  throughput gateway / nginx: %.2f (over http: %.2f)\n", g / n, h / n }'
done

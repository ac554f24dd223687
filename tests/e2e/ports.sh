# shellcheck shell=bash disable=SC2034  # started_port and started_pid are for the caller
# Sourced by the e2e scripts that start servers which cannot listen on port 0
# and report the port they got (redis-server, nginx).
#
# A port picked by probing is only free until someone binds it. Two kinds of
# someone run beside these scripts under `ctest -j`: every client socket
# takes a local port from the kernel's ephemeral range, and other tests pick
# ports the same way. So ports come from below the ephemeral range (no client
# socket can take one), and a server that exits because its port was taken
# anyway is started again on another.

# Prints a loopback port below the ephemeral range that nothing accepts on.
pick_port() {
  local low
  low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2> /dev/null || echo 32768)
  ((low > 12000)) || low=32768
  local p=$((10000 + RANDOM % (low - 11000)))
  while (echo > "/dev/tcp/127.0.0.1/$p") 2> /dev/null; do p=$((p + 1)); done
  echo "$p"
}

# Waits until PID accepts on PORT: 0 once it does, 1 if PID exited, 2 after
# 10 s without either. Whoever took the port from PID accepts on it too, so
# PID must also outlive a grace period in which a failed bind would end it.
wait_accepting() {
  local pid=$1 port=$2
  for _ in $(seq 200); do
    if (echo > "/dev/tcp/127.0.0.1/$port") 2> /dev/null; then
      sleep 0.2
      kill -0 "$pid" 2> /dev/null && return 0 || return 1
    fi
    kill -0 "$pid" 2> /dev/null || return 1
    sleep 0.05
  done
  return 2
}

# start_on_free_port LOG LAUNCH: calls `LAUNCH PORT` with its output in LOG;
# LAUNCH starts a server in the background listening on PORT. Then waits
# until it accepts. Sets started_port and started_pid and returns 0; when LOG
# says its port was in use, stops it and tries another port (five tries).
# Returns 1 if the server exited for another reason (LOG says why) and 2 if
# it neither accepted nor exited within 10 s (it is killed).
start_on_free_port() {
  local log=$1 launch=$2 p status
  for _ in 1 2 3 4 5; do
    p=$(pick_port)
    "$launch" "$p" > "$log" 2>&1
    started_pid=$!
    status=0
    wait_accepting "$started_pid" "$p" || status=$?
    # Both servers log a failed bind at once (nginx then retries it for
    # 2.5 s before exiting).
    if grep -q "Address already in use" "$log"; then
      kill -9 "$started_pid" 2> /dev/null || true
      wait "$started_pid" 2> /dev/null || true
      continue
    fi
    if ((status == 0)); then
      started_port=$p
      return 0
    fi
    if ((status == 2)); then
      kill -9 "$started_pid" 2> /dev/null || true
      return 2
    fi
    return 1
  done
  return 1
}

# Helpers the gateway benchmarks share (bench/gateway/run.sh, state.sh).
# The caller sets `dir` (this folder), `secs` (seconds per wrk run),
# `rounds` and `tmp` (a scratch folder) before calling them.

# Installs, from Debian, each PACKAGE whose COMMAND is missing: arguments
# are COMMAND=PACKAGE pairs (apt-get update only when something is).
ensure_packages() {
  local missing=() pair
  for pair in "$@"; do
    command -v "${pair%%=*}" > /dev/null || [[ -x "/usr/sbin/${pair%%=*}" ]] || missing+=("${pair#*=}")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Waits for a server to write its bound port to FILE; prints it.
wait_port() {
  for _ in $(seq 200); do [[ -s "$1" ]] && { cat "$1"; return 0; }; sleep 0.05; done
  echo "$(basename "$0"): no port in $1" >&2; exit 1
}

# One wrk run against PORT with CONNS connections; prints "p50_us p99_us req_per_s".
run() {
  local port=$1 conns=$2
  wrk -t "$(( conns < 2 ? 1 : 2 ))" -c "$conns" -d "${secs}s" --latency -s "$dir/request.lua" \
    "http://127.0.0.1:$port" > "$tmp/wrk.out"
  if ! grep -q "Non-2xx" "$tmp/wrk.out"; then :; else echo "$(basename "$0"): non-2xx answers:" >&2; cat "$tmp/wrk.out" >&2; exit 1; fi
  awk '
    function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return (v + 0) * 1000; if (v ~ /s$/) return (v + 0) * 1e6; return v }
    $1 == "50%" { p50 = us($2) } $1 == "99%" { p99 = us($2) } $1 == "Requests/sec:" { rps = $2 }
    END { printf "%.0f %.0f %.0f\n", p50, p99, rps }' "$tmp/wrk.out"
}

# The median of the numbers on stdin.
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Measures TARGETS ("name:port ..."), CONNS connections, `rounds` rounds
# interleaving the targets (so drift on a shared machine hits each alike),
# and sets NAME_p50, NAME_p99 and NAME_rps to each target's median over rounds.
measure() {
  local targets=$1 conns=$2 target t p50 p99 rps
  : > "$tmp/rows"
  for _ in $(seq "$rounds"); do
    for target in $targets; do echo "${target%%:*} $(run "${target#*:}" "$conns")" >> "$tmp/rows"; done
  done
  for target in $targets; do
    t=${target%%:*}
    p50=$(awk -v t="$t" '$1 == t { print $2 }' "$tmp/rows" | median)
    p99=$(awk -v t="$t" '$1 == t { print $3 }' "$tmp/rows" | median)
    rps=$(awk -v t="$t" '$1 == t { print $4 }' "$tmp/rows" | median)
    eval "${t}_p50=$p50 ${t}_p99=$p99 ${t}_rps=$rps"
  done
}

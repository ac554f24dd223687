#!/usr/bin/env bash
# Fidelity of the sim engine against the CPU engine (docs/fidelity.md): one
# seeded session trace over two CPU catalogue models, replayed (1) in real
# time against `talaria serve` on the cpu engine, continuing sessions on the
# text it generates (--echo-output), and (2) on the sim engine with the
# profiles in profiles/ (measured on this machine by `talaria profile measure
# --engine cpu`), on the same one-instance cluster config. Prints both rows
# and the sim's relative error at SCT p50/p95 and TTFT p50.
# Usage: bench/fidelity/run.sh [path/to/talaria] [sessions (default 12)] [seed (default 7)]
# Needs python3 (Debian package python3) for the comparison table.
set -euo pipefail
command -v python3 >/dev/null || { echo "run.sh: needs python3 (apt-get install python3)" >&2; exit 1; }
dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$dir/../.." && pwd)
bin=${1:-$root/build/talaria}
sessions=${2:-12}
seed=${3:-7}
tmp=$(mktemp -d)
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# The instance of configs/cpu-three-models.toml, serving the trace's two models.
sed -e "s|^profiles = .*|profiles = \"$root/profiles\"|" \
    -e 's|^models = .*|models = ["cpu-11m", "cpu-24m"]|' "$root/configs/cpu-three-models.toml" > "$tmp/cluster.toml"
"$bin" trace gen --sessions "$sessions" --seed "$seed" --models cpu-11m,cpu-24m --max-context 1024 \
    --session-rate 0.3 --gap-cap 2 -o "$tmp/trace.jsonl"
"$bin" trace stats "$tmp/trace.jsonl" | sed -n '2,3p'
"$bin" serve --config "$tmp/cluster.toml" --port 0 --port-file "$tmp/port" > "$tmp/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -s "$tmp/port" ]] && break; sleep 0.1; done
[[ -s "$tmp/port" ]] || { echo "run.sh: the server did not start:" >&2; cat "$tmp/serve.log" >&2; exit 1; }
"$bin" replay --target "http://127.0.0.1:$(cat "$tmp/port")" --trace "$tmp/trace.jsonl" --echo-output \
    --json "$tmp/cpu.json" --quiet
"$bin" replay --cluster "$tmp/cluster.toml" --trace "$tmp/trace.jsonl" --ablations talaria \
    --json "$tmp/sim.json" --quiet
python3 - "$tmp/cpu.json" "$tmp/sim.json" <<'PY'
import json, sys
cpu = json.load(open(sys.argv[1]))["runs"][0]
sim = json.load(open(sys.argv[2]))["runs"][0]
keys = [("sct_p50_s", "SCT p50"), ("sct_p95_s", "SCT p95"), ("ttft_p50_s", "TTFT p50"), ("ttft_p95_s", "TTFT p95")]
print("%-10s %10s %10s %10s" % ("metric", "cpu (s)", "sim (s)", "sim err"))
for k, name in keys:
    print("%-10s %10.2f %10.2f %+9.1f%%" % (name, cpu[k], sim[k], 100 * (sim[k] - cpu[k]) / cpu[k]))
print("calls      %10d %10d" % (cpu["calls_completed"], sim["calls_completed"]))
PY

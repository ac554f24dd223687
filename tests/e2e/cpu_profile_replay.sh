#!/usr/bin/env bash
# The sim engine running on measured numbers: measures profiles of two CPU
# catalogue models on this machine, writes a cluster config serving both on
# one emulated instance, generates a session trace over them, and replays it
# (every call must complete: tests/CMakeLists.txt checks the row).
# Usage: tests/e2e/cpu_profile_replay.sh path/to/talaria
set -euo pipefail
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/profiles"
for m in cpu-11m cpu-24m; do
  "$bin" profile measure --engine cpu --model "$m" --repeats 1 --max-tokens 256 --hbm-gib 8 --out "$tmp/profiles/$m.toml" > /dev/null
done
cat > "$tmp/cluster.toml" <<TOML
profiles = "profiles"

# One instance: every call has one possible place, so queue rather than shed
# (as configs/tp8-three-models.toml does).
[router]
admission_control = false

[[instance]]
name = "cpu-0"
tp = 1
models = ["cpu-11m", "cpu-24m"]
# A CPU "device": the whole 8 GiB arena is the bump region, small fixed parts.
bump_fraction = 1.0
non_bump_reserved_gib = 0
runtime_gib = 0.5
graph_pool_gib = 0.5
host_kv_gib_per_rank = 1
TOML
"$bin" trace gen --sessions 12 --seed 3 --models cpu-11m,cpu-24m --max-context 3000 > "$tmp/trace.jsonl"
"$bin" replay --cluster "$tmp/cluster.toml" --trace "$tmp/trace.jsonl" --ablations talaria

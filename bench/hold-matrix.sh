#!/usr/bin/env bash
# Slot holds compared (issue 18): every workload family of `talaria trace
# gen` on the TP=8 server (configs/tp8-three-models.toml, one cold instance
# time-sharing three models) and on the TP=4 routing testbed
# (configs/tp4-two-workers.toml, full router), at three loads, under four
# hold configurations of Talaria: the fixed 1 s hold (the paper's), no hold
# (fixed, slot_hold_s = 0), no session-prefill at all (the no-sp ablation,
# which holds nothing either), and the adaptive hold. Plus the shipped
# traces/swe-fixed-30.jsonl on TP=8. Prints one Markdown table per testbed
# with SCT p50 / p95 and TTFT p50, and whether adaptive is within 1% of the
# best of the other three.
#
#   bench/hold-matrix.sh > /tmp/hold.md
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/families.sh build/hold-matrix
run() {  # name cluster trace extra...
  local name=$1 cluster=$2 trace=$3
  shift 3
  for hold in fixed none adaptive; do
    "$B" replay ${REPLAY_FLAGS:-} -q --cluster "$cluster" --trace "$trace" --ablations talaria --hold "$hold" --load "$LOADS" \
        --gap-cap 300 --json "$OUT/$name-$hold.json" "$@"
  done
  "$B" replay ${REPLAY_FLAGS:-} -q --cluster "$cluster" --trace "$trace" --ablations no-sp --load "$LOADS" --gap-cap 300 \
      --json "$OUT/$name-nosp.json" "$@"
}
names=()
for f in $FAMILIES; do
  gen_family "$f"
  run "$f-tp8" configs/tp8-three-models.toml "$OUT/$f-tp8.jsonl"
  run "$f-tp4" configs/tp4-two-workers.toml "$OUT/$f-tp4.jsonl" --router full
  names+=("$f-tp8" "$f-tp4")
done
# Its sessions all start at once: no arrival rate for a utilisation load to scale.
LOADS=all run swe-fixed-30-tp8 configs/tp8-three-models.toml traces/swe-fixed-30.jsonl
names+=(swe-fixed-30-tp8)
python3 - "$OUT" "${names[@]}" <<'PY'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
holds = ["fixed", "none", "nosp", "adaptive"]
print("| family / testbed | load | SCT p50: fixed / none / no-sp / adaptive | SCT p95: fixed / none / no-sp / adaptive | TTFT p50: fixed / none / no-sp / adaptive | adaptive within 1% of the best (p50, p95) |")
print("|---|---|---|---|---|---|")
ok_all = True
for n in names:
    runs = {h: json.load(open(f"{out}/{n}-{h}.json"))["runs"] for h in holds}
    for i, r in enumerate(runs["fixed"]):
        load = r["load"]
        row = {h: runs[h][i] for h in holds}
        p50 = [row[h]["sct_p50_s"] for h in holds]
        p95 = [row[h]["sct_p95_s"] for h in holds]
        t50 = [row[h]["ttft_p50_s"] for h in holds]
        best50, best95 = min(p50[:3]), min(p95[:3])
        ok50, ok95 = p50[3] <= 1.01 * best50, p95[3] <= 1.01 * best95
        ok_all &= ok50 and ok95
        mark = lambda b: "yes" if b else "**no**"
        print(f"| {n} | {load} | " + " / ".join(f"{x:.0f}" for x in p50) + " | " + " / ".join(f"{x:.0f}" for x in p95) +
              " | " + " / ".join(f"{x:.2f}" for x in t50) + f" | {mark(ok50)}, {mark(ok95)} |")
print(f"\nadaptive within 1% of the best everywhere: {'yes' if ok_all else 'no'}")
PY

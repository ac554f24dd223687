#!/usr/bin/env bash
# Agent hints measured (issue 18): every workload family of `talaria trace
# gen` on the TP=8 server (configs/tp8-three-models.toml) and on the TP=4
# routing testbed (configs/tp4-two-workers.toml, full router), at three
# loads, with the adaptive hold and hints none / exact / noisy:2 (replay
# --hints). Prints one Markdown table with SCT p50 / p95 and TTFT p50 per
# hint mode, and whether exact hints improve SCT p95 over none and noisy:2
# stays within 2% of none.
#
#   bench/hint-matrix.sh > /tmp/hints.md        (SEED=1 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/families.sh build/hint-matrix
HINTS="none exact noisy:2"
names=()
for f in $FAMILIES; do
  gen_family "$f"
  for h in $HINTS; do
    "$B" replay ${REPLAY_FLAGS:-} -q --cluster configs/tp8-three-models.toml --trace "$OUT/$f-tp8.jsonl" --ablations talaria \
        --hold adaptive --hints "$h" --load "$LOADS" --gap-cap 300 --json "$OUT/$f-tp8-${h/:/}.json"
    "$B" replay ${REPLAY_FLAGS:-} -q --cluster configs/tp4-two-workers.toml --trace "$OUT/$f-tp4.jsonl" --ablations talaria \
        --router full --hold adaptive --hints "$h" --load "$LOADS" --gap-cap 300 --json "$OUT/$f-tp4-${h/:/}.json"
  done
  names+=("$f-tp8" "$f-tp4")
done
python3 - "$OUT" "${names[@]}" <<'PY'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
hints = ["none", "exact", "noisy2"]
print("| family / testbed | load | SCT p50: none / exact / noisy:2 | SCT p95: none / exact / noisy:2 | TTFT p50: none / exact / noisy:2 | exact p95 better | noisy:2 p95 within 2% |")
print("|---|---|---|---|---|---|---|")
for n in names:
    runs = {h: json.load(open(f"{out}/{n}-{h}.json"))["runs"] for h in hints}
    for i, r in enumerate(runs["none"]):
        row = {h: runs[h][i] for h in hints}
        p50 = [row[h]["sct_p50_s"] for h in hints]
        p95 = [row[h]["sct_p95_s"] for h in hints]
        t50 = [row[h]["ttft_p50_s"] for h in hints]
        mark = lambda b: "yes" if b else "**no**"
        print(f"| {n} | {r['load']} | " + " / ".join(f"{x:.0f}" for x in p50) + " | " +
              " / ".join(f"{x:.0f}" for x in p95) + " | " + " / ".join(f"{x:.2f}" for x in t50) +
              f" | {mark(p95[1] < p95[0])} | {mark(p95[2] <= 1.02 * p95[0])} |")
PY

#!/usr/bin/env bash
# Adaptive leases measured (issue 18): every workload family of `talaria
# trace gen` on the TP=4 routing testbed (configs/tp4-two-workers.toml, full
# router) at three loads, with fixed leases swept over tau = 0, 0.5, 1, 2, 5
# and adaptive leases (replay --lease adaptive) at tau = 1 and 5. Prints one
# Markdown table: returning-call TTFT p95 of the best fixed tau and of each
# adaptive run, the unused-lease share of tau = 1 and of each adaptive run,
# and SCT p50.
#
#   bench/lease-matrix.sh > /tmp/leases.md        (SEED=1 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/families.sh build/lease-matrix
for f in $FAMILIES; do
  gen_family "$f"
  "$B" replay ${REPLAY_FLAGS:-} -q --cluster configs/tp4-two-workers.toml --trace "$OUT/$f-tp4.jsonl" --ablations talaria \
      --router full --load "$LOADS" --gap-cap 300 --lease-sweep 0,0.5,1,2,5 --json "$OUT/$f-fixed.json"
  "$B" replay ${REPLAY_FLAGS:-} -q --cluster configs/tp4-two-workers.toml --trace "$OUT/$f-tp4.jsonl" --ablations talaria \
      --router full --load "$LOADS" --gap-cap 300 --lease adaptive --lease-sweep 1,5 --json "$OUT/$f-adaptive.json"
done
python3 - "$OUT" $FAMILIES <<'PY'
import json, sys
out, families = sys.argv[1], sys.argv[2:]
print("| family | load | returning TTFT p95: best fixed (tau) | adaptive tau 1 / 5 | unused leases: fixed tau 1 | adaptive tau 1 / 5 | SCT p50: fixed tau 1 | adaptive tau 1 / 5 |")
print("|---|---|---|---|---|---|---|---|")
for f in families:
    fixed = json.load(open(f"{out}/{f}-fixed.json"))["runs"]
    adaptive = json.load(open(f"{out}/{f}-adaptive.json"))["runs"]
    for load in dict.fromkeys(r["load"] for r in fixed):  # in the order run
        fx = [r for r in fixed if r["load"] == load]
        ad = sorted((r for r in adaptive if r["load"] == load), key=lambda r: r["tau_s"])
        best = min(fx, key=lambda r: r["returning_ttft_p95_s"])
        one = next(r for r in fx if r["tau_s"] == 1)
        cells = lambda key, fmt: " / ".join(fmt.format(r[key]) for r in ad)
        unused = " / ".join("{:.0f}%".format(100 * r["unused_lease_proxy"]) for r in ad)
        print(f"| {f} | {load} | {best['returning_ttft_p95_s']:.2f} ({best['tau_s']:g}) | "
              f"{cells('returning_ttft_p95_s', '{:.2f}')} | {100 * one['unused_lease_proxy']:.0f}% | "
              f"{unused} | "
              f"{one['sct_p50_s']:.0f} | {cells('sct_p50_s', '{:.0f}')} |")
PY

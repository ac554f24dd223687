#!/usr/bin/env bash
# The policy matrix (issue 17): every workload family of `talaria trace gen`
# replayed on the TP=4 routing testbed (two workers; every router, Talaria's
# scheduler) and on the TP=8 server (one instance; every ablation), at three
# loads. Writes one Markdown table per testbed to stdout, the JSON
# summaries under $OUT (default: build/policy-matrix) and their HTML report,
# $OUT/report.html (talaria report: every run, coloured within its trace and
# load, with CDFs).
#
#   bench/policy-matrix.sh > docs/policy-matrix-tables.md
#
# Families are replayed with a 300 s gap cap, so their tool gaps (seconds
# to minutes) are replayed as generated. Deterministic: the same tree gives
# the same tables.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/families.sh build/policy-matrix
for f in $FAMILIES; do
  gen_family "$f"
  "$B" replay ${REPLAY_FLAGS:-} -q --cluster configs/tp4-two-workers.toml --trace "$OUT/$f-tp4.jsonl" --ablations talaria \
      --router all --load "$LOADS" --gap-cap 300 --json "$OUT/$f-tp4.json"
  "$B" replay ${REPLAY_FLAGS:-} -q --cluster configs/tp8-three-models.toml --trace "$OUT/$f-tp8.jsonl" --ablations all \
      --load "$LOADS" --gap-cap 300 --json "$OUT/$f-tp8.json"
done
python3 - "$OUT" $FAMILIES <<'PY'
import json, sys
out, families = sys.argv[1], sys.argv[2:]
def table(suffix, key, title):
    print(f"\n### {title}\n")
    print("| family | load | " + key + " | calls | rejected | SCT p50 | SCT p95 | TTFT p50 | TTFT p95 | avoidable opens | opens | restore skips | gateway waits (calls / p95 s / last resort) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in families:
        runs = json.load(open(f"{out}/{f}-{suffix}.json"))["runs"]
        for r in runs:
            name = r["router"] if key == "router" else r["config"]
            print(f"| {f} | {r['load']} | {name} | {r['calls_completed']}/{r['calls_total']} | {r['rejected']} | "
                  f"{r['sct_p50_s']:.1f} | {r['sct_p95_s']:.1f} | {r['ttft_p50_s']:.2f} | {r['ttft_p95_s']:.2f} | "
                  f"{r['avoidable_opens']} | {r['model_opens']} | {r['restore_skips']} | "
                  f"{r['gateway_waited_calls']} / {r['gateway_wait_p95_s']:.1f} / {r['last_resort_placements']} |")
def invariants(suffix):
    print("\n### Invariants (TP=4 routing testbed)\n")
    print("| family | load | full completes all a baseline completes | full rejects none where every baseline completes all | full's avoidable opens ≤ every baseline's | SCT p50: full / best baseline |")
    print("|---|---|---|---|---|---|")
    for f in families:
        runs = json.load(open(f"{out}/{f}-{suffix}.json"))["runs"]
        loads = []
        for r in runs:
            if r["load"] not in loads: loads.append(r["load"])
        for load in loads:
            rs = {r["router"]: r for r in runs if r["load"] == load}
            full = rs.pop("full")
            most = max(r["calls_completed"] for r in rs.values())
            every = all(r["calls_completed"] == r["calls_total"] for r in rs.values())
            fewest = min(r["avoidable_opens"] for r in rs.values())
            best = min(rs.items(), key=lambda kv: kv[1]["sct_p50_s"])
            ok = lambda b: "yes" if b else "**no**"
            print(f"| {f} | {load} | {ok(full['calls_completed'] >= most)} | "
                  f"{ok(not every or full['rejected'] == 0)} | {ok(full['avoidable_opens'] <= fewest)} "
                  f"({full['avoidable_opens']} vs {fewest}) | "
                  f"{full['sct_p50_s']:.0f} / {best[1]['sct_p50_s']:.0f} ({best[0]}) |")
invariants("tp4")
table("tp4", "router", "TP=4 two workers (configs/tp4-two-workers.toml), Talaria's scheduler, every router")
table("tp8", "config", "TP=8 server (configs/tp8-three-models.toml), every ablation")
PY
"$B" report --summary "$OUT"/*.json -o "$OUT/report.html" --title "Talaria policy matrix (seed $SEED)" 2> /dev/null

#!/usr/bin/env bash
# The dashboard and the replay report in a real browser (Debian's headless
# Chromium, driven by playwright-core from tests/e2e/node_modules):
#  1. `talaria replay --json --records --report` on the TP=8 replay (two
#     configurations); the report must draw every chart with no JavaScript
#     error and no request off the file.
#  2. `talaria serve` (tests/e2e/browser.toml: two instances, two tenants)
#     under load from both tenants; /dashboard, opened with tenant B's key,
#     must show every instance's timeline, models and totals, and list only
#     tenant B's leases (its sessions are named b-*; tenant A's a-*).
# Screenshots: BUILD/artifacts/report.png and dashboard.png (BUILD is the
# directory of the talaria binary).
# Usage: tests/e2e/browser.sh path/to/talaria
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$dir/../.." && pwd)
chromium=${CHROMIUM:-/usr/bin/chromium}
[[ -x "$chromium" ]] || { echo "browser e2e: $chromium is missing (scripts/test.sh installs Debian's chromium)" >&2; exit 1; }
[[ -d "$dir/node_modules/playwright-core" ]] || { echo "browser e2e: playwright-core is missing (scripts/test.sh runs npm install in tests/e2e)" >&2; exit 1; }
artifacts=$(dirname "$bin")/artifacts
mkdir -p "$artifacts"
work=$(mktemp -d)
extra_cleanup() { rm -rf "$work"; }

# 1. The report.
(cd "$root" && "$bin" replay --ablations talaria,round-only --json "$work/replay.json" --records "$work/records" \
  --report "$artifacts/report.html" -q)
EXPECT_PAPER=1 node "$dir/browser_check.mjs" report "$artifacts/report.html" "$artifacts/report.png"

# 2. The dashboard under load.
source "$dir/start_server.sh"
start_server "$dir/browser.toml"
url="http://127.0.0.1:$port"
call() {  # key, session, model
  curl -sS --max-time 60 -H "Authorization: Bearer $1" -H "X-Session-Id: $2" -H 'Content-Type: application/json' \
    -d "{\"model\":\"$3\",\"max_tokens\":32,\"messages\":[{\"role\":\"user\",\"content\":\"a turn of $2\"}]}" \
    "$url/v1/chat/completions" > /dev/null
}
# Each client: a session of several turns, until the page has been read.
load() {  # key, tenant
  local i=0
  while [[ ! -e "$work/done" ]]; do
    for model in qwen3-235b-a22b glm-5-nvfp4 qwen3.5-122b-a10b; do call "$1" "$2-$model-$((i % 3))" "$model" || true; done
    i=$((i + 1))
  done
}
load operator-key a & load_a=$!
load tenant-b-key b & load_b=$!
sleep 1
status=0
EXPECT_LEASES=1 node "$dir/browser_check.mjs" dashboard "$url/dashboard" "$artifacts/dashboard.png" tenant-b-key || status=1
# While the load runs: tenant B's view lists only its own leases; the
# operator's lists both tenants' (so the check could fail).
leases() { curl -sS -H "Authorization: Bearer $1" "$url/v1/telemetry" | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const ids = Object.keys(JSON.parse(s).leases).map((k) => k.replace(/^[0-9a-f]{16}:/, "")[0]);
    console.log([...new Set(ids)].sort().join(""));
  });'; }
b_sees=$(leases tenant-b-key)
operator_sees=$(leases operator-key)
touch "$work/done"
wait "$load_a" "$load_b" || true
[[ "$b_sees" == b ]] || { echo "browser e2e: FAILED: tenant B's leases are of sessions '$b_sees' (want only b)" >&2; status=1; }
[[ "$operator_sees" == ab ]] || { echo "browser e2e: FAILED: the operator's leases are of sessions '$operator_sees' (want a and b)" >&2; status=1; }
[[ $status -eq 0 ]] || exit 1
echo "browser e2e: ok (screenshots in $artifacts)"

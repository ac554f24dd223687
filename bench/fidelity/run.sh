#!/usr/bin/env bash
# Fidelity of the sim engine against the CPU engine (docs/fidelity.md): one
# seeded session trace over two CPU catalogue models, replayed (1) in real
# time against `talaria serve` on the cpu engine, continuing sessions on the
# text it generates (--echo-output), and (2) on the sim engine with the
# profiles the instance served with, on the same one-instance cluster config.
# Prints both rows and the sim's relative error at SCT p50/p95 and TTFT p50,
# and TTFT's deciles.
# The profiles are measured first, on this machine, minutes before the run
# (`talaria profile measure`, about 4.5 minutes for both models): a shared
# machine's speed drifts (decode steps by a fifth and more from one run to
# the next, docs/fidelity.md), and the sim can only be
# as close as its profiles are to the machine of the run. Pass a directory
# as the fourth argument to use its profiles instead (profiles/ for the
# shipped ones). Both runs keep their call records, and each session's SCT
# is compared with itself across the two. The instance's own step accounting
# is printed next: each phase's measured step time against the profile
# model's for the same steps. When it measured the profiles itself, it
# measures them again after the run and prints the machine's drift and the
# sim's errors on the later profiles; a run that drifted by more than
# FIDELITY_DRIFT_MAX percent (default 3) is flagged DRIFT.
# Usage: bench/fidelity/run.sh [path/to/talaria] [sessions (default 12)] [seed (default 7)] [measure|DIR]
# Needs python3 (Debian package python3) for the comparison table.
set -euo pipefail
command -v python3 >/dev/null || { echo "run.sh: needs python3 (apt-get install python3)" >&2; exit 1; }
dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$dir/../.." && pwd)
bin=${1:-$root/build/talaria}
sessions=${2:-12}
seed=${3:-7}
profiles=${4:-measure}
tmp=$(mktemp -d)
pid=""
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# FIDELITY_OUT=DIR keeps the run's files (trace, profiles, both summaries, the
# instance's metrics) there.
keep() { [[ -n "${FIDELITY_OUT:-}" ]] && mkdir -p "$FIDELITY_OUT" && cp -r "$tmp"/. "$FIDELITY_OUT"/ || true; }
# The trace's generator flags (its models, context, session rate and gap
# cap), shared with bench/fidelity/sensitivity.py, which replays the same trace.
read -ra gen_args < "$dir/trace-gen.args"
models=()
for ((i = 0; i + 1 < ${#gen_args[@]}; i++)); do
  [[ "${gen_args[i]}" == --models ]] && IFS=, read -ra models <<< "${gen_args[i + 1]}"
done
[[ ${#models[@]} -gt 0 ]] || { echo "run.sh: $dir/trace-gen.args names no --models" >&2; exit 1; }
toml_models=$(printf '"%s", ' "${models[@]}")
toml_models="[${toml_models%, }]"
# Measures every model's profile on this machine into directory $1.
measure_profiles() {
  mkdir -p "$1"
  for m in "${models[@]}"; do
    "$bin" profile measure --engine cpu --model "$m" --hbm-gib 8 --out "$1/$m.tp1.toml" --quiet > /dev/null
  done
}
measured=""
if [[ "$profiles" == measure ]]; then
  measured=1
  profiles="$tmp/profiles"
  measure_profiles "$profiles"
fi
profiles=$(cd "$profiles" && pwd)
# The instance of configs/cpu-three-models.toml, serving the trace's models.
sed -e "s|^profiles = .*|profiles = \"$profiles\"|" \
    -e "s|^models = .*|models = $toml_models|" "$root/configs/cpu-three-models.toml" > "$tmp/cluster.toml"
"$bin" trace gen --sessions "$sessions" --seed "$seed" "${gen_args[@]}" -o "$tmp/trace.jsonl"
"$bin" trace stats "$tmp/trace.jsonl" | sed -n '2,3p'
"$bin" serve --config "$tmp/cluster.toml" --port 0 --port-file "$tmp/port" > "$tmp/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [[ -s "$tmp/port" ]] && break; sleep 0.1; done
[[ -s "$tmp/port" ]] || { echo "run.sh: the server did not start:" >&2; cat "$tmp/serve.log" >&2; exit 1; }
"$bin" replay --target "http://127.0.0.1:$(cat "$tmp/port")" --trace "$tmp/trace.jsonl" --echo-output \
    --json "$tmp/cpu.json" --records "$tmp/records" --quiet
# The instance's own account of the run: each phase's measured step time
# against the profile model's for the same steps, and the driver's time
# between steps (docs/serving.md, talaria_engine_step_seconds_total).
python3 - "http://127.0.0.1:$(cat "$tmp/port")/metrics" > "$tmp/metrics.txt" <<'PY'
import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())
PY
"$bin" replay --cluster "$tmp/cluster.toml" --trace "$tmp/trace.jsonl" --ablations talaria \
    --json "$tmp/sim.json" --records "$tmp/records" --quiet
# Drift: the profiles measured again once the run is over (the server
# stopped first, so nothing competes), and the sim replayed on those too. A
# machine that changed speed during the run shows here, with how far the
# sim's errors move between the two sets of profiles, and a run whose
# machine drifted by more than FIDELITY_DRIFT_MAX percent (default 3) is
# flagged rather than counted.
if [[ -n "$measured" ]]; then
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
  measure_profiles "$tmp/profiles-after"
  sed -e "s|^profiles = .*|profiles = \"$tmp/profiles-after\"|" "$tmp/cluster.toml" > "$tmp/cluster-after.toml"
  "$bin" replay --cluster "$tmp/cluster-after.toml" --trace "$tmp/trace.jsonl" --ablations talaria \
      --json "$tmp/sim-after.json" --quiet
fi
python3 - "$tmp/cpu.json" "$tmp/sim.json" "$tmp/metrics.txt" "$tmp/records/http/calls.jsonl" \
    "$tmp/records/talaria/calls.jsonl" "${measured:+$tmp/sim-after.json}" "$profiles" "$tmp/profiles-after" \
    "${FIDELITY_DRIFT_MAX:-3}" <<'PY'
import glob, json, math, os, re, sys, tomllib
cpu = json.load(open(sys.argv[1]))["runs"][0]
sim = json.load(open(sys.argv[2]))["runs"][0]
for name, run in (("cpu", cpu), ("sim", sim)):
    if run["calls_completed"] != run["calls_total"]:  # a comparison of different calls says nothing
        sys.exit("run.sh: the %s run completed %d of %d calls (refused or lost: %s)" %
                 (name, run["calls_completed"], run["calls_total"], run.get("rejected_by_reason", {})))
keys = [("sct_p50_s", "SCT p50"), ("sct_p95_s", "SCT p95"), ("ttft_p50_s", "TTFT p50"), ("ttft_p95_s", "TTFT p95")]
print("%-10s %10s %10s %10s" % ("metric", "cpu (s)", "sim (s)", "sim err"))
for k, name in keys:
    print("%-10s %10.2f %10.2f %+9.1f%%" % (name, cpu[k], sim[k], 100 * (sim[k] - cpu[k]) / cpu[k]))
print("calls      %10d %10d" % (cpu["calls_completed"], sim["calls_completed"]))
# TTFT's median sits where calls stop entering at the next decode boundary
# and start waiting for a slot, where the distribution is steepest; its
# deciles say whether the whole distribution moved or only the median.
def q(run, p):
    v = run["ttft_quantiles_s"]
    return v[round(p * (len(v) - 1))]
deciles = [(q(sim, d / 10) - q(cpu, d / 10)) / q(cpu, d / 10) for d in range(1, 10)]
print("TTFT deciles p10-p90, sim err: " + " ".join("%+.0f%%" % (100 * e) for e in deciles) +
      "  (mean |err| %.1f%%)" % (100 * sum(abs(e) for e in deciles) / len(deciles)))
print("TTFT p45/p50/p55 (s): cpu %.2f/%.2f/%.2f, sim %.2f/%.2f/%.2f" %
      tuple([q(cpu, p) for p in (0.45, 0.5, 0.55)] + [q(sim, p) for p in (0.45, 0.5, 0.55)]))
# Session by session, from both runs' call records: statistics that agree
# because each session does, or because errors cancel out?
def scts(path):
    span = {}
    for line in open(path):
        j = json.loads(line)
        a = span.setdefault(j["session_id"], [float("inf"), 0.0])
        a[0], a[1] = min(a[0], j["intended_enqueue_s"]), max(a[1], j["finished_s"])
    return {s: end - begin for s, (begin, end) in span.items()}
real, model = scts(sys.argv[4]), scts(sys.argv[5])
both = sorted(s for s in real if s in model and real[s] > 0)
errs = sorted(abs(model[s] - real[s]) / real[s] for s in both)
if errs:
    xs, ys = [real[s] for s in both], [model[s] for s in both]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    cov = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sd = (sum((x - mx) ** 2 for x in xs) * sum((y - my) ** 2 for y in ys)) ** 0.5
    print("SCT per session (%d): |sim err| median %.1f%%, p90 %.1f%%, within 5%%: %d%%; correlation %.3f" %
          (len(errs), 100 * errs[len(errs) // 2], 100 * errs[int(0.9 * (len(errs) - 1))],
           round(100 * sum(e <= 0.05 for e in errs) / len(errs)), cov / sd if sd else 0))
steps, secs, driver = {}, {}, {}
for line in open(sys.argv[3]):
    m = re.match(r'(talaria_engine_steps_total|talaria_engine_step_seconds_total|talaria_driver_\w+)\{([^}]*)\} (\S+)', line)
    if not m:
        continue
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
    v = float(m.group(3))
    if m.group(1) == "talaria_engine_steps_total":
        steps[labels["phase"]] = steps.get(labels["phase"], 0) + v
    elif m.group(1) == "talaria_engine_step_seconds_total":
        key = (labels["phase"], labels["source"])
        secs[key] = secs.get(key, 0) + v
    else:
        driver[m.group(1)] = driver.get(m.group(1), 0) + v
print("\ncpu engine steps against the profile model (the instance's /metrics)")
print("%-16s %7s %12s %12s %8s" % ("phase", "steps", "measured (s)", "model (s)", "model"))
for phase in ("prefill", "session_prefill", "decode", "switch"):
    n, meas, mod = steps.get(phase, 0), secs.get((phase, "measured"), 0), secs.get((phase, "model"), 0)
    if n:
        print("%-16s %7d %12.2f %12.2f %+7.1f%%" % (phase, n, meas, mod, 100 * (mod - meas) / meas if meas else 0))
b, bs = driver.get("talaria_driver_boundaries_total", 0), driver.get("talaria_driver_boundary_seconds_total", 0)
if b:
    print("driver between steps: %d boundaries, %.2f s, %.0f us each" % (b, bs, 1e6 * bs / b))
# The machine's drift over the run: each profile table's points measured
# after the run over before, as a geometric mean per table and model.
after_json, before_dir, after_dir, drift_max = sys.argv[6], sys.argv[7], sys.argv[8], float(sys.argv[9])
if after_json:
    def points(table):
        out = []
        for v in table:
            out.extend(points(v) if isinstance(v, list) else [v])
        return out
    print("\nmachine drift over the run (profiles measured after / before, geometric mean of each table's points)")
    worst = 0.0
    for before in sorted(glob.glob(os.path.join(before_dir, "*.toml"))):
        after = os.path.join(after_dir, os.path.basename(before))
        b, a = tomllib.load(open(before, "rb")), tomllib.load(open(after, "rb"))
        cells = []
        for table in ("prefill", "prefill_cached", "decode"):
            pairs = [(x, y) for x, y in zip(points(b[table]["seconds"]), points(a[table]["seconds"])) if x > 0 and y > 0]
            r = math.exp(sum(math.log(y / x) for x, y in pairs) / len(pairs)) - 1
            worst = max(worst, abs(r))
            cells.append("%s %+.1f%%" % (table, 100 * r))
        print("  %-10s %s" % (b["model"]["name"], ", ".join(cells)))
    after_run = json.load(open(after_json))["runs"][0]
    print("sim on the profiles measured after the run: " + ", ".join(
        "%s %+.1f%%" % (name, 100 * (after_run[k] - cpu[k]) / cpu[k]) for k, name in keys[:3]))
    if worst * 100 > drift_max:
        print("DRIFT: the machine's step times moved by up to %.1f%% over the run (more than %.0f%%): the sim "
              "cannot follow a machine that changed speed, and this run does not count towards the fidelity "
              "target" % (100 * worst, drift_max))
    else:
        print("drift within %.0f%%: the run counts" % drift_max)
PY
keep

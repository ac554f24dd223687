#!/usr/bin/env python3
"""How far the fidelity trace's own medians move when the step times move a little.

bench/fidelity/run.sh compares the sim engine with the CPU engine on one
seeded trace. Two runs of the real system never see exactly the same step
times (a shared machine drifts by several percent between runs,
docs/fidelity.md), so a comparison is only as telling as the trace's
statistics are stable under such changes. This replays the same trace on
the sim engine many times, each time with every model's prefill, cached-
prefill and decode tables scaled by its own factor drawn uniformly from
[1 - spread, 1 + spread], and prints how far SCT p50, SCT p95 and TTFT p50
move from the unscaled replay. A statistic that moves by more than a target
under a spread smaller than the machine's own drift cannot be held to that
target by any simulator on that trace.

The trace is generated as run.sh generates it, from the flags in
bench/fidelity/trace-gen.args (two CPU catalogue models, 1,024-token
contexts, 0.3 sessions/s, gaps capped at 2 s); the profiles are the shipped
ones (profiles/). The sim engine replays take seconds.

Usage: bench/fidelity/sensitivity.py [--talaria build/talaria] [--sessions 12,48,192]
       [--seed 7] [--spread 0.01] [--draws 40]
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile

PHASES = ("prefill", "prefill_cached", "decode")  # the profile tables the scale applies to
# run.sh's trace generator flags, and the models they name.
GEN_ARGS = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "trace-gen.args")).read().split()
MODELS = tuple(GEN_ARGS[GEN_ARGS.index("--models") + 1].split(","))
STATS = (("sct_p50_s", "SCT p50"), ("sct_p95_s", "SCT p95"), ("ttft_p50_s", "TTFT p50"))


def scale_tables(text, factors):
    """The profile with each phase's `seconds` array (one line or several) scaled."""
    out, section, in_seconds = [], None, False
    for line in text.split("\n"):
        header = re.match(r"\[([\w.]+)\]", line)
        if header:
            section = header.group(1)
        factor = factors.get(section)
        if factor is not None and (line.startswith("seconds") or in_seconds):
            in_seconds = not line.split("#")[0].rstrip().endswith("]")
            body, _, comment = line.partition("#")
            body = re.sub(r"(?<![\w.])(\d+\.?\d*(?:[eE][-+]?\d+)?)", lambda m: repr(float(m.group(1)) * factor), body)
            line = body + ("#" + comment if comment else "")
        out.append(line)
    return "\n".join(out)


def replay(talaria, root, trace, profiles_dir, work):
    cluster = profiles_dir + ".cluster.toml"  # beside, not in, the profiles directory
    cfg = open(os.path.join(root, "configs", "cpu-three-models.toml")).read()
    cfg = re.sub(r"(?m)^profiles = .*", 'profiles = "%s"' % profiles_dir, cfg)
    cfg = re.sub(r"(?m)^models = .*", "models = [%s]" % ", ".join('"%s"' % m for m in MODELS), cfg)
    open(cluster, "w").write(cfg)
    out = os.path.join(work, "sim.json")
    subprocess.run([talaria, "replay", "--cluster", cluster, "--trace", trace, "--ablations", "talaria", "--json", out,
                    "--quiet"], check=True, capture_output=True)
    return json.load(open(out))["runs"][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    ap.add_argument("--talaria", default=os.path.join(root, "build", "talaria"))
    ap.add_argument("--sessions", default="12,48,192", help="comma list of trace sizes")
    ap.add_argument("--seed", type=int, default=7, help="the trace's seed (run.sh's default)")
    ap.add_argument("--spread", type=float, default=0.01, help="each factor is drawn from [1-spread, 1+spread]")
    ap.add_argument("--draws", type=int, default=40)
    ap.add_argument("--target", type=float, default=5.0, help="percent: counts the draws that move a statistic more")
    a = ap.parse_args()
    rng = random.Random(1)
    print("spread ±%.1f%% per model and phase, %d draws, trace seed %d" % (100 * a.spread, a.draws, a.seed))
    print("%8s %7s %9s  %s" % ("sessions", "calls", "span (s)",
                               "  ".join("%-28s" % ("%s: range, draws > %g%%" % (n, a.target)) for _, n in STATS)))
    with tempfile.TemporaryDirectory() as work:
        for sessions in (int(s) for s in a.sessions.split(",")):
            trace = os.path.join(work, "trace-%d.jsonl" % sessions)
            subprocess.run([a.talaria, "trace", "gen", "--sessions", str(sessions), "--seed", str(a.seed)] + GEN_ARGS +
                           ["-o", trace], check=True, capture_output=True)
            runs = []
            for k in range(a.draws + 1):  # draw 0: unscaled
                d = os.path.join(work, "p%d-%d" % (sessions, k))
                os.makedirs(d)
                for model in MODELS:
                    src = open(os.path.join(root, "profiles", model + ".tp1.toml")).read()
                    factors = {p: 1.0 if k == 0 else 1 + rng.uniform(-a.spread, a.spread) for p in PHASES}
                    open(os.path.join(d, model + ".tp1.toml"), "w").write(scale_tables(src, factors))
                runs.append(replay(a.talaria, root, trace, d, d))
            base = runs[0]
            cells = []
            for key, _ in STATS:
                moved = [100 * (r[key] - base[key]) / base[key] for r in runs[1:]]
                cells.append("%+6.1f%% .. %+6.1f%%, %2d of %-2d" % (min(moved), max(moved),
                                                                  sum(abs(m) > a.target for m in moved), len(moved)))
            print("%8d %7d %9.0f  %s" % (sessions, base["calls_completed"], base["makespan_s"], "  ".join(
                "%-28s" % c for c in cells)), flush=True)


if __name__ == "__main__":
    sys.exit(main())

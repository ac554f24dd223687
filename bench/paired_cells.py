#!/usr/bin/env python3
"""Issue 18's per-cell targets, tested across seeds (called by bench/seed-means.sh).

One seed's cell (a family, testbed and load) moves by several percent when
nothing that should matter changes (docs/policy-matrix.md "Noise floor"),
so a single seed cannot say whether a policy is within 1% of another. Over
n seeds the runs are paired (every configuration replays the same trace of
a seed), so each cell's log ratio candidate / comparator has a mean and a
standard error, and a 95% confidence interval (Student's t, n - 1 degrees
of freedom). Against a margin (the target's "no worse by more than m"):

  met       the interval lies at or below log(1 + m)
  missed    the interval lies above log(1 + m)
  open      the interval straddles it: more seeds are needed to say

The comparator "the best of several" is, per cell, the one with the lowest
geometric mean over the seeds, chosen after the fact: that favours the
comparator (its luck is in its mean), so "met" against it is conservative.

  bench/paired_cells.py hold|hint|lease PREFIX SEED...
"""
import glob
import json
import math
import os
import sys

# Two-sided 95% Student t quantiles by degrees of freedom.
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 24: 2.064, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t95(df):
    return _T95[max(k for k in _T95 if k <= df)] if df < 120 else 1.960


def interval(logs):
    """Mean and 95% half-width of a list of paired log ratios."""
    n = len(logs)
    mean = sum(logs) / n
    if n < 2:
        return mean, float("inf")
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    return mean, t95(n - 1) * sd / math.sqrt(n)


def verdict(logs, margin):
    mean, half = interval(logs)
    bound = math.log1p(margin)
    state = "met" if mean + half <= bound else "missed" if mean - half > bound else "open"
    return state, f"{math.exp(mean):.3f} [{math.exp(mean - half):.3f}, {math.exp(mean + half):.3f}]"


def runs(path):
    return json.load(open(path))["runs"]


def against(cand, others, seeds, key, margin):
    """Candidate's runs against the best of `others` (dicts seed -> run) on `key`."""
    # Seeds where every run has the measure (a share of 0, say, has no log).
    seeds = [s for s in seeds
             if s in cand and cand[s][key] > 0 and all(s in o and o[s][key] > 0 for o in others.values())]
    if not seeds:
        return "-", ("open", "no runs with a positive value")
    means = {c: sum(math.log(o[s][key]) for s in seeds) / len(seeds) for c, o in others.items()}
    best = min(means, key=means.get)
    return best, verdict([math.log(cand[s][key] / others[best][s][key]) for s in seeds], margin)


def table(header, rows, tested):
    """Prints rows and, for each column index in `tested`, how many cells are met / missed / open."""
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for i in tested:
        tally = {s: sum(row[i].startswith(s) for row in rows) for s in ("met", "missed", "open")}
        print(f"- {header[i]}: " + ", ".join(f"{n} {s}" for s, n in tally.items()) + f" of {len(rows)}")
    print()


def load_runs(prefix, seeds, configs, skip=""):
    """{(cell name, load): {config: {seed: run}}} from <prefix>-<seed>/<name>-<config>.json,
    the names found by the first config's files (those starting with `skip` left out)."""
    data = {}
    for seed in seeds:
        for path in sorted(glob.glob(f"{prefix}-{seed}/*-{configs[0]}.json")):
            base = path[: -len(f"-{configs[0]}.json")]
            name = os.path.basename(base)
            if skip and name.startswith(skip):
                continue
            for c in configs:
                for r in runs(f"{base}-{c}.json"):
                    data.setdefault((name, r["load"]), {}).setdefault(c, {})[seed] = r
    return data


def hold(prefix, seeds):
    configs = ("fixed", "none", "nosp", "adaptive")
    # swe-fixed-30: the shipped trace does not change with the seed.
    data = load_runs(prefix, seeds, configs, skip="swe")
    rows = []
    for (name, load), by in sorted(data.items()):
        row = [name, load]
        for key in ("sct_p50_s", "sct_p95_s"):
            best, (state, text) = against(by["adaptive"], {c: by[c] for c in configs[:-1]}, seeds, key, 0.01)
            row.append(f"{state} {text} vs {best}")
        rows.append(row)
    print(f"Adaptive hold against the best of fixed / none / no-sp per cell, over {len(seeds)} seeds "
          "(ratio of geometric means [95% interval]; target: no worse by more than 1%):")
    print()
    table(["family / testbed", "load", "SCT p50", "SCT p95"], rows, (2, 3))


def hint(prefix, seeds):
    data = load_runs(prefix, seeds, ("none", "exact", "noisy2"))
    rows = []
    for (name, load), by in sorted(data.items()):
        _, (exact, etext) = against(by["exact"], {"none": by["none"]}, seeds, "sct_p95_s", 0.0)
        _, (noisy, ntext) = against(by["noisy2"], {"none": by["none"]}, seeds, "sct_p95_s", 0.02)
        rows.append([name, load, f"{exact} {etext}", f"{noisy} {ntext}"])
    print(f"Hints against none per cell, SCT p95, over {len(seeds)} seeds (ratio of geometric means [95% interval]; "
          "targets: exact improves on long-gap-tools, noisy:2 no worse by more than 2%):")
    print()
    table(["family / testbed", "load", "exact / none", "noisy:2 / none"], rows, (2, 3))


def unused_leases(run):
    """Leases installed and never consumed, counted: a share reads 100% for a
    rule that installed one lease and lost it where tau = 1 lost thousands
    (chat-paced, whose gaps outlast any lease)."""
    return run["leases_installed"] - run["leases_consumed"]


def lease(prefix, seeds):
    data = {}
    for seed in seeds:
        for path in sorted(glob.glob(f"{prefix}-{seed}/*-fixed.json")):
            family = os.path.basename(path)[: -len("-fixed.json")]
            for kind in ("fixed", "adaptive"):
                for r in runs(path.replace("-fixed.json", f"-{kind}.json")):
                    if kind == "adaptive" and r["tau_s"] != 5:
                        continue
                    label = "adaptive" if kind == "adaptive" else f"tau {r['tau_s']:g}"
                    data.setdefault((family, r["load"]), {}).setdefault(label, {})[seed] = r
    rows = []
    for (family, load), by in sorted(data.items()):
        fixed = {k: v for k, v in by.items() if k != "adaptive"}
        best, (state, text) = against(by["adaptive"], fixed, seeds, "returning_ttft_p95_s", 0.0)
        paired = [s for s in seeds if s in by["adaptive"] and s in by["tau 1"]]
        fewer = sum(unused_leases(by["adaptive"][s]) < unused_leases(by["tau 1"][s]) for s in paired)
        rows.append([family, load, f"{state} {text} vs {best}", f"{fewer} of {len(paired)}"])
    print(f"Adaptive leases (cap 5) per cell over {len(seeds)} seeds (ratio of geometric means [95% interval]; "
          "targets: returning-call TTFT p95 matches or beats the best fixed tau, fewer unused leases than tau = 1):")
    print()
    header = ["family", "load", "returning TTFT p95 / best fixed", "seeds with fewer unused leases than tau 1"]
    table(header, rows, (2,))


if __name__ == "__main__":
    matrix, prefix, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
    {"hold": hold, "hint": hint, "lease": lease}[matrix](prefix, seeds)

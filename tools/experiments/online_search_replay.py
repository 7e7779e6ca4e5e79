#!/usr/bin/env python3
"""Replays decision rules of the online slice-size search on recorded iteration times.

The online search (p3/core/slice_search.h) times a few candidate slice sizes for 3 iterations
each and keeps the fastest. Whether 3 iterations can pick well depends on how iteration
times vary on the host. This tool answers it offline, from real runs at fixed sizes
(docs/results/online_search/online_search_iterations.csv: worker 0's time per iteration in 45 ResNet-50
runs of 100 iterations, 5 sizes x 3 rates x 3 repetitions), without running anything:

- per rate, how iteration times vary: the coefficient of variation of one iteration, of
  the mean of 3 consecutive ones, and the lag-1 autocorrelation (negative: a long
  iteration tends to be followed by a short one);
- per rule and start, the expected throughput of the size the rule chooses, divided by the
  best fixed size's, over many replays. A replay draws, for each candidate, a window of
  consecutive iterations at a random place in a random run at the size nearest to it (in
  log scale), as the search would time it, and applies the rule.

The "true" throughput of a size is iterations per second over all its runs (iterations
from 5 on). Runs at different times share no machine state, so the replays are, if
anything, noisier than a search whose candidates run back to back.

  /usr/bin/python3 tools/experiments/online_search_replay.py [--csv=...] [--replays=4000] \
      [--seed=1] > docs/results/online_search/online_search_replay.md
"""
import argparse
import collections
import math
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths  # noqa: E402

GRID_MIN, GRID_MAX = 10000, 1000000
SKIP = 5  # first iterations of a run left out (start-up)


def load(path):
    runs = collections.defaultdict(list)  # run -> [(iteration, seconds)]
    meta = {}
    for row in csv_io.read_rows(path):
        runs[row["run"]].append((int(row["iteration"]), float(row["seconds"])))
        meta[row["run"]] = (float(row["bandwidth_gbps"]), int(row["slice_params"]))
    traces = collections.defaultdict(list)  # (rate, size) -> [seconds per iteration]
    for run, its in runs.items():
        its.sort()
        traces[meta[run]].append([s for i, s in its if i >= SKIP])
    return traces


def lag1(x):
    m = statistics.mean(x)
    den = sum((v - m) ** 2 for v in x)
    return sum((x[i] - m) * (x[i + 1] - m) for i in range(len(x) - 1)) / den if den else 0


def window_cv(traces, k):
    """Median over runs of the coefficient of variation of k-iteration window means."""
    cvs = []
    for t in traces:
        w = [statistics.mean(t[i:i + k]) for i in range(0, len(t) - k + 1, k)]
        cvs.append(statistics.pstdev(w) / statistics.mean(w))
    return statistics.median(cvs)


def clamp(size):
    return max(GRID_MIN, min(GRID_MAX, size))


# Each rule: (candidates as multiples of the start, statistic of a window, margin rule).
RULES = {
    "median, start's spread, x1 x4 x1/4 (until 2026-12-01)":
        ([1, 4, 0.25], statistics.median, "spread"),
    "mean, 2 %, x1 x4 x1/4": ([1, 4, 0.25], statistics.mean, 0.02),
    "mean, 2 %, x1 x2 x4 x1/2 (now)": ([1, 2, 4, 0.5], statistics.mean, 0.02),
    "mean, 0 %, x1 x2 x4 x1/2": ([1, 2, 4, 0.5], statistics.mean, 0.0),
}


def choose(rule, start, measure):
    mults, stat, margin_rule = rule
    candidates = []
    for m in mults:
        c = clamp(int(start * m))
        if c not in candidates:
            candidates.append(c)
    windows = {c: measure(c) for c in candidates}
    value = {c: stat(w) for c, w in windows.items()}
    best = min(candidates, key=lambda c: value[c])
    if margin_rule == "spread":
        w = windows[start]
        margin = max(0.01, (max(w) - min(w)) / (2 * statistics.median(w)))
    else:
        margin = margin_rule
    return best if best != start and 1 - value[best] / value[start] > margin else start


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv",
                    default=paths.results("online_search", "online_search_iterations.csv"))
    ap.add_argument("--replays", type=int, default=4000)
    ap.add_argument("--window", type=int, default=3, help="iterations timed per candidate")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    traces = load(a.csv)
    rates = sorted({r for r, _ in traces})
    rng = random.Random(a.seed)

    print("## How iteration times vary (per rate, median over the runs of all sizes)\n")
    print("| Gbit/s | runs | CV of one iteration | CV of a 3-iteration mean | lag-1 autocorrelation |")
    print("|---|---:|---:|---:|---:|")
    for r in rates:
        ts = [t for (rr, _), v in traces.items() if rr == r for t in v]
        cv1 = statistics.median(statistics.pstdev(t) / statistics.mean(t) for t in ts)
        print(f"| {r:g} | {len(ts)} | {cv1:.3f} | {window_cv(ts, 3):.3f} | "
              f"{statistics.median(lag1(t) for t in ts):+.2f} |")

    print(f"\n## Chosen size's throughput ÷ best fixed size's: mean (10th percentile) of "
          f"{a.replays} replays, {a.window} iterations per candidate\n")
    starts = [40000, 80000, 160000]
    header = " | ".join(f"{r:g} Gbit/s from {s // 1000}k" for r in rates for s in starts)
    print(f"| rule | {header} | worst mean |")
    print("|---|" + "---:|" * (len(rates) * len(starts) + 1))
    for name, rule in RULES.items():
        cells, worst = [], 1.0
        for r in rates:
            sizes = sorted(s for rr, s in traces if rr == r)
            true = {s: 1 / statistics.mean([v for t in traces[(r, s)] for v in t]) for s in sizes}
            best = max(true.values())
            nearest = lambda c: min(sizes, key=lambda s: abs(math.log(s / c)))

            def measure(c):
                t = rng.choice(traces[(r, nearest(c))])
                p = rng.randrange(0, len(t) - a.window + 1)
                return t[p:p + a.window]

            for s in starts:
                got = sorted(true[nearest(choose(rule, s, measure))] / best
                             for _ in range(a.replays))
                mean = statistics.mean(got)
                worst = min(worst, mean)
                cells.append(f"{mean:.3f} ({got[len(got) // 10]:.3f})")
        print(f"| {name} | " + " | ".join(cells) + f" | {worst:.3f} |")


if __name__ == "__main__":
    main()

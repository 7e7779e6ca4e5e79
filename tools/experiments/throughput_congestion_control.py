#!/usr/bin/env python3
"""The tables of docs/results/throughput/throughput.md, "TCP congestion control": the runs
of tools/bench_throughput.py under two TCP congestion controls, side by side.

  /usr/bin/python3 tools/experiments/throughput_congestion_control.py \\
      docs/results/throughput/congestion_control_2026-12-02_raw.csv
  /usr/bin/python3 tools/experiments/throughput_congestion_control.py \\
      --column=host_congestion_control \\
      docs/results/throughput/congestion_control_host_2026-12-02_raw.csv

Per model, bandwidth and mode: the median samples/s under each congestion control (min –
max over the runs) and their ratio; then per model and bandwidth P3 ÷ baseline, P3 ÷ DDP
and P3 ÷ the bandwidth bound under each.
"""
import argparse
import collections
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import models, raw_csv  # noqa: E402

MODELS = ["resnet50", "seq2seq_lstm", "vgg19"]
MODES = ["p3", "baseline", "ddp"]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="raw.csv files of bench_throughput.py run")
    ap.add_argument("--column", default="congestion_control",
                    help="the column naming each run's congestion control")
    a = ap.parse_args()
    runs = collections.defaultdict(list)  # (model, Gbit/s, mode, congestion control)
    batch = {}
    for path in a.csv:
        for r in raw_csv.read_finished(path):
            if not r[a.column]:
                continue  # a run without a network (`local`)
            key = (r["model"], float(r["bandwidth_gbps"]), r["mode"], r[a.column])
            runs[key].append(raw_csv.samples(r))
            batch[r["model"]] = int(r["batch_per_worker"])
    ccs = sorted({k[3] for k in runs})
    if len(ccs) != 2:
        sys.exit(f"expected runs under two congestion controls, found {ccs}")
    first, second = ccs
    med = {k: statistics.median(v) for k, v in runs.items()}

    def cell(v):
        return f"{statistics.median(v):.2f} ({min(v):.2f} – {max(v):.2f})"

    points = sorted({(k[0], k[1]) for k in runs}, key=lambda p: (MODELS.index(p[0])
                                                                if p[0] in MODELS else 99, p))
    print(f"| model | Gbit/s | mode | {first} | {second} | {second} ÷ {first} |")
    print("|---|---:|---|---:|---:|---:|")
    for m, bw in points:
        for mode in MODES:
            x, y = runs.get((m, bw, mode, first)), runs.get((m, bw, mode, second))
            if x and y:
                print(f"| {m} | {bw:g} | {mode} | {cell(x)} | {cell(y)} | "
                      f"{statistics.median(y) / statistics.median(x):.2f} |")
    print()
    print(f"| model | Gbit/s | P3 ÷ baseline, {first} | {second} | P3 ÷ DDP, {first} | {second} | "
          f"P3 ÷ bound, {first} | {second} |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for m, bw in points:
        if (m, bw, "p3", first) not in med or (m, bw, "p3", second) not in med:
            continue
        bound = models.bandwidth_bound(m, bw, batch[m])

        def ratio(mode, cc):
            return (f"{med[(m, bw, 'p3', cc)] / med[(m, bw, mode, cc)]:.2f}"
                    if (m, bw, mode, cc) in med else "–")
        print(f"| {m} | {bw:g} | {ratio('baseline', first)} | {ratio('baseline', second)} | "
              f"{ratio('ddp', first)} | {ratio('ddp', second)} | "
              f"{med[(m, bw, 'p3', first)] / bound:.2f} | {med[(m, bw, 'p3', second)] / bound:.2f} |")
    counts = sorted({len(v) for v in runs.values()})
    print(f"\n{sum(len(v) for v in runs.values())} runs; runs per point: "
          f"{', '.join(map(str, counts))}")


if __name__ == "__main__":
    main()

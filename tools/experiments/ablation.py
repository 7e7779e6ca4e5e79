#!/usr/bin/env python3
"""The ablation table of docs/results/throughput/ablation.md from a bench_throughput raw CSV:
median samples/s per mode, and each mode against the baseline and against p3.

  /usr/bin/python3 tools/experiments/ablation.py docs/results/throughput/ablation_raw.csv
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import raw_csv  # noqa: E402

ORDER = ["baseline", "slicing_only", "priority_only", "values_only", "p3",
         "no_backward_overlap", "no_forward_overlap", "no_overlap"]
WHAT = {"baseline": "whole tensors, FIFO, ack + pull, overlap",
        "slicing_only": "baseline + slices",
        "priority_only": "baseline + priority order", "values_only": "baseline + values on push",
        "p3": "slices + priority + values on push + overlap",
        "no_backward_overlap": "p3, gradients sent after backward",
        "no_forward_overlap": "p3, forward waits for all values",
        "no_overlap": "p3 without either overlap"}


def table(rows):
    """The page's table of the finished runs in `rows` (baseline and p3 must be there)."""
    by_mode = raw_csv.group(rows, lambda r: r["mode"])
    med = {m: (statistics.median(v), min(v), max(v), len(v))
           for m in ORDER for v in [by_mode.get(m)] if v}
    base, p3 = med["baseline"][0], med["p3"][0]
    lines = ["| mode | what differs | samples/s (median, min–max) | runs | ÷ baseline | ÷ p3 |",
             "|---|---|---:|---:|---:|---:|"]
    for m in ORDER:
        if m in med:
            s, lo, hi, n = med[m]
            lines.append(f"| `{m}` | {WHAT[m]} | {s:.1f} ({lo:.1f}–{hi:.1f}) | {n} | "
                         f"{s / base:.2f} | {s / p3:.2f} |")
    loads = [float(r["load1"]) for r in rows]
    lines += ["", f"load1 at the start of the runs: {min(loads):.1f}–{max(loads):.1f}"]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("raw", help="a raw.csv of tools/bench_throughput.py with every mode's runs")
    print(table(raw_csv.read_finished(ap.parse_args().raw)))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The ablation table of docs/results/ablation.md from a bench_throughput raw CSV:
median samples/s per mode, and each mode against the baseline and against p3.

  /usr/bin/python3 tools/ablation_table.py docs/results/ablation_raw.csv
"""
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok"]
order = ["baseline", "slicing_only", "priority_only", "values_only", "p3",
         "no_backward_overlap", "no_forward_overlap", "no_overlap"]
med = {}
for m in order:
    v = [float(r["samples_per_second"]) for r in rows if r["mode"] == m]
    if v:
        med[m] = (statistics.median(v), min(v), max(v), len(v))
base = med["baseline"][0]; p3 = med["p3"][0]
print("| mode | what differs | samples/s (median, min–max) | runs | ÷ baseline | ÷ p3 |")
print("|---|---|---:|---:|---:|---:|")
what = {"baseline": "whole tensors, FIFO, ack + pull, overlap", "slicing_only": "baseline + slices",
        "priority_only": "baseline + priority order", "values_only": "baseline + values on push",
        "p3": "slices + priority + values on push + overlap", "no_backward_overlap": "p3, gradients sent after backward",
        "no_forward_overlap": "p3, forward waits for all values", "no_overlap": "p3 without either overlap"}
for m in order:
    if m in med:
        s, lo, hi, n = med[m]
        print(f"| `{m}` | {what[m]} | {s:.1f} ({lo:.1f}–{hi:.1f}) | {n} | {s / base:.2f} | {s / p3:.2f} |")
loads = [float(r["load1"]) for r in rows]
print(f"\nload1 at the start of the runs: {min(loads):.1f}–{max(loads):.1f}")

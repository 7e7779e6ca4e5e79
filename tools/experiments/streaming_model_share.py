#!/usr/bin/env python3
"""How much of the streaming benchmark's host CPU per GB is its model's, not the data
path's (docs/results/streaming/streaming.md, "The benchmark's model in the CPU per GB").

bench_streaming's worker trains a synthetic model whose forward pass takes a mean of every
parameter and whose backward pass writes every gradient (tools/bench_streaming_main.cc):
work on the worker's training thread, which the benchmark times on its own
(`worker_training_thread_cpu_s`). The issue's CPU target counts everything on the host
(`host_cpu_s_per_gb`, softirq included); this splits it, per run, into the training
thread's CPU per GB and the rest, and sets the rest against iperf3's host CPU per GB on
the same link. Per rate (and slice size), medians (min - max) of the runs; the
shared-memory runs are left out (their training thread also copies every gradient into
the shared region, a pass of the data path).

  /usr/bin/python3 tools/experiments/streaming_model_share.py docs/results/streaming/streaming_2026-12-07.csv
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, raw_csv  # noqa: E402
from streaming_shared_memory import is_shared, path_of  # noqa: E402


def per_run(row):
    """(host CPU s per GB, the training thread's s per GB, the rest ÷ iperf3's) of one run;
    None for a run without iperf3's host CPU or without the thread's time."""
    gb = (float(row["bytes_sent"]) + float(row["bytes_received"])) / 1e9
    if gb <= 0 or not row.get("iperf3_host_cpu_s_per_gb") or \
            not row.get("worker_training_thread_cpu_s"):
        return None
    host = float(row["host_cpu_s_per_gb"])
    model = float(row["worker_training_thread_cpu_s"]) / gb
    return host, model, (host - model) / float(row["iperf3_host_cpu_s_per_gb"])


def cell(values, f=".2f"):
    """'median (min – max)' of the values given (None left out); '–' where none are."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    return f"{statistics.median(values):{f}} ({min(values):{f}} – {max(values):{f}})"


def table(rows):
    groups = {}
    for r in rows:
        v = None if is_shared(r) else per_run(r)
        if v is not None:
            slices = int(float(r.get("slice_params") or raw_csv.DEFAULT_SLICE_PARAMS))
            key = (float(r["rate_gbps"]), slices, path_of(r))
            groups.setdefault(key, []).append((v, float(r["cpu_ratio_to_iperf3"])))

    lines = ["| link | slices of | host CPU s per GB | of it the model's training thread | "
             "p3 ÷ iperf3 host CPU, all in | **the rest ÷ iperf3's** | runs |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for (rate, slices, link), vs in sorted(groups.items(), key=lambda kv: (kv[0][0] == 0, kv[0])):
        lines.append(f"| {link} | {slices:,} | "
                     f"{cell([v[0][0] for v in vs])} | {cell([v[0][1] for v in vs])} | "
                     f"{cell([v[1] for v in vs])} | **{cell([v[0][2] for v in vs])}** | "
                     f"{len(vs)} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="bench_streaming.py CSVs")
    a = ap.parse_args()
    rows = [r for path in a.csv for r in csv_io.read_rows(path)]
    print("\n".join(table(rows)))


if __name__ == "__main__":
    main()

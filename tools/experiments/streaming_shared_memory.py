#!/usr/bin/env python3
"""The colocated shared-memory path (docs/results/streaming/streaming.md, "The shared-memory
path"): tables from bench_streaming.py CSVs, no benchmark run.

  # what bounds it: goodput, CPU and idle vs slice size, and the fixed and per-value CPU
  # of a slice's round trip fitted to them (rows of one build, several --slice_params)
  /usr/bin/python3 tools/experiments/streaming_shared_memory.py sweep \\
      docs/results/streaming/shm_sweep_2026-12-05_before.csv
  # before and after: the per-round after / before ratios of interleaved rounds (the n-th
  # row of a path in one CSV against the n-th of the same path in the other)
  /usr/bin/python3 tools/experiments/streaming_shared_memory.py ab \\
      docs/results/streaming/shm_ab_2026-12-05_before.csv \\
      docs/results/streaming/shm_ab_2026-12-05_after.csv

A slice's round trip is its gradient up and its values down: 2 x slice_params x 4 bytes of
the GB that cpu_s_per_gb counts (bench_streaming_main.cc's header). The host is idle for
1 - host_busy_s / (cores x seconds) of the window.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io  # noqa: E402


def is_shared(row):
    return row.get("shared_memory") in ("1", "True", "true")


def path_of(row):
    """'shared memory', or the rate: 'loopback', '5 Gbit/s'."""
    if is_shared(row):
        return "shared memory"
    rate = float(row["rate_gbps"])
    return "loopback" if rate == 0 else f"{rate:g} Gbit/s"


def slice_cpu_us(row):
    """CPU microseconds (worker + server) per slice round trip."""
    return float(row["cpu_s_per_gb"]) * 2 * int(row["slice_params"]) * 4 / 1e9 * 1e6


def idle_fraction(row, cores):
    """The host's idle share of the window; 0 when the busy ticks (10 ms) round above it."""
    return max(0.0, 1 - float(row["host_busy_s"]) / (cores * float(row["seconds"])))


def fit(points):
    """Least squares y = a + b x over (x, y): (a, b)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0
    return my - b * mx, b


def med(values):
    return statistics.median(values) if values else float("nan")


def sweep_table(rows, cores):
    """Markdown lines: medians per slice size, then the fit of CPU per slice round trip."""
    rows = [r for r in rows if is_shared(r)]
    sizes = sorted({int(r["slice_params"]) for r in rows})
    out = ["| slice (values) | slices per iteration | goodput Gbit/s | ÷ memcpy | CPU s per GB"
           " | CPU µs per slice round trip | host idle | load1 | runs |",
           "|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    points = []
    for size in sizes:
        rs = [r for r in rows if int(r["slice_params"]) == size]
        per_iteration = int(rs[0]["params"]) // size
        loads = [float(r["load1_start"]) for r in rs]
        out.append(
            f"| {size:,} | {per_iteration:,} | {med([float(r['goodput_gbps']) for r in rs]):.2f}"
            f" | {med([float(r['goodput_to_memcpy']) for r in rs]):.3f}"
            f" | {med([float(r['cpu_s_per_gb']) for r in rs]):.3f}"
            f" | {med([slice_cpu_us(r) for r in rs]):.1f}"
            f" | {med([idle_fraction(r, cores) for r in rs]):.2f}"
            f" | {min(loads):.1f} – {max(loads):.1f} | {len(rs)} |")
        points += [(size, slice_cpu_us(r)) for r in rs]
    if len(sizes) > 1:
        a, b = fit(points)
        out.append("")
        out.append(f"Fit over {len(points)} runs: CPU per slice round trip = {a:.1f} µs"
                   f" + {b * 1e3:.3f} ns per value ({b * 1e3 / 2:.3f} ns per value each way).")
    return out


def ab_table(before, after):
    """Markdown lines: per path, medians of each build and of the per-round ratios."""
    out = ["| path | goodput Gbit/s: before → after | ÷ before, per round (min – max)"
           " | CPU s per GB: before → after | ÷ before, per round (min – max)"
           " | training thread CPU s: before → after | rounds | load1 |",
           "|---|---|---:|---|---:|---|---:|---|"]
    for path in ("shared memory", "loopback"):
        b = [r for r in before if path_of(r) == path]
        a = [r for r in after if path_of(r) == path]
        n = min(len(a), len(b))
        if n == 0:
            continue
        b, a = b[:n], a[:n]

        def col(rs, key):
            return [float(r[key]) for r in rs]

        def ratios(key):
            rs = [x / y for x, y in zip(col(a, key), col(b, key))]
            return f"{med(rs):.2f} ({min(rs):.2f} – {max(rs):.2f})"

        loads = col(a, "load1_start") + col(b, "load1_start")
        out.append(
            f"| {path} | {med(col(b, 'goodput_gbps')):.2f} → {med(col(a, 'goodput_gbps')):.2f}"
            f" | {ratios('goodput_gbps')}"
            f" | {med(col(b, 'cpu_s_per_gb')):.3f} → {med(col(a, 'cpu_s_per_gb')):.3f}"
            f" | {ratios('cpu_s_per_gb')}"
            f" | {med(col(b, 'worker_training_thread_cpu_s')):.3f} →"
            f" {med(col(a, 'worker_training_thread_cpu_s')):.3f}"
            f" | {n} | {min(loads):.1f} – {max(loads):.1f} |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="one build's runs at several slice sizes")
    s.add_argument("csv", nargs="+")
    s.add_argument("--cores", type=int, default=os.cpu_count())
    b = sub.add_parser("ab", help="before and after, per-round ratios")
    b.add_argument("before")
    b.add_argument("after")
    a = ap.parse_args(argv)
    if a.command == "sweep":
        rows = [r for path in a.csv for r in csv_io.read_rows(path)]
        print("\n".join(sweep_table(rows, a.cores)))
    else:
        print("\n".join(ab_table(csv_io.read_rows(a.before), csv_io.read_rows(a.after))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

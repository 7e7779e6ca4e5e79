#!/usr/bin/env python3
"""P3's data path beside gRPC alone on the same links and message sizes, each against
iperf3 (docs/results/streaming/streaming.md, "P3 beside gRPC alone at every message size").

Reads a bench_streaming.py CSV (P3: one worker, one server, slices of S values, 4 S bytes
a message) and a grpc_api_probe CSV (gRPC alone on P3's pattern, messages of M bytes),
both with iperf3 one way on the same link before every run. Rows are paired by link and
message size: the k-th P3 row with the k-th probe row of that pair, so a sitting that
runs them side by side round after round pairs each round's two runs. Per pair of link
and size, medians (min - max) over the rounds:

- goodput ÷ iperf3, each against the iperf3 run before it;
- P3 ÷ gRPC alone, per round;
- host CPU s per GB ÷ iperf3's, each against the iperf3 run before it (the issue's
  measure), and P3's less its model's training thread (streaming_model_share.py).

  /usr/bin/python3 tools/experiments/streaming_beside_grpc.py \\
      --p3=docs/results/streaming/beside_grpc_p3_2026-12-07.csv \\
      --grpc=docs/results/streaming/beside_grpc_probe_2026-12-07.csv
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, raw_csv  # noqa: E402
from streaming_model_share import cell, per_run  # noqa: E402
from streaming_shared_memory import is_shared  # noqa: E402


def p3_key(row):
    slices = int(float(row.get("slice_params") or raw_csv.DEFAULT_SLICE_PARAMS))
    return float(row["rate_gbps"]), 4 * slices


def grpc_key(row):
    return float(row["rate_gbps"]), int(float(row["message_bytes"]))


def by_key(rows, key):
    """Rows grouped by key, in the order they came (the rounds)."""
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    return groups


def rounds(p3_rows, grpc_rows):
    """{(rate, message bytes): [(P3 row, probe row), ...]}: the k-th of each paired. P3's
    shared-memory runs are left out; a pair with no probe rows (or no P3 rows) too."""
    p3 = by_key([r for r in p3_rows if not is_shared(r)], p3_key)
    grpc = by_key(grpc_rows, grpc_key)
    return {k: list(zip(p3[k], grpc[k])) for k in p3 if k in grpc}


def figures(p3, grpc):
    """One round's figures; a figure a run lacks (no iperf3 CPU) is None."""
    def f(row, name):
        return float(row[name]) if row.get(name) else None
    share = per_run(p3)
    return {
        "p3": f(p3, "ratio"),
        "grpc": f(grpc, "ratio"),
        "p3_over_grpc": float(p3["goodput_gbps"]) / float(grpc["goodput_gbps"]),
        "p3_cpu": f(p3, "cpu_ratio_to_iperf3"),
        "p3_rest_cpu": share[2] if share else None,
        "grpc_cpu": f(grpc, "cpu_ratio_to_iperf3"),
        "iperf3": f(p3, "iperf3_gbps"),
    }


def table(p3_rows, grpc_rows):
    lines = ["| link | message | iperf3 Gbit/s | P3 goodput ÷ iperf3 | gRPC alone ÷ iperf3 | "
             "P3 ÷ gRPC alone, per round | host CPU per GB ÷ iperf3's: P3 | "
             "P3 less its model's thread | gRPC alone | rounds |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    paired = rounds(p3_rows, grpc_rows)
    for (rate, size) in sorted(paired, key=lambda k: (k[0] == 0, k)):
        fs = [figures(p, g) for p, g in paired[(rate, size)]]
        link = "loopback" if rate == 0 else f"{rate:g} Gbit/s"
        lines.append(
            f"| {link} | {size / 1e3:,.0f} kB | {cell([x['iperf3'] for x in fs])} | "
            f"{cell([x['p3'] for x in fs])} | {cell([x['grpc'] for x in fs])} | "
            f"{cell([x['p3_over_grpc'] for x in fs])} | {cell([x['p3_cpu'] for x in fs])} | "
            f"{cell([x['p3_rest_cpu'] for x in fs])} | {cell([x['grpc_cpu'] for x in fs])} | "
            f"{len(fs)} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--p3", required=True, help="bench_streaming.py CSV")
    ap.add_argument("--grpc", required=True, help="grpc_api_probe CSV (--iperf3_seconds > 0)")
    a = ap.parse_args()
    print("\n".join(table(csv_io.read_rows(a.p3), csv_io.read_rows(a.grpc))))


if __name__ == "__main__":
    main()

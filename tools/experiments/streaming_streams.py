#!/usr/bin/python3
"""What one more stream on a link costs the data path, with no computation: the input the
simulator lacks for its many-process points (issue 36;
docs/results/simulator/simulator.md, "Streams that share a link").

bench_streaming with --servers=N moves the same bytes over one emulated link (or
loopback) as N streams, one per server (slice i to server i mod N), as a worker of a
3 + 3 cluster talks to three servers where a worker of 2 + 2 talks to two. Each round
runs every N once, at each rate, the order of the Ns reversed every other round. Per run:
goodput, both processes' CPU and the host's per GB across (gradients up + values down),
and the threads' context switches in the window: sleeps (voluntary: blocked, then woken)
and preemptions (involuntary), per MB across.

  # as root (the emulated link); B = a folder with bench_streaming and p3_server
  /usr/bin/python3 tools/experiments/streaming_streams.py --rates=1 --servers=1,2,3 --rounds=5 \\
      --bench=$B/bench_streaming --server=$B/p3_server \\
      --csv=docs/results/streaming/streams_per_link_2026-12-06.csv
  /usr/bin/python3 tools/experiments/streaming_streams.py --report \\
      --csv=docs/results/streaming/streams_per_link_2026-12-06.csv     # the table again

The table's last columns are per round against the round's N = 1 run: the extra CPU per
GB, the extra sleeps per MB, and their quotient, the CPU of one extra sleep (µs). Under
it, the simulator's two inputs fitted from them (fit(): its per-stream cost on a shaped
link, p3/sim Calibration::shaped_stream_s_per_byte and shaped_stream_wakes_per_byte).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths  # noqa: E402

FIELDS = ["date", "commit", "rate_gbps", "servers", "round", "slice_params", "params",
          "iterations", "seconds", "goodput_up_gbps", "bytes_sent", "bytes_received",
          "worker_cpu_s", "worker_training_thread_cpu_s", "server_cpu_s", "host_busy_s",
          "host_softirq_s", "worker_voluntary_switches", "worker_involuntary_switches",
          "server_voluntary_switches", "server_involuntary_switches", "load1_start",
          "grpc_experiments",
          # added after the first files: absent there (0)
          "credit_bytes"]
# Measured iterations per rate: a window of a few seconds at 100 MB each way an iteration.
ITERATIONS = {1.0: 4, 2.0: 6, 2.5: 8, 5.0: 10, 0.0: 10}


def run_once(a, rate, servers, rnd):
    """One bench_streaming run; its CSV row. Raises naming the command on a failure."""
    out_dir = os.path.join(a.out_dir, f"r{rnd}_bw{rate:g}_n{servers}")
    cmd = [a.bench, f"--server_binary={a.server}", f"--bandwidth_gbps={rate:g}",
           f"--servers={servers}", f"--params={a.params}", f"--slice_params={a.slice_params}",
           f"--iterations={a.iterations or ITERATIONS.get(rate, 8)}", f"--out_dir={out_dir}",
           f"--credit_bytes={a.credit_bytes}"]
    print("[streams] " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    row = {k: r.get(k, "") for k in FIELDS}
    row.update({"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "commit": r.get("build_commit", ""), "rate_gbps": rate, "round": rnd})
    return row


def per_run(r):
    """The figures of one CSV row: per GB and per MB across (both directions' bytes)."""
    gb = (float(r["bytes_sent"]) + float(r["bytes_received"])) / 1e9
    cpu = float(r["worker_cpu_s"]) + float(r["server_cpu_s"])
    sleeps = float(r["worker_voluntary_switches"]) + float(r["server_voluntary_switches"])
    preempted = float(r["worker_involuntary_switches"]) + float(r["server_involuntary_switches"])
    return {"goodput": float(r["goodput_up_gbps"]), "cpu_per_gb": cpu / gb,
            "host_per_gb": float(r["host_busy_s"]) / gb,
            "softirq_per_gb": float(r["host_softirq_s"]) / gb,
            "sleeps_per_mb": sleeps / (gb * 1000), "preempted_per_mb": preempted / (gb * 1000)}


def differences(rows):
    """Per round, rate and N > 1, against that round's N = 1 run at the rate: (rate, N,
    extra CPU s per GB, extra sleeps per MB), the processes' figures."""
    by = {}
    for r in rows:
        by[(float(r["rate_gbps"]), int(r["servers"]), r["round"])] = per_run(r)
    out = []
    for (rate, n, rnd), f in sorted(by.items()):
        one = by.get((rate, 1, rnd))
        if n > 1 and one is not None:
            out.append((rate, n, f["cpu_per_gb"] - one["cpu_per_gb"],
                        f["sleeps_per_mb"] - one["sleeps_per_mb"]))
    return out


def fit(rows):
    """The simulator's inputs (p3/sim Calibration::shaped_stream_s_per_byte and
    shaped_stream_wakes_per_byte), per side: the medians over every round, rate and N > 1
    of the extra per byte across divided by the other streams' share, 1 - 1/N, halved
    (the worker and the servers each send and receive). Returns (s per byte, wake-ups per
    byte, how many differences)."""
    d = differences(rows)
    if not d:
        raise ValueError("no round with both one stream and more at one rate")
    s_per_byte = statistics.median(dc / (1 - 1 / n) for _, n, dc, _ in d) / 2 * 1e-9
    wakes_per_byte = statistics.median(ds / (1 - 1 / n) for _, n, _, ds in d) / 2 * 1e-6
    return s_per_byte, wakes_per_byte, len(d)


def table(rows):
    """Markdown: a row per rate and N, medians over the rounds (min - max where it
    matters), and per round against that round's N = 1 run."""
    def med(xs, fmt="{:.3f}", spread=False):
        if not xs:
            return "–"
        text = fmt.format(statistics.median(xs))
        return text + (f" ({fmt.format(min(xs))} – {fmt.format(max(xs))})" if spread else "")

    out = ["| link | streams | goodput Gbit/s | CPU s per GB, processes | host | softirq "
           "| sleeps per MB | preempted per MB | extra CPU s per GB | extra sleeps per MB "
           "| µs per extra sleep | runs |", "|---|---:|" + "---:|" * 10]
    by = {}
    for r in rows:
        by.setdefault((float(r["rate_gbps"]), int(r["servers"])), []).append(per_run(r))
    diffs = differences(rows)
    for (rate, n), runs in sorted(by.items(), key=lambda kv: (kv[0][0] == 0, kv[0])):
        mine = [(dc, ds) for r_, n_, dc, ds in diffs if (r_, n_) == (rate, n)]
        extra_cpu = [dc for dc, _ in mine]
        extra_sleeps = [ds for _, ds in mine]
        # s per GB / sleeps per MB = ms per sleep; µs: x 1000
        us = [dc / ds * 1000 for dc, ds in mine if ds > 0]
        col = lambda k, fmt="{:.3f}", spread=False: med([f[k] for f in runs], fmt, spread)
        link = f"{rate:g} Gbit/s" if rate > 0 else "loopback"
        out.append(f"| {link} | {n} | {col('goodput', '{:.2f}', True)} | "
                   f"{col('cpu_per_gb', '{:.3f}', True)} | {col('host_per_gb')} | "
                   f"{col('softirq_per_gb')} | {col('sleeps_per_mb', '{:.2f}', True)} | "
                   f"{col('preempted_per_mb', '{:.2f}')} | {med(extra_cpu, '{:+.3f}', True)} | "
                   f"{med(extra_sleeps, '{:+.2f}', True)} | {med(us, '{:.1f}', True)} | "
                   f"{len(runs)} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1", help="Gbit/s, 0 = loopback")
    ap.add_argument("--servers", default="1,2,3", help="streams (servers) per run")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--params", type=int, default=25_000_000)
    ap.add_argument("--slice_params", type=int, default=40_000)
    ap.add_argument("--iterations", type=int, default=0, help="0: per rate")
    ap.add_argument("--credit_bytes", type=int, default=0,
                    help="scheduling.credit_bytes of the worker and the servers")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per run")
    ap.add_argument("--bench", default=os.path.join(paths.ROOT, "bazel-bin/tools/bench_streaming"))
    ap.add_argument("--server", default=os.path.join(paths.ROOT, "bazel-bin/server/p3_server"))
    ap.add_argument("--out_dir", default="/tmp/streaming_streams")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--append", action="store_true", help="add to --csv's runs")
    ap.add_argument("--report", action="store_true", help="only print the table of --csv")
    a = ap.parse_args()
    if a.report:
        rows = csv_io.read_rows(a.csv)
        print(table(rows))
        s_per_byte, wakes, n = fit(rows)
        print(f"\nper side, over {n} differences: shaped_stream_s_per_byte {s_per_byte:.4g}, "
              f"shaped_stream_wakes_per_byte {wakes:.4g}")
        return 0
    rates = [float(x) for x in a.rates.split(",")]
    ns = [int(x) for x in a.servers.split(",")]
    if 1 not in ns:
        ap.error("--servers must include 1: the other counts are compared with it")
    if os.path.exists(a.csv) and not a.append:
        ap.error(f"{a.csv} exists: --append to add to it")
    first = 1 + max((int(r["round"]) for r in csv_io.read_rows(a.csv)), default=0) \
        if a.append and os.path.exists(a.csv) else 1
    for rnd in range(first, first + a.rounds):
        for rate in rates:
            for n in (ns if rnd % 2 else list(reversed(ns))):
                csv_io.append_rows(a.csv, [run_once(a, rate, n, rnd)], FIELDS)
    print(table(csv_io.read_rows(a.csv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

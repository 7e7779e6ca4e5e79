#!/usr/bin/env python3
"""Computation and communication side by side on this host's cores: what each costs
beside the other, against alone (docs/results/simulator/simulator.md, "Where the CPU goes").

The simulator's CPU costs come from runs of one kind of work at a time: the computation
from a `local` run on an idle host (compute_scale) and from two of them side by side
(shared_host_compute_speed), the communication from the streaming benchmark with no
computation (tools/bench_streaming.py). In the cluster both share the cores, and the
computing threads are preempted by the communication's a thousand times per iteration
(simulator_cpu_breakdown.py). This measures that mix without a cluster: per round,

  1. the streaming benchmark alone on loopback (its CPU per GB, both processes);
  2. one single-thread ResNet-50 `local` run alone (its main thread's CPU per iteration,
     read from /proc as simulator_cpu_breakdown.py does);
  3. both at once: the local run started first, the streaming benchmark once the local
     run is past warm-up; the local run's main thread is read over the streaming
     benchmark's own run, and it must outlast it.

Per round: compute_speed = main-thread CPU per iteration alone / beside, and
comm_factor = CPU per GB beside / alone. `tools/experiments/simulator.py trial
--side_by_side=CSV` takes their medians as a what-if calibration.

  bazel build --jobs=2 //tools:bench_streaming //tools:launch_cluster //worker:p3_worker
  /usr/bin/python3 tools/experiments/simulator_side_by_side.py --rounds=3 \\
      --csv=docs/results/simulator/side_by_side_fresh5.csv
  /usr/bin/python3 tools/experiments/simulator_side_by_side.py --table \\
      --csv=docs/results/simulator/side_by_side_fresh5.csv

Loopback only (no root needed): the shaped links' extra cost is a smaller part of the
communication's, and the factor is applied to every CPU cost of communication alike.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator_cpu_breakdown as cpu_breakdown  # noqa: E402  (the /proc readers)
import simulator_host_contention as host_contention  # noqa: E402  (start: one `local` run)
from results_lib import csv_io, paths, runs  # noqa: E402

ROOT = paths.ROOT
BENCH = os.path.join(ROOT, "bazel-bin/tools/bench_streaming")
FIELDS = ["time_utc", "round", "local_alone_core_s", "pair_core_s", "pair_beside_core_s",
          "pair_speed", "compute_speed", "streaming_alone_cpu_s_per_gb",
          "streaming_beside_cpu_s_per_gb", "comm_factor", "pair_beside_iterations",
          "streaming_alone_gbps", "streaming_beside_gbps"]


def streaming(a, out_dir):
    cmd = [BENCH, f"--server_binary={cpu_breakdown.SERVER}", "--bandwidth_gbps=0",
           f"--iterations={a.streaming_iterations}", f"--out_dir={out_dir}"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def streaming_result(p):
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"bench_streaming failed ({p.returncode}):\n{err}")
    return json.loads(out.strip().splitlines()[-1])


def main_thread_cpu(s):
    """CPU seconds of the local run's main thread in a cpu_breakdown sample."""
    return sum(cpu for (kind, label, cpu, _, _) in s["threads"].values()
               if kind == "worker" and label == "main")


def local_runs(a, outs, during=None):
    """Runs len(outs) `local` runs at once; returns (core-s of their main threads per
    iteration, iterations summed over the runs, `during`'s process) over the window: from
    every run past warm-up + 2 to the first run's end, or with `during` (started at the
    window's start) to that process's end, which must come before any run ends."""
    logs = [runs.worker_log(out) for out in outs]
    runs = [host_contention.start(a, "side_by_side", out) for out in outs]
    procs = [p for p, _ in runs]
    first, last, other, result = None, None, None, None

    def snap():
        s = cpu_breakdown.sample(logs[0])
        s["its"] = [runs.progress_iteration(log) for log in logs]
        return s
    while all(p.poll() is None for p in procs):
        s = snap()
        if first is None and min(s["its"]) >= a.warmup + 2:
            first = s
            if during is not None:
                other = during()
        if first is not None and max(s["its"]) < a.iterations:
            if other is None or other.poll() is None:
                last = s
            elif result is None:
                last, result = s, other
        time.sleep(a.interval)
    for p, log in runs:
        if p.wait() != 0:
            sys.exit(f"local run failed; see {log.name}")
        log.close()
    if during is not None and result is None:
        sys.exit("the streaming benchmark outlasted the local runs: raise --iterations")
    n = sum(last["its"]) - sum(first["its"])
    if first is None or n < 5:
        sys.exit("fewer than 5 iterations in the window: raise --iterations")
    return (main_thread_cpu(last) - main_thread_cpu(first)) / n, n, result


def table(rows):
    print("| round | main thread core-s per iteration: 1 run / 2 runs / 2 runs + streaming "
          "| speed: 2 runs / 2 runs + streaming | streaming CPU s/GB: alone / beside | "
          "comm factor |")
    print("|---:|---|---|---|---:|")
    for r in rows:
        print(f"| {r['round']} | {float(r['local_alone_core_s']):.3f} / "
              f"{float(r['pair_core_s']):.3f} / {float(r['pair_beside_core_s']):.3f} | "
              f"{float(r['pair_speed']):.3f} / {float(r['compute_speed']):.3f} | "
              f"{float(r['streaming_alone_cpu_s_per_gb']):.2f} / "
              f"{float(r['streaming_beside_cpu_s_per_gb']):.2f} | {float(r['comm_factor']):.3f} |")
    pair = statistics.median(float(r["pair_speed"]) for r in rows)
    speed = statistics.median(float(r["compute_speed"]) for r in rows)
    comm = statistics.median(float(r["comm_factor"]) for r in rows)
    print(f"| median of {len(rows)} | | {pair:.3f} / {speed:.3f} | | {comm:.3f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=120, help="of each local run")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--streaming_iterations", type=int, default=40)
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    ap.add_argument("--out", default=os.path.join(ROOT, "out/side_by_side"))
    ap.add_argument("--csv", default="", help="append each round here")
    ap.add_argument("--table", action="store_true", help="print the table from --csv only")
    a = ap.parse_args()
    if a.table:
        table(csv_io.read_rows(a.csv))
        return
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for rnd in range(1, a.rounds + 1):
        stamp = time.strftime("%H%M%S", time.gmtime())
        out = os.path.join(a.out, f"r{rnd}_{stamp}")
        alone_s = streaming_result(streaming(a, out + "_s_alone"))
        alone, _, _ = local_runs(a, [out + "_alone"])
        pair, _, _ = local_runs(a, [out + "_pair0", out + "_pair1"])
        beside, n, proc = local_runs(a, [out + "_beside0", out + "_beside1"],
                                     lambda: streaming(a, out + "_s_beside"))
        beside_s = streaming_result(proc)
        row = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "round": rnd,
               "local_alone_core_s": round(alone, 4), "pair_core_s": round(pair, 4),
               "pair_beside_core_s": round(beside, 4), "pair_speed": round(alone / pair, 4),
               "compute_speed": round(alone / beside, 4),
               "streaming_alone_cpu_s_per_gb": round(alone_s["cpu_s_per_gb"], 4),
               "streaming_beside_cpu_s_per_gb": round(beside_s["cpu_s_per_gb"], 4),
               "comm_factor": round(beside_s["cpu_s_per_gb"] / alone_s["cpu_s_per_gb"], 4),
               "pair_beside_iterations": n,
               "streaming_alone_gbps": round(alone_s["goodput_up_gbps"], 3),
               "streaming_beside_gbps": round(beside_s["goodput_up_gbps"], 3)}
        rows.append(row)
        print(row, flush=True)
        if a.csv:
            csv_io.append_rows(a.csv, [row], FIELDS)
    table(rows)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""How much N busy processes get out of this host's cores: N `local` ResNet-50 runs at once.

The simulator charges the cluster's processes against the host's cores as a fluid share
(p3/sim/simulator.h, Calibration::shared_host_compute_speed): N processes on C cores
each get C/N of a core, at most one, computing at 0.937 of the profile's speed once
every core is busy (two runs side by side, pipeline_contention.csv). Whether a third or a
fourth process costs more than its share (context switches, caches) is what this
measures, with the worker binary the cluster runs: for each N in --procs, N single-thread
`local` runs of launch_cluster started together, one figure per run (summary.json's
samples_per_second: the median over its iterations after warm-up), rounds interleaved.

  # P3_LAUNCHER / P3_SERVER / P3_WORKER as for bench_throughput.py (default: bazel-bin)
  /usr/bin/python3 tools/experiments/simulator_host_contention.py --procs=1,2,3,4 --rounds=3 \\
      --csv=docs/results/simulator/host_contention.csv

Per round and N: the sum of the N rates over the round's lone rate (N = 1), and that
over min(N, cores): the speed of one core's worth of computation relative to one process
alone (1.0 = no loss from sharing); and the sum over the same round's 2 processes.
--table prints the table again from --csv without running anything.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths, runs  # noqa: E402

ROOT = paths.ROOT
LAUNCHER = paths.launcher()
SERVER = paths.server()
WORKER = paths.worker()


def start(a, name, out):
    cmd = [LAUNCHER, f"--config={ROOT}/configs/bench/resnet50.textproto",
           f"--server_binary={SERVER}", f"--worker_binary={WORKER}", f"--set=name={name}",
           "--set=mode=local", "--set=cluster.workers=1", "--set=cluster.servers=1",
           "--set=network.bandwidth_gbps=0", f"--set=training.iterations={a.iterations}",
           f"--set=training.warmup_iterations={a.warmup}", f"--set=output_dir={out}"]
    log = open(out + ".log", "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log


def table(rows):
    """Prints the table of docs/results/simulator/simulator.md from the rows (of this run or --csv).
    The lone run varies more between rounds than the pair, so the sum is also given over
    the same round's 2 processes (where 2 was measured)."""
    pair = {x["round"]: x["sum_sps"] for x in rows if x["procs"] == 2}
    print("\n| processes | summed samples/s, per round | ÷ alone, median | per core's worth | "
          "÷ 2 processes, per round | median |")
    print("|---:|---|---:|---:|---|---:|")
    for n in sorted({x["procs"] for x in rows}):
        mine = [x for x in rows if x["procs"] == n]
        sums = " / ".join("%.2f" % x["sum_sps"] for x in mine)
        per_pair = [x["sum_sps"] / pair[x["round"]] for x in mine if x["round"] in pair]
        pairs = (" / ".join("%.2f" % v for v in per_pair) + " | %.2f" % statistics.median(per_pair)
                 if per_pair else " | ")
        print(f"| {n} | {sums} | {statistics.median(x['sum_over_alone'] for x in mine):.3f} | "
              f"{statistics.median(x['speed_per_core'] for x in mine):.3f} | {pairs} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", default="1,2,3,4", help="concurrent runs per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=33)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out", default="out/host_contention", help="the runs' folders")
    ap.add_argument("--csv", default=paths.results("simulator", "host_contention.csv"))
    ap.add_argument("--table", action="store_true", help="only print the table of --csv")
    a = ap.parse_args()
    if a.table:
        rows = [dict(x, round=int(x["round"]), procs=int(x["procs"]),
                     sum_sps=float(x["sum_sps"]), sum_over_alone=float(x["sum_over_alone"]),
                     speed_per_core=float(x["speed_per_core"])) for x in csv_io.read_rows(a.csv)]
        table(rows)
        return
    procs = [int(n) for n in a.procs.split(",")]
    if procs[0] != 1:
        sys.exit("--procs must start with 1 (the lone rate every ratio divides by)")
    cores = os.cpu_count()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for r in range(a.rounds):
        alone = None
        for n in procs:
            load = os.getloadavg()[0]
            stamp = time.strftime("%H%M%S", time.gmtime())
            outs = [os.path.join(a.out, f"r{r}_n{n}_{i}_{stamp}") for i in range(n)]
            started = [start(a, f"contention_n{n}_{i}", out) for i, out in enumerate(outs)]
            rates = []
            for out, (p, log) in zip(outs, started):
                if p.wait() != 0:
                    sys.exit(f"run failed: see {log.name}")
                log.close()
                rates.append(runs.summary(out)["samples_per_second"])
            total = sum(rates)
            alone = alone or total
            row = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "round": r,
                   "procs": n, "cores": cores, "rates_sps": " ".join(f"{x:.2f}" for x in rates),
                   "sum_sps": round(total, 2), "sum_over_alone": round(total / alone, 3),
                   "speed_per_core": round(total / alone / min(n, cores), 3),
                   "load_before": round(load, 2)}
            rows.append(row)
            print(row, flush=True)
    csv_io.write_rows(a.csv, rows)
    table(rows)
    print("wrote", a.csv)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Where a cluster run's CPU goes, per iteration: every thread of every p3_worker and
p3_server, and the host's cores (idle, softirq), set beside the simulator's
`cpu_s_per_iteration` for the same point (docs/results/simulator/simulator.md, "Where the
CPU goes").

The simulator charges each iteration core-seconds of computation, of sending, receiving
and the servers' update, and shares the host's cores among them. Whether a miss comes
from the computation (slower beside the communication) or from the communication (costs
more in the cluster than in the streaming benchmark it is calibrated on) is what this
tells apart. It starts launch_cluster for one point, reads /proc/<pid>/task/*/stat of the
cluster's processes and /proc/stat every --interval seconds, and the iteration rank 0 has
reached from its log (PROGRESS lines). The window runs from the sample where rank 0 has
passed warm-up + 2 iterations to the last sample before it finished; everything is
divided by the iterations rank 0 made in that window.

  # P3_LAUNCHER / P3_SERVER / P3_WORKER as for bench_throughput.py (default: bazel-bin)
  /usr/bin/python3 tools/experiments/simulator_cpu_breakdown.py --mode=p3 --bandwidth=2 \\
      --rounds=3 --csv=docs/results/simulator/cpu_breakdown.csv
  /usr/bin/python3 tools/experiments/simulator_cpu_breakdown.py --table \\
      --csv=docs/results/simulator/cpu_breakdown.csv

Threads are grouped by process kind and name: the worker's main thread (it runs forward
and backward, and what the worker sends in line), the rest of the worker's threads by
their name (gRPC names its own; unnamed ones carry the binary's name), the same for the
servers. Clock ticks are 10 ms: over a window of tens of seconds that is well under 1 %.
Needs root for a shaped link (--bandwidth > 0), as the launcher does.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths, raw_csv, records, runs, textproto  # noqa: E402

ROOT = paths.ROOT
LAUNCHER = paths.launcher()
SERVER = paths.server()
WORKER = paths.worker()
TICK = os.sysconf("SC_CLK_TCK")
FIELDS = ["time_utc", "round", "model", "mode", "bandwidth_gbps", "workers", "placement",
          "slice_params", "window_iterations", "iteration_seconds", "samples_per_second",
          "group", "core_s_per_iteration", "voluntary_switches_per_iteration",
          "involuntary_switches_per_iteration"]


def proc_threads():
    """{(pid, tid): (kind, name, cpu seconds, voluntary and involuntary context switches)}
    for every p3_worker / p3_server thread."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                kind = f.read().strip()
        except OSError:
            continue
        if kind not in ("p3_worker", "p3_server"):
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                name, cpu, vol, invol = task_stat(f"/proc/{pid}/task/{tid}")
            except OSError:
                continue
            label = "main" if tid == pid else re.sub(r"[0-9]+$", "", name)
            out[(pid, tid)] = (kind.replace("p3_", ""), label, cpu, vol, invol)
    return out


def task_stat(path):
    """(name, CPU seconds, voluntary and involuntary context switches) of the task at
    `path` (/proc/PID or /proc/PID/task/TID); OSError once it is gone."""
    with open(f"{path}/stat") as f:
        stat = f.read()
    with open(f"{path}/status") as f:
        status = f.read()
    vol = int(re.search(r"^voluntary_ctxt_switches:\s*(\d+)", status, re.M).group(1))
    invol = int(re.search(r"^nonvoluntary_ctxt_switches:\s*(\d+)", status, re.M).group(1))
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2:].split()
    return name, (int(fields[11]) + int(fields[12])) / TICK, vol, invol  # utime + stime


def host_cpu():
    """Seconds of all cores in /proc/stat's first line: busy, idle, softirq."""
    with open("/proc/stat") as f:
        v = [int(x) / TICK for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return {"idle": idle + iowait, "softirq": softirq + irq, "steal": steal,
            "busy": user + nice + system + irq + softirq}


def sample(log):
    return {"t": time.time(), "it": runs.progress_iteration(log), "threads": proc_threads(),
            "host": host_cpu()}


def run_point(a, rnd):
    name = f"cpu_{a.model}_{a.mode}_bw{a.bandwidth}_w{a.workers}_{a.placement}_r{rnd}"
    out = os.path.join(a.out, name + time.strftime("_%H%M%S", time.gmtime()))
    cmd = [LAUNCHER, f"--config={ROOT}/configs/bench/{a.model}.textproto",
           f"--server_binary={SERVER}", f"--worker_binary={WORKER}", f"--set=name={name}",
           f"--set=mode={a.mode}",
           f"--set=training.iterations={a.iterations}",
           f"--set=training.warmup_iterations={a.warmup}",
           f"--set=scheduling.slice_params={a.slice_params}",
           f"--set=cluster.workers={a.workers}", f"--set=cluster.servers={a.workers}",
           f"--set=network.bandwidth_gbps={a.bandwidth}",
           f"--set=network.placement={a.placement}", f"--set=output_dir={out}"]
    os.makedirs(a.out, exist_ok=True)
    log = runs.worker_log(out)
    print(f"[cpu] round {rnd}: {a.model} {a.mode} {a.bandwidth} Gbit/s, {a.workers} workers, "
          f"{a.placement}", flush=True)
    with open(out + ".launcher.log", "w") as launcher_log:
        p = subprocess.Popen(cmd, stdout=launcher_log, stderr=subprocess.STDOUT)
        samples = []
        while p.poll() is None:
            samples.append(sample(log))
            time.sleep(a.interval)
    if p.returncode != 0:
        sys.exit(f"launch_cluster failed ({p.returncode}); see {out}.launcher.log")
    # The run's throughput as bench_throughput.py reports it, into a raw.csv of the same
    # shape (tools/experiments/simulator.py fresh reads the folder like a bench_throughput one).
    recs = [records.iteration_seconds(out, r) for r in range(a.workers)]
    batch = textproto.int_field(os.path.join(out, "config.textproto"), "batch_size")
    sps, mean_sps = records.throughput(recs, batch, a.warmup)
    raw_csv.append(os.path.join(a.out, "raw.csv"), {
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "model": a.model,
        "system": "p3", "mode": a.mode, "bandwidth_gbps": a.bandwidth,
        "batch_per_worker": batch, "workers": a.workers,
        "slice_params": a.slice_params, "iterations": a.iterations, "warmup": a.warmup,
        "samples_per_second": round(sps, 3), "mean_samples_per_second": round(mean_sps, 3),
        "load1": paths.load1(), "status": "ok", "output_dir": out,
        "wire_dtype": "float32"})
    start = next((s for s in samples if s["it"] >= a.warmup + 2), None)
    ends = [s for s in samples if s["it"] < a.iterations]
    if start is None or not ends or ends[-1]["it"] - start["it"] < 5:
        sys.exit(f"too few iterations sampled ({len(samples)} samples); raise --iterations")
    end = ends[-1]
    n = end["it"] - start["it"]
    groups, switches = {}, {}
    for key, (kind, label, cpu, vol, invol) in end["threads"].items():
        before = start["threads"].get(key, (kind, label, 0.0, 0, 0))
        g = f"{kind}:{label}"
        groups[g] = groups.get(g, 0.0) + (cpu - before[2]) / n
        v, i = switches.get(g, (0.0, 0.0))
        switches[g] = (v + (vol - before[3]) / n, i + (invol - before[4]) / n)
    for k in ("busy", "idle", "softirq", "steal"):
        groups[f"host:{k}"] = (end["host"][k] - start["host"][k]) / n
    groups["processes:total"] = sum(v for g, v in groups.items() if not g.startswith("host:"))
    it_s = (end["t"] - start["t"]) / n
    rows = []
    for g, v in sorted(groups.items()):
        rows.append({"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "round": rnd, "model": a.model, "mode": a.mode,
                     "bandwidth_gbps": a.bandwidth, "workers": a.workers,
                     "placement": a.placement, "slice_params": a.slice_params,
                     "window_iterations": n, "iteration_seconds": round(it_s, 4),
                     "samples_per_second": round(sps, 3),
                     "group": g, "core_s_per_iteration": round(v, 4),
                     "voluntary_switches_per_iteration": round(switches[g][0], 1)
                     if g in switches else "",
                     "involuntary_switches_per_iteration": round(switches[g][1], 1)
                     if g in switches else ""})
    print(f"[cpu]   {sps:.2f} samples/s; {n} iterations sampled, {it_s:.3f} s each; processes "
          f"{groups['processes:total']:.3f} core-s, host busy {groups['host:busy']:.3f}, "
          f"idle {groups['host:idle']:.3f}, softirq {groups['host:softirq']:.3f}", flush=True)
    return rows


def table(rows):
    """Median over rounds of each group's core-seconds per iteration, one column per point."""
    points = sorted({(r["model"], r["mode"], r["bandwidth_gbps"], r["workers"], r["placement"],
                      r["slice_params"]) for r in rows})
    def key(r):
        return (r["model"], r["mode"], r["bandwidth_gbps"], r["workers"], r["placement"],
                r["slice_params"])
    groups = sorted({r["group"] for r in rows}, key=lambda g: (g.split(":")[0] == "host", g))
    head = ["core-s per iteration"] + [f"{p[1]} {p[2]} Gbit/s, {p[3]} w, {p[4]}" for p in points]
    print("| " + " | ".join(head) + " |")
    print("|---" + "|---:" * len(points) + "|")
    its, windows = [], []
    for p in points:
        mine = {r["round"]: r for r in rows if key(r) == p}
        its.append("%.3f" % statistics.median(float(r["iteration_seconds"])
                                              for r in mine.values()))
        windows.append(" / ".join(r["window_iterations"] for r in mine.values()))
    print("| iteration (s) | " + " | ".join(its) + " |")
    print("| iterations per round | " + " | ".join(windows) + " |")
    for g in groups:
        cells = []
        for p in points:
            v = [float(r["core_s_per_iteration"]) for r in rows if key(r) == p and r["group"] == g]
            cells.append("%.3f" % statistics.median(v) if v else "")
        if any(c and float(c) >= 0.002 for c in cells):
            print(f"| {g} | " + " | ".join(cells) + " |")
    # How often the computing threads were preempted and how often every other thread
    # went to sleep (a wake-up each): columns of CSVs written since they were recorded.
    for g, col, label in (("worker:main", "involuntary_switches_per_iteration",
                           "preemptions of the workers' main threads"),
                          (None, "voluntary_switches_per_iteration",
                           "sleeps of all other threads (wake-ups)")):
        cells = []
        for p in points:
            per_round = {}
            for r in rows:
                if key(r) == p and r.get(col) and (r["group"] == g if g else
                                                   r["group"] != "worker:main"):
                    per_round[r["round"]] = per_round.get(r["round"], 0.0) + float(r[col])
            cells.append("%.0f" % statistics.median(per_round.values()) if per_round else "")
        if any(cells):
            print(f"| {label}, per iteration | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet50",
                    help="a model with a config in configs/bench (its batch size is that config's)")
    ap.add_argument("--mode", default="p3")
    ap.add_argument("--bandwidth", type=float, default=2.0, help="Gbit/s; 0 = unlimited")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--placement", default="colocated", choices=["colocated", "separate"])
    ap.add_argument("--slice_params", type=int, default=40000)
    ap.add_argument("--iterations", type=int, default=43)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--round", type=int, default=0,
                    help="label the one round run with this number (interleaving points "
                         "round by round from a script); 0: rounds 1..--rounds")
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    ap.add_argument("--out", default=os.path.join(ROOT, "out/cpu_breakdown"))
    ap.add_argument("--csv", default="", help="append every group of every round here")
    ap.add_argument("--table", action="store_true", help="print the table from --csv only")
    a = ap.parse_args()
    if a.mode == "local":  # one process, no link
        a.workers, a.bandwidth = 1, 0.0
    if a.table:
        table(csv_io.read_rows(a.csv))
        return
    rows = []
    for rnd in ([a.round] if a.round else range(1, a.rounds + 1)):
        mine = run_point(a, rnd)
        rows += mine
        if a.csv:
            csv_io.append_rows(a.csv, mine, FIELDS)
    table([{k: str(v) for k, v in r.items()} for r in rows])


if __name__ == "__main__":
    main()

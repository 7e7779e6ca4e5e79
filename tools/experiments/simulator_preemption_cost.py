#!/usr/bin/env python3
"""What a preemption costs the computation, measured on one core
(docs/results/simulator/simulator.md, "What a preemption costs").

In the cluster the workers' main threads are preempted about a thousand times per
iteration by the communication's threads (simulator_cpu_breakdown.py), and they need more CPU
per iteration than a `local` run alone. This measures the cost of a preemption without a
cluster: one single-thread ResNet-50 `local` run pinned to core 0, and a disturber, a
small process of this script, that either

  same:R:B   shares core 0: wakes R times per second and each time copies B bytes
             (a slice's worth of memory traffic through the core's caches), or
  batch:R:B  as same:R:B, the disturber in SCHED_BATCH: the policy of the cluster's
             communication threads since scheduling.batch_io_threads (cd526dc), under
             which a waking thread does not preempt the computation at once,
  other:B    runs on core 1: copies B bytes without pause (memory bandwidth and the
             shared cache, no preemption),
  none       is not started.

Each condition is one `local` run; the run's main thread is read from /proc over a window
from warm-up + 2 to the end, as simulator_cpu_breakdown.py does: CPU seconds, voluntary and
involuntary context switches (preemptions) per iteration. Rounds interleave the
conditions in a rotating order. Per round and condition, against the same round's `none`:

  extra CPU per iteration = core-s per iteration - none's
  cost per preemption     = extra CPU / (preemptions per iteration - none's)

This script and its /proc sampler run on core 1.

  bazel build --jobs=2 //tools:launch_cluster //worker:p3_worker
  /usr/bin/python3 tools/experiments/simulator_preemption_cost.py --rounds=3 \\
      --csv=docs/results/simulator/preemption_cost.csv
  /usr/bin/python3 tools/experiments/simulator_preemption_cost.py --table \\
      --csv=docs/results/simulator/preemption_cost.csv
"""
import argparse
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
DEFAULT_CONDITIONS = "none,same:1000:0,same:4000:0,same:4000:262144,other:8388608"
FIELDS = ["time_utc", "round", "condition", "iterations", "seconds_per_iteration",
          "core_s_per_iteration", "preemptions_per_iteration", "voluntary_per_iteration",
          "disturber_wakes_per_iteration", "disturber_core_s_per_iteration",
          "extra_core_s_per_iteration", "extra_preemptions_per_iteration",
          "us_per_preemption"]


def parse_condition(c):
    """'none' | 'same:R:B' | 'batch:R:B' | 'other:B' -> (where, wakes per second, bytes)."""
    parts = c.split(":")
    try:
        if parts == ["none"]:
            return "none", 0, 0
        if parts[0] in ("same", "batch") and len(parts) == 3 and float(parts[1]) > 0 and int(parts[2]) >= 0:
            return parts[0], float(parts[1]), int(parts[2])
        if parts[0] == "other" and len(parts) == 2 and int(parts[1]) > 0:
            return "other", 0, int(parts[1])
    except ValueError:
        pass
    sys.exit(f"--conditions: bad condition {c!r} (none, same:RATE:BYTES, batch:RATE:BYTES or other:BYTES)")


def disturb(spec):
    """The disturber's loop (this script with --disturb); runs until killed."""
    where, rate, size = parse_condition(spec)
    os.sched_setaffinity(0, {1 if where == "other" else 0})
    if where == "batch":
        # As p3/base/thread_policy.h's ScheduleThisThreadAsBatch: nice unchanged.
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    import numpy as np  # after the pinning; one BLAS thread (see run_condition)
    src = np.ones(max(size // 4, 1), dtype=np.float32)
    dst = np.empty_like(src)
    if where == "other":
        while True:
            np.copyto(dst, src)
    period = 1.0 / rate
    due = time.monotonic()
    while True:
        due += period
        left = due - time.monotonic()
        if left > 0:
            time.sleep(left)
        else:
            due = time.monotonic()  # behind: no burst to catch up
        if size:
            np.copyto(dst, src)


def main_thread(s):
    """(CPU seconds, voluntary, involuntary switches) of the local run's main thread."""
    hits = [(cpu, vol, inv) for (kind, label, cpu, vol, inv) in s["threads"].values()
            if kind == "worker" and label == "main"]
    if len(hits) != 1:
        sys.exit(f"expected one p3_worker main thread, found {len(hits)}: is another running?")
    return hits[0]


def run_condition(a, rnd, condition, out):
    """One `local` run on core 0 with the condition's disturber; returns the CSV row."""
    where, _, _ = parse_condition(condition)
    os.sched_setaffinity(0, {0})  # the run inherits core 0 ...
    proc, log = host_contention.start(a, "preemption_cost", out)
    os.sched_setaffinity(0, {1})  # ... and this sampler stays off it
    dist = None
    if where != "none":
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        dist = subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                 f"--disturb={condition}"], env=env)
    logpath = runs.worker_log(out)
    first = last = None
    try:
        while proc.poll() is None:
            s = cpu_breakdown.sample(logpath)
            if s["it"] >= a.warmup + 2 and s["it"] < a.iterations:
                # The disturber: one thread, so its process is its task.
                s["dist"] = cpu_breakdown.task_stat(f"/proc/{dist.pid}")[1:3] if dist else (0.0, 0)
                if first is None:
                    first = s
                last = s
            time.sleep(a.interval)
    finally:
        if dist:
            dist.kill()
            dist.wait()
    if proc.wait() != 0:
        sys.exit(f"local run failed; see {log.name}")
    log.close()
    n = last["it"] - first["it"] if first else 0
    if n < 5:
        sys.exit("fewer than 5 iterations in the window: raise --iterations")
    (c0, v0, i0), (c1, v1, i1) = main_thread(first), main_thread(last)
    return {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "round": rnd,
            "condition": condition, "iterations": n,
            "seconds_per_iteration": round((last["t"] - first["t"]) / n, 4),
            "core_s_per_iteration": round((c1 - c0) / n, 4),
            "preemptions_per_iteration": round((i1 - i0) / n, 1),
            "voluntary_per_iteration": round((v1 - v0) / n, 1),
            "disturber_wakes_per_iteration": round((last["dist"][1] - first["dist"][1]) / n, 1),
            "disturber_core_s_per_iteration":
                round((last["dist"][0] - first["dist"][0]) / n, 4)}


def with_extra(rows):
    """Adds each row's extra over the same round's `none` (where there is one)."""
    alone = {r["round"]: r for r in rows if r["condition"] == "none"}
    for r in rows:
        base = alone.get(r["round"])
        if base is None or r is base:
            r.update(extra_core_s_per_iteration="", extra_preemptions_per_iteration="",
                     us_per_preemption="")
            continue
        extra = float(r["core_s_per_iteration"]) - float(base["core_s_per_iteration"])
        more = float(r["preemptions_per_iteration"]) - float(base["preemptions_per_iteration"])
        r["extra_core_s_per_iteration"] = round(extra, 4)
        r["extra_preemptions_per_iteration"] = round(more, 1)
        r["us_per_preemption"] = round(extra / more * 1e6, 1) if more >= 10 else ""
    return rows


def table(rows):
    conds = list(dict.fromkeys(r["condition"] for r in rows))
    print("| disturber | main thread core-s per iteration (÷ none) | preemptions per iteration "
          "| disturber wakes per iteration | µs per extra preemption, per round | median |")
    print("|---|---|---:|---:|---|---:|")
    med = lambda key, rs: statistics.median(float(r[key]) for r in rs)  # noqa: E731
    none = [r for r in rows if r["condition"] == "none"]
    for c in conds:
        mine = [r for r in rows if r["condition"] == c]
        core = med("core_s_per_iteration", mine)
        ratio = f" ({core / med('core_s_per_iteration', none):.3f})" if none and c != "none" else ""
        costs = [float(r["us_per_preemption"]) for r in mine if r["us_per_preemption"] != ""]
        per_round = " / ".join(f"{x:.1f}" for x in costs) or "–"
        median = f"{statistics.median(costs):.1f}" if costs else "–"
        print(f"| {c} | {core:.4f}{ratio} | {med('preemptions_per_iteration', mine):.0f} | "
              f"{med('disturber_wakes_per_iteration', mine):.0f} | {per_round} | {median} |")
    print(f"\n{len(set(r['round'] for r in rows))} rounds; the core-s and preemptions are "
          "medians over rounds.")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conditions", default=DEFAULT_CONDITIONS,
                    help="comma-separated: none, same:RATE:BYTES, batch:RATE:BYTES, other:BYTES")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--first_round", type=int, default=1,
                    help="the first round's number (a sitting that runs one round at a time)")
    ap.add_argument("--iterations", type=int, default=53, help="of each local run")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    ap.add_argument("--out", default=os.path.join(ROOT, "out/preemption_cost"))
    ap.add_argument("--csv", default="", help="append each round's rows here")
    ap.add_argument("--table", action="store_true", help="print the table from --csv only")
    ap.add_argument("--disturb", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.disturb:
        disturb(a.disturb)
        return
    if a.table:
        table(csv_io.read_rows(a.csv))
        return
    if os.cpu_count() < 2:
        sys.exit("needs two cores: the run and the disturber on core 0, the sampler on core 1")
    conds = a.conditions.split(",")
    for c in conds:
        parse_condition(c)
    if "none" not in conds:
        sys.exit("--conditions must include none (every cost is against it)")
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for rnd in range(a.first_round, a.first_round + a.rounds):
        shift = (rnd - 1) % len(conds)
        mine = []
        for c in conds[shift:] + conds[:shift]:
            out = os.path.join(a.out, f"r{rnd}_{c.replace(':', '_')}_"
                               + time.strftime("%H%M%S", time.gmtime()))
            mine.append(run_condition(a, rnd, c, out))
            print(mine[-1], flush=True)
        with_extra(mine)
        rows += mine
        if a.csv:
            csv_io.append_rows(a.csv, mine, FIELDS)
    table(rows)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Why two baseline points got faster when the wake-ups per byte charged them more
(issue 36; simulator.md, "Preemptions per bytes on a shaped link"): the two workers'
phase in the simulated schedule. Nothing in p3/sim or the committed calibrations changes.

Two workers on one 2-core host settle, in the deterministic simulation, either in step
(both compute together, the communication hidden behind the slower computation) or
staggered (one worker behind the other, the host's cores partly idle while the laggard's
parameters cross the link). Which one a run shows in its measured window can flip with a
change of ±1 % anywhere. This tool measures that:

  * `ensemble` (default): every point whose prediction moves with the measured wake-ups
    per byte (simulator_validation_before_wakebytes_issue36.csv against
    simulator_validation_wakebytes_whatif_issue36.csv), and every whole-tensor point on a
    shaped link, predicted with W = 0 and W = the measured shaped_bytes_per_wake, each at
    the fitted compute_scale x SCALES (well inside the spread of the `local` runs it is
    fitted on) and in a late window (LATE more iterations, all left out: the schedule the
    run settles in). Writes every prediction to --csv and prints the protocol's scores
    with each point predicted by the median of its five, and by its late window.
  * `--trace=SET:MODEL:SYSTEM:GBIT/S`: one point's iterations with W = 0 and W on, from
    p3_sim's trace: when worker 0 starts each iteration after worker 1 (lag), worker 0's
    iteration, computation and wait for parameters, in ms (--iterations: how many to
    simulate; default the point's own).

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/experiments/simulator_phase.py \\
      --csv=docs/results/simulator/phase_whatif_2026-12-05.csv
  /usr/bin/python3 tools/experiments/simulator_phase.py --trace=fresh-3:resnet50:baseline:2
"""
import argparse
import collections
import copy
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as calibration  # noqa: E402
import simulator_noise  # noqa: E402
import simulator_points as sp  # noqa: E402
import simulator_protocol as protocol  # noqa: E402
from results_lib import csv_io, paths  # noqa: E402

BEFORE = "docs/results/simulator/simulator_validation_before_wakebytes_issue36.csv"
AFTER = "docs/results/simulator/simulator_validation_wakebytes_whatif_issue36.csv"
SCALES = (0.99, 0.995, 1.0, 1.005, 1.01)
LATE = 100
WHOLE_TENSOR = ("baseline", "priority_only")
KEY = ("set", "model", "system", "bandwidth", "workers", "slice_params", "placement",
       "wire_dtype")


def key(r):
    return tuple(str(r.get(k) or "") if k in ("placement", "wire_dtype") else
                 float(r[k]) if k == "bandwidth" else
                 int(r[k]) if k in ("workers", "slice_params") else r[k] for k in KEY)


def selected(before, after):
    """The keys of the points to re-predict: not fitted, and either moved between the two
    validations or whole-tensor on a shaped link."""
    moved = {key(a) for a, b in zip(after, before) if a["predicted"] != b["predicted"]}
    return [key(r) for r in before if not r["fitted"] and
            (key(r) in moved or (r["system"] in WHOLE_TENSOR and float(r["bandwidth"]) > 0))]


def variants(p):
    """(name, point to simulate, compute_scale factor) for one measured point."""
    out = [(f"x{s:.3f}", p, s) for s in SCALES]
    late = dict(p, iterations=int(p["iterations"]) + LATE, warmup=int(p["warmup"]) + LATE)
    out.append(("late", late, 1.0))
    return out


def rescored(rows, predicted, runs):
    """Validation rows with each key in `predicted` re-predicted (samples/s), ratio and
    the protocol's columns computed again."""
    out = copy.deepcopy(rows)
    for r in out:
        k = key(r)
        if k in predicted:
            r["predicted"] = predicted[k]
            r["ratio"] = round(predicted[k] / float(r["measured"]), 3)
    simulator.score_rows(out, runs)
    return out


def scores(rows, system=None):
    """The protocol's all and fresh-after-the-freeze rows (hits, checkable, median)."""
    sub = [r for r in rows if system is None or r["system"] == system]
    return {s["set"]: s for s in protocol.summary(simulator.ordered(sub))}


def iteration_table(trace):
    """Per iteration of a simulated run's trace (p3_sim --trace, two or more workers):
    worker 0's start after the earliest worker's (lag), worker 0's iteration (start to its
    next start), computation and wait for parameters, all in ms. Returns a list of dicts."""
    ev = trace["traceEvents"]
    worker = {e["pid"]: int(e["args"]["name"].split()[1]) for e in ev
              if e["ph"] == "M" and e["name"] == "process_name"
              and e["args"]["name"].startswith("worker ")}
    compute_tid = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M"
                   and e["name"] == "thread_name" and e["args"]["name"] == "compute"}
    start = collections.defaultdict(lambda: float("inf"))
    comp = collections.defaultdict(float)
    wait = collections.defaultdict(float)
    for e in ev:
        if e["ph"] != "X" or e["pid"] not in worker:
            continue
        w = worker[e["pid"]]
        if (e["pid"], e["tid"]) in compute_tid:
            i = e["args"]["iteration"]
            start[(w, i)] = min(start[(w, i)], e["ts"])
            comp[(w, i)] += e["dur"]
        elif e.get("cat") == "wait":
            wait[(w, int(e["name"].split("v")[1]))] += e["dur"]
    ranks = sorted(set(worker.values()))
    n = max(i for _, i in start)
    rows = []
    for i in range(n):
        first = min(start[(w, i)] for w in ranks)
        rows.append({"iteration": i, "lag_ms": (start[(0, i)] - first) / 1e3,
                     "iteration_ms": (start[(0, i + 1)] - start[(0, i)]) / 1e3,
                     "compute_ms": comp[(0, i)] / 1e3, "wait_ms": wait[(0, i)] / 1e3})
    return rows


def point_of(spec):
    set_name, model, system, bw = spec.split(":")
    for p in sp.points():
        if (p["set"], p["model"], p["system"], float(p["bandwidth"])) == \
                (set_name, model, system, float(bw)):
            return p
    sys.exit(f"no measured point {spec}")


_SCALES = {}


def simulate(p, wake, scale_x=1.0, more_flags=()):
    """p3_sim's result for measured point p with its set's calibration, shaped_bytes_per_wake
    = wake, and the fitted compute_scale x scale_x."""
    cal_set = sp.calibration_of(p["set"])
    with open(os.path.join(paths.ROOT, cal_set["file"])) as f:
        cal = dict(json.load(f), shaped_bytes_per_wake=wake)
    if (p["set"], p["model"]) not in _SCALES:
        _SCALES[(p["set"], p["model"])] = calibration.compute_scale(
            p["model"], sp.local_of(sp.points(), p["set"], p["model"]), cal_set["file"])
    scale = _SCALES[(p["set"], p["model"])]
    return calibration.with_temporary(cal, lambda path: simulator.predict(
        p, path, scale * scale_x, cal_set["extra"], more_flags))


def trace(args):
    p = dict(point_of(args.trace))
    if args.iterations:
        p["iterations"] = args.iterations
    for wake in (0.0, calibration.shaped_bytes_per_wake()):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            r = simulate(p, wake, more_flags=[f"--trace={path}"])
            with open(path) as f:
                rows = iteration_table(json.load(f))
        print(f"{args.trace} W = {wake:.0f}: {r['iteration_seconds']:.4f} s an iteration over "
              f"iterations {p['warmup']} - {int(p['iterations']) - 1}; "
              f"measured {sp.BATCH[p['model']] * int(p['workers']) / p['measured']:.4f}")
        print("  iteration: lag / iteration / computation / wait, worker 0, ms")
        cells = [f"{r['iteration']}: {r['lag_ms']:+.0f} / {r['iteration_ms']:.0f} / "
                 f"{r['compute_ms']:.0f} / {r['wait_ms']:.0f}" for r in rows]
        for j in range(0, len(cells), 6):
            print("  " + "   ".join(cells[j:j + 6]))


def ensemble(args):
    before = simulator.read_validation(os.path.join(paths.ROOT, BEFORE))
    after = simulator.read_validation(os.path.join(paths.ROOT, AFTER))
    wanted = set(selected(before, after))
    points = {key(p): p for p in sp.points() if key(p) in wanted}
    wakes = (0.0, calibration.shaped_bytes_per_wake())
    out = []
    for k in [k for k in map(key, before) if k in points]:
        p = points[k]
        for wake in wakes:
            for name, q, x in variants(p):
                r = simulate(q, wake, x)
                out.append(dict(zip(KEY, k), shaped_bytes_per_wake=round(wake), variant=name,
                                iterations=q["iterations"], warmup=q["warmup"],
                                measured=p["measured"],
                                predicted=round(r["samples_per_second"], 3),
                                ratio=round(r["samples_per_second"] / p["measured"], 3)))
            print(f"{k[0]:18} {k[1]:12} {k[2]:13} {k[3]:4} s{k[5]:<8} W {wake:7.0f}: "
                  + " ".join(f"{o['variant']} {o['ratio']:.3f}" for o in out[-len(SCALES) - 1:]),
                  flush=True)
    csv_io.write_rows(os.path.join(paths.ROOT, args.csv), out)
    report(out, before, after)


def report(out, before, after):
    """The protocol's scores of W = 0 and W on: as validated, with each re-predicted point
    at its ensemble's median, and at its late window."""
    runs = simulator_noise.point_runs()
    by = collections.defaultdict(list)
    for o in out:
        by[(float(o["shaped_bytes_per_wake"]), o["variant"] == "late", key(o))].append(
            float(o["predicted"]))
    wakes = sorted({w for w, _, _ in by})
    print("| scored | W | all: hits of checkable, median | fresh after the freeze | "
          "baseline's points |")
    print("|---|---:|---|---|---|")
    for how in ("as validated", "median of compute_scale x " + "/".join(map(str, SCALES)),
                f"late window (+{LATE} iterations)"):
        for w, rows in zip(wakes, (before, after)):
            if how != "as validated":
                late = how.startswith("late")
                rows = rescored(rows, {k: statistics.median(v) for (ww, lt, k), v in by.items()
                                       if ww == w and lt == late}, runs)
            s, b = scores(rows), scores(rows, "baseline")
            fresh = s[protocol.FRESH_SUMMARY]
            print(f"| {how} | {w:.0f} | {s['all']['hits']} of {s['all']['checkable']}, "
                  f"{s['all']['median_abs_error']:.3f} | {fresh['hits']} of "
                  f"{fresh['checkable']}, {fresh['median_abs_error']:.3f} | "
                  f"{b['all']['hits']} of {b['all']['checkable']}, "
                  f"{b['all']['median_abs_error']:.3f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default="docs/results/simulator/phase_whatif_2026-12-05.csv",
                    help="ensemble: where every prediction goes (relative to the repository)")
    ap.add_argument("--report_only", action="store_true",
                    help="ensemble: read --csv and print the scores, simulating nothing")
    ap.add_argument("--trace", default="", help="SET:MODEL:SYSTEM:GBIT/S: one point's iterations")
    ap.add_argument("--iterations", type=int, default=0, help="trace: iterations to simulate")
    args = ap.parse_args()
    if args.trace:
        trace(args)
    elif args.report_only:
        report(csv_io.read_rows(os.path.join(paths.ROOT, args.csv)),
               simulator.read_validation(os.path.join(paths.ROOT, BEFORE)),
               simulator.read_validation(os.path.join(paths.ROOT, AFTER)))
    else:
        ensemble(args)


if __name__ == "__main__":
    main()

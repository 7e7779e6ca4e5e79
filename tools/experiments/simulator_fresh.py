#!/usr/bin/env python3
"""Fresh points for the simulator's validation protocol (issue 36;
docs/results/simulator/simulator.md, "Validation protocol"): configurations no
calibration was fitted on, predicted by the frozen model and committed before any of
them is measured, then measured in interleaved rounds with a streaming run per round
(that sitting's own calibration).

  bazel build //tools:p3_sim
  S="/usr/bin/python3 tools/experiments/simulator_fresh.py"
  $S predict          # -> docs/results/simulator/fresh_predictions_2026-12-05.{csv,md}
  # commit those two files, then, as root (about 8 min a round on a quiet 2-core host):
  bazel build //tools:bench_streaming //tools:launch_cluster //worker:p3_worker //server:p3_server
  sudo $S measure --rounds=5 --out=out/fresh1205
  $S collect --out=out/fresh1205   # raw runs + streaming CSV into docs/results
  /usr/bin/python3 tools/experiments/simulator.py calibrate --only=fresh-2026-12-05
  /usr/bin/python3 tools/experiments/simulator.py validate   # scored as the fresh set

Every run's 1-minute load average is in its raw.csv row (`load1`).
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as calibration  # noqa: E402
import simulator_points as sp  # noqa: E402
from results_lib import csv_io, paths  # noqa: E402

SET = "fresh-2026-12-05"
PREDICTIONS = "simulator/fresh_predictions_2026-12-05"
# The calibration the committed predictions use: the newest VM that measured both models'
# `local` (cc-2026-12-02); after the runs, the set is predicted again with its own sitting's.
PREDICT_WITH = "cc-bbr"
ITERATIONS = {"resnet50": (43, 3), "vgg19": (13, 3)}


def point(model, system, bw, workers=2, placement="colocated", wire=""):
    its, warm = ITERATIONS[model]
    return {"set": SET, "model": model, "system": system, "bandwidth": bw, "workers": workers,
            "slice_params": 40000, "placement": placement, "wire_dtype": wire,
            "iterations": its, "warmup": warm}


# The list: 2 Gbit/s, 3 workers + 3 servers, non-colocated placement, VGG-19 at
# 4 Gbit/s, the 16-bit wire at 2.5 Gbit/s; and the baseline at 2 Gbit/s beside P3.
POINTS = [point("resnet50", "p3", 2.0), point("resnet50", "baseline", 2.0),
          point("resnet50", "p3", 1.0, workers=3),
          point("resnet50", "p3", 1.0, placement="separate"),
          point("vgg19", "p3", 4.0),
          point("resnet50", "p3", 2.5, wire="bfloat16")]


def name(p):
    return (f"{p['model']}_{p['system']}_{p['bandwidth']:g}g_w{p['workers']}_{p['placement']}"
            + (f"_{p['wire_dtype']}" if p["wire_dtype"] else ""))


def predict(_args):
    """The frozen model's predictions, with PREDICT_WITH's calibration and compute_scale."""
    pts = sp.points()
    cal_set = sp.calibration_of(PREDICT_WITH)
    commit = paths.git_commit(mark_dirty=True)
    rows = []
    for p in POINTS:
        local = sp.local_of(pts, PREDICT_WITH, p["model"])
        scale = calibration.compute_scale(p["model"], local, cal_set["file"])
        r = simulator.predict(p, cal_set["file"], scale, cal_set["extra"])
        rows.append({"point": name(p), "model": p["model"], "system": p["system"],
                     "bandwidth_gbps": p["bandwidth"], "workers": p["workers"],
                     "placement": p["placement"], "wire_dtype": p["wire_dtype"] or "float32",
                     "iterations": p["iterations"], "warmup": p["warmup"],
                     "predicted_sps": round(r["samples_per_second"], 3),
                     "calibration": cal_set["file"], "local_sps": local,
                     "compute_scale": round(scale, 4), "model_commit": commit})
        print(f"{rows[-1]['point']:40} {rows[-1]['predicted_sps']:8.3f} samples/s", flush=True)
    csv_io.write_rows(sp.results(PREDICTIONS + ".csv"), rows)
    lines = ["| point | predicted samples/s | calibration | compute_scale (local samples/s) |",
             "|---|---:|---|---:|"]
    lines += [f"| {r['point']} | {r['predicted_sps']:.2f} | {os.path.basename(r['calibration'])} | "
              f"{r['compute_scale']} ({r['local_sps']}) |" for r in rows]
    with open(sp.results(PREDICTIONS + ".md"), "w") as f:
        f.write(f"# Fresh predictions, 2026-12-05 (frozen model {commit})\n\n"
                "Made by `/usr/bin/python3 tools/experiments/simulator_fresh.py predict` and "
                "committed before any run of these points; measured by its `measure`, scored "
                "by `simulator.py validate` under the validation protocol "
                "([simulator.md](simulator.md#validation-protocol)). The committed numbers use "
                f"the {PREDICT_WITH} set's calibration and `local` runs (another VM); the "
                "scoring predicts the points again, with the same frozen code, from the "
                "sitting's own streaming runs and `local` runs, as for every set.\n\n"
                + "\n".join(lines) + "\n")
    print(f"-> docs/results/{PREDICTIONS}.{{csv,md}}")


def bench(p, out, iterations, warmup):
    args = [sys.executable, os.path.join(paths.ROOT, "tools/bench_throughput.py"), "run",
            f"--model={p['model']}", "--runs=1", f"--iterations={iterations}",
            f"--warmup={warmup}", f"--out={out}"]
    if p["system"] == "local":
        args += ["--modes=", "--local"]
    else:
        args += [f"--bandwidths={p['bandwidth']:g}", f"--modes={p['system']}",
                 f"--workers={p['workers']}"]
        if p["placement"] == "separate":
            args.append("--set=network.placement=separate")
        if p["wire_dtype"]:
            args.append(f"--wire_dtypes={p['wire_dtype']}")
    print(" ".join(args), flush=True)
    subprocess.run(args, check=False)


def measure(args):
    """--rounds interleaved rounds: a streaming run at each rate, each model's `local`, then
    every point once, the order of the points rotated each round."""
    os.makedirs(args.out, exist_ok=True)
    streaming_csv = os.path.join(args.out, "streaming.csv")
    for r in range(1, args.rounds + 1):
        print(f"round {r} at {time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f}",
              flush=True)
        subprocess.run([sys.executable, os.path.join(paths.ROOT, "tools/bench_streaming.py"),
                        "--runs=1", f"--csv={streaming_csv}", "--md="]
                       + (["--append"] if os.path.exists(streaming_csv) else []), check=False)
        for model, (its, warm) in ITERATIONS.items():
            bench({"model": model, "system": "local"}, os.path.join(args.out, f"local_{model}"),
                  its, warm)
        k = (r - 1) % len(POINTS)
        for p in POINTS[k:] + POINTS[:k]:
            bench(p, os.path.join(args.out, name(p)), p["iterations"], p["warmup"])


def collect(args):
    """The measured runs into docs/results (simulator.py fresh's layout) and the streaming
    runs into docs/results/streaming."""
    dirs = [f"{os.path.join(args.out, f'local_{m}')}=colocated" for m in ITERATIONS]
    dirs += [f"{os.path.join(args.out, name(p))}={p['placement']}" for p in POINTS]
    subprocess.run([sys.executable, os.path.join(paths.ROOT, "tools/experiments/simulator.py"),
                    "fresh", f"--file={dict(sp.FRESH_SETS)[SET]}"] + dirs, check=True)
    shutil.copy(os.path.join(args.out, "streaming.csv"),
                os.path.join(paths.ROOT, sp.SETS[SET]["streaming"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["predict", "measure", "collect"])
    ap.add_argument("--rounds", type=int, default=5, help="measure: interleaved rounds (>= 5)")
    ap.add_argument("--out", default="out/fresh1205", help="measure, collect: the runs' folder")
    args = ap.parse_args()
    {"predict": predict, "measure": measure, "collect": collect}[args.command](args)


if __name__ == "__main__":
    main()

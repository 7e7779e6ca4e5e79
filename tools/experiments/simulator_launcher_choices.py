#!/usr/bin/env python3
"""The launcher's automatic slice size for every zoo model under two calibrations (issue
36, docs/results/simulator/simulator.md, "The launcher's calibration"): what
`launch_cluster --tune_only` chooses at 1, 2.5, 5 Gbit/s and unlimited (2 workers + 2
servers colocated, the shipped configs), the prediction at the choice and at 40,000, and
the seconds the search took (one run each; the 1-min load beside), one CSV row each.

  bazel build //tools:launch_cluster
  /usr/bin/python3 tools/experiments/simulator_launcher_choices.py \\
      --calibration=before=configs/sim/calibration_cpu_2026-12-01.json \\
      --calibration=after=configs/sim/calibration_cpu.json \\
      --csv=docs/results/simulator/launcher_choices_2026-12-05.csv

The launcher reads configs/sim/calibration_cpu.json relative to its working directory, so
each calibration runs in a scratch copy of configs/ that has that file as the launcher's.
Rows are in the order run; the table (markdown) goes to stdout.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths  # noqa: E402

LAUNCHER_CALIBRATION = os.path.join("configs", "sim", "calibration_cpu.json")
# (model, config, extra --set): the zoo (docs/models.md). The throughput benchmark's own
# configs where there is one, else the default experiment's with the model swapped in.
ZOO = [
    ("resnet50", "configs/bench/resnet50.textproto", []),
    ("vgg19", "configs/bench/vgg19.textproto", []),
    ("inception_v3", "configs/bench/inception_v3.textproto", []),
    ("seq2seq_lstm", "configs/bench/seq2seq_lstm.textproto", []),
    ("transformer", "configs/bench/transformer.textproto", []),
    ("small_cnn", "configs/default.textproto", []),
    ("mlp", "configs/default.textproto", ["model.name=mlp", "data.dataset=synthetic"]),
    ("vgg16", "configs/default.textproto",
     ["model.name=vgg16", "data.dataset=synthetic", "model.image_size=32", "model.in_channels=3"]),
    ("row_lstm", "configs/default.textproto", ["model.name=row_lstm"]),
]
RATES = (1.0, 2.5, 5.0, 0.0)
FIELDS = ["calibration", "calibration_file", "model", "config", "bandwidth_gbps", "searched",
          "chosen_slice_params", "predicted_samples_per_second", "predicted_at_40000",
          "best_slice_params", "search_seconds", "launcher_seconds", "load1", "commit", "reason"]


def scratch_with(calibration):
    """A folder with configs/ whose launcher calibration is the file `calibration`."""
    d = tempfile.mkdtemp(prefix="launcher_choices_")
    shutil.copytree(os.path.join(paths.ROOT, "configs"), os.path.join(d, "configs"))
    shutil.copyfile(os.path.join(paths.ROOT, calibration), os.path.join(d, LAUNCHER_CALIBRATION))
    return d


def tune(launcher, cwd, config, sets, rate):
    """launch_cluster --tune_only with slice_params automatic: (its "tuning" JSON, wall s)."""
    cmd = [launcher, f"--config={config}", "--tune_only", "--set=scheduling.slice_params=0",
           f"--set=network.bandwidth_gbps={rate:g}", "--set=training.iterations=20"]
    cmd += [f"--set={s}" for s in sets]
    start = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    line = next(x for x in p.stdout.splitlines() if x.startswith("[p3] tuning: "))
    return json.loads(line[len("[p3] tuning: "):]), wall


def row(name, calibration, model, config, rate, t, wall):
    r = {"calibration": name, "calibration_file": calibration, "model": model, "config": config,
         "bandwidth_gbps": rate, "searched": t["searched"], "chosen_slice_params": t["slice_params"],
         "predicted_samples_per_second": "", "predicted_at_40000": "", "best_slice_params": "",
         "search_seconds": "", "launcher_seconds": round(wall, 2), "reason": t.get("reason", "")}
    if t["searched"]:
        at = {g["slice_params"]: g["samples_per_second"] for g in t["grid"]}
        r.update(predicted_samples_per_second=round(t["predicted_samples_per_second"], 3),
                 predicted_at_40000=round(at[40000], 3),
                 best_slice_params=t["best"]["slice_params"], search_seconds=round(t["seconds"], 2))
    return r


def table(rows):
    names = list(dict.fromkeys(r["calibration"] for r in rows))
    print("| model | " + " | ".join(f"{'unlimited' if b == 0 else f'{b:g} Gbit/s'}"
                                    for b in RATES) + " | search s (" + ", ".join(names) + ") |")
    print("|---|" + "---|" * (len(RATES) + 1))
    by = {(r["calibration"], r["model"], float(r["bandwidth_gbps"])): r for r in rows}
    for model in dict.fromkeys(r["model"] for r in rows):
        cells = []
        for b in RATES:
            cells.append(" → ".join(f"{int(by[(n, model, b)]['chosen_slice_params']):,}"
                                    for n in names if (n, model, b) in by))
        secs = [float(by[(n, model, b)]["search_seconds"] or 0) for n in names for b in RATES
                if (n, model, b) in by]
        print(f"| {model} | " + " | ".join(cells) + f" | {min(secs):.1f} – {max(secs):.1f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibration", action="append", required=True,
                    help="NAME=FILE (relative to the repository), in the order wanted")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--models", default="", help="comma-separated subset of the zoo")
    args = ap.parse_args()
    launcher = paths.launcher()
    commit = paths.git_commit(mark_dirty=True)
    rows = []
    for spec in args.calibration:
        name, calibration = spec.split("=", 1)
        cwd = scratch_with(calibration)
        try:
            for model, config, sets in ZOO:
                if args.models and model not in args.models.split(","):
                    continue
                for rate in RATES:
                    load = paths.load1()
                    t, wall = tune(launcher, cwd, config, sets, rate)
                    rows.append(dict(row(name, calibration, model, config, rate, t, wall),
                                     load1=load, commit=commit))
                    print(f"{name} {model} {rate:g}: {t['slice_params']} "
                          f"({t.get('seconds', 0):.1f} s)", file=sys.stderr, flush=True)
        finally:
            shutil.rmtree(cwd)
    csv_io.write_rows(os.path.join(paths.ROOT, args.csv), rows, FIELDS)
    table(rows)


if __name__ == "__main__":
    main()

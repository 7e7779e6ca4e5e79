#!/usr/bin/python3
"""row_lstm on Fashion-MNIST in the pipeline mode: every weight mode at 2 and 4 stages,
3 seeds, test accuracy after every epoch (docs/results/pipeline/pipeline.md, "row_lstm").
By default 3 epochs over the first 15,000 training images (CPU time is scarce), tested
on all 10,000 test images after each epoch.

Runs pipeline_train (build it first: `bazel build //tools:pipeline_train`; the grid took
41 minutes here on the shared 2-core machine, so copy the binary somewhere a rebuild
will not replace it and pass --binary) with configs/pipeline_lstm.textproto, one run at a time, and writes
  --csv       raw per-epoch figures, one row per (mode, stages, seed, epoch)
  --markdown  the table of docs/results/pipeline/pipeline.md: per mode and stage count, the test
              accuracy after each epoch, mean +- sample standard deviation over the seeds,
              and each seed's final accuracy
and prints the table. Each run's result JSON and log go to --raw; with --reuse a run
whose JSON is there is read back instead of run again (runs are deterministic: same
config, same result). --report_only rebuilds the table from --csv.

"data_parallel" is the pipeline's own data-parallel engine (pipeline.weights
data_parallel: N replicas, each mini-batch split over them, gradients averaged, one
update: single-device training on the union batch), not the cluster's `local` mode.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pipeline import MODES, write_report  # noqa: E402  (MODES: label, --set overrides)
from results_lib import csv_io, paths  # noqa: E402

CONFIG = "configs/pipeline_lstm.textproto"
FIELDS = ["mode", "stages", "seed", "epoch", "test_accuracy", "train_loss", "epoch_seconds",
          "samples_per_second", "train_samples", "stage_blocks"]


def run_one(args, label, sets, stages, seed):
    name = f"lstm_{label}_n{stages}_s{seed}"
    os.makedirs(args.raw, exist_ok=True)
    result_file = os.path.join(args.raw, name + ".json")
    if not (args.reuse and os.path.exists(result_file)):
        overrides = sets + [f"pipeline.stages={stages}", f"training.seed={seed}",
                            f"training.epochs={args.epochs}",
                            f"pipeline.train_samples={args.train_samples}", f"name={name}"]
        cmd = [args.binary, "--config=" + CONFIG, "--result_file=" + result_file]
        cmd += ["--set=" + o for o in overrides]
        start = time.time()
        with open(os.path.join(args.raw, name + ".log"), "w") as log:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            sys.exit(f"{name}: pipeline_train failed (exit {proc.returncode}); "
                     f"see {args.raw}/{name}.log")
        print(f"{name}: {time.time() - start:.0f} s", flush=True)
    with open(result_file) as f:
        result = json.load(f)
    rows = []
    for e in result["epochs"]:
        rows.append({"mode": label, "stages": stages, "seed": seed, "epoch": e["epoch"],
                     "test_accuracy": e["test_accuracy"], "train_loss": e["train_loss"],
                     "epoch_seconds": round(e["seconds"], 3),
                     "samples_per_second": round(e["samples_per_second"], 1),
                     "train_samples": args.train_samples or 60000,
                     "stage_blocks": "|".join(result["stage_blocks"])})
    print(f"{name}: accuracy per epoch " +
          " ".join(f"{r['test_accuracy']:.4f}" for r in rows), flush=True)
    return rows


def mean_sd(values):
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return "n/a"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):.2f} ± {100 * sd:.2f}"


def table(rows):
    epochs = sorted({int(r["epoch"]) for r in rows})
    seeds = sorted({int(r["seed"]) for r in rows})
    head = ["mode", "stages", "partition"] + [f"epoch {e}" for e in epochs] + \
        [f"final, seeds {', '.join(map(str, seeds))}"]
    lines = ["| " + " | ".join(head) + " |", "|---|---:|---|" + "---:|" * len(epochs) + "---|"]
    for stages in sorted({int(r["stages"]) for r in rows}):
        for label, _ in MODES:
            mine = [r for r in rows if r["mode"] == label and int(r["stages"]) == stages]
            if not mine:
                continue
            cells = [label, str(stages), mine[0]["stage_blocks"].replace("|", " \\| ")
                     if label != "data_parallel" else f"{stages} replicas"]
            for e in epochs:
                cells.append(mean_sd([float(r["test_accuracy"]) for r in mine
                                      if int(r["epoch"]) == e]))
            final = []
            for s in seeds:
                last = [r for r in mine if int(r["seed"]) == s and int(r["epoch"]) == epochs[-1]]
                final.append(f"{100 * float(last[0]['test_accuracy']):.2f}" if last else "-")
            cells.append(" / ".join(final))
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default="bazel-bin/tools/pipeline_train")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    p.add_argument("--modes", nargs="+", default=[m[0] for m in MODES])
    p.add_argument("--train_samples", type=int, default=15000,
                   help="pipeline.train_samples (0: all 60,000)")
    p.add_argument("--raw", default="out/pipeline_lstm_grid")
    p.add_argument("--csv", default=paths.results("pipeline", "pipeline_lstm_accuracy.csv"))
    p.add_argument("--markdown", default=paths.results("pipeline", "pipeline_lstm_table.md"))
    p.add_argument("--reuse", action="store_true")
    p.add_argument("--report_only", action="store_true")
    args = p.parse_args()
    if args.report_only:
        rows = csv_io.read_rows(args.csv)
    else:
        rows = []
        # Seed-major, so that an interrupted grid still has whole seeds.
        for seed in args.seeds:
            for stages in args.stages:
                for label, sets in MODES:
                    if label in args.modes:
                        rows += run_one(args, label, sets, stages, seed)
                        csv_io.write_rows(args.csv, rows, FIELDS)
    write_report(table(rows), args.csv, args.markdown)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures test accuracy with a 16-bit wire (docs/results/wire_dtype/wire_dtype.md).

Runs configs/default.textproto (mode p3, 2 workers + 2 servers, small_cnn on
Fashion-MNIST) for 3 epochs with each scheduling.wire_dtype and each seed, one run at a
time, the three dtypes of a seed back to back; the cosine schedule spans the 3 epochs
(t_max = 3 x 937). Writes every run's summary figures to a JSON file (after each run, so
that an interrupted measurement keeps what it has) and prints the mean test accuracy per
dtype and its difference from float32.

  bazel build //tools:launch_cluster //server:p3_server //worker:p3_worker
  /usr/bin/python3 tools/experiments/wire_dtype_accuracy.py \
      --out docs/results/wire_dtype/wire_dtype_accuracy.json

A run's result depends only on its seed and dtype, not on timing (the servers sum
gradients in rank order).
"""
import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import paths, runs  # noqa: E402

EPOCH = 937  # iterations of one epoch at 32 x 2 samples
DTYPES = ["float32", "bfloat16", "float16"]
FIELDS = ["iterations", "final_loss", "test_accuracy", "param_l2", "samples_per_second",
          "wall_seconds"]


def summarise(records):
    by_dtype = {}
    for r in records:
        if r.get("test_accuracy") is not None:
            by_dtype.setdefault(r["wire_dtype"], {})[r["seed"]] = r["test_accuracy"]
    # Means over the seeds every dtype has finished, so that the comparison is paired.
    common = set.intersection(*(set(v) for v in by_dtype.values())) if by_dtype else set()
    out = {"seeds_compared": sorted(common), "mean_test_accuracy": {}, "difference_points": {}}
    for dtype, accs in by_dtype.items():
        if common:
            out["mean_test_accuracy"][dtype] = statistics.mean(accs[s] for s in common)
    base = out["mean_test_accuracy"].get("float32")
    if base is not None:
        for dtype, mean in out["mean_test_accuracy"].items():
            out["difference_points"][dtype] = round(100 * (mean - base), 3)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launcher", default="bazel-bin/tools/launch_cluster")
    parser.add_argument("--binaries", default="",
                        help="folder with p3_server and p3_worker (default: the launcher's)")
    parser.add_argument("--config", default="configs/default.textproto")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--out", default=paths.results("wire_dtype", "wire_dtype_accuracy.json"))
    parser.add_argument("--work_dir", default="out/wire_dtype_experiment")
    args = parser.parse_args()
    commit = paths.git_commit()
    seeds = [int(s) for s in args.seeds.split(",")]
    extra = ([f"--server_binary={args.binaries}/p3_server",
              f"--worker_binary={args.binaries}/p3_worker"] if args.binaries else [])
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "commit": commit, "config": args.config, "epochs": args.epochs, "runs": []}
    total = len(seeds) * len(DTYPES)
    for seed in seeds:
        for dtype in DTYPES:
            print(f"[{len(result['runs']) + 1}/{total}] {dtype}, seed {seed} ...", flush=True)
            overrides = [f"training.seed={seed}", f"training.epochs={args.epochs}",
                         f"optimizer.schedule.t_max={args.epochs * EPOCH}",
                         f"scheduling.wire_dtype={dtype}"]
            out_dir = os.path.join(args.work_dir, f"{dtype}_seed{seed}")
            summary, facts = runs.launch(args.launcher, args.config, out_dir, overrides, extra)
            record = {"wire_dtype": dtype, "seed": seed, **facts}
            record.update({k: summary.get(k) for k in FIELDS})
            result["runs"].append(record)
            result["summary"] = summarise(result["runs"])
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
                f.write("\n")
            print(f"    accuracy {record['test_accuracy']}  final loss {record['final_loss']:.4f}"
                  f"  {record['seconds']} s  load {record['load1_before']}", flush=True)
    s = result["summary"]
    print("\n| wire dtype | mean test accuracy | difference from float32 |")
    print("|---|---:|---:|")
    for dtype in DTYPES:
        if dtype in s["mean_test_accuracy"]:
            print(f"| {dtype} | {100 * s['mean_test_accuracy'][dtype]:.2f} % | "
                  f"{s['difference_points'].get(dtype, 0):+.2f} points |")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Measures the default experiment with and without learning-rate schedules.

Runs configs/default.textproto (mode p3, one epoch of Fashion-MNIST, 937 iterations)
through the launcher with each schedule below and each seed, one run at a time; writes
every run's summary figures to a JSON file and prints a table of test accuracy after
one epoch (docs/results/training/lr_schedule.md).

  bazel build //tools:launch_cluster
  /usr/bin/python3 tools/experiments/lr_schedule.py --out docs/results/training/lr_schedule.json

A run takes 1-2 minutes on the 2-core development machine; results do not depend on
timing (the servers sum gradients in rank order), only on the seed.
"""
import argparse
import datetime
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import paths, runs  # noqa: E402

# One epoch at 32 x 2 samples per iteration: 60000 / 64 = 937 iterations.
EPOCH = 937
SCHEDULES = [
    # (name, overrides)
    ("constant (today's default)", []),
    ("cosine over the epoch", ["optimizer.schedule.name=cosine",
                               f"optimizer.schedule.t_max={EPOCH}"]),
    ("warm-up 50 from 0.1, then cosine", ["optimizer.schedule.name=cosine",
                                          f"optimizer.schedule.t_max={EPOCH}",
                                          "optimizer.schedule.warmup_iterations=50",
                                          "optimizer.schedule.warmup_start_factor=0.1"]),
]
SEEDS = [1, 2, 3]
FIELDS = ["iterations", "final_loss", "test_accuracy", "param_l2", "samples_per_second",
          "wall_seconds"]


def run(launcher, config, name, seed, overrides, out_root, binaries):
    slug = name.split(" (")[0].replace(", ", "_").replace(" ", "_").replace(".", "")
    out_dir = os.path.join(out_root, f"{slug}_seed{seed}")
    extra = ([f"--server_binary={binaries}/p3_server", f"--worker_binary={binaries}/p3_worker"]
             if binaries else [])
    summary, facts = runs.launch(launcher, config, out_dir, [f"training.seed={seed}"] + overrides,
                            extra)
    record = {"schedule": name, "seed": seed, "command": facts["command"],
              "seconds": facts["seconds"]}
    record.update({k: summary.get(k) for k in FIELDS})
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launcher", default="bazel-bin/tools/launch_cluster")
    parser.add_argument("--config", default="configs/default.textproto")
    parser.add_argument("--out", default=paths.results("training", "lr_schedule.json"))
    parser.add_argument("--work_dir", default="out/schedule_experiment")
    parser.add_argument("--binaries", default="",
                        help="folder with p3_server and p3_worker (default: the launcher's)")
    args = parser.parse_args()
    commit = paths.git_commit()
    records = []
    total = len(SCHEDULES) * len(SEEDS)
    for seed in SEEDS:
        for name, overrides in SCHEDULES:
            print(f"[{len(records) + 1}/{total}] {name}, seed {seed} ...", flush=True)
            records.append(run(args.launcher, args.config, name, seed, overrides, args.work_dir,
                               args.binaries))
            r = records[-1]
            print(f"    accuracy {r['test_accuracy']}  final loss {r['final_loss']:.4f}  "
                  f"{r['seconds']} s", flush=True)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit, "config": args.config, "runs": records,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("\n| schedule | " + " | ".join(f"seed {s}" for s in SEEDS) + " | mean |")
    print("|---|" + "---:|" * (len(SEEDS) + 1))
    for name, _ in SCHEDULES:
        accs = [r["test_accuracy"] for r in records if r["schedule"] == name]
        cells = " | ".join(f"{100 * a:.2f} %" for a in accs)
        print(f"| {name} | {cells} | {100 * statistics.mean(accs):.2f} % |")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

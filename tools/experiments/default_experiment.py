#!/usr/bin/env python3
"""Measures the figures of docs/results/training/default_experiment.md and docs/design.md.

Runs the default experiment (configs/default.textproto, mode p3) twice, the same in mode
`local` (configs/local.textproto), and both for 10, 20 and 100 iterations, through the
launcher, one run at a time; writes every run's summary figures with the machine's load
to a JSON file and prints a table.

  bazel build //tools:launch_cluster
  /usr/bin/python3 tools/experiments/default_experiment.py \
      --out docs/results/training/default_experiment.json

Takes about 5 minutes on the 2-core development machine.
"""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import paths, runs  # noqa: E402

RUNS = [
    # (name, config, overrides)
    ("p3, 1 epoch, run 1", "configs/default.textproto", []),
    ("p3, 1 epoch, run 2", "configs/default.textproto", []),
    ("local, 1 epoch", "configs/local.textproto", []),
]
for iterations in (10, 20, 100):
    for mode, config in (("p3", "configs/default.textproto"), ("local", "configs/local.textproto")):
        RUNS.append((f"{mode}, {iterations} iterations", config,
                     [f"training.iterations={iterations}", "training.evaluate=false"]))

FIELDS = ["mode", "iterations", "samples_per_second", "final_loss", "test_accuracy", "param_l2",
          "wall_seconds"]


def run(launcher, name, config, overrides, out_root):
    out_dir = os.path.join(out_root, name.replace(", ", "_").replace(" ", "_"))
    summary, facts = runs.launch(launcher, config, out_dir, overrides)
    record = {"run": name, **facts}
    record.update({k: summary.get(k) for k in FIELDS})
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--launcher", default="bazel-bin/tools/launch_cluster")
    parser.add_argument("--out", default=paths.results("training", "default_experiment.json"))
    parser.add_argument("--work_dir", default="out/default_experiment")
    args = parser.parse_args()
    commit = paths.git_commit()
    records = []
    for i, (name, config, overrides) in enumerate(RUNS):
        print(f"[{i + 1}/{len(RUNS)}] {name} ...", flush=True)
        records.append(run(args.launcher, name, config, overrides, args.work_dir))
        r = records[-1]
        print(f"    param_l2 {r['param_l2']:.6f}  accuracy {r['test_accuracy']}  "
              f"{r['samples_per_second']:.0f} samples/s  load {r['load1_before']}", flush=True)
    by = {r["run"]: r for r in records}
    comparison = []
    for iterations in (10, 20, 100):
        p3 = by[f"p3, {iterations} iterations"]["param_l2"]
        local = by[f"local, {iterations} iterations"]["param_l2"]
        comparison.append({"iterations": iterations, "p3_param_l2": p3, "local_param_l2": local,
                           "relative_difference": abs(p3 - local) / abs(local)})
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit, "cpus": os.cpu_count(), "runs": records,
        "p3_vs_local_param_l2": comparison,
        "p3_runs_identical": by["p3, 1 epoch, run 1"]["param_l2"] ==
                             by["p3, 1 epoch, run 2"]["param_l2"],
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print("\n| run | samples/s | test accuracy | param_l2 | load |")
    print("|---|---:|---:|---:|---:|")
    for r in records:
        acc = "—" if r["test_accuracy"] is None else f"{100 * r['test_accuracy']:.2f} %"
        print(f"| {r['run']} | {r['samples_per_second']:.0f} | {acc} | {r['param_l2']:.6f} | "
              f"{r['load1_before']} |")
    for c in comparison:
        print(f"p3 vs local after {c['iterations']} iterations: relative param_l2 difference "
              f"{c['relative_difference']:.1e}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

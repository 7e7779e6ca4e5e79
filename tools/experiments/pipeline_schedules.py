#!/usr/bin/python3
"""Throughput and bubble fraction of the pipeline schedules
(docs/results/pipeline/pipeline.md, "Schedules"): 1F1B (SpecTrain v1; and vanilla, one mini-batch at a time) and GPipe with
several micro-batch counts, at 2 and 4 stages, on row_lstm (Fashion-MNIST, batch 64).

Each run trains --iterations mini-batches with pipeline_train (no evaluation) and reports
the steady samples/s (mini-batches after the first 5) and the measured bubble fraction:
1 - (the stages' busy seconds) / (stages x training seconds), where a stage is busy
while it runs a forward, a backward or an update (waits for its neighbours excluded).
The ideal next to it assumes stages of equal cost and one core per stage:
  gpipe               (K - 1) / (M + K - 1)                    K stages, M micro-batches
  interleaved_1f1b    (K - 1) / (V M + K - 1)                  V = 2 chunks per stage
  1f1b (pipelined)    (K - 1) / (C + K - 1)                    fill and drain once per run of C
  vanilla             (K - 1) / K                              one stage busy at a time
--repeats runs per configuration, interleaved; the median is reported, with min and max.
Writes --csv (every run) and --markdown (the table), prints the table.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pipeline  # noqa: E402  (run: one pipeline_train run; write_report)
from results_lib import csv_io, paths  # noqa: E402

CONFIG = "configs/pipeline_lstm.textproto"


def configs(args):
    out = []
    for k in args.stages:
        out.append(("1f1b", "vanilla", 1, k, ["pipeline.weights=vanilla"]))
        out.append(("1f1b", "spectrain_v1", 1, k, ["pipeline.weights=spectrain",
                                                    "pipeline.spectrain_version=1"]))
        for m in args.microbatches:
            out.append(("gpipe", "vanilla", m, k, ["pipeline.schedule=gpipe",
                                                   "pipeline.weights=vanilla",
                                                   f"pipeline.microbatches={m}"]))
        # Interleaved 1F1B with 2 chunks per stage: needs 2 K blocks (row_lstm has 5) and
        # M a multiple of K.
        if args.interleaved and 2 * k <= args.blocks:
            for m in args.microbatches:
                if m % k == 0:
                    out.append(("interleaved_1f1b", "vanilla", m, k,
                                ["pipeline.schedule=interleaved_1f1b", "pipeline.weights=vanilla",
                                 "pipeline.chunks=2", f"pipeline.microbatches={m}"]))
    return out


def ideal(schedule, weights, m, k, iterations):
    if schedule == "gpipe":
        return (k - 1) / (m + k - 1)
    if schedule == "interleaved_1f1b":  # V = 2 chunks per stage
        return (k - 1) / (2 * m + k - 1)
    if weights == "vanilla":
        return (k - 1) / k
    return (k - 1) / (iterations + k - 1)


def run_one(args, schedule, weights, m, k, sets, repeat):
    name = f"sched_{schedule}_{weights}_m{m}_n{k}_r{repeat}"
    r = pipeline.run(args.binary, sets + [f"pipeline.stages={k}",
                                                f"training.iterations={args.iterations}",
                                                "training.evaluate=false"],
                           name, args.raw, config=CONFIG)
    load_before = r["load_before"]
    row = {"schedule": schedule, "weights": weights, "microbatches": m, "stages": k,
           "repeat": repeat, "samples_per_second": round(r["samples_per_second"], 1),
           "bubble_fraction": round(r["bubble_fraction"], 4),
           "ideal_bubble_fraction": round(ideal(schedule, weights, m, k, args.iterations), 4),
           "stage_blocks": "|".join(r["stage_blocks"]), "load_before": round(load_before, 2),
           "load_after": round(os.getloadavg()[0], 2)}
    print(f"{name}: {row['samples_per_second']} samples/s, bubble {row['bubble_fraction']} "
          f"(ideal {row['ideal_bubble_fraction']}), load {row['load_before']}", flush=True)
    return row


def table(rows):
    lines = ["| schedule | weights | stages | micro-batches | median samples/s | min | max | "
             "bubble measured (median) | bubble ideal |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    keys = []
    for r in rows:
        key = (r["schedule"], r["weights"], int(r["stages"]), int(r["microbatches"]))
        if key not in keys:
            keys.append(key)
    for key in sorted(keys, key=lambda x: (x[2], x[0], x[1], x[3])):
        mine = [r for r in rows if (r["schedule"], r["weights"], int(r["stages"]),
                                    int(r["microbatches"])) == key]
        rates = [float(r["samples_per_second"]) for r in mine]
        bubbles = [float(r["bubble_fraction"]) for r in mine]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | "
                     f"{statistics.median(rates):.0f} | {min(rates):.0f} | {max(rates):.0f} | "
                     f"{statistics.median(bubbles):.3f} | "
                     f"{float(mine[0]['ideal_bubble_fraction']):.3f} |")
    return "\n".join(lines) + f"\n\n{len(rows) // max(1, len(keys))} runs per row.\n"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default="bazel-bin/tools/pipeline_train")
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    p.add_argument("--microbatches", type=int, nargs="+", default=[1, 2, 4, 8])
    p.add_argument("--raw", default="out/pipeline_schedule_bench")
    p.add_argument("--csv", default=paths.results("pipeline", "pipeline_schedules.csv"))
    p.add_argument("--markdown", default=paths.results("pipeline", "pipeline_schedules_table.md"))
    p.add_argument("--report_only", action="store_true")
    p.add_argument("--interleaved", action="store_true",
                   help="also interleaved_1f1b with 2 chunks per stage")
    p.add_argument("--blocks", type=int, default=5, help="the model's blocks (row_lstm: 5)")
    p.add_argument("--append", action="store_true",
                   help="add to the rows already in --csv (e.g. --interleaved --only_interleaved)")
    p.add_argument("--only_interleaved", action="store_true")
    args = p.parse_args()
    if args.report_only:
        rows = csv_io.read_rows(args.csv)
    else:
        rows = csv_io.read_rows(args.csv) if args.append else []
        for repeat in range(args.repeats):  # interleaved: background load spreads out
            for schedule, weights, m, k, sets in configs(args):
                if args.only_interleaved and schedule != "interleaved_1f1b":
                    continue
                rows.append(run_one(args, schedule, weights, m, k, sets, repeat))
                csv_io.write_rows(args.csv, rows, list(rows[0].keys()))
    pipeline.write_report(table(rows), args.csv, args.markdown)


if __name__ == "__main__":
    main()

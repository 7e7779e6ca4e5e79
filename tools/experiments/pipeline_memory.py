#!/usr/bin/python3
"""Measured peak memory per pipeline stage for every weight mode and schedule, with and
without activation recomputation (docs/results/pipeline/pipeline.md, "Memory").

Every run is pipeline_train, which counts each stage thread's CPU tensor allocations
(p3/pipeline/stage_memory.h: a counting wrapper around libtorch's CPU allocator; a
tensor's bytes go back to the stage that allocated it whichever thread frees it) and
reports per stage the peak of live bytes and what was live at that peak by category:
model (the stage's replica of the whole model, allocated when the engine is built),
optimizer (separate real weights, momentum), stash (weight versions kept for a backward),
forward (activations kept for the backward and the output handed on), backward
(parameter gradients, input gradients, temporaries), other.

Configurations, per model and stage count (2, 4): 1f1b with vanilla, stale, pipedream,
spectrain v1, spectrain v2 and data_parallel; gpipe (vanilla) with 1 and 4
micro-batches; interleaved_1f1b (vanilla, 2 chunks per stage, micro-batches = stages)
when --interleaved and the model has 2 x stages blocks; each with recompute off and on (data_parallel: off only).
Models: small_cnn (Fashion-MNIST, batch 32), row_lstm (Fashion-MNIST, batch 64) and
resnet50 (synthetic 32x32, batch 16), as tools/experiments/pipeline.py's THROUGHPUT_MODELS.
The stage boundaries are fixed per model and stage count (a first run's profiled
partition), so that every mode is measured on the same cut.

--repeats runs per configuration, interleaved (the machine is shared): memory is the
same in every repeat (checked: the script reports the largest difference), samples/s is
the median. Writes --csv (one row per run and stage), --markdown (tables) and --plot.
"""
import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pipeline  # noqa: E402  (run: one pipeline_train run; write_report)
from results_lib import csv_io, paths  # noqa: E402

MODELS = {
    # name: (config, overrides) -- as pipeline.py's THROUGHPUT_MODELS
    "small_cnn": ("configs/pipeline_spectrain.textproto",
                  ["training.batch_size=32", "optimizer.lr=0.02"]),
    "row_lstm": ("configs/pipeline_lstm.textproto", []),
    "resnet50": ("configs/pipeline_spectrain.textproto",
                 ["model.name=resnet50", "model.image_size=32", "model.in_channels=3",
                  "data.dataset=synthetic", "data.synthetic_size=1024",
                  "training.batch_size=16", "optimizer.lr=0.001",
                 # 6 mini-batches (4 stages reach their steady in-flight count after 4),
                 # samples/s from the last 4: one ResNet-50 run takes minutes on this
                 # shared machine.
                 "training.warmup_iterations=2"]),
}
CATEGORIES = ["model", "optimizer", "stash", "forward", "backward", "other"]
MiB = 1024.0 * 1024.0


def configs(args, stages, blocks):
    """(label, schedule, weights, microbatches, recompute, overrides)"""
    modes = [("vanilla", ["pipeline.weights=vanilla"]),
             ("stale", ["pipeline.weights=stale"]),
             ("pipedream", ["pipeline.weights=pipedream"]),
             ("spectrain_v1", ["pipeline.weights=spectrain", "pipeline.spectrain_version=1"]),
             ("spectrain_v2", ["pipeline.weights=spectrain", "pipeline.spectrain_version=2"])]
    out = []
    for recompute in (False, True):
        rc = [f"pipeline.recompute={'true' if recompute else 'false'}"]
        for label, sets in modes:
            out.append((label, "1f1b", label, 1, recompute, sets + rc))
        if not recompute:
            out.append(("data_parallel", "1f1b", "data_parallel", 1, False,
                        ["pipeline.weights=data_parallel"]))
        for m in (1, 4):
            out.append((f"gpipe_m{m}", "gpipe", "vanilla", m, recompute,
                        ["pipeline.schedule=gpipe", "pipeline.weights=vanilla",
                         f"pipeline.microbatches={m}"] + rc))
        if args.interleaved and 2 * stages <= blocks:  # 2 chunks per stage, a block each at least
            out.append((f"interleaved_m{stages}", "interleaved_1f1b", "vanilla", stages, recompute,
                        ["pipeline.schedule=interleaved_1f1b", "pipeline.weights=vanilla",
                         f"pipeline.microbatches={stages}", "pipeline.chunks=2"] + rc))
    return out


def with_boundaries(config_path, boundaries, out_path):
    """A copy of the config with `boundaries` in its pipeline section."""
    with open(config_path) as f:
        text = f.read()
    lines = "".join(f"  boundaries: {b}\n" for b in boundaries)
    text, n = re.subn(r"(\npipeline \{\n)", r"\1" + lines.replace("\\", "\\\\"), text, count=1)
    if n != 1:
        sys.exit(f"{config_path}: no pipeline section to put boundaries into")
    with open(out_path, "w") as f:
        f.write(text)
    return out_path


def run(args, config, overrides, name):
    return pipeline.run(args.binary, overrides + ["training.evaluate=false"], name,
                              args.raw, config=config)


def measure(args):
    plan = []  # (model, stages, label, schedule, weights, m, recompute, config, overrides)
    for model in args.models:
        config, base = MODELS[model]
        for stages in args.stages:
            # The partition every configuration of this model and stage count uses.
            probe = run(args, config, base + [f"pipeline.stages={stages}",
                                              "pipeline.weights=vanilla",
                                              "training.iterations=1"],
                        f"mem_{model}_n{stages}_partition")
            fixed = with_boundaries(config, probe["boundaries"],
                                    os.path.join(args.raw, f"{model}_n{stages}.textproto"))
            for label, schedule, weights, m, recompute, sets in configs(
                    args, stages, len(probe["block_names"])):
                if args.only and label not in args.only:
                    continue
                cfg = config if weights == "data_parallel" or schedule == "interleaved_1f1b" else fixed
                plan.append((model, stages, label, schedule, weights, m, recompute, cfg,
                             base + sets + [f"pipeline.stages={stages}",
                                            f"training.iterations={args.iterations[model]}"]))
    rows = csv_io.read_rows(args.csv) if args.append else []
    have = {(r["model"], int(r["stages"]), r["config"], int(r["recompute"]), int(r["repeat"]))
            for r in rows}
    for repeat in range(args.first_repeat, args.first_repeat + args.repeats):
        # Interleaved: background load spreads out over the configurations.
        for model, stages, label, schedule, weights, m, recompute, cfg, overrides in plan:
            if (model, stages, label, int(recompute), repeat) in have:
                continue  # measured by an earlier, interrupted invocation (--append)
            name = f"mem_{model}_{label}_rc{int(recompute)}_n{stages}_r{repeat}"
            r = run(args, cfg, overrides, name)
            print(f"{name}: {r['samples_per_second']:.1f} samples/s, peak MiB "
                  f"{[round(s['peak_bytes'] / MiB, 1) for s in r['memory']]}, "
                  f"load {r['load_before']:.2f}", flush=True)
            for s in r["memory"]:
                row = {"model": model, "stages": stages, "config": label, "schedule": schedule,
                       "weights": weights, "microbatches": m, "recompute": int(recompute),
                       "repeat": repeat, "stage": s["stage"],
                       "stage_blocks": r["stage_blocks"][s["stage"]],
                       "batch_size": r["batch_size"], "iterations": r["iterations"],
                       "parameter_bytes": s["parameter_bytes"], "peak_bytes": s["peak_bytes"]}
                for c in CATEGORIES:
                    row[f"at_peak_{c}"] = s["at_peak"][c]
                for c in CATEGORIES:
                    row[f"peak_{c}"] = s["category_peak"][c]
                row.update({"samples_per_second": round(r["samples_per_second"], 2),
                            "load_before": round(r["load_before"], 2),
                            "load_after": round(r["load_after"], 2)})
                rows.append(row)
            csv_io.write_rows(args.csv, rows, list(rows[0].keys()))
    print("wrote", args.csv)
    return rows


def mib(x):
    return f"{float(x) / MiB:.2f}"


def group(rows):
    """{(model, stages, config, recompute): {repeat: [rows by stage]}}"""
    out = {}
    for r in rows:
        key = (r["model"], int(r["stages"]), r["config"], int(r["recompute"]))
        out.setdefault(key, {}).setdefault(int(r["repeat"]), []).append(r)
    for reps in out.values():
        for stage_rows in reps.values():
            stage_rows.sort(key=lambda r: int(r["stage"]))
    return out


def rate(reps):
    return statistics.median(float(stage_rows[0]["samples_per_second"])
                             for stage_rows in reps.values())


def runs(reps):
    return len(reps)


def tables(rows):
    g = group(rows)
    models = [m for m in MODELS if any(k[0] == m for k in g)]
    order = []
    for k in g:
        if (k[2], k[3]) not in order:
            order.append((k[2], k[3]))
    spread = 0  # the largest difference in a stage's peak between repeats
    for reps in g.values():
        peaks = [[int(r["peak_bytes"]) for r in stage_rows] for stage_rows in reps.values()]
        for by_stage in zip(*peaks):
            spread = max(spread, max(by_stage) - min(by_stage))
    loads = [float(r["load_before"]) for r in rows]
    lines = [f"Memory from the first run of each configuration (the largest difference of a "
             f"stage's peak between runs of one configuration: {spread / MiB:.3f} MiB); "
             f"samples/s the median of the runs counted in column `runs`. Load average (1 min) "
             f"before the runs: median {statistics.median(loads):.2f}, max {max(loads):.2f}.",
             ""]
    for model in models:
        for stages in sorted({k[1] for k in g if k[0] == model}):
            first = next(iter(g[(model, stages, "vanilla", 0)].values()))
            lines += [f"### {model}, {stages} stages (batch {first[0]['batch_size']}; stages: "
                      f"{' | '.join(r['stage_blocks'] for r in first)}; model replica per stage "
                      f"{mib(first[0]['at_peak_model'])} MiB, not included below)", "",
                      "| config | recompute | peak MiB per stage (without the replica) | "
                      "at the peak: optimizer / stash / forward / backward, largest stage | "
                      "stash peak per stage | samples/s (median) | runs | recompute: memory, stage 0 / largest stage | "
                      "recompute: samples/s |",
                      "|---|---:|---|---|---|---:|---:|---:|---:|"]
            for config, recompute in order:
                reps = g.get((model, stages, config, recompute))
                if reps is None:
                    continue
                stage_rows = reps[min(reps)]
                train = [int(r["peak_bytes"]) - int(r["at_peak_model"]) for r in stage_rows]
                big = stage_rows[max(range(len(train)), key=lambda i: train[i])]
                parts = " / ".join(mib(big[f"at_peak_{c}"])
                                   for c in ("optimizer", "stash", "forward", "backward"))
                stash = " / ".join(mib(r["peak_stash"]) for r in stage_rows)
                mem_cost = time_cost = ""
                off = g.get((model, stages, config, 0))
                if recompute and off is not None:
                    off_rows = off[min(off)]
                    off_train = [int(r["peak_bytes"]) - int(r["at_peak_model"]) for r in off_rows]
                    mem_cost = (f"{(train[0] - off_train[0]) / off_train[0] * 100:+.0f} % / "
                                f"{(max(train) - max(off_train)) / max(off_train) * 100:+.0f} %")
                    time_cost = f"{(rate(reps) / rate(off) - 1) * 100:+.0f} %"
                lines.append(f"| {config} | {'on' if recompute else 'off'} | "
                             f"{' / '.join(mib(t) for t in train)} | {parts} (stage {big['stage']}) | "
                             f"{stash} | {rate(reps):.1f} | {runs(reps)} | {mem_cost} | {time_cost} |")
            lines.append("")
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    g = group(rows)
    models = [m for m in MODELS if any(k[0] == m for k in g)]
    stage_counts = sorted({k[1] for k in g})
    fig, axes = plt.subplots(len(models), len(stage_counts),
                             figsize=(7 * len(stage_counts), 3.3 * len(models)), squeeze=False)
    for i, model in enumerate(models):
        for j, stages in enumerate(stage_counts):
            ax = axes[i][j]
            keys = [k for k in g if k[0] == model and k[1] == stages]
            width = 0.8 / stages
            for s in range(stages):
                values = []
                for k in keys:
                    reps = g[k]
                    r = reps[min(reps)][s]
                    values.append((int(r["peak_bytes"]) - int(r["at_peak_model"])) / MiB)
                ax.bar([x + s * width for x in range(len(keys))], values, width,
                       label=f"stage {s}")
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(keys))])
            ax.set_xticklabels([k[2] + ("+rc" if k[3] else "") for k in keys], rotation=60,
                               ha="right", fontsize=7)
            ax.set_ylabel("peak MiB (no replica)")
            ax.set_title(f"{model}, {stages} stages", fontsize=9)
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default="bazel-bin/tools/pipeline_train")
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--interleaved", action="store_true",
                   help="also schedule interleaved_1f1b (2 chunks per stage)")
    p.add_argument("--raw", default="out/pipeline_memory_bench")
    p.add_argument("--csv", default=paths.results("pipeline", "pipeline_memory.csv"))
    p.add_argument("--markdown", default=paths.results("pipeline", "pipeline_memory_table.md"))
    p.add_argument("--plot", default=paths.results("pipeline", "pipeline_memory.png"))
    p.add_argument("--report_only", action="store_true")
    p.add_argument("--append", action="store_true",
                   help="add to the rows already in --csv instead of replacing them")
    p.add_argument("--first_repeat", type=int, default=0,
                   help="number of the first repeat (with --append: after those in the CSV)")
    p.add_argument("--only", nargs="+", default=[],
                   help="run only these configurations (e.g. vanilla gpipe_m4 interleaved_m2)")
    args = p.parse_args()
    args.iterations = {"small_cnn": 40, "row_lstm": 40, "resnet50": 6}
    if args.report_only:
        rows = csv_io.read_rows(args.csv)
    else:
        rows = measure(args)
    pipeline.write_report(tables(rows), args.csv, args.markdown)
    plot(rows, args.plot)


if __name__ == "__main__":
    main()

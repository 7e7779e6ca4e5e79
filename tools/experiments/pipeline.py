#!/usr/bin/python3
"""Benchmark of the pipeline mode (docs/pipeline.md): accuracy per epoch and throughput.

Runs bazel-bin/tools/pipeline_train (build it first:
`bazel build //tools:pipeline_train`) once per configuration, one run at a time,
and writes into --out (default docs/results/pipeline):
  pipeline_accuracy.csv     test accuracy and training loss per epoch, per mode and stages
  pipeline_accuracy.png     the same as a plot (matplotlib; run with /usr/bin/python3)
  pipeline_throughput.csv   samples/s of every run (with the load average around it)
  pipeline_stage_times.csv  where each stage's time went, per run
  pipeline_tables.md        tables: accuracy per epoch, final accuracy, median samples/s
                            (the page, pipeline.md, quotes them with its analysis)
  pipeline_stage_times_table.md   the stage times' table

Parts: --part=accuracy (Fashion-MNIST, small_cnn, --epochs epochs per run, one run per
configuration), --part=throughput (--repeats runs of --iterations mini-batches per
configuration, interleaved so that background load spreads over all of them, median
reported), --part=report (tables and plot from the CSVs), --part=all.
Raw results (JSON per run, logs) go to out/pipeline_bench/.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths  # noqa: E402

CONFIG = "configs/pipeline_spectrain.textproto"
MODES = [  # label, --set overrides
    ("data_parallel", ["pipeline.weights=data_parallel"]),
    ("vanilla", ["pipeline.weights=vanilla"]),
    ("stale", ["pipeline.weights=stale"]),
    ("pipedream", ["pipeline.weights=pipedream"]),
    ("spectrain_v1", ["pipeline.weights=spectrain", "pipeline.spectrain_version=1"]),
    ("spectrain_v2", ["pipeline.weights=spectrain", "pipeline.spectrain_version=2"]),
]
LABELS = [m[0] for m in MODES]


def write_report(text, csv_path, markdown_path):
    """Writes the markdown table `text`, prints it and where the results are."""
    with open(markdown_path, "w") as f:
        f.write(text)
    print(text)
    print("wrote", csv_path, "and", markdown_path)


# Command prefix of every pipeline_train run (--boost): a new session whose autogroup
# has nice -20, the process itself at nice -20. With the kernel's autogroup scheduling
# (sched_autogroup_enabled = 1) CPU time is shared fairly between sessions first, so a
# plain `nice` does not help against other sessions' builds; a boosted autogroup does.
# Needs root. The runs then get most of the cores, not a quiet machine: memory bandwidth
# and caches are still shared.
BOOST = ["setsid", "bash", "-c", 'echo -20 > /proc/$$/autogroup && exec nice -n -20 "$@"',
         "boost"]
PREFIX = []


def wait_for_quiet(max_load, max_wait):
    """Waits (up to max_wait seconds) until the 1-minute load average is below max_load:
    the machine is shared, and a throughput figure taken while others compile measures
    them. Returns the load average when it stopped waiting."""
    deadline = time.time() + max_wait
    while os.getloadavg()[0] >= max_load and time.time() < deadline:
        time.sleep(10)
    return os.getloadavg()[0]


def run(binary, overrides, name, raw_dir, reuse=False, config=CONFIG):
    """One pipeline_train run of `config` with --set `overrides` (and name=`name`);
    returns its result JSON (dict) with the 1-minute load average before and after the
    run. With `reuse`, a result already in raw_dir is read instead (the runs are
    deterministic: same config, same result). Exits naming the log when the run fails."""
    os.makedirs(raw_dir, exist_ok=True)
    result_file = os.path.join(raw_dir, name + ".json")
    if reuse and os.path.exists(result_file):
        with open(result_file) as f:
            result = json.load(f)
        result.setdefault("load_before", float("nan"))
        result.setdefault("load_after", float("nan"))
        print(f"{name}: reused {result_file}", flush=True)
        return result
    args = PREFIX + [binary, "--config=" + config, "--result_file=" + result_file]
    args += ["--set=" + o for o in overrides + ["name=" + name]]
    load_before = os.getloadavg()[0]
    start = time.time()
    with open(os.path.join(raw_dir, name + ".log"), "w") as log:
        proc = subprocess.run(args, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        sys.exit(f"{name}: pipeline_train failed (exit {proc.returncode}); see {raw_dir}/{name}.log")
    with open(result_file) as f:
        result = json.load(f)
    result["load_before"] = load_before
    result["load_after"] = os.getloadavg()[0]
    result["process_seconds"] = time.time() - start
    print(f"{name}: {result['samples_per_second']:.0f} samples/s, accuracy "
          f"{result['test_accuracy']}, load {load_before:.2f}->{result['load_after']:.2f}",
          flush=True)
    return result


def accuracy(args):
    rows = []
    configs = [(seed, stages, label, sets) for seed in args.seeds for stages in args.stages
               for label, sets in MODES]
    for seed, stages, label, sets in configs:
        overrides = sets + [f"pipeline.stages={stages}", f"training.epochs={args.epochs}",
                            f"optimizer.lr={args.lr}", f"training.seed={seed}",
                            "training.evaluate=true"]
        r = run(args.binary, overrides, f"acc_{label}_n{stages}_s{seed}", args.raw,
                reuse=args.reuse)
        for e in r["epochs"]:
            rows.append({"mode": label, "stages": stages, "seed": seed, "lr": args.lr,
                         "epoch": e["epoch"], "test_accuracy": e["test_accuracy"],
                         "train_loss": e["train_loss"], "epoch_seconds": e["seconds"],
                         "samples_per_second": e["samples_per_second"],
                         "stage_blocks": "|".join(r["stage_blocks"])})
    path = os.path.join(args.out, "pipeline_accuracy.csv")
    csv_io.write_rows(path, rows)
    print("wrote", path)


THROUGHPUT_MODELS = {
    # name: extra overrides
    # The accuracy runs' settings (lr 0.02: lr 0.05 makes 4-stage pipelines diverge, and
    # NaN-filled tensors would time something else).
    "small_cnn": ["training.batch_size=32", "optimizer.lr=0.02"],
    # Finer blocks (18), so that 2 and 4 stages can be balanced; synthetic 32x32 images.
    # lr 0.001: larger ones make the randomly initialised ResNet's loss explode.
    "resnet50": ["model.name=resnet50", "model.image_size=32", "model.in_channels=3",
                 "data.dataset=synthetic", "data.synthetic_size=1024",
                 "training.batch_size=16", "optimizer.lr=0.001"],
}


def partition_bound(result):
    """Speed-up over one thread that the partition allows at best: the profiled time of
    all blocks over that of the most expensive stage (pipelined modes), or "" when the
    run was not profiled."""
    costs = result.get("block_seconds") or []
    if not costs or not result.get("boundaries"):
        return ""
    cuts = [0] + list(result["boundaries"]) + [len(costs)]
    stage = [sum(costs[a:b]) for a, b in zip(cuts, cuts[1:])]
    return round(sum(costs) / max(stage), 3)


def throughput(args):
    configs = []
    for model in args.models:
        iterations = args.iterations if model == "small_cnn" else args.resnet_iterations
        base = THROUGHPUT_MODELS[model] + [f"training.iterations={iterations}",
                                           "training.evaluate=false"] + args.extra_set
        binaries = [("", args.binary, [])]
        if args.compare_binary:
            binaries.append(("-before", args.compare_binary, []))
        for variant in args.variant:
            name, _, sets = variant.partition("=")
            binaries.append(("-" + name, args.binary, sets.split(",")))
        for suffix, binary, variant_sets in binaries:
            if not args.modes or "single_device" in args.modes:
                configs.append((model, "single_device" + suffix, 1, binary,
                                base + variant_sets +
                                ["pipeline.weights=vanilla", "pipeline.stages=1"]))
            for stages in args.stages:
                for label, sets in MODES:
                    if args.modes and label not in args.modes:
                        continue
                    configs.append((model, label + suffix, stages, binary,
                                    base + variant_sets + sets + [f"pipeline.stages={stages}"]))
    rows = []
    stage_rows = []
    for repeat in range(args.repeats):
        for model, label, stages, binary, overrides in configs:
            wait_for_quiet(args.quiet_load, args.max_wait)
            r = run(binary, overrides, f"tp_{model}_{label}_n{stages}_r{repeat}", args.raw,
                    reuse=args.reuse, config=args.config)
            train_seconds = sum(e["seconds"] for e in r["epochs"])
            for k, t in enumerate(r.get("stage_times", [])):
                stage_rows.append({"model": model, "mode": label, "stages": stages,
                                   "repeat": repeat, "stage": k,
                                   "train_seconds": round(train_seconds, 4),
                                   **{key: round(v, 4) for key, v in t.items()}})
            rows.append({"model": model, "mode": label, "stages": stages, "repeat": repeat,
                         "samples_per_second": round(r["samples_per_second"], 1),
                         "partition_bound": partition_bound(r),
                         "iterations": r["iterations"], "batch_size": r["batch_size"],
                         "stage_blocks": "|".join(r["stage_blocks"]),
                         "load_before": round(r["load_before"], 2),
                         "load_after": round(r["load_after"], 2)})
    path = os.path.join(args.out, args.throughput_csv)
    csv_io.write_rows(path, rows)
    print("wrote", path)
    if stage_rows:
        name = (args.throughput_csv.replace("throughput", "stage_times")
                if "throughput" in args.throughput_csv
                else args.throughput_csv.replace(".csv", "_stage_times.csv"))
        path = os.path.join(args.out, name)
        csv_io.write_rows(path, stage_rows)
        print("wrote", path)


def contention(args):
    """How much two busy threads get out of this machine's 2 cores: a single-device run
    alone, then two single-device runs at the same time (separate processes, so nothing
    is shared but the hardware). The sum of the two concurrent rates over the lone rate is
    the most a 2-stage pipeline of perfectly balanced, independent stages could gain."""
    rows = []
    for repeat in range(args.repeats):
        for model in args.models:
            iterations = args.iterations if model == "small_cnn" else args.resnet_iterations
            base = THROUGHPUT_MODELS[model] + [f"training.iterations={iterations}",
                                               "training.evaluate=false",
                                               "pipeline.weights=vanilla", "pipeline.stages=1"]
            wait_for_quiet(args.quiet_load, args.max_wait)
            alone = run(args.binary, base, f"ct_{model}_alone_r{repeat}", args.raw)
            wait_for_quiet(args.quiet_load, args.max_wait)
            load_before = os.getloadavg()[0]
            procs, files = [], []
            for c in range(2):
                name = f"ct_{model}_pair{c}_r{repeat}"
                result_file = os.path.join(args.raw, name + ".json")
                log = open(os.path.join(args.raw, name + ".log"), "w")
                cmd = PREFIX + [args.binary, "--config=" + CONFIG, "--result_file=" + result_file]
                cmd += ["--set=" + o for o in base + ["name=" + name]]
                procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
                files.append(result_file)
            for proc, log in procs:
                if proc.wait() != 0:
                    sys.exit(f"contention run failed; see {log.name}")
                log.close()
            pair = []
            for path in files:
                with open(path) as f:
                    pair.append(json.load(f)["samples_per_second"])
            rows.append({"model": model, "repeat": repeat,
                         "alone_sps": round(alone["samples_per_second"], 1),
                         "pair0_sps": round(pair[0], 1), "pair1_sps": round(pair[1], 1),
                         "pair_sum_over_alone": round(sum(pair) / alone["samples_per_second"], 3),
                         "load_before": round(load_before, 2),
                         "load_after": round(os.getloadavg()[0], 2)})
            print(rows[-1], flush=True)
    path = os.path.join(args.out, "pipeline_contention.csv")
    csv_io.write_rows(path, rows)
    print("wrote", path)


def report(args):
    lines = ["# Pipeline mode: generated tables", "",
             "Generated by `tools/experiments/pipeline.py --part=report`; the page "
             "([pipeline.md](pipeline.md)) quotes them with its analysis.", ""]
    acc_path = os.path.join(args.out, "pipeline_accuracy.csv")
    if os.path.exists(acc_path):
        acc = csv_io.read_rows(acc_path)
        seeds = sorted({r["seed"] for r in acc}, key=int)
        lrs = sorted({r["lr"] for r in acc})
        epochs = sorted({int(r["epoch"]) for r in acc})
        stages_list = sorted({int(r["stages"]) for r in acc})

        def acc_of(label, stages, seed, epoch):
            for r in acc:
                if (r["mode"] == label and int(r["stages"]) == stages and r["seed"] == seed
                        and int(r["epoch"]) == epoch):
                    return 100 * float(r["test_accuracy"])
            return None

        lines += ["## Fashion-MNIST test accuracy", "",
                  f"small_cnn, batch 32, SGD lr {', '.join(lrs)}, momentum 0.9, weight decay "
                  f"1e-4; {len(epochs)} epochs; seeds {', '.join(seeds)} (training.seed: "
                  "initialisation and data order), one run per seed; 1 libtorch thread per "
                  "stage; stages balanced by profiled block time. Accuracy (%) on the 10,000 "
                  "test images after each epoch: mean over the seeds, and the final accuracy "
                  "of each seed.", ""]
        header = ("| mode | stages | partition | " +
                  " | ".join(f"epoch {e} mean" for e in epochs) +
                  " | final, per seed | final mean | vs data_parallel |")
        lines += [header, "|---|---:|---|" + "---:|" * len(epochs) + "---|---:|---:|"]
        last = epochs[-1]
        for stages in stages_list:
            dp = [acc_of("data_parallel", stages, s, last) for s in seeds]
            dp_mean = statistics.mean(dp) if None not in dp else None
            for label in LABELS:
                rs = [r for r in acc if r["mode"] == label and int(r["stages"]) == stages]
                if not rs:
                    continue
                part = rs[0]["stage_blocks"].replace("|", " \\| ") if label != "data_parallel" \
                    else f"{stages} replicas"
                means = []
                for e in epochs:
                    v = [acc_of(label, stages, s, e) for s in seeds]
                    v = [x for x in v if x is not None]
                    means.append(f"{statistics.mean(v):.2f}" if v else "")
                finals = [acc_of(label, stages, s, last) for s in seeds]
                finals = [x for x in finals if x is not None]
                fmean = statistics.mean(finals)
                vs = f"{fmean - dp_mean:+.2f}" if dp_mean is not None else ""
                lines.append(f"| {label} | {stages} | {part} | " + " | ".join(means) +
                             f" | {' / '.join(f'{x:.2f}' for x in finals)} | {fmean:.2f} | {vs} |")
        lines.append("")
        plot(acc, os.path.join(args.out, "pipeline_accuracy.png"), stages_list, epochs, seeds)
        lines += ["![accuracy per epoch](pipeline_accuracy.png)", ""]
    tp_path = os.path.join(args.out, "pipeline_throughput.csv")
    if os.path.exists(tp_path):
        tp = csv_io.read_rows(tp_path)
        repeats = len({r["repeat"] for r in tp})
        lines += ["## Throughput (samples/s)", "",
                  f"Median of {repeats} runs per row (interleaved); each run "
                  "trains a fixed number of mini-batches and its rate is taken over the "
                  "mini-batches after the first 5 (pipeline fill excluded). 2 cores shared "
                  "with other engineers' work: the 1-minute load average before and after "
                  "each run is in pipeline_throughput.csv (runs wait for it to fall below "
                  "--quiet_load, up to --max_wait; with --boost they run in an autogroup of "
                  "nice -20). `single_device` is vanilla with 1 stage (one thread). "
                  "'partition allows': the profiled time of all blocks over that of the slowest "
                  "stage, the most a pipeline with this partition can gain over one thread "
                  "(median over the runs' own profiles).",
                  ""]
        for model in sorted({r["model"] for r in tp}, key=lambda m: list(THROUGHPUT_MODELS).index(m)):
            rows = [r for r in tp if r["model"] == model]
            first = rows[0]
            lines += [f"### {model} (batch {first['batch_size']}, {first['iterations']} mini-batches per run)", "",
                      "| mode | stages | partition | median samples/s | min | max | vs vanilla (same stages) | vs single device | partition allows |",
                      "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
            def med(label, stages):
                v = [float(r["samples_per_second"]) for r in rows
                     if r["mode"] == label and int(r["stages"]) == stages]
                return (statistics.median(v), min(v), max(v)) if v else None
            single = med("single_device", 1)
            keys = [("single_device", 1)] + [(l, s) for s in sorted({int(r["stages"]) for r in rows if r["mode"] != "single_device"}) for l in LABELS]
            for label, stages in keys:
                m = med(label, stages)
                if m is None:
                    continue
                van = med("vanilla", stages)
                part = next(r["stage_blocks"] for r in rows if r["mode"] == label and int(r["stages"]) == stages)
                if label == "data_parallel":
                    part = f"{stages} replicas"
                elif len(part) > 60:
                    part = " \\| ".join(f"{len(p.split('+'))} blocks" for p in part.split("|"))
                else:
                    part = part.replace("|", " \\| ")
                vs_van = f"{m[0] / van[0]:.2f}×" if van and label != "single_device" else ""
                vs_single = f"{m[0] / single[0]:.2f}×" if single else ""
                bounds = [float(r["partition_bound"]) for r in rows if r["mode"] == label
                          and int(r["stages"]) == stages and r["partition_bound"]]
                bound = f"{statistics.median(bounds):.2f}×" if bounds and label not in ("vanilla", "single_device") else ""
                lines.append(f"| {label} | {stages} | {part} | {m[0]:.0f} | {m[1]:.0f} | {m[2]:.0f} | {vs_van} | {vs_single} | {bound} |")
            lines.append("")
    path = os.path.join(args.out, "pipeline_tables.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    print("wrote", path)


def stage_times_table(path):
    """Markdown: per model, mode and stage, the median share of the training time each
    stage spent in each kind of work (from pipeline_stage_times.csv), and its CPU seconds
    over its busy seconds."""
    rows = csv_io.read_rows(path)
    kinds = ["forward_s", "backward_s", "update_s", "weights_s", "wait_s"]
    lines = ["| model | mode | stages | stage | forward | backward | update | weights | wait | "
             "CPU ÷ busy |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    keys = []
    for r in rows:
        key = (r["model"], r["mode"], int(r["stages"]), int(r["stage"]))
        if key not in keys:
            keys.append(key)
    for model, mode, stages, stage in keys:
        rs = [r for r in rows if (r["model"], r["mode"], int(r["stages"]), int(r["stage"])) ==
              (model, mode, stages, stage)]
        shares = [statistics.median(float(r[k]) / float(r["train_seconds"]) for r in rs)
                  for k in kinds]
        cpu = statistics.median(float(r["cpu_s"]) / max(1e-9, sum(float(r[k]) for k in kinds[:4]))
                                for r in rs)
        lines.append(f"| {model} | {mode} | {stages} | {stage} | " +
                     " | ".join(f"{100 * x:.0f} %" for x in shares) + f" | {cpu:.2f} |")
    return "\n".join(lines) + "\n"


def plot(acc, path, stages_list, epochs, seeds):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(stages_list), figsize=(5.8 * len(stages_list), 4.6),
                             sharey=True, squeeze=False)
    styles = {"data_parallel": ("black", "-", "o"), "vanilla": ("gray", "--", "s"),
              "stale": ("tab:red", "-", "v"), "pipedream": ("tab:orange", "-", "^"),
              "spectrain_v1": ("tab:blue", "-", "D"), "spectrain_v2": ("tab:green", "-", "P")}
    for ax, stages in zip(axes[0], stages_list):
        off = []
        for n, label in enumerate(LABELS):
            xs, mean, lo, hi = [], [], [], []
            for e in epochs:
                v = [100 * float(r["test_accuracy"]) for r in acc
                     if r["mode"] == label and int(r["stages"]) == stages and int(r["epoch"]) == e]
                if v:
                    xs.append(e + (n - 2.5) * 0.04)  # side by side, so the bars do not overlap
                    mean.append(statistics.mean(v))
                    lo.append(statistics.mean(v) - min(v))
                    hi.append(max(v) - statistics.mean(v))
            if not xs:
                continue
            color, ls, marker = styles[label]
            ax.errorbar(xs, mean, yerr=[lo, hi], color=color, linestyle=ls, marker=marker,
                        label=label, capsize=2, linewidth=1.4, markersize=5)
            if max(mean) < 84:
                finals = [100 * float(r["test_accuracy"]) for r in acc
                          if r["mode"] == label and int(r["stages"]) == stages
                          and int(r["epoch"]) == epochs[-1]]
                off.append(f"{label}: mean {mean[-1]:.1f}% after epoch {epochs[-1]} "
                           f"(seeds: {', '.join(f'{x:.1f}' for x in finals)})")
        if off:
            ax.text(0.02, 0.02, "off the chart: " + "; ".join(off), transform=ax.transAxes,
                    fontsize=8, color="tab:red")
        ax.set_title(f"{stages} stages (data_parallel: {stages} replicas)")
        ax.set_xlabel("epoch")
        ax.set_xticks(epochs)
        ax.set_ylim(84, 91.5)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Fashion-MNIST test accuracy (%)")
    axes[0][-1].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"Fashion-MNIST, small_cnn, batch 32, SGD lr 0.02 momentum 0.9: mean over "
                 f"seeds {', '.join(seeds)} (bars: min to max)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", default="all",
                   choices=["accuracy", "throughput", "contention", "report", "all"])
    p.add_argument("--binary", default="bazel-bin/tools/pipeline_train")
    p.add_argument("--out", default=paths.results("pipeline"))
    p.add_argument("--raw", default="out/pipeline_bench")
    p.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3],
                   help="training.seed of the accuracy runs (model init and data order)")
    p.add_argument("--reuse", action="store_true",
                   help="read results already in --raw instead of running them again")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--iterations", type=int, default=600, help="small_cnn mini-batches per throughput run")
    p.add_argument("--resnet_iterations", type=int, default=30)
    p.add_argument("--models", nargs="+", default=["small_cnn", "resnet50"])
    p.add_argument("--quiet_load", type=float, default=1.0,
                   help="throughput runs wait until the 1-minute load average is below this")
    p.add_argument("--max_wait", type=float, default=300,
                   help="longest wait for a quiet machine before a throughput run (s)")
    p.add_argument("--extra_set", nargs="*", default=[],
                   help="more --set overrides for every throughput run, e.g. "
                        "pipeline.microbatches=4 (single fields only: a fixed partition goes "
                        "into --config)")
    p.add_argument("--config", default=CONFIG,
                   help="the config every throughput run starts from (e.g. a copy of the "
                        "default with `boundaries` in its pipeline section)")
    p.add_argument("--compare_binary", default="",
                   help="also run every throughput configuration with this (older) binary, "
                        "interleaved; its rows are labelled <mode>-before")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=field=value,field=value: also run every throughput "
                        "configuration with these overrides, interleaved; its rows are "
                        "labelled <mode>-NAME (e.g. recompute=pipeline.recompute=true)")
    p.add_argument("--modes", nargs="+", default=[],
                   help="throughput: only these modes (labels of MODES, or single_device)")
    p.add_argument("--throughput_csv", default="pipeline_throughput.csv",
                   help="file name (in --out) of the throughput CSV; the stage times go beside it")
    p.add_argument("--boost", action="store_true",
                   help="run every pipeline_train in an autogroup of nice -20 (root; see BOOST)")
    args = p.parse_args()
    if args.boost:
        PREFIX[:] = BOOST
    if args.part in ("accuracy", "throughput", "contention", "all") and not os.path.exists(args.binary):
        sys.exit(f"{args.binary} not found: bazel build //tools:pipeline_train")
    os.makedirs(args.out, exist_ok=True)
    if args.part in ("accuracy", "all"):
        accuracy(args)
    if args.part in ("throughput", "all"):
        throughput(args)
    if args.part in ("contention", "all"):
        contention(args)
    if args.part in ("report", "all"):
        report(args)
        st = os.path.join(args.out, "pipeline_stage_times.csv")
        if os.path.exists(st):
            write_report(stage_times_table(st), st,
                         os.path.join(args.out, "pipeline_stage_times_table.md"))


if __name__ == "__main__":
    main()

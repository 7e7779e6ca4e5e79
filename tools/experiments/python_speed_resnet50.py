#!/usr/bin/python3
"""Python P3 workers against C++ workers and PyTorch DDP on the ResNet-50 bench config
(docs/results/python/python_speed.md).

Every run is one of tools/bench_throughput.py's own, over emulated links (root):
  c++     its run_p3: launch_cluster with configs/bench/resnet50.textproto, mode p3;
  python  the same launch with worker.command running this script's --worker loop on every
          rank (in the worker machine's network namespace): torchvision's resnet50 rebuilt
          into the zoo's 18 blocks (conv1 + bn1, each bottleneck, fc), seeded as the zoo
          seeds its model, fed the C++ trainer's own batches (p3._p3.TrainingData);
  ddp     its run_ddp: tools/ddp_peer.py, gloo, on a bridge shaped alike.
Throughput is measured alike for all three (results_lib/records.throughput): each
iteration's time is the mean over the 2 workers of their iteration times, the figure is
the median over the iterations after warm-up of the global batch ÷ that time (column
samples_per_second; mean_samples_per_second: all their samples ÷ their summed time). An
iteration's time is the step, not the batch's loading: for C++ the trainer's Step
(forward, backward, EndIteration, the loss's value), for Python the same span of the
--worker loop (written to P3_RECORDS_FILE in the trainer's format), for DDP ddp_peer's
barrier-to-optimizer-step.
Trials interleave rates and kinds (trial 0: 1 Gbit/s c++, python, ddp; unlimited c++,
python, ddp; trial 1: ...). From the repository root, as root:

  bazel build //server:p3_server //worker:p3_worker //worker/python:p3 //tools:launch_cluster
  /usr/bin/python3 tools/experiments/python_speed_resnet50.py --trials 3 \\
      --csv docs/results/python/python_speed_resnet50.csv
  # the results page's table (medians, ratios, whether param_l2 agrees) from that CSV
  /usr/bin/python3 tools/experiments/python_speed_resnet50.py \\
      --report docs/results/python/python_speed_resnet50.csv
"""

import argparse
import csv
import os
import statistics
import sys
import time

TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TOOLS)
import bench_throughput as bt  # noqa: E402
from results_lib import paths, records, runs  # noqa: E402

KINDS = ("c++", "python", "ddp")
FIELDS = ["trial", "kind", "bandwidth_gbps", "samples_per_second", "mean_samples_per_second",
          "load1", "status", "param_l2", "first_loss", "last_loss", "batch_per_worker",
          "iterations", "warmup", "commit", "time_utc", "output_dir"]


def resnet50_twin(num_classes, seed):
    """torchvision's resnet50 with the zoo's blocks (models/resnet.cc): [(name, module)].

    The zoo builds the same modules in the same order (downsample before each bottleneck's
    convolutions, as torchvision's _make_layer) after torch::manual_seed(seed), and both
    reinitialise convolutions and BatchNorm alike; the stem's conv1 and bn1 become one
    module so that they are one block, as the zoo's "conv1" block is.
    """
    import torch
    import torchvision
    from torch import nn
    torch.manual_seed(seed)
    model = torchvision.models.resnet50(num_classes=num_classes)
    model.conv1 = nn.Sequential(model.conv1, model.bn1)
    model.bn1 = nn.Identity()
    blocks = [("conv1", model.conv1)]
    for stage in range(1, 5):
        layer = getattr(model, "layer{}".format(stage))
        blocks += [("layer{}.{}".format(stage, i), b) for i, b in enumerate(layer)]
    return model, blocks + [("fc", model.fc)]


def worker_main(num_classes, seed, iterations):
    """One Python worker under launch_cluster (the P3_* environment)."""
    import torch
    from torch import nn
    import p3
    from p3 import _p3
    torch.set_num_threads(1)  # the config's training.threads, as p3_worker
    ctx = p3.init()
    module, blocks = resnet50_twin(num_classes, seed)
    model = p3.distribute(module, blocks=blocks)
    data = _p3.TrainingData(config=ctx.config, overrides=[], rank=ctx.rank)
    rows = []
    for it in range(iterations):
        x, y = data.batch(it)
        start = time.perf_counter()  # as the trainer's Step: not the batch's loading
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        model.step()
        value = loss.item()
        seconds = time.perf_counter() - start
        rows.append((it, value, seconds, ctx.world_size * x.shape[0] / seconds))
        print("PROGRESS iteration={} loss={:.6f}".format(it + 1, value), flush=True)
    model.average_buffers()  # as p3_worker at the end
    model.finish(final_loss=rows[-1][1])
    path = os.environ.get("P3_RECORDS_FILE")
    if path:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:  # the trainer's format (worker/trainer.cc RecordsCsv)
            f.write("iteration,loss,iteration_seconds,samples_per_second,epoch,epoch_loss,"
                    "test_accuracy\n")
            for it, value, seconds, rate in rows:
                f.write("{},{:.6f},{:.6f},{:.3f},1,,\n".format(it, value, seconds, rate))


def worker_command(args):
    """The worker.command of the python kind (run by /bin/sh -c, from the launcher's folder)."""
    return ("PYTHONPATH={root}/bazel-bin/worker/python OMP_NUM_THREADS=1 GLIBC_TUNABLES={gt} "
            "/usr/bin/python3 {me} --worker --num_classes={nc} --seed={seed} "
            "--iterations={it}").format(
                root=bt.ROOT, gt=bt.GLIBC_TUNABLES, me=os.path.abspath(__file__),
                nc=args.num_classes, seed=args.seed, it=args.iterations)


def bench_namespace(args, out, extra_set):
    """The argument namespace bench_throughput's run_p3 / run_ddp read."""
    return argparse.Namespace(
        model="resnet50", batch=args.batch, image_size=args.image_size, seq_len=16,
        iterations=args.iterations, warmup=args.warmup, timeout=args.timeout,
        congestion_control="", out=out, set=extra_set)


def last_row(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))[-1]


def losses(run_dir):
    try:
        rows = records.read(run_dir, 0)
        return rows[0]["loss"], rows[-1]["loss"]
    except (OSError, IndexError, KeyError):
        return "", ""


def one_run(args, kind, bw, trial):
    """Runs one kind at one rate through bench_throughput; returns this script's row."""
    out = os.path.join(args.out, kind.replace("+", "p"))
    os.makedirs(out, exist_ok=True)
    tag = "_t{}".format(trial)
    if kind == "ddp":
        bt.run_ddp(bench_namespace(args, out, []), bw)
    else:
        extra = ["worker.command=" + worker_command(args)] if kind == "python" else []
        bt.run_p3(bench_namespace(args, out, extra), "p3", bw, args.slice_params,
                  tag="_" + kind.replace("+", "p") + tag)
    raw = last_row(os.path.join(out, "raw.csv"))
    row = {k: raw.get(k, "") for k in ("bandwidth_gbps", "samples_per_second",
                                       "mean_samples_per_second", "load1", "status",
                                       "output_dir", "time_utc")}
    row.update(trial=trial, kind=kind, batch_per_worker=args.batch,
               iterations=args.iterations, warmup=args.warmup, commit=args.commit)
    if kind != "ddp" and row["status"] == "ok":
        results = runs.summary(row["output_dir"]).get("workers_results") or [{}]
        row["param_l2"] = results[0].get("param_l2", "")
        row["first_loss"], row["last_loss"] = losses(row["output_dir"])
    return row


def summarise(rows, bandwidths):
    """[(bandwidth, {kind: median samples/s of the ok rows}, python÷c++, python÷ddp,
    c++÷ddp)], a ratio None where a kind has no ok row."""
    out = []
    for bw in bandwidths:
        med = {}
        for kind in KINDS:
            v = [float(r["samples_per_second"]) for r in rows if r["kind"] == kind and
                 r["status"] == "ok" and float(r["bandwidth_gbps"]) == bw]
            med[kind] = statistics.median(v) if v else None

        def ratio(a, b):
            return med[a] / med[b] if med[a] and med[b] else None
        out.append((bw, med, ratio("python", "c++"), ratio("python", "ddp"),
                    ratio("c++", "ddp")))
    return out


def fmt(x, spec):
    return "—" if x is None else format(x, spec)


def report(rows):
    """The results page's table (Markdown) from the rows of a CSV this script wrote."""
    bws = sorted({float(r["bandwidth_gbps"]) for r in rows}, key=lambda b: b or float("inf"))
    lines = ["| Gbit/s | C++ P3 | Python P3 | PyTorch DDP | Python ÷ C++ | Python ÷ DDP | "
             "C++ ÷ DDP | Python ÷ C++ per trial: median (min–max) | param_l2 Python = C++ | "
             "1-min load |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for bw, med, py_cpp, py_ddp, cpp_ddp in summarise(rows, bws):
        ok = [r for r in rows if float(r["bandwidth_gbps"]) == bw and r["status"] == "ok"]
        cells = []
        for kind in KINDS:
            v = [float(r["samples_per_second"]) for r in ok if r["kind"] == kind]
            cells.append("{} ({}–{}, n={})".format(fmt(med[kind], ".1f"), fmt(min(v), ".1f"),
                                                   fmt(max(v), ".1f"), len(v)) if v else "—")
        by_trial = {(r["trial"], r["kind"]): float(r["samples_per_second"]) for r in ok}
        paired = [by_trial[t, "python"] / by_trial[t, "c++"] for t, k in by_trial
                  if k == "c++" and (t, "python") in by_trial]
        cells.append("{} ({}–{})".format(fmt(statistics.median(paired), ".3f"),
                                         fmt(min(paired), ".3f"), fmt(max(paired), ".3f"))
                     if paired else "—")
        l2 = {k: {r["param_l2"] for r in ok if r["kind"] == k} for k in ("c++", "python")}
        same = "yes" if l2["c++"] and l2["c++"] == l2["python"] else "no"
        loads = [float(r["load1"]) for r in rows if float(r["bandwidth_gbps"]) == bw]
        lines.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} – {:.1f} |".format(
            fmt(bw, "g") if bw else "unlimited", *cells[:3], fmt(py_cpp, ".3f"),
            fmt(py_ddp, ".3f"), fmt(cpp_ddp, ".3f"), cells[3], same, min(loads), max(loads)))
    return "\n".join(lines)


def write_csv(path, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="per kind and rate")
    parser.add_argument("--bandwidths", default="1,0", help="Gbit/s per machine; 0: unlimited")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--batch", type=int, default=8, help="as configs/bench/resnet50")
    parser.add_argument("--image_size", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=13)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--slice_params", type=int, default=40000)
    parser.add_argument("--num_classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1, help="the config's training.seed")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--out", default=os.path.join(bt.ROOT, "out/python_speed_resnet50"))
    parser.add_argument("--csv", default="", help="every run's row, written after each run")
    parser.add_argument("--report", default="",
                        help="print the results page's table from this CSV, run nothing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker_main(args.num_classes, args.seed, args.iterations)
        return
    if args.report:
        with open(args.report, newline="") as f:
            print(report(list(csv.DictReader(f))))
        return
    args.commit = paths.git_commit(mark_dirty=True)
    bws = [float(b) for b in args.bandwidths.split(",") if b]
    kinds = [k for k in args.kinds.split(",") if k]
    rows = []
    for trial in range(args.trials):
        for bw in bws:
            for kind in kinds:
                rows.append(one_run(args, kind, bw, trial))
                if args.csv:
                    write_csv(args.csv, rows)
    for bw, med, py_cpp, py_ddp, cpp_ddp in summarise(rows, bws):
        print("{} Gbit/s: median samples/s c++ {}, python {}, ddp {}; python/c++ {}, "
              "python/ddp {}, c++/ddp {}".format(
                  bw or "unlimited", *(fmt(med[k], ".2f") for k in KINDS),
                  fmt(py_cpp, ".3f"), fmt(py_ddp, ".3f"), fmt(cpp_ddp, ".3f")), flush=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Scale-out predictions of the simulator (docs/results/simulator/scaling.md): P3, the baseline and
ring all-reduce for ResNet-50, VGG-19 and the Sockeye-shaped LSTM at 4-64 machines and
10, 25, 100 Gbit/s with GPU-class compute.

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/experiments/scaling.py profiles   # configs/sim/profiles/*_b32_gpu.json
  /usr/bin/python3 tools/experiments/scaling.py run        # docs/results/simulator/scaling.csv
  /usr/bin/python3 tools/experiments/scaling.py report     # the tables and plots in scaling.md

No GPU was available: each model's GPU time per iteration (batch 32 per GPU, the P3
paper's) is a published figure or derived from one (GPU_SOURCES), split over the blocks
in the shares this project measured on its CPU (models/model_bench --profile).
"""
import argparse
import concurrent.futures
import csv
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, markdown, p3_sim, paths  # noqa: E402

PROFILES = p3_sim.PROFILES
RESULTS = paths.results("simulator")
BATCH = 32

# ResNet-50: NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5
# README, "Training performance: NVIDIA DGX-1 16GB (8x V100 16GB)", 1 GPU, FP32: 367 img/s
# (pytorch-21.03 NGC container). The others from it by their training FLOPs (forward
# FLOPs x 3), at the same effective rate (4.09 GFLOPs per 224x224 image forward for
# ResNet-50, 19.6 for VGG-19: the usual published counts; the LSTM: 2 FLOPs per weight
# per token it is applied to, 25 + 25 tokens per sentence pair, embeddings free).
RESNET_IMG_S = 367.0
RESNET_GFLOP = 4.09
EFFECTIVE_FLOPS = RESNET_IMG_S * RESNET_GFLOP * 3 * 1e9
VGG_GFLOP = 19.6


def lstm_gflop_per_pair(profile):
    """Forward FLOPs of one sentence pair of the zoo's seq2seq_lstm, from its blocks."""
    blocks = {b["name"]: sum(b["params"]) for b in profile["blocks"]}
    embed = sum(v for k, v in blocks.items() if "embed" in k)
    output = profile["blocks"][-1]["params"]
    out = sum(output)
    lstm = sum(blocks.values()) - embed - out
    tokens = 25
    return 2 * (lstm * tokens + out * tokens) / 1e9


GPU_SOURCES = {
    "resnet50": ("resnet50_b2_i224_cpu.json",
                 lambda p: BATCH / RESNET_IMG_S,
                 "367 img/s, V100 16 GB FP32, NVIDIA DeepLearningExamples ResNet-50 v1.5 "
                 "(PyTorch, NGC 21.03)"),
    "vgg19": ("vgg19_b2_i224_cpu.json",
              lambda p: BATCH * VGG_GFLOP * 3e9 / EFFECTIVE_FLOPS,
              "ResNet-50's 367 img/s scaled by forward FLOPs 19.6 / 4.09 (76.6 img/s)"),
    "seq2seq_lstm": ("seq2seq_lstm_b16_cpu.json",
                     lambda p: BATCH * lstm_gflop_per_pair(p) * 3e9 / EFFECTIVE_FLOPS,
                     "ResNet-50's effective FLOP rate (4.5 TFLOP/s) over the LSTM's FLOPs "
                     "(25 + 25 tokens per pair)"),
}
MACHINES = [4, 8, 16, 32, 64]
BANDWIDTHS = [10, 25, 100]
SYSTEMS = ["p3", "baseline", "allreduce"]
# P3 with gradients and values on a bfloat16 wire (scheduling.wire_dtype): whether halving
# the bytes pays off. Tabled against float32 P3, not plotted.
WIRE_SYSTEMS = ["p3_bfloat16"]
CALIBRATIONS = {
    # This project's data path as measured (streaming benchmark on loopback: per-byte and
    # per-message CPU costs), but no emulated-link overhead and a real NIC's latency.
    "measured": "configs/sim/calibration_cluster.json",
    # The transfers at wire speed: no CPU per byte or message (what the method allows).
    "wire": "configs/sim/calibration_wire.json",
}


def profiles(args):
    for model, (cpu_file, gpu_total, source) in GPU_SOURCES.items():
        if not os.path.exists(os.path.join(PROFILES, cpu_file)):
            print(f"{model}: {cpu_file} missing (models/model_bench --profile); skipped")
            continue
        with open(os.path.join(PROFILES, cpu_file)) as f:
            p = json.load(f)
        total = sum(b["forward_s"] + b["backward_s"] for b in p["blocks"])
        want = gpu_total(p)
        scale = want / total
        out = {"model": model, "batch": BATCH,
               "source": f"GPU-class: {source}; {want*1000:.1f} ms per iteration of batch "
                         f"{BATCH}, split over the blocks in the shares of {cpu_file} "
                         f"({p['source']})",
               "blocks": [dict(b, forward_s=round(b["forward_s"] * scale, 7),
                               backward_s=round(b["backward_s"] * scale, 7))
                          for b in p["blocks"]]}
        path = os.path.join(PROFILES, f"{model}_b{BATCH}_gpu.json")
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        print(f"{model}: {want*1000:.1f} ms per iteration -> {path}")


def sim(model, system, machines, bw, calibration, iterations=3, binary=None):
    profile = os.path.join(PROFILES, f"{model}_b{BATCH}_gpu.json")
    sets = [f"cluster.workers={machines}", f"cluster.servers={machines}",
            f"network.bandwidth_gbps={bw}", f"training.batch_size={BATCH}"]
    flags = [f"--iterations={iterations}", "--warmup=1", "--equal_split"]
    if system == "allreduce":
        flags.append("--allreduce")
        sets.append("mode=p3")
    elif system == "p3_bfloat16":
        sets += ["mode=p3", "scheduling.wire_dtype=bfloat16"]
    else:
        sets.append(f"mode={system}")
    return p3_sim.run(f"configs/bench/{model}.textproto", profile, calibration, sets, flags,
                      binary=binary)


def run(args):
    """Simulates every point of the grid not in scaling.csv yet (all of them with --fresh),
    --jobs at a time, and appends each row as it finishes (the report sorts them)."""
    path = os.path.join(RESULTS, "scaling.csv")
    done = set()
    if os.path.exists(path) and not args.fresh:
        with open(path) as f:
            for r in csv.DictReader(f):
                done.add((r["calibration"], r["model"], r["system"], r["machines"],
                          r["bandwidth_gbps"]))
    points = [(cal, model, system, m, bw)
              for m in [int(x) for x in args.machines.split(",")]
              for cal in args.calibrations.split(",")
              for model in args.models.split(",")
              for bw in BANDWIDTHS
              for system in SYSTEMS + WIRE_SYSTEMS
              if (cal, model, system, str(m), str(bw)) not in done]

    def one(point):
        cal, model, system, m, bw = point
        t0 = time.time()
        r = sim(model, system, m, bw, CALIBRATIONS[cal], binary=args.sim)
        return point, r, time.time() - t0

    new = not os.path.exists(path) or args.fresh
    with open(path, "w" if new else "a", newline="") as f, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        w = csv.writer(f)
        if new:
            w.writerow(["calibration", "model", "system", "machines", "bandwidth_gbps",
                        "samples_per_second", "iteration_seconds", "compute_s",
                        "exposed_comm_s", "idle_s", "sim_wall_s"])
        # The largest clusters first, so that the long runs do not end up alone at the end.
        points.sort(key=lambda p: -p[3])
        for (cal, model, system, m, bw), r, wall in pool.map(one, points):
            wk = r["workers"][0]
            w.writerow([cal, model, system, m, bw,
                        round(r["samples_per_second"], 2),
                        round(r["iteration_seconds"], 5),
                        round(wk["compute_s"], 5), round(wk["exposed_comm_s"], 5),
                        round(wk["idle_s"], 5), round(wall, 1)])
            f.flush()
            print(cal, model, system, m, bw, round(r["samples_per_second"], 1),
                  f"({wall:.1f} s)", flush=True)
    # In the grid's order (machines, calibration, model, bandwidth, system), whatever the
    # order the runs finished in.
    with open(path) as f:
        rows = list(csv.reader(f))
    cals, models = list(CALIBRATIONS), list(GPU_SOURCES)
    systems = SYSTEMS + WIRE_SYSTEMS
    rows[1:] = sorted(rows[1:], key=lambda r: (int(r[3]), cals.index(r[0]), models.index(r[1]),
                                               float(r[4]), systems.index(r[2])))
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


PAPER = {"resnet50": 1.25, "vgg19": 1.66, "seq2seq_lstm": 1.38}
NAMES = {"resnet50": "ResNet-50", "vgg19": "VGG-19", "seq2seq_lstm": "Sockeye-shaped LSTM"}
BEGIN = "<!-- scaling-table:begin (tools/experiments/scaling.py report) -->"
END = "<!-- scaling-table:end -->"


def wire_table(lines, data, c):
    """P3 with a bfloat16 wire against float32 P3, per model, machines and bandwidth."""
    lines.append(f"**P3 with a bfloat16 wire, calibration `{c}`** (samples/s, and ÷ P3 with "
                 "float32):")
    lines.append("")
    lines.append("| model | machines | " + " | ".join(f"{b} Gbit/s" for b in BANDWIDTHS) + " |")
    lines.append("|---|---:|" + "---:|" * len(BANDWIDTHS))
    for model in GPU_SOURCES:
        for m in MACHINES:
            cells = []
            for b in BANDWIDTHS:
                half, full = data.get((c, model, "p3_bfloat16", m, b)), data.get((c, model, "p3", m, b))
                cells.append(f"{half:.0f} ({half / full:.2f}×)" if half and full else "not run")
            lines.append(f"| {NAMES[model]} | {m} | " + " | ".join(cells) + " |")
    lines.append("")


def report(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = csv_io.read_rows(os.path.join(RESULTS, "scaling.csv"))
    data = {}
    for r in rows:
        data[(r["calibration"], r["model"], r["system"], int(r["machines"]),
              int(float(r["bandwidth_gbps"])))] = float(r["samples_per_second"])
    lines = ["**The paper's headline beside the prediction** (P3 ÷ baseline, 4 machines as in "
             "the paper; both calibrations):", "",
             "| model | paper | " + " | ".join(f"{c}, {b} Gbit/s" for c in CALIBRATIONS
                                               for b in BANDWIDTHS) + " |",
             "|---|---:|" + "---:|" * (len(CALIBRATIONS) * len(BANDWIDTHS))]
    for model in GPU_SOURCES:
        cells = []
        for c in CALIBRATIONS:
            for b in BANDWIDTHS:
                p3 = data.get((c, model, "p3", 4, b))
                base = data.get((c, model, "baseline", 4, b))
                cells.append(f"{p3 / base:.2f}" if p3 and base else "–")
        lines.append(f"| {NAMES[model]} | {PAPER[model]:.2f} | " + " | ".join(cells) + " |")
    lines.append("")
    for c in CALIBRATIONS:
        for model in GPU_SOURCES:
            lines.append(f"**{NAMES[model]}, calibration `{c}`** (samples/s; P3 ÷ baseline, "
                         "P3 ÷ all-reduce):")
            lines.append("")
            lines.append("| machines | " + " | ".join(f"{b} Gbit/s: P3 / baseline / all-reduce"
                                                     for b in BANDWIDTHS) + " |")
            lines.append("|---:|" + "---|" * len(BANDWIDTHS))
            for m in MACHINES:
                cells = []
                for b in BANDWIDTHS:
                    v = [data.get((c, model, s, m, b)) for s in SYSTEMS]
                    if None in v:
                        cells.append("not run")
                    else:
                        cells.append(f"{v[0]:.0f} / {v[1]:.0f} / {v[2]:.0f} "
                                     f"({v[0] / v[1]:.2f}×, {v[0] / v[2]:.2f}×)")
                lines.append(f"| {m} | " + " | ".join(cells) + " |")
            lines.append("")
        # one figure per calibration: a panel per model, a line per system and bandwidth
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        for ax, model in zip(axes, GPU_SOURCES):
            for b, style in zip(BANDWIDTHS, [":", "--", "-"]):
                for s, color in zip(SYSTEMS, ["tab:red", "tab:blue", "tab:green"]):
                    xs = [m for m in MACHINES if (c, model, s, m, b) in data]
                    if xs:
                        ax.plot(xs, [data[(c, model, s, m, b)] for m in xs], style, color=color,
                                marker="o", ms=3, label=f"{s} {b} Gbit/s")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(MACHINES)
            ax.set_xticklabels(MACHINES)
            ax.set_xlabel("machines (1 GPU each)")
            ax.set_ylabel("samples/s")
            ax.set_title(NAMES[model])
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=7, ncol=3)
        fig.suptitle(f"Predicted throughput, calibration {c} (tools/experiments/scaling.py)")
        fig.tight_layout()
        png = f"scaling_{c}.png"
        wire_table(lines, data, c)
        fig.savefig(os.path.join(RESULTS, png), dpi=90)
        lines.append(f"![{c}]({png})")
        lines.append("")
    # The last line is empty: the block ends with one newline before END.
    markdown.rewrite_block(os.path.join(RESULTS, "scaling.md"), BEGIN, END, "\n".join(lines[:-1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["profiles", "run", "report"])
    ap.add_argument("--models", default="resnet50,vgg19,seq2seq_lstm")
    ap.add_argument("--machines", default=",".join(map(str, MACHINES)))
    ap.add_argument("--calibrations", default="measured,wire")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--sim", default=None,
                    help="the p3_sim binary (default: $P3_SIM, else bazel-bin's)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="simulations run at once (each takes one core)")
    args = ap.parse_args()
    if args.command == "profiles":
        profiles(args)
    elif args.command == "run":
        run(args)
    else:
        report(args)


if __name__ == "__main__":
    main()

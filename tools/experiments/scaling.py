#!/usr/bin/env python3
"""Scale-out predictions of the simulator (docs/results/simulator/scaling.md): P3, the baseline and
ring all-reduce for ResNet-50, VGG-19 and the Sockeye-shaped LSTM at 4-64 machines and
10, 25, 100 Gbit/s, each machine one H200 and a 16-core host.

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/experiments/scaling.py profiles   # configs/sim/profiles/scaling_*_h200.json
  /usr/bin/python3 tools/experiments/scaling.py run --jobs 2   # docs/results/simulator/scaling.csv
  /usr/bin/python3 tools/experiments/scaling.py report     # the tables and plots in scaling.md
  /usr/bin/python3 tools/experiments/scaling.py before_after --before=OLD.csv   # the History table
  /usr/bin/python3 tools/experiments/scaling.py buffer_whatif   # scaling_buffer_whatif.csv

Compute: the per-block times of the zoo's own models measured on an H200 (libtorch 2.11,
fp32, batch 64; configs/sim/profiles/*_h200.json, copies of ../shared/data/gpu_profiles),
scaled so that their sum plus the SGD step is the zoo's whole measured iteration
(h200_zoo.csv: timing each block alone with a device synchronisation adds 6 - 45 %);
bf16: those times x PyTorch eager's bf16 / fp32 iteration on the same H200
(h200_pytorch_eager.csv; none for the LSTM, which is predicted in fp32 only). Both CSVs:
docs/results/gpu/h200_inputs/. Communication: see CALIBRATIONS.
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
INPUTS = paths.results("gpu", "h200_inputs")
BATCH = 64
CORES = 16
# The measured H200 profiles (zoo model -> file) and the models' names in the CSVs.
H200 = {"resnet50": "resnet50_b64_i224_h200.json", "vgg19": "vgg19_b64_i224_h200.json",
        "seq2seq_lstm": "seq2seq_lstm_b64_h200.json"}
PRECISIONS = ["fp32", "bf16"]
# The GPU's SGD with momentum: about 5 float32 accesses per value over the H200's
# 4.8 TB/s HBM3e (NVIDIA's H200 datasheet), per byte of parameters.
SGD_S_PER_BYTE = 5 / 4.8e12


def _csv(name):
    with open(os.path.join(INPUTS, name)) as f:
        return [l.strip().split(",") for l in f if l.strip() and not l.startswith("#")]


def compute_scale(model, precision, profile):
    """The factor on the profile's times, or None when the folder has no source for it."""
    blocks = sum(b["forward_s"] + b["backward_s"] for b in profile["blocks"])
    params = sum(sum(b["params"]) for b in profile["blocks"])
    zoo = next(r for r in _csv("h200_zoo.csv") if r[0] == "zoo" and r[1] == model)
    scale = (float(zoo[6]) / 1000 - SGD_S_PER_BYTE * params * 4) / blocks
    if precision == "fp32":
        return scale
    eager = {r[2]: float(r[7]) for r in _csv("h200_pytorch_eager.csv")
             if r[0] == "ref" and r[1] == model}
    if "bf16" not in eager or "fp32" not in eager:
        return None
    return scale * eager["bf16"] / eager["fp32"]


def profile_path(model, precision):
    return os.path.join(PROFILES, f"scaling_{model}_b{BATCH}_{precision}_h200.json")


def profiles(args):
    for model, source in H200.items():
        with open(os.path.join(PROFILES, source)) as f:
            p = json.load(f)
        for precision in PRECISIONS:
            scale = compute_scale(model, precision, p)
            if scale is None:
                print(f"{model} {precision}: no PyTorch eager figure in h200_pytorch_eager.csv; "
                      "skipped")
                continue
            total = sum(b["forward_s"] + b["backward_s"] for b in p["blocks"]) * scale
            how = ("the zoo's iteration (h200_zoo.csv) less SGD over the blocks' sum"
                   + ("" if precision == "fp32" else
                      ", times PyTorch eager's bf16 / fp32 (h200_pytorch_eager.csv)"))
            out = {"model": model, "batch": BATCH,
                   "source": f"H200 {precision}: {source} ({p['source']}) times "
                             f"{scale:.4f} = {how}; {total * 1000:.2f} ms per iteration",
                   "blocks": [dict(b, forward_s=round(b["forward_s"] * scale, 7),
                                   backward_s=round(b["backward_s"] * scale, 7))
                              for b in p["blocks"]]}
            path = profile_path(model, precision)
            with open(path, "w") as f:
                json.dump(out, f, indent=1)
                f.write("\n")
            print(f"{model} {precision}: x{scale:.4f}, {total * 1000:.2f} ms -> {path}")


MACHINES = [4, 8, 16, 32, 64]
BANDWIDTHS = [10, 25, 100]
SYSTEMS = ["p3", "baseline", "allreduce"]
CALIBRATIONS = {
    # This project's data path as measured here (CPU per byte from the streaming benchmark
    # of 2026-12-04 on loopback, per message from the fit of 2026-12-03), on each machine's
    # 16 cores; a real NIC's latency, no emulated-link overhead; PCIe Gen5 copies.
    "measured": "configs/sim/calibration_h200_cluster.json",
    # The transfers at wire speed: no CPU per byte or message (what the method allows);
    # the same PCIe copies.
    "wire": "configs/sim/calibration_h200_wire.json",
}


def sim(model, precision, system, machines, bw, calibration, iterations=3, binary=None):
    sets = [f"cluster.workers={machines}", f"cluster.servers={machines}",
            f"network.bandwidth_gbps={bw}", f"training.batch_size={BATCH}", "model.image_size=224"]
    flags = [f"--iterations={iterations}", "--warmup=1", "--equal_split",
             f"--cpu_cores_per_host={CORES}", "--machines_per_host=1"]
    if system == "allreduce":
        flags.append("--allreduce")
        sets.append("mode=p3")
    else:
        sets.append(f"mode={system}")
    return p3_sim.run(f"configs/bench/{model}.textproto", profile_path(model, precision),
                      calibration, sets, flags, binary=binary)


def points_of(args):
    return [(cal, model, precision, system, m, bw)
            for m in [int(x) for x in args.machines.split(",")]
            for cal in args.calibrations.split(",")
            for model in args.models.split(",")
            for precision in PRECISIONS
            if os.path.exists(profile_path(model, precision))
            for bw in BANDWIDTHS
            for system in SYSTEMS]


HEADER = ["calibration", "model", "precision", "system", "machines", "bandwidth_gbps",
          "samples_per_second", "iteration_seconds", "compute_s", "exposed_comm_s", "idle_s",
          "sim_wall_s"]


def run(args):
    """Simulates every point of the grid not in scaling.csv yet (all of them with --fresh),
    --jobs at a time, and appends each row as it finishes (the report sorts them). Without
    --fresh it resumes a stopped run: the points already written are skipped."""
    path = os.path.join(RESULTS, "scaling.csv")
    done = set()
    if os.path.exists(path) and not args.fresh:
        # A run stopped mid-write (killed for the quiet window) can leave a last row cut
        # short, without its newline: it is dropped, and its point simulated again.
        with open(path) as f:
            rows = list(csv.reader(f))
        whole = [r for r in rows[1:] if len(r) == len(HEADER) and all(r)]
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([HEADER] + whole)
        for r in whole:
            done.add(tuple(r[:6]))
        print(f"resuming: {len(whole)} points in {path}"
              + (f", {len(rows) - 1 - len(whole)} cut-short rows dropped"
                 if len(rows) - 1 > len(whole) else ""), flush=True)
    points = [p for p in points_of(args)
              if (p[0], p[1], p[2], p[3], str(p[4]), str(p[5])) not in done]

    def one(point):
        cal, model, precision, system, m, bw = point
        t0 = time.time()
        r = sim(model, precision, system, m, bw, CALIBRATIONS[cal], binary=args.sim)
        return point, r, time.time() - t0

    new = not os.path.exists(path) or args.fresh
    with open(path, "w" if new else "a", newline="") as f, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        w = csv.writer(f)
        if new:
            w.writerow(HEADER)
        # The largest clusters first, so that the long runs do not end up alone at the end.
        points.sort(key=lambda p: -p[4])
        for (cal, model, precision, system, m, bw), r, wall in pool.map(one, points):
            wk = r["workers"][0]
            w.writerow([cal, model, precision, system, m, bw,
                        round(r["samples_per_second"], 2),
                        round(r["iteration_seconds"], 5),
                        round(wk["compute_s"], 5), round(wk["exposed_comm_s"], 5),
                        round(wk["idle_s"], 5), round(wall, 1)])
            f.flush()
            print(cal, model, precision, system, m, bw, round(r["samples_per_second"], 1),
                  f"({wall:.1f} s)", flush=True)
    # In the grid's order (machines, calibration, model, precision, bandwidth, system),
    # whatever the order the runs finished in.
    with open(path) as f:
        rows = list(csv.reader(f))
    cals, models = list(CALIBRATIONS), list(H200)
    rows[1:] = sorted(rows[1:], key=lambda r: (int(r[4]), cals.index(r[0]), models.index(r[1]),
                                               PRECISIONS.index(r[2]), float(r[5]),
                                               SYSTEMS.index(r[3])))
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


# The P3 paper's headline gains over the baseline (P3: Jayarajan et al., SysML 2019; 4
# machines, "realistic network bandwidth"): /work/shared/notes/references.md.
PAPER = {"resnet50": 1.25, "vgg19": 1.66, "seq2seq_lstm": 1.38}
NAMES = {"resnet50": "ResNet-50", "vgg19": "VGG-19", "seq2seq_lstm": "Sockeye-shaped LSTM"}
BEGIN = "<!-- scaling-table:begin (tools/experiments/scaling.py report) -->"
END = "<!-- scaling-table:end -->"


def report(args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = csv_io.read_rows(os.path.join(RESULTS, "scaling.csv"))
    data = {}
    for r in rows:
        data[(r["calibration"], r["model"], r["precision"], r["system"], int(r["machines"]),
              int(float(r["bandwidth_gbps"])))] = float(r["samples_per_second"])
    lines = ["**The paper's headline beside the prediction** (P3 ÷ baseline, 4 machines as in "
             "the paper; fp32, and bf16 where the folder has its ratio):", "",
             "| model | paper | " + " | ".join(f"{c}, {b} Gbit/s" for c in CALIBRATIONS
                                               for b in BANDWIDTHS) + " |",
             "|---|---:|" + "---:|" * (len(CALIBRATIONS) * len(BANDWIDTHS))]
    for model in H200:
        for precision in PRECISIONS:
            cells = []
            for c in CALIBRATIONS:
                for b in BANDWIDTHS:
                    p3 = data.get((c, model, precision, "p3", 4, b))
                    base = data.get((c, model, precision, "baseline", 4, b))
                    cells.append(f"{p3 / base:.2f}" if p3 and base else "–")
            if set(cells) == {"–"}:
                continue
            lines.append(f"| {NAMES[model]} {precision} | +{(PAPER[model] - 1) * 100:.0f} % "
                         f"({PAPER[model]:.2f}) | " + " | ".join(cells) + " |")
    lines.append("")
    for c in CALIBRATIONS:
        for model in H200:
            for precision in PRECISIONS:
                if not any(k[:3] == (c, model, precision) for k in data):
                    continue
                lines.append(f"**{NAMES[model]}, {precision}, calibration `{c}`** (samples/s; "
                             "P3 ÷ baseline, P3 ÷ all-reduce):")
                lines.append("")
                lines.append("| machines | " + " | ".join(
                    f"{b} Gbit/s: P3 / baseline / all-reduce" for b in BANDWIDTHS) + " |")
                lines.append("|---:|" + "---|" * len(BANDWIDTHS))
                for m in MACHINES:
                    cells = []
                    for b in BANDWIDTHS:
                        v = [data.get((c, model, precision, s, m, b)) for s in SYSTEMS]
                        if None in v:
                            cells.append("not run")
                        else:
                            cells.append(f"{v[0]:.0f} / {v[1]:.0f} / {v[2]:.0f} "
                                         f"({v[0] / v[1]:.2f}×, {v[0] / v[2]:.2f}×)")
                    lines.append(f"| {m} | " + " | ".join(cells) + " |")
                lines.append("")
        # one figure per calibration: a panel per model, a line per system and bandwidth (fp32)
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        for ax, model in zip(axes, H200):
            for b, style in zip(BANDWIDTHS, [":", "--", "-"]):
                for s, color in zip(SYSTEMS, ["tab:red", "tab:blue", "tab:green"]):
                    xs = [m for m in MACHINES if (c, model, "fp32", s, m, b) in data]
                    if xs:
                        ax.plot(xs, [data[(c, model, "fp32", s, m, b)] for m in xs], style,
                                color=color, marker="o", ms=3, label=f"{s} {b} Gbit/s")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(MACHINES)
            ax.set_xticklabels(MACHINES)
            ax.set_xlabel("machines (1 H200 + 16 cores each)")
            ax.set_ylabel("samples/s")
            ax.set_title(f"{NAMES[model]}, fp32")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=7, ncol=3)
        fig.suptitle(f"Predicted throughput, calibration {c} (tools/experiments/scaling.py)")
        fig.tight_layout()
        png = f"scaling_{c}.png"
        fig.savefig(os.path.join(RESULTS, png), dpi=90)
        lines.append(f"![{c}]({png})")
        lines.append("")
    # The last line is empty: the block ends with one newline before END.
    markdown.rewrite_block(os.path.join(RESULTS, "scaling.md"), BEGIN, END, "\n".join(lines[:-1]))


def before_after(before_rows, after_rows, machines=4, calibration="measured",
                 precision="fp32"):
    """The markdown table of P3 and the baseline, before -> after, per model and bandwidth
    on `machines` machines (two scaling.csv's, as rows): samples/s and P3 ÷ baseline."""
    def index(rows):
        return {(r["model"], r["system"], int(float(r["bandwidth_gbps"]))):
                float(r["samples_per_second"]) for r in rows
                if (r["calibration"], r["precision"], int(r["machines"])) ==
                (calibration, precision, machines)}
    old, new = index(before_rows), index(after_rows)
    lines = [f"| model, {machines} machines, `{calibration}`, {precision} | Gbit/s | "
             "P3 before → after | baseline before → after | P3 ÷ baseline before → after |",
             "|---|---:|---:|---:|---:|"]
    for model in H200:
        for b in BANDWIDTHS:
            k = [(model, s, b) for s in ("p3", "baseline")]
            if not all(x in old and x in new for x in k):
                continue
            (p0, b0), (p1, b1) = [old[x] for x in k], [new[x] for x in k]
            lines.append(f"| {NAMES[model]} | {b} | {p0:.0f} → {p1:.0f} | {b0:.0f} → {b1:.0f} "
                         f"({b1 / b0:.2f}×) | {p0 / b0:.2f} → {p1 / b1:.2f} |")
    return lines


BUFFERS = [1 << 20, 4 << 20, 16 << 20]


def calibration_with_buffer(calibration, kernel_buffer_bytes, folder):
    """A copy of `calibration` (a path relative to the repository) in `folder` with its
    kernel_buffer_bytes replaced; returns the copy's path."""
    with open(os.path.join(paths.ROOT, calibration)) as f:
        c = json.load(f)
    c["kernel_buffer_bytes"] = kernel_buffer_bytes
    out = os.path.join(folder, f"{os.path.basename(calibration)[:-5]}_{kernel_buffer_bytes}.json")
    with open(out, "w") as f:
        json.dump(c, f, indent=1)
    return out


def buffer_whatif(args):
    """What-if: P3 and the baseline on 4 machines, fp32, with the kernel send buffer of
    BUFFERS in place of the GPU calibrations' 1 MiB; scaling_buffer_whatif.csv."""
    import tempfile
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for cal in args.calibrations.split(","):
            for model in args.models.split(","):
                for bw in BANDWIDTHS:
                    for kb in BUFFERS:
                        path = calibration_with_buffer(CALIBRATIONS[cal], kb, d)
                        for system in ("p3", "baseline"):
                            r = sim(model, "fp32", system, 4, bw, path, binary=args.sim)
                            rows.append({"calibration": cal, "model": model, "system": system,
                                         "machines": 4, "bandwidth_gbps": bw,
                                         "kernel_buffer_bytes": kb, "samples_per_second":
                                         round(r["samples_per_second"], 2)})
                            print(*rows[-1].values(), flush=True)
    csv_io.write_rows(os.path.join(RESULTS, "scaling_buffer_whatif.csv"), rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["profiles", "run", "report", "before_after",
                                             "buffer_whatif"])
    ap.add_argument("--models", default="resnet50,vgg19,seq2seq_lstm")
    ap.add_argument("--machines", default=",".join(map(str, MACHINES)))
    ap.add_argument("--calibrations", default="measured,wire")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--before", help="before_after: an earlier scaling.csv (e.g. from git show)")
    ap.add_argument("--sim", default=None,
                    help="the p3_sim binary (default: $P3_SIM, else bazel-bin's)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="simulations run at once (each takes one core)")
    args = ap.parse_args()
    if args.command == "profiles":
        profiles(args)
    elif args.command == "run":
        run(args)
    elif args.command == "buffer_whatif":
        buffer_whatif(args)
    elif args.command == "before_after":
        print("\n".join(before_after(csv_io.read_rows(args.before),
                                      csv_io.read_rows(os.path.join(RESULTS, "scaling.csv")))))
    else:
        report(args)


if __name__ == "__main__":
    main()

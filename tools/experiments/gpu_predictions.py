#!/usr/bin/env python3
"""The simulator's prediction of the GPU check's throughput figures, filed before any GPU
run (issue 36, item 5; docs/results/gpu/predictions_2026-12-05.md). Every figure of
tools/gpu/check.py's sections c and e, predicted by the frozen p3_sim on:

  * compute: the H200 per-block profile of ResNet-50, b64, 224 x 224, fp32
    (configs/sim/profiles/resnet50_b64_i224_h200.json, a copy of
    ../shared/data/gpu_profiles/resnet50_b64_h200.json), times compute_scale: the zoo's
    whole measured iteration (h200_zoo.csv, SGD included) over the profile's sum of
    blocks less the calibration's SGD (the blocks timed one by one with a device
    synchronisation each add about 12 %); bf16: times PyTorch eager's bf16 / fp32
    iteration (h200_pytorch_eager.csv). Both CSVs: docs/results/gpu/h200_inputs/;
  * two workers sharing the one GPU: each computes at half speed (compute_scale x 2),
    since synchronous workers compute at the same time; the bound with the GPU unshared
    is printed beside;
  * the host data path: configs/sim/calibration_h200_prediction.json (this machine's
    fitted CPU costs per byte, calibration_cpu_2026-12-03.json) on 16 cores
    (--cpu_cores_per_host=16, every emulated machine on the one host);
  * streaming: the streaming benchmark's 25 M parameters (streaming_25m.json), 1 worker
    + 1 server, loopback (separate machines) and shared memory (colocated), as
    tools/experiments/simulator_calibration.py simulates it; beside it the same on this
    machine's 2 cores, against this machine's measurement (streaming_2026-12-04.csv).

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/experiments/gpu_predictions.py predict \\
      --csv=docs/results/gpu/predictions_2026-12-05.csv        # prints the Markdown table
  # once the GPU check has run: its check.csv fills the "measured" column
  /usr/bin/python3 tools/experiments/gpu_predictions.py fill \\
      --csv=docs/results/gpu/predictions_2026-12-05.csv --check=DIR/check.csv
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, p3_sim, paths  # noqa: E402

CONFIG = "configs/bench/resnet50.textproto"
PROFILE = os.path.join(p3_sim.PROFILES, "resnet50_b64_i224_h200.json")
STREAMING = os.path.join(p3_sim.PROFILES, "streaming_25m.json")
CALIBRATION = os.path.join(paths.ROOT, "configs", "sim", "calibration_h200_prediction.json")
INPUTS = os.path.join(paths.ROOT, "docs", "results", "gpu", "h200_inputs")
MEASURED_HERE = os.path.join(paths.ROOT, "docs", "results", "streaming",
                             "streaming_2026-12-04.csv")
CORES = 16
# tools/gpu/check.py's section c sizes (not --quick).
SIZE = ["training.batch_size=64", "model.image_size=224"]
FIELDS = ["section", "item", "predicted", "measured", "unit", "gpu_unshared_bound",
          "simulated_here_2_cores", "measured_here", "inputs"]


def compute_scales():
    """(fp32, bf16) compute_scale and how each was obtained."""
    with open(PROFILE) as f:
        profile = json.load(f)
    blocks = sum(b["forward_s"] + b["backward_s"] for b in profile["blocks"])
    params = sum(sum(b["params"]) for b in profile["blocks"])
    with open(CALIBRATION) as f:
        sgd = json.load(f)["worker_update_s_per_byte"] * params * 4
    zoo = next(r for r in _rows("h200_zoo.csv")
               if r[0] == "zoo" and r[1] == "resnet50" and r[2] == "64")
    iteration = float(zoo[6]) / 1000
    eager = {r[2]: float(r[7]) for r in _rows("h200_pytorch_eager.csv")
             if r[0] == "ref" and r[1] == "resnet50" and r[3] == "64"}
    fp32 = (iteration - sgd) / blocks
    bf16 = fp32 * eager["bf16"] / eager["fp32"]
    how = (f"fp32 {fp32:.4f} = (zoo iteration {iteration * 1000:.3f} ms - SGD "
           f"{sgd * 1000:.3f} ms) / profile blocks {blocks * 1000:.3f} ms; bf16 {bf16:.4f} = "
           f"fp32's x eager bf16/fp32 {eager['bf16']:.3f}/{eager['fp32']:.3f} ms")
    return fp32, bf16, how


def _rows(name):
    with open(os.path.join(INPUTS, name)) as f:
        return [l.strip().split(",") for l in f if l.strip() and not l.startswith("#")]


def simulate(sets, scale, profile=PROFILE, cores=CORES, flags=()):
    flags = [f"--cpu_cores_per_host={cores}", "--machines_per_host=2",
             f"--compute_scale={scale}"] + list(flags)
    return p3_sim.run(CONFIG, profile, CALIBRATION, sets, flags)


def predict():
    fp32, bf16, how = compute_scales()
    print(f"compute_scale: {how}", file=sys.stderr)
    rows = []

    def row(section, item, value, unit, inputs, **extra):
        rows.append(dict({"section": section, "item": item, "predicted": value,
                          "measured": "", "unit": unit, "inputs": inputs}, **extra))

    for precision, scale in [("fp32", fp32), ("bf16", bf16)]:
        rates = {}
        for mode in ["local", "p3", "baseline"]:
            r = simulate(SIZE + [f"mode={mode}", "cluster.workers=1", "cluster.servers=2",
                                 "network.bandwidth_gbps=0"], scale)
            rates[mode] = r["samples_per_second"]
            row("c", f"1 worker + 2 servers, {mode}, {precision} samples/s",
                f"{rates[mode]:.1f}", "samples/s",
                f"compute_scale {scale:.4f}; {CORES} cores; loopback")
        row("c", f"P3 / local, {precision}", f"{rates['p3'] / rates['local']:.2f}", "ratio",
            f"baseline / local {rates['baseline'] / rates['local']:.2f}")
    for gbps in [10, 25]:
        rates, bounds = {}, {}
        for mode in ["p3", "baseline"]:
            sets = SIZE + [f"mode={mode}", "cluster.workers=2", "cluster.servers=2",
                           f"network.bandwidth_gbps={gbps}"]
            rates[mode] = simulate(sets, 2 * fp32)["samples_per_second"]
            bounds[mode] = simulate(sets, fp32)["samples_per_second"]
            row("c", f"2 workers at {gbps} Gbit/s, {mode} samples/s", f"{rates[mode]:.1f}",
                "samples/s", f"compute_scale {2 * fp32:.4f} (the GPU shared by 2); "
                f"{CORES} cores; emulated links", gpu_unshared_bound=f"{bounds[mode]:.1f}")
        row("c", f"2 workers at {gbps} Gbit/s, P3 / baseline",
            f"{rates['p3'] / rates['baseline']:.2f}", "ratio", "the two rows above",
            gpu_unshared_bound=f"{bounds['p3'] / bounds['baseline']:.2f}")
    measured = _measured_here()
    for name, placement in [("loopback", "separate"), ("shared memory", "colocated")]:
        sets = ["mode=p3", "cluster.workers=1", "cluster.servers=1",
                f"network.placement={placement}", "network.bandwidth_gbps=0",
                "training.batch_size=1"]
        goodput = {}
        for cores in [CORES, 2]:
            r = simulate(sets, 1.0, profile=STREAMING, cores=cores,
                         flags=["--iterations=6", "--warmup=2"])
            goodput[cores] = 25_000_000 * 4 * 8 / r["iteration_seconds"] / 1e9
        row("e", f"streaming goodput, {name} (Gbit/s each way)", f"{goodput[CORES]:.2f}",
            "Gbit/s", f"streaming_25m.json; {CORES} cores",
            simulated_here_2_cores=f"{goodput[2]:.2f}",
            measured_here=f"{measured[name]:.2f}" if name in measured else "")
    return rows


def _measured_here():
    """This machine's medians of streaming_2026-12-04.csv: loopback and shared memory."""
    rows = csv_io.read_rows(MEASURED_HERE)
    out = {}
    loop = [float(r["goodput_gbps"]) for r in rows
            if float(r["rate_gbps"]) == 0 and r["shared_memory"] in ("0", "")]
    shm = [float(r["goodput_gbps"]) for r in rows if r["shared_memory"] == "1"]
    if loop:
        out["loopback"] = statistics.median(loop)
    if shm:
        out["shared memory"] = statistics.median(shm)
    return out


def markdown(rows):
    lines = ["| section | item | predicted | measured | GPU unshared (bound) | "
             "this machine: simulated / measured |", "|---|---|---:|---:|---:|---|"]
    for r in rows:
        here = (f"{r['simulated_here_2_cores']} / {r['measured_here']}"
                if r.get("simulated_here_2_cores") else "")
        lines.append(f"| {r['section']} | {r['item']} | {r['predicted']} | {r['measured']} | "
                     f"{r.get('gpu_unshared_bound', '')} | {here} |")
    return "\n".join(lines)


def fill(rows, check_rows):
    """The GPU check's figures into `measured`, matched by item (the per-mode rates of the
    two-worker points from the detail of their P3 / baseline row)."""
    by_item = {r["item"]: r for r in check_rows}
    for r in rows:
        c = by_item.get(r["item"])
        if c is not None and c["measured"] not in ("", "-"):
            r["measured"] = c["measured"]
            continue
        m = re.match(r"2 workers at (\d+) Gbit/s, (p3|baseline) samples/s", r["item"])
        if m:
            c = by_item.get(f"2 workers at {m.group(1)} Gbit/s, P3 / baseline")
            d = re.search(r"P3 ([\d.]+), baseline ([\d.]+) samples/s", c["detail"]) if c else None
            if d:
                r["measured"] = d.group(1) if m.group(2) == "p3" else d.group(2)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["predict", "fill"])
    parser.add_argument("--csv", required=True)
    parser.add_argument("--check", help="fill: the GPU check's check.csv")
    a = parser.parse_args()
    if a.command == "predict":
        rows = predict()
    else:
        if not a.check:
            sys.exit("fill needs --check=check.csv")
        rows = fill(csv_io.read_rows(a.csv), csv_io.read_rows(a.check))
    csv_io.write_rows(a.csv, rows, FIELDS)
    print(markdown(rows))


if __name__ == "__main__":
    main()

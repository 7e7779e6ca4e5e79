#!/usr/bin/env python3
"""Calibrates the simulator (//tools:p3_sim) and compares its predictions with the
committed measurements (docs/results/simulator.md).

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/sim_validate.py calibrate   # streaming fit -> configs/sim/calibration_*.json
  /usr/bin/python3 tools/sim_validate.py validate    # every measured point -> CSV + table
  /usr/bin/python3 tools/sim_validate.py sweep       # the slice sweeps (slice_tuning_sweep.csv)
  /usr/bin/python3 tools/sim_validate.py calibrate --only=fresh-3          # one calibration set
  /usr/bin/python3 tools/sim_validate.py fresh --file=F DIR=placement ...  # fresh runs -> docs/results/F
  /usr/bin/python3 tools/sim_validate.py trial --sets=fresh-3 --cpu_factor=1.3   # a what-if, nothing written
  /usr/bin/python3 tools/sim_validate.py cpu         # measured CPU per iteration beside the simulated
  /usr/bin/python3 tools/sim_validate.py noise       # the runs' own spread beside the misses

Calibration, per set of binaries (docs/simulator.md, "Calibration"):
  * CPU seconds per byte sent and received, and the extra on a shaped link, from the
    streaming micro-benchmark's CPU s/GB (docs/results/streaming*.csv; no fit);
  * per-message CPU and the writer's wake-up gap: the grid point whose simulated
    streaming goodput is closest (log error) to the measured one at 1, 2.5, 5 Gbit/s and
    loopback;
  * gloo's ring costs (the DDP peer; nothing like the streaming benchmark exists for
    it): the defaults of p3/sim/simulator.h times one factor, fitted so that ResNet-50's
    DDP point at unlimited bandwidth of the interleaved session (the most CPU-bound DDP
    point) is met; the same factor in both calibrations (the peer did not change);
  * compute_scale per model and session: the `local` point of the same session (the
    machine's speed moves by up to 30 % between sessions, docs/results/throughput.md).
    That point is fitted, so it is not a validation point;
  * shared_host_compute_speed: how fast one process computes while another runs on the
    other core, against alone: half the throughput of two single-thread ResNet-50 runs
    side by side over one run alone (docs/results/pipeline_contention.csv, median of the
    ResNet-50 pairs). No point of the validation enters it;
  * preempt_s: the computation's CPU lost per preemption by a thread waking on its core
    1,000 times a second (docs/results/preemption_cost.csv, tools/preemption_cost.py).
    No point of the validation enters it either.
"""
import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_throughput  # noqa: E402  (base_config, config_int: how a sweep run reads its config)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIM = os.path.join(ROOT, "bazel-bin/tools/p3_sim")
PROFILES = os.path.join(ROOT, "configs/sim/profiles")
RESULTS = os.path.join(ROOT, "docs/results")
HOST = ["--cpu_cores_per_host=2", "--machines_per_host=2"]  # 2 emulated machines, 2 cores
BATCH = {"resnet50": 8, "vgg19": 4, "seq2seq_lstm": 16}
# Points measured for the validation alone (`fresh`): set name, file in docs/results.
# fresh: 2 or 3 runs of 10 timed iterations per point (2026-12-01 14:58); fresh-2: 5
# interleaved rounds of 40 timed iterations (2026-12-01 21:17); fresh-3: 3 such rounds,
# each with a run of the streaming benchmark (its own calibration, SET_CALIBRATION).
# fresh-4: the same, 3 rounds on another VM (AMD EPYC, 2026-12-02 morning). fresh-5: the
# same VM's next session, every run also read for where its CPU went (tools/cpu_breakdown.py;
# `cpu` below), plus P3 at 1 Gbit/s and on loopback. 2026-12-03: another AMD EPYC VM, 3
# interleaved rounds of the sweep's own points (ResNet-50 and the LSTM; p3, baseline, DDP at
# 1 Gbit/s and unlimited, and `local`), each round with a streaming run (its calibration).
FRESH_SETS = [("fresh", "simulator_fresh_raw.csv"), ("fresh-2", "simulator_fresh2_raw.csv"),
              ("fresh-3", "simulator_fresh3_raw.csv"), ("fresh-4", "simulator_fresh4_raw.csv"),
              ("fresh-5", "simulator_fresh5_raw.csv"),
              ("2026-12-03", "simulator_2026-12-03_raw.csv")]
# The full sweeps of tools/bench_throughput.py (every mode, the peer and `local`), as
# aggregated by its `report`: set name, file in docs/results.
SWEEP_SETS = [("2026-12-02", "throughput.csv"), ("2026-11-30", "throughput_2026-11-30.csv")]
# The raw CSV of each sweep set, where one is committed: the iterations its runs timed.
# Without one (2026-11-30), the runs timed configs/bench/<model>.textproto's, unchanged
# since that sweep (55110cf).
SWEEP_RAW = {"2026-12-02": "throughput_2026-12-02_raw.csv"}
# The runs of docs/results/throughput.md "TCP congestion control" (another VM, 2026-12-02
# afternoon): one set per congestion control, sharing that VM's `local` runs (rows with
# mode local and no congestion control) and its calibration ("cc-2026-12-02").
CC_FILE = "congestion_control_2026-12-02_raw.csv"
CC_SETS = [("cc-bbr", "bbr"), ("cc-cubic", "cubic")]
# P3 at 1 Gbit/s with each scheduling.wire_dtype, and without a link limit, with `local`
# (docs/results/wire_dtype.md, 2026-12-02 afternoon; the congestion-control runs' VM, so
# its calibration): set name, file in docs/results.
WIRE_SETS = [("wire", "wire_dtype_vm3_raw.csv")]
# The CPU breakdown of fresh-5's runs (tools/cpu_breakdown.py --csv).
CPU_BREAKDOWN = {"fresh-5": "cpu_breakdown_fresh5.csv", "2026-12-03": "cpu_breakdown_2026-12-03.csv"}
BEGIN = "<!-- sim-table:begin (tools/sim_validate.py validate) -->"
END = "<!-- sim-table:end -->"

# Each calibration set: the binaries it stands for, its streaming CSV, and what differs.
SETS = {
    "current": {
        "file": "configs/sim/calibration_cpu.json",
        "streaming": "docs/results/streaming_after.csv",
        "binaries": "fa7c300 / 8730c80 (zero-copy streams, shared memory, one send order per link)",
        "extra": {},
    },
    # The sweep of 2026-12-02 (throughput.csv): every mode with the binaries of a6c8c45,
    # the streaming benchmark run before its first round, between the rounds and after.
    "2026-12-02": {
        "file": "configs/sim/calibration_cpu_2026-12-02.json",
        "streaming": "docs/results/streaming_2026-12-02.csv",
        "binaries": "a6c8c45 (-O2 data path; streaming measured in the sweep's session)",
        "extra": {},
    },
    "2026-11-30": {
        "file": "configs/sim/calibration_cpu_2026-11-30.json",
        "streaming": "docs/results/streaming.csv",
        "binaries": "1e5e39e / 058ea0e (protobuf copies, loopback TCP between a colocated pair)",
        # No shared memory then: a colocated worker and server used loopback TCP.
        "extra": {"shared_memory": False},
    },
    # The streaming benchmark run in the same interleaved rounds as the fresh-3 points
    # (tools/sim_validate.py, docs/results/simulator.md "One block"): a calibration of the
    # machine as it was while those points were measured.
    "fresh-3": {
        "file": "configs/sim/calibration_cpu_fresh3.json",
        "streaming": "docs/results/streaming_fresh3.csv",
        "binaries": "75fde34 (streaming measured in the same rounds as the fresh-3 points)",
        "extra": {},
    },
    # The same procedure on the VM of 2026-12-02's morning session (AMD EPYC, slower).
    "fresh-4": {
        "file": "configs/sim/calibration_cpu_fresh4.json",
        "streaming": "docs/results/streaming_fresh4.csv",
        "binaries": "a79b33c (streaming measured in the same rounds as the fresh-4 points)",
        "extra": {},
    },
    # The VM of the congestion-control runs (Intel Xeon, 2026-12-02 afternoon): the
    # streaming benchmark in 3 rounds right after them, under the host's bbr.
    "cc-2026-12-02": {
        "file": "configs/sim/calibration_cpu_cc.json",
        "streaming": "docs/results/streaming_cc_2026-12-02.csv",
        "binaries": "7b6d072 (a6c8c45's data path; streaming measured right after the runs)",
        "extra": {},
    },
    "fresh-5": {
        "file": "configs/sim/calibration_cpu_fresh5.json",
        "streaming": "docs/results/streaming_fresh5.csv",
        "binaries": "9dab1a0 (streaming measured in the same rounds as the fresh-5 points)",
        "extra": {},
    },
    "2026-12-03": {
        "file": "configs/sim/calibration_cpu_2026-12-03.json",
        "streaming": "docs/results/streaming_2026-12-03.csv",
        "binaries": "e4368cb (streaming measured in the same rounds as the 2026-12-03 points)",
        "extra": {},
    },
}
# The calibration each measured set is predicted with (default: "current").
SET_CALIBRATION = {"2026-12-02": "2026-12-02", "2026-11-30": "2026-11-30", "fresh-3": "fresh-3",
                   "fresh-4": "fresh-4", "fresh-5": "fresh-5", "cc-bbr": "cc-2026-12-02",
                   "cc-cubic": "cc-2026-12-02", "wire": "cc-2026-12-02",
                   "2026-12-03": "2026-12-03"}


def sim(config, sets, profile, calibration, extra_flags=()):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [SIM, f"--config={config}", f"--profile={profile}", f"--out={out.name}"]
        if calibration:
            cmd.append(f"--calibration={calibration}")
        cmd += [f"--set={s}" for s in sets] + list(extra_flags)
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            sys.exit(f"p3_sim failed: {' '.join(cmd)}\n{p.stderr}")
        with open(out.name) as f:
            return json.load(f)


def streaming_measured(path):
    """Medians per rate of goodput and CPU s/GB."""
    by_rate = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            by_rate.setdefault(float(row["rate_gbps"]), []).append(row)
    out = {}
    for rate, rows in sorted(by_rate.items()):
        out[rate] = {"goodput": statistics.median(float(r["goodput_gbps"]) for r in rows),
                     "cpu_s_per_gb": statistics.median(float(r["cpu_s_per_gb"]) for r in rows),
                     "worker": statistics.median(float(r["worker_cpu_s"]) for r in rows),
                     "server": statistics.median(float(r["server_cpu_s"]) for r in rows),
                     "runs": len(rows), "commit": rows[0]["commit"]}
    return out


def simulate_streaming(cal_path, rate):
    sets = ["mode=p3", "cluster.workers=1", "cluster.servers=1", "network.placement=separate",
            f"network.bandwidth_gbps={rate}", "training.batch_size=1"]
    r = sim("configs/bench/resnet50.textproto", sets,
            os.path.join(PROFILES, "streaming_25m.json"), cal_path,
            HOST + ["--iterations=6", "--warmup=2"])
    return 25_000_000 * 4 * 8 / r["iteration_seconds"] / 1e9


RING_DEFAULT = {"ring_send_s_per_byte": 0.4e-9, "ring_recv_s_per_byte": 0.4e-9,
                "ring_reduce_s_per_byte": 0.3e-9}
RING = {}  # set by fit_ring()
RING_POINT = ("current-interleaved", "resnet50", "ddp", 0.0, 2)


def fit_ring():
    """The factor on the ring costs that meets RING_POINT (bisection)."""
    pts = [p for p in points() if (p["set"], p["model"], p["system"], p["bandwidth"],
                                   p["workers"]) == RING_POINT]
    want = pts[0]["measured"]
    scale = compute_scale("resnet50", local_of(points(), RING_POINT[0], "resnet50"),
                          SETS["current"]["file"])
    lo, hi = 0.5, 4.0
    for _ in range(8):
        k = (lo + hi) / 2
        trial = json.load(open(os.path.join(ROOT, SETS["current"]["file"])))
        trial.update({n: v * k for n, v in RING_DEFAULT.items()})
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(trial, f)
        r = sim("configs/bench/resnet50.textproto", ["mode=p3", "network.bandwidth_gbps=0"],
                os.path.join(PROFILES, "resnet50_b8_cpu.json"), f.name,
                HOST + ["--allreduce", f"--compute_scale={scale}"])
        os.unlink(f.name)
        if r["samples_per_second"] > want:
            lo = k
        else:
            hi = k
    k = (lo + hi) / 2
    print(f"ring costs x {k:.3f} (DDP ResNet-50 unlimited, interleaved session: {want})")
    return {n: v * k for n, v in RING_DEFAULT.items()}


def shared_host_compute_speed():
    """Half of (two single-thread runs side by side) / (one alone), ResNet-50, median."""
    with open(os.path.join(RESULTS, "pipeline_contention.csv")) as f:
        pairs = [float(r["pair_sum_over_alone"]) for r in csv.DictReader(f)
                 if r["model"] == "resnet50"]
    return statistics.median(pairs) / 2


# The disturber of tools/preemption_cost.py whose wake-up rate is the cluster's: a worker's
# main thread was preempted 550 - 1,150 times a second in fresh-5's runs.
PREEMPT_CONDITION = "same:1000:0"


def preempt_s():
    """CPU seconds a single-thread ResNet-50 computation lost per preemption, beside a
    thread on its core waking 1,000 times a second (docs/results/preemption_cost.csv,
    median of the rounds). Measured without a cluster: no validation point enters it."""
    with open(os.path.join(RESULTS, "preemption_cost.csv")) as f:
        costs = [float(r["us_per_preemption"]) for r in csv.DictReader(f)
                 if r["condition"] == PREEMPT_CONDITION and r["us_per_preemption"]]
    return statistics.median(costs) * 1e-6


def calibrate(args):
    first = True
    speed = shared_host_compute_speed()
    print(f"shared_host_compute_speed {speed:.4f} (pipeline_contention.csv, ResNet-50 pairs)")
    preempt = preempt_s()
    print(f"preempt_s {preempt * 1e6:.1f} us (preemption_cost.csv, {PREEMPT_CONDITION})")
    for name, s in SETS.items():
        if args.only and name not in args.only.split(","):
            if first and name == "current":
                # The ring factor is fitted on the current calibration only; reuse it.
                with open(os.path.join(ROOT, s["file"])) as f:
                    RING.update({k: v for k, v in json.load(f).items() if k.startswith("ring_")})
                first = False
            continue
        m = streaming_measured(os.path.join(ROOT, s["streaming"]))
        loop = m[0.0]["cpu_s_per_gb"]  # CPU s per GB crossing, both ends together
        # Split between the sides as the processes' CPU split (worker sends the gradients,
        # the server the values; each does both, so the split is close to even).
        send = loop / 2 * 1e-9
        extra = {rate: (m[rate]["cpu_s_per_gb"] - loop) / 2 for rate in (1.0, 2.5, 5.0)}
        exponent = math.log(extra[1.0] / extra[5.0]) / math.log(5.0)
        if exponent < 0:
            # The extra does not fall with the rate (flat within the runs' spread on the
            # cc-2026-12-02 VM); the model takes no negative exponent.
            print(f"{name}: shaped exponent {exponent:.3f} < 0, taken as 0")
            exponent = 0.0
        cal = {"_source": f"tools/sim_validate.py calibrate from {s['streaming']} "
                          f"(commit {m[0.0]['commit']}, medians of {m[0.0]['runs']} runs per rate); "
                          f"binaries: {s['binaries']}",
               "send_s_per_byte": send, "recv_s_per_byte": send,
               "shaped_s_per_byte_at_1g": extra[1.0] * 1e-9, "shaped_exponent": exponent,
               "shared_host_compute_speed": speed, "preempt_s": preempt}
        best = None
        for per_message in (5e-6, 10e-6, 20e-6, 40e-6):
            for gap in (0.0, 30e-6, 60e-6, 120e-6, 200e-6):
                trial = dict(cal, per_message_s=per_message, write_gap_s=gap)
                with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                    json.dump(trial, f)
                err = 0.0
                for rate in (1.0, 2.5, 5.0, 0.0):
                    g = simulate_streaming(f.name, rate)
                    err += math.log(g / m[rate]["goodput"]) ** 2
                os.unlink(f.name)
                print(f"{name}: per_message {per_message*1e6:.0f} us, gap {gap*1e6:.0f} us: "
                      f"rms log error {math.sqrt(err/4):.3f}")
                if best is None or err < best[0]:
                    best = (err, per_message, gap)
        cal["per_message_s"], cal["write_gap_s"] = best[1], best[2]
        cal.update(RING)
        path = os.path.join(ROOT, s["file"])
        with open(path, "w") as f:
            json.dump(cal, f, indent=2)
            f.write("\n")
        if first:
            RING.update(fit_ring())  # needs the current calibration file written first
            cal.update(RING)
            with open(path, "w") as f:
                json.dump(cal, f, indent=2)
                f.write("\n")
            first = False
        print(f"{name}: wrote {s['file']}:")
        for rate in (1.0, 2.5, 5.0, 0.0):
            g = simulate_streaming(path, rate)
            print(f"  {rate:4} Gbit/s: measured {m[rate]['goodput']:.2f}, simulated {g:.2f} Gbit/s")


def compute_scale(model, local_sps, cal):
    """The compute_scale at which the simulated `local` matches the measured one."""
    profile = os.path.join(PROFILES, f"{model}_b{BATCH[model]}_cpu.json")
    cfg = f"configs/bench/{model}.textproto"
    it = []
    for scale in (1.0, 2.0):
        r = sim(cfg, ["mode=local"], profile, cal, HOST + [f"--compute_scale={scale}"])
        it.append(r["iteration_seconds"])
    want = BATCH[model] / local_sps
    return (want - it[0]) / (it[1] - it[0]) + 1.0


def points():
    """Every measured point: (set, model, system, bandwidth, placement, measured, runs, source)."""
    out = []
    for set_name, file_name in SWEEP_SETS:
        with open(os.path.join(RESULTS, file_name)) as f:
            for r in csv.DictReader(f):
                out.append({"set": set_name, "model": r["model"], "system": r["mode"],
                            "bandwidth": float(r["bandwidth_gbps"]), "workers": int(r["workers"]),
                            "slice_params": int(r["slice_params"] or 40000),
                            "measured": float(r["median_sps"]), "runs": int(r["runs"]),
                            "source": file_name,
                            **raw_iterations(set_name, r["model"], r["mode"])})
    with open(os.path.join(RESULTS, "data_path.csv")) as f:
        for r in csv.DictReader(f):
            one = r["bandwidth_gbps"].startswith("1 worker")
            bw = 0.0 if (one or r["bandwidth_gbps"] == "unlimited") else float(r["bandwidth_gbps"])
            base = {"set": "current", "model": r["model"], "bandwidth": bw, "slice_params": 40000,
                    "source": "data_path.csv", **config_iterations(r["model"])}
            out.append(dict(base, system="p3", workers=1 if one else 2,
                            measured=float(r["p3_after"]), runs=int(r["runs_after"])))
            if r["ddp"]:
                out.append(dict(base, system="ddp", workers=2, measured=float(r["ddp"]),
                                runs=int(r["runs_ddp"])))
    with open(os.path.join(RESULTS, "data_path_interleaved.csv")) as f:
        for r in csv.DictReader(f):
            one = r["bandwidth_gbps"].startswith("1 worker")
            bw = 0.0 if (one or r["bandwidth_gbps"] == "unlimited") else float(r["bandwidth_gbps"])
            base = {"set": "current-interleaved", "model": r["model"], "bandwidth": bw,
                    "slice_params": 40000, "source": "data_path_interleaved.csv",
                    **config_iterations(r["model"])}
            out.append(dict(base, system="p3", workers=1 if one else 2,
                            measured=float(r["p3_after"]), runs=int(r["runs_after"])))
            if r["ddp"]:
                out.append(dict(base, system="ddp", workers=2, measured=float(r["ddp"]),
                                runs=int(r["runs_ddp"])))
    for set_name, file_name, rows in raw_sets():
        out += run_points(set_name, file_name, rows)
    return out


def raw_sets():
    """(set, file, rows) of each set whose points come from bench_throughput raw.csv rows:
    the fresh and wire sets, and one set per congestion control of CC_FILE (its runs under
    that congestion control, and the `local` runs, which have none)."""
    for set_name, file_name in FRESH_SETS + WIRE_SETS:
        path = os.path.join(RESULTS, file_name)
        if os.path.exists(path):
            with open(path) as f:
                yield set_name, file_name, list(csv.DictReader(f))
    path = os.path.join(RESULTS, CC_FILE)
    if os.path.exists(path):
        with open(path) as f:
            rows = list(csv.DictReader(f))
        for set_name, cc in CC_SETS:
            yield set_name, CC_FILE, [r for r in rows if r["congestion_control"] == cc or
                                      (r["mode"] == "local" and not r["congestion_control"])]


def run_groups(rows):
    """The samples/s of the finished runs in bench_throughput.py raw.csv rows, per model,
    mode, bandwidth, workers, slice size (DDP's runs have none: 40000), placement, wire
    dtype (where the CSV has them) and iteration count and warm-up."""
    groups = {}
    for r in rows:
        if r["status"] != "ok":
            continue
        wire = r.get("wire_dtype", "") if r["mode"] != "local" else ""
        key = (r["model"], r["mode"], float(r["bandwidth_gbps"]), int(r["workers"]),
               int(r.get("slice_params") or 40000), r.get("placement", ""),
               "" if wire == "float32" else wire, int(r["iterations"]), int(r["warmup"]))
        groups.setdefault(key, []).append(float(r["samples_per_second"]))
    return groups


def run_points(set_name, source, rows):
    """The points of bench_throughput.py raw.csv rows: the median of each group's runs."""
    return [{"set": set_name, "model": model, "system": mode, "bandwidth": bw,
             "workers": workers, "slice_params": slices, "placement": placement,
             "measured": statistics.median(v), "runs": len(v), "source": source,
             "iterations": its, "warmup": warm, "wire_dtype": wire}
            for (model, mode, bw, workers, slices, placement, wire, its, warm), v
            in sorted(run_groups(rows).items())]


def local_of(pts, set_name, model):
    if set_name in dict(FRESH_SETS + SWEEP_SETS + CC_SETS + WIRE_SETS):
        for p in pts:
            if p["set"] == set_name and p["model"] == model and p["system"] == "local":
                return p["measured"]
    src = "data_path_interleaved.csv" if set_name == "current-interleaved" else "data_path.csv"
    with open(os.path.join(RESULTS, src)) as f:
        for r in csv.DictReader(f):
            if r["model"] == model:
                return float(r["local"])
    return None


def config_iterations(model):
    """The iterations (warm-up included) and warm-up of a benchmark run of `model` with
    its config's defaults (configs/bench/<model>.textproto)."""
    cfg = bench_throughput.base_config(model)
    return {"iterations": bench_throughput.config_int(cfg, "iterations", 8),
            "warmup": bench_throughput.config_int(cfg, "warmup_iterations", 2)}


def raw_iterations(set_name, model, mode):
    """The iterations and warm-up the runs of one sweep point made, from the set's raw CSV
    (SWEEP_RAW); every run of the point must agree. Without a raw CSV, the config's."""
    if set_name not in SWEEP_RAW:
        return config_iterations(model)
    with open(os.path.join(RESULTS, SWEEP_RAW[set_name])) as f:
        seen = {(int(r["iterations"]), int(r["warmup"])) for r in csv.DictReader(f)
                if r["model"] == model and r["mode"] == mode and r["status"] == "ok"}
    if len(seen) != 1:
        sys.exit(f"{SWEEP_RAW[set_name]}: {model} {mode}: runs of {sorted(seen)} iterations")
    its, warm = seen.pop()
    return {"iterations": its, "warmup": warm}


def predict(p, cal, scale, extra):
    """The simulator's result for measured point p with calibration file cal, over as many
    iterations (and warm-up) as p's runs made: the whole-tensor modes' simulated
    iterations lengthen as a run goes on, so the count matters."""
    profile = os.path.join(PROFILES, f"{p['model']}_b{BATCH[p['model']]}_cpu.json")
    sets = [f"network.bandwidth_gbps={p['bandwidth']}",
            f"scheduling.slice_params={p['slice_params']}"]
    if extra.get("shared_memory") is False:
        sets.append("scheduling.shared_memory=false")
    if p.get("wire_dtype"):
        sets.append(f"scheduling.wire_dtype={p['wire_dtype']}")
    flags = HOST + [f"--compute_scale={scale}"]
    system = p["system"]
    if system == "ddp":
        flags.append("--allreduce")
        sets.append("mode=p3")
    else:
        sets.append(f"mode={system}")
    if p["workers"] != 2 and system != "local":
        sets += [f"cluster.workers={p['workers']}", f"cluster.servers={p['workers']}"]
    if p.get("placement") == "separate":
        sets.append("network.placement=separate")
        # 2 workers + 2 servers on 4 emulated machines, still one 2-core host
        flags = [f for f in flags if not f.startswith("--machines_per_host")]
        flags.append("--machines_per_host=4")
    elif p["workers"] == 3:
        flags = [f for f in flags if not f.startswith("--machines_per_host")]
        flags.append("--machines_per_host=3")
    flags += [f"--iterations={p['iterations']}", f"--warmup={p['warmup']}"]
    return sim(f"configs/bench/{p['model']}.textproto", sets, profile, cal, flags)


# The calibration's CPU costs of communication that `trial --cpu_factor` multiplies.
CPU_COST_FIELDS = ("send_s_per_byte", "recv_s_per_byte", "shaped_s_per_byte_at_1g", "per_message_s")


def trial(args):
    """Predicted / measured for the points of some sets with a changed calibration (a
    what-if; nothing is written): every CPU cost of communication x --cpu_factor, and/or
    the link's payload share set to --goodput_factor, the computation's speed on shared
    cores set to --compute_speed, or both from a side-by-side measurement (--side_by_side).
    compute_scale is fitted again."""
    pts = points()
    for set_name in args.sets.split(","):
        cal_set = SET_CALIBRATION.get(set_name, "current")
        with open(os.path.join(ROOT, SETS[cal_set]["file"])) as f:
            cal = json.load(f)
        cal.update({k: cal[k] * args.cpu_factor for k in CPU_COST_FIELDS})
        if args.goodput_factor:
            cal["goodput_factor"] = args.goodput_factor
        if args.compute_speed:
            cal["shared_host_compute_speed"] = args.compute_speed
        if args.preempt_s >= 0:
            cal["preempt_s"] = args.preempt_s
        if args.side_by_side:
            # Computation and communication measured side by side (tools/side_by_side.py):
            # the computation's speed beside both, the communication's CPU x its factor.
            with open(os.path.join(ROOT, args.side_by_side)) as sf:
                sbs = list(csv.DictReader(sf))
            cal["shared_host_compute_speed"] = statistics.median(
                float(r["compute_speed"]) for r in sbs)
            comm = statistics.median(float(r["comm_factor"]) for r in sbs)
            cal.update({k: cal[k] * comm for k in CPU_COST_FIELDS})
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(cal, f)
        scales = {}
        for p in pts:
            if p["set"] != set_name or p["system"] in ("local", "ddp"):
                continue
            if p["model"] not in scales:
                scales[p["model"]] = compute_scale(p["model"], local_of(pts, set_name, p["model"]),
                                                   f.name)
            r = predict(p, f.name, scales[p["model"]], SETS[cal_set]["extra"])
            print(f"{set_name:20} {p['model']:13} {p['system']:9} {p['bandwidth']:4} w{p['workers']} "
                  f"{p.get('placement') or 'colocated':9} cpu x{args.cpu_factor:g} goodput "
                  f"{cal.get('goodput_factor', 'default')} compute speed "
                  f"{cal['shared_host_compute_speed']:g} preempt {cal.get('preempt_s', 0) * 1e6:g} us: "
                  f"predicted / measured "
                  f"{r['samples_per_second'] / p['measured']:.3f}", flush=True)
        os.unlink(f.name)


def validate(args):
    pts = points()
    scales = {}
    rows = []
    for p in pts:
        cal_set = SET_CALIBRATION.get(p["set"], "current")
        cal = SETS[cal_set]["file"]
        key = (p["set"], p["model"])
        if key not in scales:
            scales[key] = compute_scale(p["model"], local_of(pts, p["set"], p["model"]), cal)
        system = p["system"]
        r = predict(p, cal, scales[key], SETS[cal_set]["extra"])
        ratio = r["samples_per_second"] / p["measured"]
        w = r["workers"][0]
        rows.append(dict(p, predicted=round(r["samples_per_second"], 3), ratio=round(ratio, 3),
                         within_10pct=abs(ratio - 1) <= 0.10, compute_scale=round(scales[key], 3),
                         compute_s=round(w["compute_s"], 4),
                         exposed_comm_s=round(w["exposed_comm_s"], 4), idle_s=round(w["idle_s"], 4),
                         fitted=system == "local" or (p["set"], p["model"], system,
                                                      p["bandwidth"], p["workers"]) == RING_POINT))
        print(f"{p['set']:20} {p['model']:13} {system:14} {p['bandwidth']:4} w{p['workers']} "
              f"s{p['slice_params']:<8} measured {p['measured']:7.2f} predicted "
              f"{r['samples_per_second']:7.2f} ratio {ratio:.2f}", flush=True)
    csv_path = os.path.join(RESULTS, "simulator_validation.csv")
    with open(csv_path, "w", newline="") as f:
        fields = list(dict.fromkeys(k for r in rows for k in r))  # every set's columns
        wr = csv.DictWriter(f, fieldnames=fields, restval="")
        wr.writeheader()
        wr.writerows(rows)
    write_table(rows)


def write_table(rows):
    checked = [r for r in rows if not r["fitted"]]
    by_model = {}
    for r in checked:
        key = "VGG-19" if r["model"] == "vgg19" else "ResNet-50 and the LSTM"
        by_model.setdefault(key, []).append(r["within_10pct"])
    lines = [f"**All sets: {sum(r['within_10pct'] for r in checked)} of {len(checked)} checked "
             f"points within ±10 %** (" + "; ".join(f"{k}: {sum(v)} of {len(v)}"
                                                      for k, v in sorted(by_model.items()))
             + ").", ""]
    for set_name in ("2026-12-03", "wire", "2026-12-02", "cc-bbr", "cc-cubic", "fresh-5", "fresh-4", "fresh-3",
                     "fresh-2", "fresh", "current-interleaved", "current", "2026-11-30"):
        sub = [r for r in rows if r["set"] == set_name]
        if not sub:
            continue
        checked = [r for r in sub if not r["fitted"]]
        inside = sum(1 for r in checked if r["within_10pct"])
        lines.append(f"**{set_name}** ({sub[0]['source']}): {inside} of {len(checked)} points "
                     f"within ±10 %; median |ratio − 1| "
                     f"{statistics.median(abs(r['ratio'] - 1) for r in checked):.3f}.")
        lines.append("")
        lines.append("| model | system | Gbit/s | workers | placement | slice | measured | "
                     "predicted | predicted ÷ measured | runs |")
        lines.append("|---|---|---:|---:|---|---:|---:|---:|---:|---:|")
        for r in sorted(sub, key=lambda r: (r["model"], r["system"], r["workers"],
                                            r["slice_params"], r["bandwidth"] or 99,
                                            r.get("wire_dtype") or "")):
            bw = "unlimited" if r["bandwidth"] == 0 else f"{r['bandwidth']:g}"
            mark = " (fitted)" if r["fitted"] else ("" if r["within_10pct"] else " **✗**")
            system = r["system"] + (f", {r['wire_dtype']} wire" if r.get("wire_dtype") else "")
            lines.append(f"| {r['model']} | {system} | {bw} | {r['workers']} | "
                         f"{r.get('placement') or 'colocated'} | {r['slice_params']} | {r['measured']:.2f} | {r['predicted']:.2f} | "
                         f"{r['ratio']:.2f}{mark} | {r['runs']} |")
        lines.append("")
    md = os.path.join(ROOT, "docs/results/simulator.md")
    text = open(md).read() if os.path.exists(md) else f"{BEGIN}\n{END}\n"
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    with open(md, "w") as f:
        f.write(text[:start] + "\n" + "\n".join(lines) + text[end:])


def fresh(args):
    """Collects bench_throughput raw.csv files (DIR=placement) into docs/results/<--file>."""
    files = [f for _, f in FRESH_SETS]
    if args.file not in files:
        raise SystemExit("fresh: --file must name one of " + ", ".join(files))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    rows = []
    for spec in args.dirs:
        d, placement = spec.split("=")
        with open(os.path.join(d, "raw.csv")) as f:
            for r in csv.DictReader(f):
                rows.append(dict(r, placement=placement, commit=commit))
    with open(os.path.join(RESULTS, args.file), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    print(f"{len(rows)} runs -> docs/results/{args.file}")


def sweep(args):
    """The slice sweeps of slice_tuning_sweep.csv against the launcher's search's predictions
    (ResNet-50, calibration_cpu.json, 6 iterations of which 2 left out, compute_scale 1)."""
    runs = {}
    with open(os.path.join(RESULTS, "slice_tuning_sweep.csv")) as f:
        for r in csv.DictReader(f):
            if r["status"] == "ok":
                runs.setdefault((float(r["bandwidth_gbps"]), int(r["slice_params"])),
                                []).append(float(r["samples_per_second"]))
    print("| Gbit/s | slice | measured median samples/s | min | max | predicted | "
          "predicted ÷ measured |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for (bw, slice_params), v in sorted(runs.items()):
        r = sim("configs/bench/resnet50.textproto",
                ["mode=p3", f"network.bandwidth_gbps={bw}", f"scheduling.slice_params={slice_params}"],
                os.path.join(PROFILES, "resnet50_b8_cpu.json"), SETS["current"]["file"],
                HOST + ["--iterations=6", "--warmup=2"])
        measured = statistics.median(v)
        ratios.append(r["samples_per_second"] / measured)
        print(f"| {bw:g} | {slice_params:,} | {measured:.2f} | {min(v):.2f} | {max(v):.2f} | "
              f"{r['samples_per_second']:.2f} | {ratios[-1]:.2f} |")
    print(f"\n{sum(abs(x - 1) <= 0.10 for x in ratios)} of {len(ratios)} points within ±10 %; "
          f"median |ratio − 1| {statistics.median(abs(x - 1) for x in ratios):.3f}")


def cpu(args):
    """Where the CPU went in each run of a set with a CPU breakdown (tools/cpu_breakdown.py),
    beside where the simulator puts it: the workers' main threads (forward and backward)
    against `compute` + `preempt`, every other thread of the workers and servers against send +
    receive + update, and the host's busy cores against the total. Medians over rounds;
    core-seconds per iteration of the whole cluster."""
    pts = points()
    for set_name, file_name in CPU_BREAKDOWN.items():
        path = os.path.join(RESULTS, file_name)
        if not os.path.exists(path):
            continue
        cal = SETS[SET_CALIBRATION[set_name]]["file"]
        scales = {}
        runs = {}
        with open(path) as f:
            for r in csv.DictReader(f):
                key = (r["model"], r["mode"], float(r["bandwidth_gbps"]), int(r["workers"]),
                       r["placement"])
                one = runs.setdefault(key, {}).setdefault(r["round"], {})
                one[r["group"]] = float(r["core_s_per_iteration"])
                one["iteration"] = float(r["iteration_seconds"])
                if r["model"] not in scales:
                    scales[r["model"]] = compute_scale(
                        r["model"], local_of(pts, set_name, r["model"]), cal)
        print(f"**{set_name}** ({file_name}; compute_scale "
              + ", ".join(f"{m} {v:.3f}" for m, v in sorted(scales.items()))
              + f"; {cal}): core-seconds per "
              "iteration, medians over rounds, measured / simulated.\n")
        print("| point | iteration (s) | computation (workers' main threads) | communication "
              "(all other threads) | processes in all | host busy | softirq |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for key, rounds in sorted(runs.items(), key=lambda kv: (kv[0][1] != "local", kv[0])):
            model, mode, bw, workers, placement = key

            def med(fn):
                return statistics.median(fn(g) for g in rounds.values())
            main_s = med(lambda g: g.get("worker:main", 0.0))
            total = med(lambda g: g["processes:total"])
            comm = med(lambda g: g["processes:total"] - g.get("worker:main", 0.0))
            # The set's point: the same runs, with the iterations they made.
            p = next(q for q in pts if q["set"] == set_name and
                     (q["model"], q["system"], q["bandwidth"], q["workers"],
                      q.get("placement")) == key)
            r = predict(p, cal, scales[model], SETS[SET_CALIBRATION[set_name]]["extra"])
            c = r["cpu_s_per_iteration"]
            sim_comm = c["send"] + c["receive"] + c["update"] + c["ring"]
            sim_compute = c["compute"] + c.get("preempt", 0.0)
            name = f"{mode} {'unlimited' if bw == 0 else f'{bw:g} Gbit/s'}" + (
                f", {workers} + {workers}" if workers == 3 else "") + (
                ", separate" if placement == "separate" else "")
            print(f"| {name} | {med(lambda g: g['iteration']):.3f} / {r['iteration_seconds']:.3f} "
                  f"| {main_s:.3f} / {sim_compute:.3f} | {comm:.3f} / {sim_comm:.3f} "
                  f"| {total:.3f} / {c['total']:.3f} | {med(lambda g: g['host:busy']):.3f} "
                  f"| {med(lambda g: g['host:softirq']):.3f} |", flush=True)


# The raw runs behind the sets whose points validate() reads from aggregated CSVs.
AGGREGATED_RAW = {"current": "throughput_raw.csv",
                  "current-interleaved": "data_path_interleaved_after_raw.csv"}
# Variance of the median of n draws of a unit normal (n <= 5 exact; beyond, pi / 2n).
MEDIAN_VAR = {1: 1.0, 2: 0.5, 3: 0.4487, 4: 0.3433, 5: 0.2868}


def point_runs():
    """The samples/s of every run behind each validated point, keyed as the rows of
    simulator_validation.csv: (set, model, system, bandwidth, workers, slice_params,
    placement, wire dtype). For throughput_2026-11-30.csv, which keeps only min, median and
    max, a point's runs are known where it has at most 3; else (min, max) stand in."""
    groups = {}

    def add(set_name, rows):
        for (model, mode, bw, workers, slices, placement, wire, _, _), v in \
                run_groups(rows).items():
            groups.setdefault((set_name, model, mode, bw, workers, slices, placement, wire),
                              []).extend(v)

    for set_name, _, rows in raw_sets():
        add(set_name, rows)
    for set_name, file_name in list(SWEEP_RAW.items()) + list(AGGREGATED_RAW.items()):
        with open(os.path.join(RESULTS, file_name)) as f:
            add(set_name, list(csv.DictReader(f)))
    with open(os.path.join(RESULTS, "throughput_2026-11-30.csv")) as f:
        for r in csv.DictReader(f):
            n = int(r["runs"])
            lo, med, hi = float(r["min_sps"]), float(r["median_sps"]), float(r["max_sps"])
            groups[("2026-11-30", r["model"], r["mode"], float(r["bandwidth_gbps"]),
                    int(r["workers"]), int(r["slice_params"] or 40000), "", "")] = \
                {1: [med], 2: [lo, hi], 3: [lo, med, hi]}.get(n, [lo, hi])
    return groups


def noise(args):
    """How far the measurements themselves reproduce: per set, the runs' pooled spread, what
    a predictor that knew each point's true throughput would be expected to meet, and
    whether each miss lies within the runs' own range."""
    runs = point_runs()
    with open(os.path.join(RESULTS, "simulator_validation.csv")) as f:
        checked = [r for r in csv.DictReader(f) if r["fitted"] == "False"]
    by_set = {}
    for r in checked:
        key = (r["set"], r["model"], r["system"], float(r["bandwidth"]), int(r["workers"]),
               int(r["slice_params"]), r.get("placement", ""), r.get("wire_dtype", ""))
        v = runs.get(key)
        if v is None:
            sys.exit(f"noise: no runs on record for {key}")
        complete = len(v) == int(r["runs"])
        if complete and abs(statistics.median(v) - float(r["measured"])) > 0.01:
            sys.exit(f"noise: the runs of {key} have median {statistics.median(v)}, "
                     f"simulator_validation.csv says {r['measured']}")
        by_set.setdefault(r["set"], []).append((r, v, complete))
    lo_log, hi_log = math.log(0.9), math.log(1.1)

    def phi(x):
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    out = []
    for set_name, pts in by_set.items():
        sq, dof = 0.0, 0
        for _, v, complete in pts:
            if complete and len(v) >= 2:
                logs = [math.log(x) for x in v]
                mean = sum(logs) / len(logs)
                sq += sum((x - mean) ** 2 for x in logs)
                dof += len(logs) - 1
        sigma = math.sqrt(sq / dof)
        expected, p_all, own, hits, within_runs, beyond = 0.0, 1.0, 0, 0, 0, 0
        for r, v, _ in pts:
            n = int(r["runs"])
            sd = sigma * math.sqrt(MEDIAN_VAR.get(n, math.pi / (2 * n)))
            p_hit = phi(hi_log / sd) - phi(lo_log / sd)
            expected += p_hit
            p_all *= p_hit
            med, pred = float(r["measured"]), float(r["predicted"])
            own += min(v) >= 0.9 * med and max(v) <= 1.1 * med
            if r["within_10pct"] == "True":
                hits += 1
            elif any(0.9 * x <= pred <= 1.1 * x for x in v):
                within_runs += 1
            else:
                beyond += 1
        out.append({"set": set_name, "points": len(pts),
                    "runs_per_point": f"{statistics.median(int(r['runs']) for r, _, _ in pts):g}",
                    "sigma_log": round(sigma, 4), "sigma_dof": dof,
                    "points_whose_runs_lie_within_10pct": own,
                    "expected_hits_of_exact_predictor": round(expected, 1),
                    "chance_exact_predictor_meets_all": p_all,
                    "hits": hits, "misses_within_10pct_of_a_run": within_runs,
                    "misses_beyond_every_run": beyond})
    total = {"set": "all", "points": sum(o["points"] for o in out), "runs_per_point": "",
             "sigma_log": "", "sigma_dof": sum(o["sigma_dof"] for o in out)}
    for k in ("points_whose_runs_lie_within_10pct", "expected_hits_of_exact_predictor", "hits",
              "misses_within_10pct_of_a_run", "misses_beyond_every_run"):
        total[k] = round(sum(o[k] for o in out), 1)
    total["chance_exact_predictor_meets_all"] = math.prod(
        o["chance_exact_predictor_meets_all"] for o in out)
    out.append(total)
    path = os.path.join(RESULTS, "simulator_noise.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0].keys()))
        w.writeheader()
        w.writerows(out)
    print("| set | points | runs per point | σ of one run | points whose runs lie within "
          "±10 % of their median | expected hits of an exact predictor | chance it meets all | hits | misses "
          "within 10 % of a run | misses beyond every run |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for o in out:
        sig = f"{o['sigma_log']:.3f}" if o["sigma_log"] != "" else ""
        print(f"| {o['set']} | {o['points']} | {o['runs_per_point']} | {sig} | "
              f"{o['points_whose_runs_lie_within_10pct']} | "
              f"{o['expected_hits_of_exact_predictor']} | "
              f"{o['chance_exact_predictor_meets_all']:.2g} | {o['hits']} | "
              f"{o['misses_within_10pct_of_a_run']} | {o['misses_beyond_every_run']} |")
    print(f"-> {os.path.relpath(path, ROOT)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["calibrate", "validate", "table", "fresh", "sweep", "trial",
                                            "cpu", "noise"])
    ap.add_argument("dirs", nargs="*", help="fresh: bench output folders as DIR=placement")
    ap.add_argument("--sets", default="fresh-3",
                    help="trial: the measured sets to predict (comma-separated)")
    ap.add_argument("--cpu_factor", type=float, default=1.0,
                    help="trial: multiplies the calibration's CPU costs of communication")
    ap.add_argument("--goodput_factor", type=float, default=0.0,
                    help="trial: the link's payload share (0: the calibration's)")
    ap.add_argument("--compute_speed", type=float, default=0.0,
                    help="trial: shared_host_compute_speed (0: the calibration's)")
    ap.add_argument("--preempt_s", type=float, default=-1.0,
                    help="trial: the computation's CPU seconds lost per wake-up on a full host "
                         "(Calibration::preempt_s; negative: the calibration's)")
    ap.add_argument("--side_by_side", default="",
                    help="trial: a tools/side_by_side.py CSV: its medians as the computation's "
                         "speed and a factor on the communication's CPU costs")
    ap.add_argument("--only", default="",
                    help="calibrate: only these calibration sets (comma-separated names of SETS)")
    ap.add_argument("--file", default="",
                    help="fresh: the CSV in docs/results to write (one of FRESH_SETS' files)")
    args = ap.parse_intermixed_args()
    if args.command == "fresh":
        fresh(args)
    elif args.command == "calibrate":
        calibrate(args)
    elif args.command == "validate":
        validate(args)
    elif args.command == "sweep":
        sweep(args)
    elif args.command == "trial":
        trial(args)
    elif args.command == "cpu":
        cpu(args)
    elif args.command == "noise":
        noise(args)
    else:
        with open(os.path.join(RESULTS, "simulator_validation.csv")) as f:
            rows = []
            for r in csv.DictReader(f):
                for k in ("bandwidth", "measured", "predicted", "ratio"):
                    r[k] = float(r[k])
                for k in ("workers", "slice_params", "runs"):
                    r[k] = int(r[k])
                r["within_10pct"] = r["within_10pct"] == "True"
                r["fitted"] = r["fitted"] == "True"
                rows.append(r)
        write_table(rows)


if __name__ == "__main__":
    main()

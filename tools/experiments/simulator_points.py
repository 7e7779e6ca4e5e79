"""The measured points the simulator is checked against (docs/results/simulator/simulator.md):
which committed file holds which set of runs, the calibration each set is predicted with,
and every point read from them. Used by tools/experiments/simulator.py.

Files are named relative to docs/results; a point's `source` is the file's name alone."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths, raw_csv, textproto  # noqa: E402

HOST = ["--cpu_cores_per_host=2", "--machines_per_host=2"]  # 2 emulated machines, 2 cores
# How much each block's computation varies where processes share these 2 cores (p3_sim
# --block_jitter; not in `local`): the median of 13 traced runs' time-weighted log sd, 3
# models, 1 - unlimited Gbit/s, 2 + 2 and 3 + 3 (0.26 - 0.55; simulator.md, "Blocks that
# vary"; docs/results/simulator/block_spread_2026-12-07/runs.csv). A prediction is the
# median of JITTER_SEEDS seeds' runs.
BLOCK_JITTER = 0.37
JITTER_SEEDS = 5
BATCH = {"resnet50": 8, "vgg19": 4, "seq2seq_lstm": 16, "transformer": 8, "inception_v3": 8}


def profile_name(model):
    """The committed profile (configs/sim/profiles/) of a model at BATCH and its bench
    config's image size, named as the launcher and p3_sim find one (FindProfile,
    tools/launcher/tuning.h): <model>_b<batch>_cpu.json, _i<size>_cpu.json above 32 x 32."""
    size = textproto.int_field(textproto.bench_config(model), "image_size", 0)
    return f"{model}_b{BATCH[model]}" + (f"_i{size}" if size > 32 else "") + "_cpu.json"


# Points measured for the validation alone (`fresh`): set name, file.
# fresh: 2 or 3 runs of 10 timed iterations per point (2026-12-01 14:58); fresh-2: 5
# interleaved rounds of 40 timed iterations (2026-12-01 21:17); fresh-3: 3 such rounds,
# each with a run of the streaming benchmark (its own calibration, SET_CALIBRATION).
# fresh-4: the same, 3 rounds on another VM (AMD EPYC, 2026-12-02 morning). fresh-5: the
# same VM's next session, every run also read for where its CPU went
# (simulator_cpu_breakdown.py; `cpu`), plus P3 at 1 Gbit/s and on loopback. 2026-12-03:
# another AMD EPYC VM, 3 interleaved rounds of the sweep's own points (ResNet-50 and the
# LSTM; p3, baseline, DDP at 1 Gbit/s and unlimited, and `local`), each round with a
# streaming run (its calibration).
FRESH_SETS = [("fresh", "simulator/simulator_fresh_raw.csv"),
              ("fresh-2", "simulator/simulator_fresh2_raw.csv"),
              ("fresh-3", "simulator/simulator_fresh3_raw.csv"),
              ("fresh-4", "simulator/simulator_fresh4_raw.csv"),
              ("fresh-5", "simulator/simulator_fresh5_raw.csv"),
              ("2026-12-03", "simulator/simulator_2026-12-03_raw.csv"),
              # The protocol's fresh set (simulator_fresh.py): predicted and committed
              # before it was measured; 5 interleaved rounds with a streaming run each.
              ("fresh-2026-12-05", "simulator/simulator_fresh_2026-12-05_raw.csv"),
              # The second, frozen after fix 3 (predictions committed first).
              ("fresh-2026-12-05b", "simulator/simulator_fresh_2026-12-05b_raw.csv"),
              # The third, frozen after the shared-memory calibration and gloo's link
              # share (DDP points among them).
              ("fresh-2026-12-05c", "simulator/simulator_fresh_2026-12-05c_raw.csv"),
              # The fourth, frozen after the kernel buffer in bytes and the two-size fit
              # (its streaming runs at two slice sizes: its own two-size calibration).
              ("fresh-2026-12-05d", "simulator/simulator_fresh_2026-12-05d_raw.csv"),
              # The fifth, the first under the packs and SCHED_BATCH defaults (its P3 and
              # baseline runs state pack_params 65,536; the model simulates the packs).
              ("fresh-2026-12-06", "simulator/simulator_fresh_2026-12-06_raw.csv"),
              # The sixth: Inception-v3 and the Transformer at 5 Gbit/s (after
              # models-2026-12-06, their first runs) and Inception-v3's baseline.
              ("fresh-2026-12-06b", "simulator/simulator_fresh_2026-12-06b_raw.csv"),
              # Not fresh: earlier sets' missed configurations, measured again with
              # today's binaries, predicted and committed first (simulator_fresh_sets.py).
              ("remeasure-2026-12-06", "simulator/simulator_remeasure_2026-12-06_raw.csv"),
              # Not fresh either: the many-process points at credit 0 and 1 MiB.
              ("credit-2026-12-07", "simulator/simulator_credit_2026-12-07_raw.csv")]
# Ordinary sets measured with tools/bench_throughput.py run in one sitting, every run's
# raw.csv row copied as it was written (`simulator.py fresh --commit=`): set name, file.
# Neither fresh (their configurations were fitted on in earlier sets, no prediction was
# committed before the runs) nor sweeps (no aggregated CSV). ddp-2026-12-05: P3 against
# DDP, 5 interleaved rounds (ResNet-50 and VGG-19 at 1, 2.5, 5 Gbit/s and unlimited, the
# LSTM at 1), then in the same sitting the streaming benchmark, the preemption runs and
# the `local` runs of VGG-19 and the LSTM (ResNet-50's are in the rounds).
# slices-2026-12-05: P3 at 40000, 160000, 640000 and the launcher's automatic slice size
# (given 0, recorded as its choice) against DDP, ResNet-50 at 2.5, 5 Gbit/s and unlimited
# and VGG-19 at 5 and unlimited, 5 interleaved rounds; then the streaming benchmark, the
# preemption runs and the `local` runs of both models.
# models-2026-12-06: Inception-v3 and the Transformer, P3 at every default against DDP at
# 1, 2.5 Gbit/s and unlimited, 5 interleaved rounds (binaries cd526dc; throughput.md), their
# `local` runs 3 interleaved rounds right after; predicted with fresh-2026-12-06's
# calibration (the same VM and data path, that morning's sitting: none of its own).
# pieces-2026-12-06: the Transformer and the LSTM with the output projection whole and in
# 8 and 16 pieces (model.output_pieces) against DDP at 1 Gbit/s, 5 interleaved rounds,
# then whole and 8 pieces at unlimited (DDP beside) and 2.5 Gbit/s, 3 rounds, and 3 rounds
# of both models' `local` (binaries d34ecf4; throughput.md); predicted with
# fresh-2026-12-06b's calibration (the same VM, that morning). Its 1 Gbit/s predictions
# were committed before the runs (output_pieces_predicted_2026-12-06.csv).
# auto-2026-12-05: P3 at the launcher's automatic slice size against DDP (ResNet-50 and
# VGG-19 at 2.5, 5 Gbit/s and unlimited, the LSTM at 1) and ResNet-50 at 640,000, 5
# interleaved rounds; then the streaming benchmark at slices of 40,000 and of 640,000 (the
# calibration's two sizes), the preemption runs and the three models' `local` runs.
SITTING_SETS = [("ddp-2026-12-05", "simulator/simulator_ddp_2026-12-05_raw.csv"),
                ("slices-2026-12-05", "simulator/simulator_slices_2026-12-05_raw.csv"),
                ("auto-2026-12-05", "simulator/simulator_auto_2026-12-05_raw.csv"),
                ("models-2026-12-06", "simulator/simulator_models_2026-12-06_raw.csv"),
                ("pieces-2026-12-06", "throughput/output_pieces_2026-12-06_raw.csv")]
# The full sweeps of tools/bench_throughput.py (every mode, the peer and `local`), as
# aggregated by its `report`: set name, file.
SWEEP_SETS = [("2026-12-02", "throughput/throughput.csv"),
              ("2026-11-30", "throughput/throughput_2026-11-30.csv")]
# The raw CSV of each sweep set, where one is committed: the iterations its runs timed.
# Without one (2026-11-30), the runs timed configs/bench/<model>.textproto's, unchanged
# since that sweep (55110cf).
SWEEP_RAW = {"2026-12-02": "throughput/throughput_2026-12-02_raw.csv"}
# The runs of the throughput page's "TCP congestion control" (another VM, 2026-12-02
# afternoon): one set per congestion control, sharing that VM's `local` runs (rows with
# mode local and no congestion control) and its calibration ("cc-2026-12-02").
CC_FILE = "throughput/congestion_control_2026-12-02_raw.csv"
CC_SETS = [("cc-bbr", "bbr"), ("cc-cubic", "cubic")]
# P3 at 1 Gbit/s with each scheduling.wire_dtype, and without a link limit, with `local`
# (the 16-bit wire's page, 2026-12-02 afternoon; the congestion-control runs' VM, so its
# calibration): set name, file.
WIRE_SETS = [("wire", "wire_dtype/wire_dtype_vm3_raw.csv")]
# The points of the data-path comparison (2026-12-01), medians as its table gave them.
DATA_PATH_SETS = [("current", "throughput/data_path.csv"),
                  ("current-interleaved", "throughput/data_path_interleaved.csv")]
# The raw runs behind the sets whose points are read from aggregated CSVs.
AGGREGATED_RAW = {"current": "throughput/throughput_raw.csv",
                  "current-interleaved": "throughput/data_path_interleaved_after_raw.csv"}
# The CPU breakdown of some sets' runs (simulator_cpu_breakdown.py --csv).
CPU_BREAKDOWN = {"fresh-5": "simulator/cpu_breakdown_fresh5.csv",
                 "2026-12-03": "simulator/cpu_breakdown_2026-12-03.csv"}

# Each calibration set: the binaries it stands for, its streaming CSV, and what differs.
SETS = {
    # The sets `current` and `current-interleaved` (2026-12-01's binaries). Until issue 36
    # this was also the launcher's calibration (configs/sim/calibration_cpu.json, LAUNCHER).
    "current": {
        "file": "configs/sim/calibration_cpu_2026-12-01.json",
        "streaming": "docs/results/streaming/streaming_after.csv",
        "binaries": "fa7c300 / 8730c80 (zero-copy streams, shared memory, one send order per link)",
        "extra": {},
    },
    # The sweep of 2026-12-02 (throughput.csv): every mode with the binaries of a6c8c45,
    # the streaming benchmark run before its first round, between the rounds and after.
    "2026-12-02": {
        "file": "configs/sim/calibration_cpu_2026-12-02.json",
        "streaming": "docs/results/streaming/streaming_2026-12-02.csv",
        "binaries": "a6c8c45 (-O2 data path; streaming measured in the sweep's session)",
        "extra": {},
    },
    "2026-11-30": {
        "file": "configs/sim/calibration_cpu_2026-11-30.json",
        "streaming": "docs/results/streaming/streaming.csv",
        "binaries": "1e5e39e / 058ea0e (protobuf copies, loopback TCP between a colocated pair)",
        # No shared memory then: a colocated worker and server used loopback TCP.
        "extra": {"shared_memory": False},
    },
    # The streaming benchmark run in the same interleaved rounds as the fresh-3 points
    # (the simulator page's "One block"): a calibration of the machine as it was while
    # those points were measured.
    "fresh-3": {
        "file": "configs/sim/calibration_cpu_fresh3.json",
        "streaming": "docs/results/streaming/streaming_fresh3.csv",
        "binaries": "75fde34 (streaming measured in the same rounds as the fresh-3 points)",
        "extra": {},
    },
    # The same procedure on the VM of 2026-12-02's morning session (AMD EPYC, slower).
    "fresh-4": {
        "file": "configs/sim/calibration_cpu_fresh4.json",
        "streaming": "docs/results/streaming/streaming_fresh4.csv",
        "binaries": "a79b33c (streaming measured in the same rounds as the fresh-4 points)",
        "extra": {},
    },
    # The VM of the congestion-control runs (Intel Xeon, 2026-12-02 afternoon): the
    # streaming benchmark in 3 rounds right after them, under the host's bbr.
    "cc-2026-12-02": {
        "file": "configs/sim/calibration_cpu_cc.json",
        "streaming": "docs/results/streaming/streaming_cc_2026-12-02.csv",
        "binaries": "7b6d072 (a6c8c45's data path; streaming measured right after the runs)",
        "extra": {},
    },
    "fresh-5": {
        "file": "configs/sim/calibration_cpu_fresh5.json",
        "streaming": "docs/results/streaming/streaming_fresh5.csv",
        "binaries": "9dab1a0 (streaming measured in the same rounds as the fresh-5 points)",
        "extra": {},
    },
    # Written once the fresh set's streaming runs exist (simulator_fresh.py collect).
    "fresh-2026-12-05": {
        "file": "configs/sim/calibration_cpu_fresh_2026-12-05.json",
        "streaming": "docs/results/streaming/streaming_fresh_2026-12-05.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    # Written once that set's streaming runs exist (simulator_fresh.py collect); its
    # preempt_s and comm_interference from its own sitting's simulator_preemption_cost.py
    # runs (simulator_calibration.sitting_preemption).
    "fresh-2026-12-05b": {
        "file": "configs/sim/calibration_cpu_fresh_2026-12-05b.json",
        "streaming": "docs/results/streaming/streaming_fresh_2026-12-05b.csv",
        "preemption": "simulator/preemption_cost_fresh_2026-12-05b.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    # The same, with the sitting's own shared-memory streaming runs (--shared_memory).
    # Its second slice size is auto-2026-12-05's, as slices-2026-12-05's (below): the same
    # VM 2.5 hours later, the same data path (b50196d's; its 40,000 runs cost 0.902 s/GB).
    "fresh-2026-12-05c": {
        "file": "configs/sim/calibration_cpu_fresh_2026-12-05c.json",
        "streaming": "docs/results/streaming/streaming_fresh_2026-12-05c.csv",
        "second_size": "docs/results/streaming/streaming_auto_2026-12-05.csv",
        "preemption": "simulator/preemption_cost_fresh_2026-12-05c.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    # The same, with each round's streaming runs at a second slice size too (640,000 at
    # 2.5, 5 Gbit/s and loopback): per_message_s and the per-byte costs fitted jointly.
    "fresh-2026-12-05d": {
        "file": "configs/sim/calibration_cpu_fresh_2026-12-05d.json",
        "streaming": "docs/results/streaming/streaming_fresh_2026-12-05d.csv",
        "preemption": "simulator/preemption_cost_fresh_2026-12-05d.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    # As fresh-2026-12-05d's (two slice sizes, shared memory, its own preemption runs),
    # under the defaults since cd526dc (packs, communication threads in SCHED_BATCH).
    "fresh-2026-12-06": {
        "file": "configs/sim/calibration_cpu_fresh_2026-12-06.json",
        "streaming": "docs/results/streaming/streaming_fresh_2026-12-06.csv",
        "preemption": "simulator/preemption_cost_fresh_2026-12-06.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    "fresh-2026-12-06b": {
        "file": "configs/sim/calibration_cpu_fresh_2026-12-06b.json",
        "streaming": "docs/results/streaming/streaming_fresh_2026-12-06b.csv",
        "preemption": "simulator/preemption_cost_fresh_2026-12-06b.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    "remeasure-2026-12-06": {
        "file": "configs/sim/calibration_cpu_remeasure_2026-12-06.json",
        "streaming": "docs/results/streaming/streaming_remeasure_2026-12-06.csv",
        "preemption": "simulator/preemption_cost_remeasure_2026-12-06.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    "credit-2026-12-07": {
        "file": "configs/sim/calibration_cpu_credit_2026-12-07.json",
        "streaming": "docs/results/streaming/streaming_credit_2026-12-07.csv",
        "preemption": "simulator/preemption_cost_credit_2026-12-07.csv",
        "binaries": "the commit of simulator_fresh.py measure (streaming in the same rounds)",
        "extra": {},
    },
    # P3 against DDP (SITTING_SETS), main 3387c10: the streaming benchmark (5 runs a rate,
    # shared memory rows too, which the calibration leaves out) and 3 rounds of
    # simulator_preemption_cost.py right after the points' rounds.
    "ddp-2026-12-05": {
        "file": "configs/sim/calibration_cpu_ddp_2026-12-05.json",
        "streaming": "docs/results/streaming/streaming_2026-12-05c.csv",
        "preemption": "simulator/preemption_cost_ddp_2026-12-05.csv",
        "binaries": "3387c10 (streaming and preemption runs in the points' sitting, after them)",
        "extra": {},
    },
    # The slice sizes at fast links (SITTING_SETS), main 1d41416: the same runs after
    # the points' rounds as ddp-2026-12-05 (streaming 5 runs a rate, 3 preemption rounds).
    # Its streaming runs have one slice size; the second is auto-2026-12-05's, an hour
    # later on the same VM (the restart came at 19:05) with the same data path (`git diff
    # 1d41416 b64bf48 -- worker server p3 proto` touches p3/sim only) and the same
    # loopback CPU per GB at 40,000 (medians 0.831 and 0.832 s per GB).
    "slices-2026-12-05": {
        "file": "configs/sim/calibration_cpu_slices_2026-12-05.json",
        "streaming": "docs/results/streaming/streaming_slices_2026-12-05.csv",
        "second_size": "docs/results/streaming/streaming_auto_2026-12-05.csv",
        "preemption": "simulator/preemption_cost_slices_2026-12-05.csv",
        "binaries": "1d41416 (streaming and preemption runs in the points' sitting, after them)",
        "extra": {},
    },
    # The automatic slice size against DDP (SITTING_SETS): its streaming CSV has runs at
    # two slice sizes, so per_message_s and the per-byte costs are fitted jointly.
    "auto-2026-12-05": {
        "file": "configs/sim/calibration_cpu_auto_2026-12-05.json",
        "streaming": "docs/results/streaming/streaming_auto_2026-12-05.csv",
        "preemption": "simulator/preemption_cost_auto_2026-12-05.csv",
        "binaries": "b64bf48 (streaming and preemption runs in the points' sitting, after them)",
        "extra": {},
    },
    "2026-12-03": {
        "file": "configs/sim/calibration_cpu_2026-12-03.json",
        "streaming": "docs/results/streaming/streaming_2026-12-03.csv",
        "binaries": "e4368cb (streaming measured in the same rounds as the 2026-12-03 points)",
        "extra": {},
    },
}
# The launcher's calibration (tools/launch_cluster.cc: it chooses the automatic slice size
# and credit, docs/simulator.md): a copy of one set's, the newest sitting whose streaming
# CSV has two slice sizes, so that the per-message cost is told from the per-byte one.
# `simulator.py calibrate --only=<set>` writes both files; `--only=launcher` copies the
# set's committed file alone. No measured set is predicted with this file.
LAUNCHER = {"file": "configs/sim/calibration_cpu.json", "set": "auto-2026-12-05"}
# The calibration each measured set is predicted with (default: "current").
SET_CALIBRATION = {"2026-12-02": "2026-12-02", "2026-11-30": "2026-11-30", "fresh-3": "fresh-3",
                   "fresh-4": "fresh-4", "fresh-5": "fresh-5", "cc-bbr": "cc-2026-12-02",
                   "cc-cubic": "cc-2026-12-02", "wire": "cc-2026-12-02",
                   "2026-12-03": "2026-12-03", "fresh-2026-12-05": "fresh-2026-12-05",
                   "fresh-2026-12-05b": "fresh-2026-12-05b",
                   "fresh-2026-12-05c": "fresh-2026-12-05c",
                   "fresh-2026-12-05d": "fresh-2026-12-05d",
                   "fresh-2026-12-06": "fresh-2026-12-06",
                   "fresh-2026-12-06b": "fresh-2026-12-06b",
                   "remeasure-2026-12-06": "remeasure-2026-12-06",
                   "credit-2026-12-07": "credit-2026-12-07",
                   "ddp-2026-12-05": "ddp-2026-12-05",
                   "slices-2026-12-05": "slices-2026-12-05",
                   "auto-2026-12-05": "auto-2026-12-05",
                   "models-2026-12-06": "fresh-2026-12-06",
                   "pieces-2026-12-06": "fresh-2026-12-06b"}
# The point whose measurement fits the factor on gloo's ring costs (fit_ring), in every
# calibration: the same point of a later set (ddp-2026-12-05's) is checked, not fitted.
RING_POINT = ("current-interleaved", "resnet50", "ddp", 0.0, 2)


def results(name):
    """A file named relative to docs/results."""
    return paths.results(name)


def calibration_of(set_name):
    """The calibration set a measured set is predicted with."""
    return SETS[SET_CALIBRATION.get(set_name, "current")]


def points():
    """Every measured point: set, model, system, bandwidth, workers, slice_params,
    (placement, wire_dtype), measured samples/s, runs, source file, and the iterations
    (and warm-up) its runs made."""
    out = []
    for set_name, file_name in SWEEP_SETS:
        for r in csv_io.read_rows(results(file_name)):
            out.append({"set": set_name, "model": r["model"], "system": r["mode"],
                        "bandwidth": float(r["bandwidth_gbps"]), "workers": int(r["workers"]),
                        "slice_params": int(r["slice_params"] or raw_csv.DEFAULT_SLICE_PARAMS),
                        "measured": float(r["median_sps"]), "runs": int(r["runs"]),
                        "source": os.path.basename(file_name),
                        **raw_iterations(set_name, r["model"], r["mode"])})
    for set_name, file_name in DATA_PATH_SETS:
        out += data_path_points(set_name, file_name)
    for set_name, file_name, rows in raw_sets():
        out += run_points(set_name, os.path.basename(file_name), rows)
    return out


def data_path_points(set_name, file_name):
    """The p3 (and DDP) points of a data-path table (its `after` columns)."""
    out = []
    for r in csv_io.read_rows(results(file_name)):
        one = r["bandwidth_gbps"].startswith("1 worker")
        bw = 0.0 if (one or r["bandwidth_gbps"] == "unlimited") else float(r["bandwidth_gbps"])
        base = {"set": set_name, "model": r["model"], "bandwidth": bw,
                "slice_params": raw_csv.DEFAULT_SLICE_PARAMS,
                "source": os.path.basename(file_name), **config_iterations(r["model"])}
        out.append(dict(base, system="p3", workers=1 if one else 2,
                        measured=float(r["p3_after"]), runs=int(r["runs_after"])))
        if r["ddp"]:
            out.append(dict(base, system="ddp", workers=2, measured=float(r["ddp"]),
                            runs=int(r["runs_ddp"])))
    return out


def raw_sets():
    """(set, file, rows) of each set whose points come from bench_throughput raw.csv rows:
    the fresh, sitting and wire sets, and one set per congestion control of CC_FILE (its
    runs under that congestion control, and the `local` runs, which have none)."""
    for set_name, file_name in FRESH_SETS + SITTING_SETS + WIRE_SETS:
        path = results(file_name)
        if os.path.exists(path):
            yield set_name, file_name, raw_csv.read(path)
    path = results(CC_FILE)
    if os.path.exists(path):
        rows = raw_csv.read(path)
        for set_name, cc in CC_SETS:
            yield set_name, CC_FILE, [r for r in rows if r["congestion_control"] == cc or
                                      (r["mode"] == "local" and not r["congestion_control"])]


def run_groups(rows):
    """The samples/s of the finished runs in bench_throughput.py raw.csv rows, per model,
    mode, bandwidth, workers, slice size (DDP's runs have none: the default), placement,
    wire dtype (where the CSV has them; float32 and none as ""), iteration count and
    warm-up, packs (none in a row that records none: every run before them), the output
    projection's pieces (1, whole, in a row that records none) and the send queues' credit
    (0 in a row that records none)."""
    def key(r):
        wire = raw_csv.wire_dtype(r)
        return (r["model"], r["mode"], float(r["bandwidth_gbps"]), int(r["workers"]),
                raw_csv.slice_params(r), r.get("placement", ""),
                "" if wire in (None, "float32") else wire, int(r["iterations"]),
                int(r["warmup"]), raw_csv.pack_params(r), raw_csv.output_pieces(r),
                raw_csv.credit_bytes(r))
    return raw_csv.group(raw_csv.finished(rows), key)


def run_points(set_name, source, rows):
    """The points of bench_throughput.py raw.csv rows: the median of each group's runs."""
    return [{"set": set_name, "model": model, "system": mode, "bandwidth": bw,
             "workers": workers, "slice_params": slices, "placement": placement,
             "measured": statistics.median(v), "runs": len(v), "source": source,
             "iterations": its, "warmup": warm, "wire_dtype": wire, "pack_params": packs,
             "output_pieces": pieces, "credit_bytes": credit}
            for (model, mode, bw, workers, slices, placement, wire, its, warm, packs, pieces,
                 credit), v in sorted(run_groups(rows).items())]


def local_of(pts, set_name, model):
    """The measured `local` samples/s of a set's model: the one process that sets the
    session's compute_scale."""
    if set_name in dict(FRESH_SETS + SITTING_SETS + SWEEP_SETS + CC_SETS + WIRE_SETS):
        for p in pts:
            if p["set"] == set_name and p["model"] == model and p["system"] == "local":
                return p["measured"]
    src = dict(DATA_PATH_SETS)["current-interleaved" if set_name == "current-interleaved"
                               else "current"]
    for r in csv_io.read_rows(results(src)):
        if r["model"] == model:
            return float(r["local"])
    return None


def config_iterations(model):
    """The iterations (warm-up included) and warm-up of a benchmark run of `model` with
    its config's defaults (configs/bench/<model>.textproto)."""
    cfg = textproto.bench_config(model)
    return {"iterations": textproto.int_field(cfg, "iterations", 8),
            "warmup": textproto.int_field(cfg, "warmup_iterations", 2)}


def raw_iterations(set_name, model, mode):
    """The iterations and warm-up the runs of one sweep point made, from the set's raw CSV
    (SWEEP_RAW); every run of the point must agree. Without a raw CSV, the config's."""
    if set_name not in SWEEP_RAW:
        return config_iterations(model)
    seen = {(int(r["iterations"]), int(r["warmup"]))
            for r in raw_csv.read_finished(results(SWEEP_RAW[set_name]))
            if r["model"] == model and r["mode"] == mode}
    if len(seen) != 1:
        sys.exit(f"{SWEEP_RAW[set_name]}: {model} {mode}: runs of {sorted(seen)} iterations")
    its, warm = seen.pop()
    return {"iterations": its, "warmup": warm}

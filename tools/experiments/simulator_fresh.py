#!/usr/bin/env python3
"""Fresh points for the simulator's validation protocol (issue 36;
docs/results/simulator/simulator.md, "Validation protocol"): configurations no
calibration was fitted on, predicted by the frozen model and committed before any of
them is measured, then measured in interleaved rounds with a streaming run per round
(that sitting's own calibration).

  bazel build //tools:p3_sim
  S="/usr/bin/python3 tools/experiments/simulator_fresh.py"
  $S predict --set=fresh-2026-12-05d  # -> docs/results/simulator/fresh_predictions_2026-12-05d.{csv,md}
  # commit those two files, then, as root (about 5 min a round on a quiet 2-core host):
  bazel build //tools:bench_streaming //tools:launch_cluster //worker:p3_worker //server:p3_server
  sudo $S measure --set=fresh-2026-12-05d --rounds=5       # into out/fresh1205d
  $S collect --set=fresh-2026-12-05d   # raw runs + streaming CSV into docs/results
  /usr/bin/python3 tools/experiments/simulator.py calibrate --only=fresh-2026-12-05d
  /usr/bin/python3 tools/experiments/simulator.py validate   # scored as a fresh set

--set names one of FRESH (default: the newest); the first set, fresh-2026-12-05, was
measured into out/fresh1205, the second into out/fresh1205b, and so on.
Every run's 1-minute load average is in its raw.csv row (`load1`).
"""
import argparse
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as calibration  # noqa: E402
import simulator_points as sp  # noqa: E402
from results_lib import csv_io, paths  # noqa: E402


# The slice size of a point that names none (bench_throughput.py's and the config's).
DEFAULT_SLICE_PARAMS = 40000


def point(set_name, model, system, bw, workers=2, placement="colocated", wire="",
          slice_params=DEFAULT_SLICE_PARAMS):
    its, warm = FRESH[set_name]["iterations"][model]
    return {"set": set_name, "model": model, "system": system, "bandwidth": bw,
            "workers": workers, "slice_params": slice_params, "placement": placement,
            "wire_dtype": wire, "iterations": its, "warmup": warm}


# Each fresh set of the protocol: its points, the iterations (and warm-up) of each model's
# runs, where its predictions go, and the measured sets whose calibration and `local` runs
# the committed predictions use (per model, the first that has the model's `local`).
FRESH = {
    # The list: 2 Gbit/s, 3 workers + 3 servers, non-colocated placement, VGG-19
    # at 4 Gbit/s, the 16-bit wire at 2.5 Gbit/s; and the baseline at 2 Gbit/s beside P3.
    # Predicted by addae2b (cbd5d16), measured 2026-12-05 07:01 - 07:24 UTC.
    "fresh-2026-12-05": {
        "predictions": "simulator/fresh_predictions_2026-12-05", "out": "out/fresh1205",
        "iterations": {"resnet50": (43, 3), "vgg19": (13, 3)},
        "predict_with": ("cc-bbr",),
        "points": [("resnet50", "p3", 2.0), ("resnet50", "baseline", 2.0),
                   ("resnet50", "p3", 1.0, 3), ("resnet50", "p3", 1.0, 2, "separate"),
                   ("vgg19", "p3", 4.0), ("resnet50", "p3", 2.5, 2, "colocated", "bfloat16")],
    },
    # A second set, frozen after fix 3 (the interference charged once): no configuration of
    # an earlier fresh set, none fitted on. 1.5 Gbit/s (p3, baseline); 3 + 3 at 2 Gbit/s (3 + 3 only at 1
    # before); separate placement at 2.5 Gbit/s (only at 1 before); the bfloat16 wire at 1
    # Gbit/s on this VM's kind (only on the cc VM before, never fresh); the LSTM at 2 Gbit/s
    # (p3, baseline; no fresh set had the LSTM).
    "fresh-2026-12-05b": {
        "predictions": "simulator/fresh_predictions_2026-12-05b", "out": "out/fresh1205b",
        "iterations": {"resnet50": (43, 3), "seq2seq_lstm": (16, 3)},
        "predict_with": ("fresh-2026-12-05", "cc-bbr"),
        "points": [("resnet50", "p3", 1.5), ("resnet50", "baseline", 1.5),
                   ("resnet50", "p3", 2.0, 3), ("resnet50", "p3", 2.5, 2, "separate"),
                   ("resnet50", "p3", 1.0, 2, "colocated", "bfloat16"),
                   ("seq2seq_lstm", "p3", 2.0), ("seq2seq_lstm", "baseline", 2.0)],
        "notes": """
## How the lead measures and scores it (the machine to itself: nothing else running)

As root, from the repository root, at the commit that holds this file or later with the
same p3/sim code. About 7 minutes a round (a streaming run at each rate, one round of
simulator_preemption_cost.py's `none,same:1000:0,other:8388608` for this sitting's own
`preempt_s` and `comm_interference`, `local` of both models, the 7 points once, in a
rotated order; the longest runs about 45 s), so about 35 minutes for 5 rounds, plus a few
minutes of building:

```sh
bazel build //tools:p3_sim //tools:bench_streaming //tools:launch_cluster //worker:p3_worker //server:p3_server
/usr/bin/python3 tools/experiments/simulator_fresh.py measure --set=fresh-2026-12-05b --rounds=5   # into out/fresh1205b
/usr/bin/python3 tools/experiments/simulator_fresh.py collect --set=fresh-2026-12-05b
/usr/bin/python3 tools/experiments/simulator.py calibrate --only=fresh-2026-12-05b   # ~1 min
/usr/bin/python3 tools/experiments/simulator.py validate   # ~1 min quiet (5 min under load): the set's rows, "fresh after the freeze"
```

`collect` writes docs/results/simulator/simulator_fresh_2026-12-05b_raw.csv (every run,
with its load1), docs/results/streaming/streaming_fresh_2026-12-05b.csv and
docs/results/simulator/preemption_cost_fresh_2026-12-05b.csv; `calibrate` writes
configs/sim/calibration_cpu_fresh_2026-12-05b.json (its `preempt_s` and
`comm_interference` from that sitting's CSV, not the shared 38.9 µs and 0.0358: the
committed predictions above use the shared ones). Commit the four with the validation CSV
and page. A point needs 5 finished runs to be checkable.
""",
    },
    # A third set, frozen after today's two model changes: the shared-memory path's CPU
    # from the streaming benchmark's shared-memory runs (the sitting's own: its streaming
    # runs take --shared_memory) and gloo's ring given its measured link share (alone and
    # beside a computation, measured at 1 / 2.5 / 5 Gbit/s: 1.5, 2 and 3 are interpolated).
    # No configuration of an earlier set (raw CSVs and sweeps checked): DDP ResNet-50 at 2
    # and 3 Gbit/s (DDP only at 1, 2.5, 5 and unlimited before), DDP and P3 LSTM at 1.5,
    # P3 and the baseline ResNet-50 at 3. Each run <= ~35 s on the 2-core VM.
    "fresh-2026-12-05c": {
        "predictions": "simulator/fresh_predictions_2026-12-05c", "out": "out/fresh1205c",
        "iterations": {"resnet50": (43, 3), "seq2seq_lstm": (16, 3)},
        # The newest sitting on this kind of VM, the only one whose streaming CSV has
        # shared-memory runs (its own shm_s_per_byte) and whose locals are both models'.
        "predict_with": ("ddp-2026-12-05", "fresh-2026-12-05b"),
        "streaming_args": ["--shared_memory"],
        "points": [("resnet50", "ddp", 2.0), ("resnet50", "ddp", 3.0),
                   ("seq2seq_lstm", "ddp", 1.5), ("resnet50", "p3", 3.0),
                   ("seq2seq_lstm", "p3", 1.5), ("resnet50", "baseline", 3.0)],
        "notes": """
The committed numbers take `ddp-2026-12-05`'s calibration (its own streaming runs, the
shared-memory ones included, and its own preemption runs: `preempt_s` 0.9 µs,
`comm_interference` 0) and its `local` runs; every calibration has the same
`ring_link_share` (0.949 / 0.945 / 0.868 of 1 / 2.5 / 5 Gbit/s) and beside a computation
(0.923 / 0.882 / 0.694), so 1.5, 2 and 3 Gbit/s take the log-linear interpolation between
the measured rates. What the set tests: the ring's share between the measured rates (the
three DDP points), and the P3 and baseline points with the shared-memory cost from the
sitting's own shared-memory streaming runs (`--shared_memory` in every round).

## How the lead measures and scores it (the machine to itself: nothing else running)

As root, from the repository root, at the commit that holds this file or later with the
same p3/sim code and calibration code. A round: one streaming run at each rate and one on
shared memory (about 35 s), one round of simulator_preemption_cost.py's
`none,same:1000:0,other:8388608` (about 40 s), `local` of both models (about 22 s), the 6
points once in a rotated order (about 160 s; the longest, the LSTM's DDP at 1.5 Gbit/s,
about 35 s). Estimated from the raw CSVs' `wall_seconds` (simulator_fresh_2026-12-05b_raw.csv,
simulator_ddp_2026-12-05_raw.csv) scaled to these points' iterations and predicted speeds,
and from `fresh-2026-12-05b`'s rounds (5.3 min a round with 7 points, 225 s of them):
about 4.5 minutes a round, so **about 22 – 25 minutes for 5 rounds**, plus a few minutes
of building:

```sh
bazel build //tools:p3_sim //tools:bench_streaming //tools:launch_cluster //worker:p3_worker //server:p3_server
/usr/bin/python3 tools/experiments/simulator_fresh.py measure --set=fresh-2026-12-05c --rounds=5   # into out/fresh1205c
/usr/bin/python3 tools/experiments/simulator_fresh.py collect --set=fresh-2026-12-05c
/usr/bin/python3 tools/experiments/simulator.py calibrate --only=fresh-2026-12-05c   # ~1 min
/usr/bin/python3 tools/experiments/simulator.py validate   # ~1 min quiet (5 min under load): the set's rows, "fresh after the freeze"
/usr/bin/python3 tools/experiments/simulator.py score      # the protocol's table again, from the CSV
```

`collect` writes docs/results/simulator/simulator_fresh_2026-12-05c_raw.csv (every run,
with its load1), docs/results/streaming/streaming_fresh_2026-12-05c.csv (shared-memory
rows included) and docs/results/simulator/preemption_cost_fresh_2026-12-05c.csv;
`calibrate` writes configs/sim/calibration_cpu_fresh_2026-12-05c.json (its
`shm_s_per_byte` from its own shared-memory runs, its `preempt_s` and
`comm_interference` from its own preemption runs). Commit the four with the validation
CSV and page. A point needs 5 finished runs to be checkable. To score the committed
numbers themselves as well (as for `fresh-2026-12-05b`), compare this file's table with
the measured medians and the runs' min – max.
""",
    },
    # A fourth set, frozen after the two model changes since c: the kernel's send buffer
    # takes bytes (4 MiB, measured), and per_message_s and the per-byte costs fitted
    # jointly from streaming runs at two slice sizes. No configuration of an earlier set
    # (every raw CSV of docs/results/simulator, throughput and wire_dtype checked): nothing
    # was measured at 4 Gbit/s but VGG-19's P3 at 40,000. ResNet-50's P3 at 4 Gbit/s at
    # 40,000, 320,000 and 1,280,000 (the split of the data path's cost between message and
    # byte; a 1,280,000 slice travels as two parts, 4.19 MB + 0.93 MB, at
    # max_message_params 1,048,576: the larger as large as the buffer), the baseline at
    # 4 Gbit/s (whole tensors through the buffer), the bfloat16 wire at 2.5 Gbit/s at
    # 320,000 (only 40,000 before), VGG-19's P3 at 4 Gbit/s at 320,000 (only 40,000
    # before), the LSTM's DDP at 4 Gbit/s (between the measured 2.5 and 5 of gloo's share).
    "fresh-2026-12-05d": {
        "predictions": "simulator/fresh_predictions_2026-12-05d", "out": "out/fresh1205d",
        "iterations": {"resnet50": (43, 3), "vgg19": (13, 3), "seq2seq_lstm": (16, 3)},
        # The newest two-size calibration, whose sitting measured all three `local`s.
        "predict_with": ("auto-2026-12-05",),
        "streaming_args": ["--shared_memory"],
        # The second slice size of each round's streaming runs (the calibration's joint
        # fit), at the rates auto-2026-12-05's sitting ran it.
        "second_streaming": {"slice_params": 640000, "rates": "2.5,5,0"},
        "points": [("resnet50", "p3", 4.0, 2, "colocated", "", 40000),
                   ("resnet50", "p3", 4.0, 2, "colocated", "", 320000),
                   ("resnet50", "p3", 4.0, 2, "colocated", "", 1280000),
                   ("resnet50", "baseline", 4.0),
                   ("resnet50", "p3", 2.5, 2, "colocated", "bfloat16", 320000),
                   ("vgg19", "p3", 4.0, 2, "colocated", "", 320000),
                   ("seq2seq_lstm", "ddp", 4.0)],
        "notes": """
The committed numbers take `auto-2026-12-05`'s calibration (the newest with streaming runs
at two slice sizes: 11.3 µs a message and 0.32 ns a byte a side; its own `preempt_s` and
`comm_interference`; the 4 MiB kernel buffer, 4,141,050 bytes of payload) and its `local`
runs of the three models. No point below was measured by any earlier set: every raw CSV of
docs/results/simulator, docs/results/throughput and docs/results/wire_dtype (and
throughput.csv, throughput_2026-11-30.csv, the slice sweeps) checked for model × system ×
rate × slice size × workers × wire dtype; nothing at 4 Gbit/s but VGG-19's P3 at 40,000
(`fresh-2026-12-05`). Every slice size is explicit (none automatic). Message counts below
are of ResNet-50's 161 tensors (configs/sim/profiles/resnet50_b8_cpu.json) cut at the
slice size and at `max_message_params`.

| point | what it tests |
|---|---|
| ResNet-50 P3, 4 Gbit/s, 40,000 | the default size between the measured 3 (`fresh-2026-12-05c`) and 5 Gbit/s: the reference for the two below, same rate, same sitting |
| ResNet-50 P3, 4 Gbit/s, 320,000 | the per-message / per-byte split: 217 messages an iteration each way for the same 102 MB, against 769 at 40,000 (predicted +12 % over 40,000) |
| ResNet-50 P3, 4 Gbit/s, 1,280,000 | both changes: the split (174 messages; predicted +1 % over 320,000) and messages as large as the 4 MiB send buffer (the 8 slices longer than `max_message_params`, 1,048,576 values, travel as two parts, the first 4.19 MB) |
| ResNet-50 baseline, 4 Gbit/s | the send buffer taking bytes: whole tensors (parts up to 4.7 MB) at a rate the baseline never ran (its 3 Gbit/s point went 0.83 → 1.11 with the change) |
| ResNet-50 P3, bfloat16 wire, 2.5 Gbit/s, 320,000 | the 16-bit wire (the issue's list; only at 40,000 before): half the bytes a message, so the per-message share of the data path doubles |
| VGG-19 P3, 4 Gbit/s, 320,000 | VGG-19 at 4 Gbit/s (the issue's list; only at 40,000 before) with its large messages |
| seq2seq LSTM DDP, 4 Gbit/s | gloo's link share between the measured 2.5 and 5 Gbit/s (log-linear interpolation), on the model DDP never ran there |

Left out: the baseline at 2 Gbit/s (measured in six earlier sets: `fresh`, `fresh-2` to
`fresh-5`, `fresh-2026-12-05`) and the 16-bit wire at 2.5 Gbit/s at 40,000
(`fresh-2026-12-05`): not fresh.

The set's calibration is its own sitting's: each round runs the streaming benchmark at
every rate and on shared memory (slices of 40,000), then again at 2.5, 5 Gbit/s and
loopback with slices of 640,000 (`bench_streaming.py --slice_params=640000 --append`, into
the same CSV), so `calibrate --only=fresh-2026-12-05d` fits `per_message_s` and the
per-byte costs from both sizes. Checked before the freeze: auto-2026-12-05's streaming and
preemption CSVs copied to this set's paths and calibrated with `--only=fresh-2026-12-05d`
gave auto-2026-12-05's calibration to the digit (every field but `_source`; "per_message
11.35 us ... from loopback CPU 0.8323 s/GB at 40000 and 0.6994 at 640000"); the copies
were then removed.

## How the lead measures and scores it (the machine to itself: nothing else running)

As root, from the repository root, at the commit that holds this file or later with the
same p3/sim code and calibration code. A round: the streaming runs at 40,000 (every rate
and shared memory, about 30 s) and at 640,000 (3 rates, about 17 s: auto-2026-12-05's
rows are 4 – 8 s apart), one round of simulator_preemption_cost.py's
`none,same:1000:0,other:8388608`, `local` of the three models (about 34 s), then the 7
points once in a rotated order (about 160 s). The points' lengths are estimated from the
raw CSVs' `wall_seconds` as the timed samples at the predicted speed plus the overhead of
the nearest measured point (warm-up, start): ResNet-50's P3 points about 17 – 20 s each,
its baseline about 28 s (the baseline at 3 Gbit/s: 29.8 s), VGG-19 about 31 s (its P3 at
4 Gbit/s and 40,000: 32.8 s), the LSTM's DDP about 25 – 30 s; the longest below 35 s.
`fresh-2026-12-05c`'s rounds took 4.0 – 4.4 minutes with 183 s of `wall_seconds` in them;
this set's have about 192 s and the second streaming call: **about 4.5 – 5 minutes a
round, about 23 – 25 minutes for 5 rounds** (27 at the most), plus a few minutes of
building:

```sh
bazel build //tools:p3_sim //tools:bench_streaming //tools:launch_cluster //worker:p3_worker //server:p3_server
/usr/bin/python3 tools/experiments/simulator_fresh.py measure --set=fresh-2026-12-05d --rounds=5   # into out/fresh1205d
/usr/bin/python3 tools/experiments/simulator_fresh.py collect --set=fresh-2026-12-05d
/usr/bin/python3 tools/experiments/simulator.py calibrate --only=fresh-2026-12-05d   # seconds: prints "per_message ... at 40000 and ... at 640000"
/usr/bin/python3 tools/experiments/simulator.py validate   # ~1 min quiet (5 min under load): the set's rows, "fresh after the freeze"
/usr/bin/python3 tools/experiments/simulator.py score      # the protocol's table again, from the CSV
```

`collect` writes docs/results/simulator/simulator_fresh_2026-12-05d_raw.csv (every run,
with its load1), docs/results/streaming/streaming_fresh_2026-12-05d.csv (both slice sizes
and the shared-memory rows) and docs/results/simulator/preemption_cost_fresh_2026-12-05d.csv;
`calibrate` writes configs/sim/calibration_cpu_fresh_2026-12-05d.json (its
`per_message_s` and per-byte costs from its own two sizes, its `shm_s_per_byte`,
`preempt_s` and `comm_interference` from its own runs). Commit the four with the
validation CSV and page. A point needs 5 finished runs to be checkable. To score the
committed numbers themselves as well, compare this file's table with the measured medians
and the runs' min – max.
""",
    },
}
NEWEST = "fresh-2026-12-05d"


def points_of(set_name):
    return [point(set_name, *p) for p in FRESH[set_name]["points"]]


def name(p):
    """A point's name (its runs' folder): a slice size other than the default is in it."""
    return (f"{p['model']}_{p['system']}_{p['bandwidth']:g}g_w{p['workers']}_{p['placement']}"
            + (f"_{p['wire_dtype']}" if p["wire_dtype"] else "")
            + (f"_s{p['slice_params']}" if p["slice_params"] != DEFAULT_SLICE_PARAMS else ""))


def predict_with(pts, fresh, model):
    """(calibration set name, its calibration, local samples/s) for a model's predictions:
    the first of the set's predict_with sets that measured the model's `local`."""
    for name in fresh["predict_with"]:
        # Only the set's own `local` runs (sp.local_of falls back on the `current` set's).
        if any(p["set"] == name and p["model"] == model and p["system"] == "local"
               for p in pts):
            return name, sp.calibration_of(name), sp.local_of(pts, name, model)
    raise SystemExit(f"predict: no set of {fresh['predict_with']} has a local run of {model}")


def kind(p):
    """What makes a point a configuration: model, system, rate, workers, placement, wire
    dtype, slice size."""
    return (p["model"], p["system"], float(p["bandwidth"]), int(p["workers"]),
            p.get("placement") or "colocated", p.get("wire_dtype") or "",
            int(p["slice_params"]))


def measured_before(set_name, pts):
    """The points of set_name whose configuration a set other than itself measured, among
    pts (simulator_points.points(): the sets it reads, not every CSV in docs/results)."""
    seen = {kind(p) for p in pts if p["set"] != set_name}
    return [p for p in points_of(set_name) if kind(p) in seen]


def predict(args):
    """The frozen model's predictions, each with its predict_with set's calibration and
    compute_scale; refused where a point of the set was measured before (not fresh)."""
    fresh = FRESH[args.set]
    pts = sp.points()
    repeated = measured_before(args.set, pts)
    if repeated:
        raise SystemExit("predict: measured before, not fresh: "
                         + ", ".join(name(p) for p in repeated))
    commit = paths.git_commit(mark_dirty=True)
    rows = []
    for p in points_of(args.set):
        with_name, cal_set, local = predict_with(pts, fresh, p["model"])
        scale = calibration.compute_scale(p["model"], local, cal_set["file"])
        r = simulator.predict(p, cal_set["file"], scale, cal_set["extra"])
        rows.append({"point": name(p), "model": p["model"], "system": p["system"],
                     "bandwidth_gbps": p["bandwidth"], "workers": p["workers"],
                     "placement": p["placement"], "wire_dtype": p["wire_dtype"] or "float32",
                     "slice_params": p["slice_params"],
                     "iterations": p["iterations"], "warmup": p["warmup"],
                     "predicted_sps": round(r["samples_per_second"], 3),
                     "calibration": cal_set["file"], "local_set": with_name,
                     "local_sps": local, "compute_scale": round(scale, 4),
                     "model_commit": commit})
        print(f"{rows[-1]['point']:45} {rows[-1]['predicted_sps']:8.3f} samples/s", flush=True)
    csv_io.write_rows(sp.results(fresh["predictions"] + ".csv"), rows)
    lines = ["| point | predicted samples/s | calibration | `local` of (samples/s) | "
             "compute_scale |", "|---|---:|---|---|---:|"]
    lines += [f"| {r['point']} | {r['predicted_sps']:.2f} | "
              f"{os.path.basename(r['calibration'])} | {r['local_set']} ({r['local_sps']}) | "
              f"{r['compute_scale']} |" for r in rows]
    with open(sp.results(fresh["predictions"] + ".md"), "w") as f:
        f.write(f"# Fresh predictions, set `{args.set}` (frozen model {commit})\n\n"
                "Made by `/usr/bin/python3 tools/experiments/simulator_fresh.py predict "
                f"--set={args.set}` and committed before any run of these points; measured by "
                "its `measure`, scored by `simulator.py validate` under the validation "
                "protocol ([simulator.md](simulator.md#validation-protocol)). The committed "
                "numbers use the calibration and `local` runs of the sets named per row; the "
                "scoring predicts the points again, with the same frozen code, from the "
                "sitting's own streaming runs and `local` runs, as for every set.\n\n"
                + "\n".join(lines) + "\n" + fresh.get("notes", ""))
    print(f"-> docs/results/{fresh['predictions']}.{{csv,md}}")


def bench(p, out, iterations, warmup):
    args = [sys.executable, os.path.join(paths.ROOT, "tools/bench_throughput.py"), "run",
            f"--model={p['model']}", "--runs=1", f"--iterations={iterations}",
            f"--warmup={warmup}", f"--out={out}"]
    if p["system"] == "local":
        args += ["--modes=", "--local"]
    elif p["system"] == "ddp":
        # bench_throughput's DDP run (tools/ddp_peer.py, 2 ranks, its own network): no P3
        # mode, the rate only (DDP has no workers, placement or wire dtype options).
        args += [f"--bandwidths={p['bandwidth']:g}", "--modes=", "--ddp"]
    else:
        args += [f"--bandwidths={p['bandwidth']:g}", f"--modes={p['system']}",
                 f"--workers={p['workers']}"]
        if p["slice_params"] != DEFAULT_SLICE_PARAMS:
            args.append(f"--slice_params={p['slice_params']}")
        if p["placement"] == "separate":
            args.append("--set=network.placement=separate")
        if p["wire_dtype"]:
            args.append(f"--wire_dtypes={p['wire_dtype']}")
    print(" ".join(args), flush=True)
    subprocess.run(args, check=False)


# The conditions of simulator_preemption_cost.py a sitting runs for its own preempt_s and
# comm_interference (simulator_calibration.sitting_preemption): about a minute a round.
PREEMPTION_CONDITIONS = "none,same:1000:0,other:8388608"


def preemption_command(out, rnd):
    """One round of simulator_preemption_cost.py, appended to out/preemption_cost.csv."""
    script = os.path.join(paths.ROOT, "tools/experiments/simulator_preemption_cost.py")
    return [sys.executable, script, "--rounds=1", f"--first_round={rnd}", f"--conditions={PREEMPTION_CONDITIONS}",
            f"--csv={os.path.join(out, 'preemption_cost.csv')}",
            f"--out={os.path.join(out, 'preemption')}"]


def streaming_command(fresh, streaming_csv):
    """One run of the streaming benchmark at each rate (and on shared memory where the set
    asks for it: its sitting's own shm_s_per_byte), appended to streaming_csv."""
    return ([sys.executable, os.path.join(paths.ROOT, "tools/bench_streaming.py"), "--runs=1",
             f"--csv={streaming_csv}", "--md="] + fresh.get("streaming_args", [])
            + (["--append"] if os.path.exists(streaming_csv) else []))


def second_streaming_command(fresh, streaming_csv):
    """For a set with "second_streaming": one run at each of its rates with slices of its
    size, over a socket only, appended to streaming_csv after streaming_command's runs
    (simulator_calibration then fits per_message_s and the per-byte costs from both
    sizes); None for a set without one."""
    second = fresh.get("second_streaming")
    if not second:
        return None
    return [sys.executable, os.path.join(paths.ROOT, "tools/bench_streaming.py"), "--runs=1",
            f"--rates={second['rates']}", f"--slice_params={second['slice_params']}",
            f"--csv={streaming_csv}", "--md=", "--append"]


def measure(args):
    """--rounds interleaved rounds: a streaming run at each rate (and at the set's second
    slice size where it has one), for a set whose
    calibration takes the sitting's own preemption costs one round of
    simulator_preemption_cost.py, each model's `local`, then every point once, the order of
    the points rotated each round."""
    fresh = FRESH[args.set]
    pts = points_of(args.set)
    os.makedirs(args.out, exist_ok=True)
    streaming_csv = os.path.join(args.out, "streaming.csv")
    for r in range(1, args.rounds + 1):
        print(f"round {r} at {time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f}",
              flush=True)
        subprocess.run(streaming_command(fresh, streaming_csv), check=False)
        second = second_streaming_command(fresh, streaming_csv)
        if second:
            subprocess.run(second, check=False)
        if sp.SETS[args.set].get("preemption"):
            subprocess.run(preemption_command(args.out, r), check=False)
        for model, (its, warm) in fresh["iterations"].items():
            bench({"model": model, "system": "local"}, os.path.join(args.out, f"local_{model}"),
                  its, warm)
        k = (r - 1) % len(pts)
        for p in pts[k:] + pts[:k]:
            bench(p, os.path.join(args.out, name(p)), p["iterations"], p["warmup"])


def collect(args):
    """The measured runs into docs/results (simulator.py fresh's layout) and the streaming
    runs into docs/results/streaming."""
    dirs = [f"{os.path.join(args.out, f'local_{m}')}=colocated"
            for m in FRESH[args.set]["iterations"]]
    dirs += [f"{os.path.join(args.out, name(p))}={p['placement']}" for p in points_of(args.set)]
    subprocess.run([sys.executable, os.path.join(paths.ROOT, "tools/experiments/simulator.py"),
                    "fresh", f"--file={dict(sp.FRESH_SETS)[args.set]}"] + dirs, check=True)
    shutil.copy(os.path.join(args.out, "streaming.csv"),
                os.path.join(paths.ROOT, sp.SETS[args.set]["streaming"]))
    own = sp.SETS[args.set].get("preemption")
    if own and os.path.exists(os.path.join(args.out, "preemption_cost.csv")):
        shutil.copy(os.path.join(args.out, "preemption_cost.csv"), sp.results(own))
    elif own:
        print("no preemption_cost.csv in the runs: the calibration takes the shared preempt_s "
              "and comm_interference")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["predict", "measure", "collect"])
    ap.add_argument("--rounds", type=int, default=5, help="measure: interleaved rounds (>= 5)")
    ap.add_argument("--set", default=NEWEST, choices=sorted(FRESH),
                    help="the fresh set (default: the newest)")
    ap.add_argument("--out", default="",
                    help="measure, collect: the runs' folder (default: the set's, e.g. out/fresh1205c)")
    args = ap.parse_args()
    args.out = args.out or FRESH[args.set]["out"]
    {"predict": predict, "measure": measure, "collect": collect}[args.command](args)


if __name__ == "__main__":
    main()

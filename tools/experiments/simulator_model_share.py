#!/usr/bin/env python3
"""A what-if of the simulator's validation (docs/results/simulator/simulator.md, "The
streaming benchmark's own model in the communication costs"): every calibration's CPU
costs of communication less the part of its streaming runs that is the benchmark's own
model, not the data path.

The calibration (simulator_calibration.streaming_costs) takes the streaming benchmark's
CPU per GB on loopback, less its server's update, as the data path's cost of sending and
receiving. The benchmark's worker also trains a model whose forward pass reads every
parameter and whose backward pass writes every gradient (tools/bench_streaming_main.cc),
on its training thread, which also does copy 1 (the gradient into the flat buffer: the
data path's). Per calibration set, from its streaming CSV's loopback runs at slices of
40,000: the model's CPU per GB crossing = the training thread's (worker_training_thread_
cpu_s over the GB crossing) less copy 1 (half a memcpy of every byte crossing: the
gradients are half the bytes; memcpy's CPU per GB from the CSV's shared-memory runs, else
from simulator_calibration.SHM_STREAMING's); the CPU costs of communication
(simulator.CPU_COST_FIELDS) are multiplied by 1 - model ÷ (loopback CPU per GB less the
update), through `simulator.validate`'s override. The per-message fit is not redone.
Nothing committed is changed.

  /usr/bin/python3 tools/experiments/simulator_model_share.py \\
      --out=docs/results/simulator/simulator_validation_model_share_whatif_issue36.csv
  /usr/bin/python3 tools/experiments/simulator.py score \\
      --before=docs/results/simulator/simulator_validation.csv \\
      --after=docs/results/simulator/simulator_validation_model_share_whatif_issue36.csv
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths  # noqa: E402
import simulator  # noqa: E402
import simulator_calibration as calibration  # noqa: E402
import simulator_points as sp  # noqa: E402


def model_share(rows, update_s_per_gb, default_memcpy_s_per_gb):
    """(factor, model s per GB crossing, loopback CPU s per GB) of a streaming CSV's rows:
    the factor on the CPU costs of communication that takes the benchmark's model off."""
    loop = [r for r in rows if float(r["rate_gbps"]) == 0 and not calibration.is_shared_memory(r)
            and calibration.row_slice_params(r) == calibration.STREAMING_SLICE_PARAMS]
    if not loop:
        raise ValueError("no loopback runs at slices of "
                         f"{calibration.STREAMING_SLICE_PARAMS}")
    thread = statistics.median(
        float(r["worker_training_thread_cpu_s"])
        / ((float(r["bytes_sent"]) + float(r["bytes_received"])) / 1e9) for r in loop)
    copies = [float(r["memcpy_cpu_s_per_gb"]) for r in rows if r.get("memcpy_cpu_s_per_gb")]
    memcpy = statistics.median(copies) if copies else default_memcpy_s_per_gb
    cpu = statistics.median(float(r["cpu_s_per_gb"]) for r in loop)
    model = max(0.0, thread - 0.5 * memcpy)
    return 1 - model / (cpu - update_s_per_gb), model, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the what-if's validation CSV")
    a = ap.parse_args()
    update = calibration.streaming_update_s_per_gb()
    default_memcpy = statistics.median(
        float(r["memcpy_cpu_s_per_gb"])
        for r in csv_io.read_rows(sp.results(calibration.SHM_STREAMING))
        if r.get("memcpy_cpu_s_per_gb"))

    factors = {}  # each calibration file's, found once

    def less_model(cal_set, fields, point):
        if cal_set["file"] not in factors:
            factor, model, cpu = model_share(
                csv_io.read_rows(os.path.join(paths.ROOT, cal_set["streaming"])), update,
                default_memcpy)
            print(f"{cal_set['file']}: the model {model:.3f} of {cpu:.3f} s per GB crossing: "
                  f"CPU costs of communication x {factor:.3f}", file=sys.stderr, flush=True)
            factors[cal_set["file"]] = factor
        return {n: fields[n] * factors[cal_set["file"]] for n in simulator.CPU_COST_FIELDS}

    simulator.validate(out=a.out, override=less_model)


if __name__ == "__main__":
    main()

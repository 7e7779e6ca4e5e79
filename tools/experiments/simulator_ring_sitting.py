#!/usr/bin/env python3
"""A what-if of the simulator's validation (docs/results/simulator/simulator.md, "gloo's
ring costs carried by each sitting"): DDP's ring costs scaled by how each point's sitting
differs from the sitting they were fitted in.

The ring's CPU costs (Calibration::ring_send_s_per_byte, ring_recv_s_per_byte,
ring_reduce_s_per_byte) are the one cost of communication not taken from each set's own
sitting: simulator_calibration.fit_ring fits them once, on RING_POINT (DDP, ResNet-50
without a link limit, the sitting of 2026-12-01), and every set takes them as they are.
Here each DDP point's ring costs are multiplied by a factor from its own sitting:

  --by=iperf3   the reference sitting's iperf3 loopback goodput ÷ this sitting's (the
                median over the loopback runs of each calibration set's streaming CSV):
                the kernel's cost per byte on that VM, which gloo's sockets pay as iperf3's
  --by=compute  this sitting's compute scale of the point's model (from its `local` runs)
                ÷ the reference sitting's of the same model (RING_POINT's set for
                ResNet-50, the set `current`, 2026-12-01 too, for VGG-19 and the LSTM):
                whatever slowed the computation in a sitting slows the ring alike. A
                model no reference sitting ran keeps the ring as fitted.

Only DDP's points are predicted: the ring's fields enter no other. Nothing committed is
changed.

  /usr/bin/python3 tools/experiments/simulator_ring_sitting.py --by=iperf3 \\
      --out=docs/results/simulator/simulator_validation_ring_iperf3_whatif_issue36.csv
  /usr/bin/python3 tools/experiments/simulator.py score --system=ddp \\
      --before=docs/results/simulator/simulator_validation.csv \\
      --after=docs/results/simulator/simulator_validation_ring_iperf3_whatif_issue36.csv
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

# The sitting the ring's costs were fitted in (RING_POINT's; its calibration set `current`).
REFERENCE_SET = "current"
# The reference sitting's compute scale of each model: (set, model) whose `local` runs give it.
COMPUTE_REFERENCE = {"resnet50": (sp.RING_POINT[0], "resnet50"),
                     "vgg19": ("current", "vgg19"), "seq2seq_lstm": ("current", "seq2seq_lstm")}


def loopback_iperf3(rows):
    """The median iperf3 goodput (Gbit/s) over a streaming CSV's loopback runs over a
    socket (the shared-memory path's rows, also at rate 0, are not iperf3 on loopback)."""
    ip = [float(r["iperf3_gbps"]) for r in rows
          if float(r["rate_gbps"]) == 0 and not calibration.is_shared_memory(r)
          and r.get("iperf3_gbps")]
    if not ip:
        raise ValueError("no loopback run with iperf3 beside it")
    return statistics.median(ip)


def ring_fields(fields, factor):
    """The ring's cost fields of a calibration, times factor."""
    return {n: fields[n] * factor for n in calibration.RING_DEFAULT}


class Factors:
    """Each point's factor on the ring's costs, found once per calibration set (iperf3)
    or per set and model (compute)."""

    def __init__(self, by, compute_scale=None):
        self.by, self.cache = by, {}
        self.compute_scale = compute_scale  # (set, model) -> the sitting's compute scale

    def iperf3(self, cal_set):
        if cal_set["file"] not in self.cache:
            self.cache[cal_set["file"]] = loopback_iperf3(
                csv_io.read_rows(os.path.join(paths.ROOT, cal_set["streaming"])))
        return self.cache[cal_set["file"]]

    def __call__(self, cal_set, point):
        if self.by == "iperf3":
            return self.iperf3(sp.SETS[REFERENCE_SET]) / self.iperf3(cal_set)
        ref = COMPUTE_REFERENCE.get(point["model"])
        if ref is None:
            return 1.0
        return self.compute_scale(point["set"], point["model"]) / self.compute_scale(*ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--by", choices=["iperf3", "compute"], required=True,
                    help="what carries a sitting's state into the ring's costs")
    ap.add_argument("--out", required=True, help="the what-if's validation CSV (DDP's points)")
    a = ap.parse_args()
    pts, scales = sp.points(), {}

    def compute_scale(set_name, model):
        if (set_name, model) not in scales:
            scales[(set_name, model)] = calibration.compute_scale(
                model, sp.local_of(pts, set_name, model), sp.calibration_of(set_name)["file"])
        return scales[(set_name, model)]
    factors = Factors(a.by, compute_scale)

    def scaled(cal_set, fields, point):
        k = factors(cal_set, point)
        print(f"{point['set']} {point['model']}: ring costs x {k:.3f}", file=sys.stderr,
              flush=True)
        return ring_fields(fields, k)

    simulator.validate(out=a.out, override=scaled, systems=("ddp",))


if __name__ == "__main__":
    main()

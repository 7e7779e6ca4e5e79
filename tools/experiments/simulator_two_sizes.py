#!/usr/bin/env python3
"""A what-if of the two-size fit of per_message_s (simulator_calibration.py, issue 36) on
a set whose own streaming runs have one slice size: its points predicted with its
calibration as committed, and with per_message_s and the per-byte costs from the
loopback CPU per GB difference between two slice sizes of another streaming CSV (one
measured at the same binaries, sizes interleaved), applied to the set's own 40,000 CPU
per GB (per_message_from_two_sizes); write_gap_s fitted again on the set's own goodput
(the grid) and shm_s_per_byte recomputed. Writes every point's ratio and protocol hit
to a CSV; nothing else is written.

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/experiments/simulator_two_sizes.py --set=slices-2026-12-05 \\
      --streaming=docs/results/simulator/msgcost_streaming_2026-12-05.csv \\
      --csv=docs/results/simulator/msgcost_whatif_2026-12-05.csv
  ... --cpu_difference=0.153   # the difference given (s per GB crossing), no CSV read
"""
import argparse
import csv
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as c  # noqa: E402
import simulator_noise  # noqa: E402
import simulator_points as sp  # noqa: E402
from results_lib import paths  # noqa: E402

FIELDS = ["calibration", "per_message_s", "send_s_per_byte", "write_gap_s", "model", "system",
          "bandwidth", "slice_params", "measured", "predicted", "ratio", "protocol_hit",
          "fitted"]


def two_size_calibration(cal, measured, difference, update, shm):
    """cal with per_message_s and the per-byte costs from the set's 40,000 loopback CPU
    per GB (measured) and `difference` to 640,000, write_gap_s of the grid closest to
    the set's goodput, shm_s_per_byte again (shm: its shared-memory CPU per GB)."""
    cpu = measured[0.0]["cpu_s_per_gb"]
    m, b = c.per_message_from_two_sizes(cpu, cpu - difference, 640000, update)
    alt = dict(cal, per_message_s=m, send_s_per_byte=b, recv_s_per_byte=b)
    best = None
    for gap in c.WRITE_GAP_S:
        trial = dict(alt, write_gap_s=gap, update_s_per_byte=c.streaming_update_s_per_byte(update))
        err = c.with_temporary(trial, lambda path: sum(
            math.log(c.simulate_streaming(path, rate) / measured[rate]["goodput"]) ** 2
            for rate in c.RATES))
        if best is None or err < best[0]:
            best = (err, gap)
    alt["write_gap_s"] = best[1]
    if shm is not None:
        alt["shm_s_per_byte"] = c.shm_s_per_byte(shm, update, m)
    return alt


def predict_set(set_name, cal, pts, runs, extra):
    """The set's points predicted with calibration `cal`, scored by the protocol."""
    def go(path):
        scales, rows = {}, []
        for p in pts:
            if p["model"] not in scales:
                scales[p["model"]] = c.compute_scale(p["model"], sp.local_of(pts, set_name,
                                                                              p["model"]), path)
            r = simulator.predict(p, path, scales[p["model"]], extra)
            row = dict(p, predicted=r["samples_per_second"])
            simulator.score_rows([row], runs)
            rows.append(row)
        return rows
    return c.with_temporary(cal, go)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="slices-2026-12-05")
    ap.add_argument("--streaming", default="", help="a streaming CSV with runs at 40,000 and "
                    "640,000 parameters a slice (bench_streaming.py --slice_params)")
    ap.add_argument("--cpu_difference", type=float, default=None,
                    help="loopback CPU s per GB crossing, 40,000 less 640,000 (instead of "
                         "--streaming)")
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    if a.cpu_difference is None:
        path = os.path.join(paths.ROOT, a.streaming)
        small, large = c.streaming_measured(path), c.streaming_measured(path, 640000)
        a.cpu_difference = small[0.0]["cpu_s_per_gb"] - large[0.0]["cpu_s_per_gb"]
        print(f"{a.streaming}: loopback {small[0.0]['cpu_s_per_gb']:.4f} s/GB at 40,000, "
              f"{large[0.0]['cpu_s_per_gb']:.4f} at 640,000 (medians of "
              f"{small[0.0]['runs']} and {large[0.0]['runs']} runs)")
    s = sp.SETS[sp.SET_CALIBRATION.get(a.set, "current")]
    streaming = os.path.join(paths.ROOT, s["streaming"])
    update = c.streaming_update_s_per_gb()
    with open(os.path.join(paths.ROOT, s["file"])) as f:
        committed = json.load(f)
    alt = two_size_calibration(committed, c.streaming_measured(streaming), a.cpu_difference,
                               update, c.shm_measured(streaming))
    pts = [p for p in sp.points() if p["set"] == a.set]
    runs = simulator_noise.point_runs()
    out = []
    for label, cal in (("committed", committed), ("two-size", alt)):
        for r in predict_set(a.set, cal, pts, runs, s["extra"]):
            out.append({"calibration": label, "per_message_s": cal["per_message_s"],
                        "send_s_per_byte": cal["send_s_per_byte"],
                        "write_gap_s": cal["write_gap_s"],
                        **{k: r[k] for k in ("model", "system", "bandwidth", "slice_params",
                                             "measured", "protocol_hit")},
                        "predicted": round(r["predicted"], 3),
                        "ratio": round(r["predicted"] / r["measured"], 3),
                        "fitted": r["system"] == "local"})
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(out)
    for label in ("committed", "two-size"):
        rows = [r for r in out if r["calibration"] == label and not r["fitted"]]
        print(f"{label}: per_message_s {rows[0]['per_message_s'] * 1e6:.2f} us, send and "
              f"receive {rows[0]['send_s_per_byte'] * 1e9:.4f} ns a byte, write_gap_s "
              f"{rows[0]['write_gap_s'] * 1e6:.0f} us: {sum(r['protocol_hit'] for r in rows)} "
              f"of {len(rows)} hits")


if __name__ == "__main__":
    main()

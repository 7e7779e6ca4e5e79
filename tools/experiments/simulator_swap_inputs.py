#!/usr/bin/env python3
"""Which calibration input moves a prediction (issue 36): one point of a simulator_fresh
set predicted with calibration A, then with each of calibration B's fields in turn, then
with B's compute_scale, then with B whole; and a scan of compute_scale, where a
deterministic schedule can flip between phases (docs/results/simulator/simulator.md, "the
workers' phase"). Nothing is written.

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/experiments/simulator_swap_inputs.py \\
      --set=remeasure-2026-12-06 --point=resnet50_baseline_1g_w2_colocated \\
      --a=configs/sim/calibration_cpu_fresh_2026-12-06.json --a_local=47.331 \\
      --b=configs/sim/calibration_cpu_remeasure_2026-12-06.json --b_local=51.086 \\
      --scan=0.40,0.42,0.44,0.46,0.48,0.50,0.51,0.52,0.54,0.56,0.60

--a_local / --b_local: the `local` samples/s each calibration's compute_scale is fitted on
(the set's own `local` median; for a committed prediction, its CSV's `local_sps`).
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as calibration  # noqa: E402
import simulator_fresh  # noqa: E402

# Fields that go together: a swap of one takes its partner too.
PAIRS = {"send_s_per_byte": "recv_s_per_byte", "ring_send_s_per_byte": "ring_recv_s_per_byte"}


def predict(point, cal, scale):
    """p3_sim's samples/s for point under the calibration dict cal at compute_scale."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(cal, f)
    try:
        return simulator.predict(point, f.name, scale, {})["samples_per_second"]
    finally:
        os.unlink(f.name)


def swaps(a, b):
    """(label, calibration) for each field of b that differs from a's, b's value in a."""
    out = []
    for key in sorted(b):
        if key.startswith("_") or key in PAIRS.values() or a.get(key) == b[key]:
            continue
        c = dict(a, **{key: b[key]})
        if key in PAIRS:
            c[PAIRS[key]] = b[PAIRS[key]]
        out.append((key, c))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", required=True, choices=sorted(simulator_fresh.FRESH))
    ap.add_argument("--point", required=True, help="the point's name (its runs' folder)")
    ap.add_argument("--a", required=True)
    ap.add_argument("--a_local", type=float, required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--b_local", type=float, required=True)
    ap.add_argument("--scan", default="", help="compute_scale values, with calibration B")
    args = ap.parse_args()
    points = {simulator_fresh.name(p): p for p in simulator_fresh.points_of(args.set)}
    if args.point not in points:
        sys.exit(f"no point {args.point} in {args.set}: {', '.join(points)}")
    p = points[args.point]
    with open(args.a) as f:
        a = json.load(f)
    with open(args.b) as f:
        b = json.load(f)
    scale_a = calibration.compute_scale(p["model"], args.a_local, args.a)
    scale_b = calibration.compute_scale(p["model"], args.b_local, args.b)
    print(f"{args.point}: compute_scale A {scale_a:.4f}, B {scale_b:.4f}")
    print(f"  A                      {predict(p, a, scale_a):8.2f} samples/s")
    for key, c in swaps(a, b):
        print(f"  A with B's {key:24} {predict(p, c, scale_a):8.2f}")
    print(f"  A with B's compute_scale {predict(p, a, scale_b):8.2f}")
    print(f"  B                      {predict(p, b, scale_b):8.2f}")
    for s in [float(x) for x in args.scan.split(",") if x]:
        print(f"  B at compute_scale {s:.3f}: {predict(p, b, s):8.2f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Why the simulator over-predicted what larger slices gain (issue 36; simulator.md, "Why
larger slices were predicted too fast"): what-ifs over the sets with P3 at several slice
sizes and a two-size calibration (auto-2026-12-05, fresh-2026-12-05d, and
slices-2026-12-05 with the two-size what-if of simulator_two_sizes.py from
auto-2026-12-05's streaming runs). Each set's points are predicted with its base
calibration and with one change at a time; every point's ratio, protocol hit and the
simulated CPU per iteration (preemption, send + receive) go to a CSV. Nothing else is
written; p3/sim and the committed calibrations are not touched.

Variants (each on the set's base calibration):
  * base: as validated (slices-2026-12-05: also `one-size`, its committed calibration);
  * preempt0: preempt_s = 0 (no computation pays for a woken communication thread);
  * preempt_rate: preempt_s at the point's own simulated preemption rate: the sitting's
    cost at 1,000 wake-ups a second scaled by (rate / 1,000) ^ k, k from
    preemption_cost.csv (2026-12-02: 1,000 and 4,000 a second on the computation's core),
    the rate clamped to the measured 1,000 - 4,000; rate and cost iterated twice;
  * wake_160kB, wake_640kB: on a shaped link, wake-ups that follow the bytes, not the
    messages (a reader outpacing the link sleeps and wakes several times per large
    message; a writer on a full send buffer likewise), one per W bytes at most: a P3
    point whose messages are longer than W pays per iteration the preemptions the same
    point pays at slices of W bytes (preempt_s scaled by that ratio, iterated twice), for
    W = 160 kB (a 40,000-value slice) and 640 kB. Loopback (the reader finds the bytes
    there), other systems and points with shorter messages as base;
  * per_message_shaped: per_message_s from the CPU per GB difference between the two slice
    sizes on the shaped links (median over 2.5 and 5 Gbit/s) instead of loopback's; the
    per-byte costs keep the 40,000 loopback CPU per GB.

  bazel build //tools:p3_sim
  /usr/bin/python3 tools/experiments/simulator_slice_gain.py \\
      --csv=docs/results/simulator/slice_gain_whatif_2026-12-05.csv
  ... --variants=base,wake_160kB --sets=<others> --csv=...   # the other sets
  ... --sweep --csv=docs/results/simulator/slice_gain_sweep_whatif_2026-12-05.csv
"""
import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as c  # noqa: E402
import simulator_noise  # noqa: E402
import simulator_points as sp  # noqa: E402
import simulator_two_sizes as two  # noqa: E402
from results_lib import csv_io, paths  # noqa: E402

SETS = ("auto-2026-12-05", "slices-2026-12-05", "fresh-2026-12-05d")
# The streaming CSV with two slice sizes that slices-2026-12-05's what-if borrows.
SLICES_TWO_SIZE_FROM = "docs/results/streaming/streaming_auto_2026-12-05.csv"
LARGE = 640000
# The bytes a communication thread on a shaped link handles per wake-up in the wake_*
# variants: a 40,000-value slice, and four.
WAKE_BYTES = (160000, 640000)
VARIANTS = ("one-size", "base", "preempt0", "preempt_rate", "wake_160kB", "wake_640kB",
            "per_message_shaped")
PREEMPT_RATES = ("same:1000:0", "same:4000:0")
FIELDS = ["set", "variant", "model", "system", "bandwidth", "workers", "slice_params",
          "wire_dtype", "placement", "measured", "runs_min", "runs_max", "predicted", "ratio",
          "protocol_hit", "checkable", "fitted", "preempt_s", "per_message_s",
          "cpu_preempt_s", "cpu_send_recv_s", "cpu_total_s", "preemptions_per_s"]


def preempt_exponent(path=None):
    """k in cost per preemption ~ rate ^ k: the medians of preemption_cost.csv's
    us_per_preemption at 1,000 and 4,000 wake-ups a second (no copy)."""
    rows = csv_io.read_rows(path or sp.results("simulator/preemption_cost.csv"))
    med = [statistics.median(float(r["us_per_preemption"]) for r in rows
                             if r["condition"] == cond and r["us_per_preemption"])
           for cond in PREEMPT_RATES]
    return math.log(med[1] / med[0]) / math.log(4.0), med


def shaped_per_message(path, update):
    """(per_message_s, send_s_per_byte) from the shaped links' CPU per GB difference
    between 40,000 and LARGE (median over the rates measured at both), the per-byte cost
    from the 40,000 loopback CPU per GB less that per-message cost."""
    small, large = c.streaming_measured(path), c.streaming_measured(path, LARGE)
    diffs = [small[r]["cpu_s_per_gb"] - large[r]["cpu_s_per_gb"] for r in large if r > 0]
    m = statistics.median(diffs) * 1e-9 / (2 * (1 / c.STREAMING_MESSAGE_BYTES - 1 / (LARGE * 4)))
    comm = (small[0.0]["cpu_s_per_gb"] - update) * 1e-9
    m = min(max(m, 0.0), comm / 2 * c.STREAMING_MESSAGE_BYTES)
    return m, comm / 2 - m / c.STREAMING_MESSAGE_BYTES, diffs


def run_point(p, cal, scale, extra):
    r = c.with_temporary(cal, lambda path: simulator.predict(p, path, scale, extra))
    return r


def preemptions_per_s(p, r, preempt):
    """Preemptions a second of each computation in the simulated run."""
    if not preempt:
        return 0.0
    return r["cpu_s_per_iteration"]["preempt"] / preempt / r["iteration_seconds"] / \
        max(1, int(p["workers"]))


def rate_preempt(base, rate, k):
    return base * (min(max(rate, 1000.0), 4000.0) / 1000.0) ** k


def reference_slice_params(p, wake_bytes):
    """The slice size whose messages are wake_bytes long on p's wire (2 bytes a value on
    the bfloat16 wire, else 4)."""
    return wake_bytes // (2 if p.get("wire_dtype") == "bfloat16" else 4)


def wake_bytes_calibration(p, base, scale, extra, wake_bytes):
    """base with preempt_s scaled so that a P3 point on a shaped link whose slices are
    longer than wake_bytes pays, per iteration, the preemptions the same point pays at
    slices of wake_bytes (iterated twice); base elsewhere."""
    ref = reference_slice_params(p, wake_bytes)
    if p["system"] != "p3" or int(p["slice_params"]) <= ref or float(p["bandwidth"]) <= 0 \
            or base["preempt_s"] <= 0:
        return dict(base)
    want = run_point(dict(p, slice_params=ref), base, scale, extra)["cpu_s_per_iteration"]["preempt"]
    cal = dict(base)
    for _ in range(2):
        own = run_point(p, cal, scale, extra)["cpu_s_per_iteration"]["preempt"]
        if own > 0:
            cal = dict(base, preempt_s=cal["preempt_s"] * want / own)
    return cal


def row_of(set_name, variant, p, r, cal, runs, preempt_rate_s=None):
    row = dict(p, predicted=r["samples_per_second"])
    simulator.score_rows([row], runs)
    cpu = r["cpu_s_per_iteration"]
    return {"set": set_name, "variant": variant,
            **{k: p.get(k, "") for k in ("model", "system", "bandwidth", "workers",
                                         "slice_params", "wire_dtype", "placement",
                                         "measured")},
            "runs_min": row["runs_min"], "runs_max": row["runs_max"],
            "predicted": round(r["samples_per_second"], 3),
            "ratio": round(r["samples_per_second"] / p["measured"], 4),
            "protocol_hit": row["protocol_hit"], "checkable": row["checkable"],
            "fitted": p["system"] == "local", "preempt_s": cal["preempt_s"],
            "per_message_s": cal["per_message_s"],
            "cpu_preempt_s": round(cpu["preempt"], 5),
            "cpu_send_recv_s": round(cpu["send"] + cpu["receive"], 5),
            "cpu_total_s": round(cpu["total"], 5),
            "preemptions_per_s": round(preempt_rate_s if preempt_rate_s is not None else
                                       preemptions_per_s(p, r, cal["preempt_s"]), 1)}


def bases(set_name, update):
    """[(label, calibration)] of a set's base: its committed calibration, or for
    slices-2026-12-05 the two-size what-if (and its committed one-size one)."""
    s = sp.SETS[sp.SET_CALIBRATION.get(set_name, "current")]
    with open(os.path.join(paths.ROOT, s["file"])) as f:
        committed = json.load(f)
    if set_name != "slices-2026-12-05":
        return [("base", committed)], os.path.join(paths.ROOT, s["streaming"])
    borrowed = os.path.join(paths.ROOT, SLICES_TWO_SIZE_FROM)
    diff = (c.streaming_measured(borrowed)[0.0]["cpu_s_per_gb"] -
            c.streaming_measured(borrowed, LARGE)[0.0]["cpu_s_per_gb"])
    own = os.path.join(paths.ROOT, s["streaming"])
    alt = two.two_size_calibration(committed, c.streaming_measured(own), diff, update,
                                   c.shm_measured(own))
    return [("one-size", committed), ("base", alt)], borrowed


def shaped_calibration(set_name, s, base, two_size_csv, update):
    """base with per_message_s and the per-byte costs of shaped_per_message, and
    shm_s_per_byte again."""
    m, b, diffs = shaped_per_message(two_size_csv, update)
    print(f"{set_name}: shaped CPU per GB differences {[round(d, 3) for d in diffs]} "
          f"-> per_message {m * 1e6:.1f} us, {b * 1e9:.4f} ns a byte "
          f"(base {base['per_message_s'] * 1e6:.1f} us, {base['send_s_per_byte'] * 1e9:.4f})")
    shaped = dict(base, per_message_s=m, send_s_per_byte=b, recv_s_per_byte=b)
    shm = c.shm_measured(os.path.join(paths.ROOT, s["streaming"]))
    if shm is None:
        shm = c.shm_measured(sp.results(c.SHM_STREAMING))
    shaped["shm_s_per_byte"] = c.shm_s_per_byte(shm, update, m)
    return shaped


SWEEP_FIELDS = ["bandwidth", "slice_params", "runs", "measured", "base", "wake_160kB",
                "measured_gain", "base_gain", "wake_160kB_gain"]


def sweep_whatif(path):
    """The slice sweep of 2026-12-01 (simulator/slice_tuning_sweep.csv, ResNet-50 P3 at
    10,000 - 1,000,000, scored by `simulator.py sweep` with the `current` calibration, 6
    iterations of which 2 left out, compute_scale 1) with base and wake_160kB; the gains
    over 40,000 at each rate. Writes a CSV at path."""
    groups = {}
    for r in csv_io.read_rows(sp.results(simulator.SLICE_SWEEP)):
        if r["status"] == "ok":
            groups.setdefault((float(r["bandwidth_gbps"]), int(r["slice_params"])), []).append(
                float(r["samples_per_second"]))
    with open(os.path.join(paths.ROOT, sp.SETS["current"]["file"])) as f:
        base = json.load(f)
    got = {}
    for (bw, n), v in sorted(groups.items()):
        p = {"model": "resnet50", "system": "p3", "bandwidth": bw, "slice_params": n,
             "workers": 2, "iterations": 6, "warmup": 2}
        wake = wake_bytes_calibration(p, base, 1.0, {}, WAKE_BYTES[0])
        got[(bw, n)] = (len(v), statistics.median(v),
                        run_point(p, base, 1.0, {})["samples_per_second"],
                        run_point(p, wake, 1.0, {})["samples_per_second"])
    out = []
    for (bw, n), (runs, m, b, w) in sorted(got.items()):
        _, m0, b0, w0 = got[(bw, c.STREAMING_SLICE_PARAMS)]
        out.append({"bandwidth": bw, "slice_params": n, "runs": runs, "measured": round(m, 3),
                    "base": round(b, 3), "wake_160kB": round(w, 3),
                    "measured_gain": round(m / m0 - 1, 4), "base_gain": round(b / b0 - 1, 4),
                    "wake_160kB_gain": round(w / w0 - 1, 4)})
        print(f"{bw:g} Gbit/s {n:,}: gain over 40,000 measured {100 * (m / m0 - 1):+.1f} %, "
              f"base {100 * (b / b0 - 1):+.1f}, wake_160kB {100 * (w / w0 - 1):+.1f}")
    csv_io.write_rows(path, out, SWEEP_FIELDS)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="the variants to run (per_message_shaped needs a set whose streaming "
                         "CSV has slices of 640,000)")
    ap.add_argument("--sweep", action="store_true",
                    help="instead: the 2026-12-01 slice sweep with base and wake_160kB")
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    if a.sweep:
        sweep_whatif(a.csv)
        return
    wanted = set(a.variants.split(","))
    update = c.streaming_update_s_per_gb()
    k, med = preempt_exponent()
    print(f"preemption cost: {med[0]:.1f} us at 1,000/s, {med[1]:.1f} at 4,000/s: k = {k:.3f}")
    runs = simulator_noise.point_runs()
    pts_all = sp.points()
    out = []
    for set_name in a.sets.split(","):
        s = sp.SETS[sp.SET_CALIBRATION.get(set_name, "current")]
        pts = [p for p in pts_all if p["set"] == set_name]
        base_list, two_size_csv = bases(set_name, update)
        base = dict(base_list[-1][1])
        variants = base_list + [("preempt0", dict(base, preempt_s=0.0))]
        if "per_message_shaped" in wanted:
            variants.append(("per_message_shaped", shaped_calibration(
                set_name, s, base, two_size_csv, update)))
        variants = [(label, cal) for label, cal in variants if label in wanted]
        scales = {}
        for p in pts:
            if p["model"] not in scales:
                scales[p["model"]] = c.with_temporary(base, lambda path: c.compute_scale(
                    p["model"], sp.local_of(pts, set_name, p["model"]), path))
            scale = scales[p["model"]]
            for label, cal in variants:
                out.append(row_of(set_name, label, p, run_point(p, cal, scale, s["extra"]),
                                  cal, runs))
            if "preempt_rate" in wanted:
                # The cost at the point's own simulated rate, iterated twice.
                cal = dict(base)
                for _ in range(2):
                    r = run_point(p, cal, scale, s["extra"])
                    rate = preemptions_per_s(p, r, cal["preempt_s"])
                    cal = dict(base, preempt_s=rate_preempt(base["preempt_s"], rate, k))
                r = run_point(p, cal, scale, s["extra"])
                out.append(row_of(set_name, "preempt_rate", p, r, cal, runs, rate))
            for wake_bytes in WAKE_BYTES:
                if f"wake_{wake_bytes // 1000}kB" not in wanted:
                    continue
                cal = wake_bytes_calibration(p, base, scale, s["extra"], wake_bytes)
                out.append(row_of(set_name, f"wake_{wake_bytes // 1000}kB", p,
                                  run_point(p, cal, scale, s["extra"]), cal, runs))
        summarize(out, set_name)
    csv_io.write_rows(a.csv, out, FIELDS)


def summarize(out, set_name):
    for v in VARIANTS:
        rows = [r for r in out if r["set"] == set_name and r["variant"] == v
                and not r["fitted"] and r["checkable"]]
        if not rows:
            continue
        err = statistics.median(abs(r["ratio"] - 1) for r in rows)
        p3 = " ".join(f"{r['bandwidth']}/{r['slice_params']}:{r['ratio']:.3f}" for r in rows
                      if r["system"] == "p3" and r["model"] == "resnet50")
        print(f"{set_name} {v}: {sum(bool(r['protocol_hit']) for r in rows)} of {len(rows)} "
              f"hits, median |error| {err:.3f}; ResNet-50 P3 {p3}")


if __name__ == "__main__":
    main()

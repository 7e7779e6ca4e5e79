#!/usr/bin/env python3
"""Calibrates the simulator (//tools:p3_sim) and compares its predictions with the
committed measurements (docs/results/simulator/simulator.md).

  bazel build //tools:p3_sim
  S="/usr/bin/python3 tools/experiments/simulator.py"
  $S calibrate     # streaming fit -> configs/sim/calibration_*.json
  $S validate      # every measured point -> CSV + table
  $S table         # the tables again from the CSV
  $S sweep         # the slice sweeps (slice_tuning_sweep.csv)
  $S calibrate --only=fresh-3                      # one calibration set
  $S fresh --file=simulator/F DIR=placement ...    # fresh runs -> docs/results/simulator/F
  $S fresh --file=simulator/F --commit=C DIR=colocated ...   # a sitting's runs (binaries of C)
  $S trial --sets=fresh-3 --cpu_factor=1.3         # a what-if, nothing written
  $S trial --sets=ddp-2026-12-05 --ring_streaming_share   # DDP with P3's streaming link share
  $S cpu           # measured CPU per iteration beside the simulated
  $S noise         # the runs' own spread beside the misses
  $S score [--before=OLD.csv]   # the protocol's hits per set (simulator_protocol.py)
  $S validate --block_jitter=0 --out=/tmp/v.csv   # a what-if (no block jitter); then
  $S score --after=/tmp/v.csv --before=docs/results/simulator/simulator_validation.csv
  $S validate --out=/tmp/v.csv --calibration='{"shaped_s_per_byte_at_1g": 0}'  # fields replaced
  $S score --before=OLD.csv --system=ddp --bandwidth=1   # a part of the points only
  $S score --inputs=own    # the sets whose sitting measured the model's inputs (or older)

Which file holds which set of points: simulator_points.py. How each calibration is fitted
(docs/simulator.md, "Calibration"): simulator_calibration.py. The noise: simulator_noise.py.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator_calibration as calibration  # noqa: E402
import simulator_noise  # noqa: E402
import simulator_points as sp  # noqa: E402
import simulator_protocol as protocol  # noqa: E402
from results_lib import csv_io, markdown, p3_sim, paths, raw_csv  # noqa: E402

ROOT = paths.ROOT
VALIDATION = "simulator/simulator_validation.csv"
PAGE = "simulator/simulator.md"
BEGIN = "<!-- sim-table:begin (tools/experiments/simulator.py validate) -->"
END = "<!-- sim-table:end -->"
# Each block's computation varying, as on shared cores (p3_sim --block_jitter), and the
# seeds of a prediction: the model's (simulator_points), or validate's --block_jitter and
# --seeds (a what-if; --block_jitter=0: the model without).
JITTER = {"block_jitter": sp.BLOCK_JITTER, "seeds": sp.JITTER_SEEDS}


def predict(p, cal, scale, extra, more_flags=()):
    """The simulator's result for measured point p with calibration file cal, over as many
    iterations (and warm-up) as p's runs made: the whole-tensor modes' simulated
    iterations lengthen as a run goes on, so the count matters. more_flags: p3_sim flags
    added at the end (e.g. --trace=PATH). With JITTER's block jitter (not for `local`),
    the run of the median throughput over its seeds."""
    profile = calibration.profile(sp.profile_name(p["model"]))
    sets = [f"network.bandwidth_gbps={p['bandwidth']}",
            f"scheduling.slice_params={p['slice_params']}",
            # The packs the runs had: none before they existed (2026-12-05).
            f"scheduling.pack_params={p.get('pack_params', 0)}"]
    if extra.get("shared_memory") is False:
        sets.append("scheduling.shared_memory=false")
    if p.get("wire_dtype"):
        sets.append(f"scheduling.wire_dtype={p['wire_dtype']}")
    # The output projection as the runs had it (whole before the option existed), whatever
    # configs/bench says now; DDP's peer runs it whole.
    pieces = 1 if p["system"] == "ddp" else int(p.get("output_pieces") or 1)
    sets.append(f"model.output_pieces={pieces}")
    # The send queues' credit the runs had (0 in every set before the column existed).
    sets.append(f"scheduling.credit_bytes={raw_csv.credit_bytes(p)}")
    flags = sp.HOST + [f"--compute_scale={scale}"]
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
    flags += [f"--iterations={p['iterations']}", f"--warmup={p['warmup']}"] + list(more_flags)
    config = f"configs/bench/{p['model']}.textproto"
    if JITTER["block_jitter"] <= 0 or system == "local":
        return p3_sim.run(config, profile, cal, sets, flags)
    # A random computation: the seeds' run of the median throughput stands for the point.
    runs = sorted((p3_sim.run(config, profile, cal, sets, flags + [
        f"--block_jitter={JITTER['block_jitter']}", f"--jitter_seed={seed}"])
        for seed in range(1, JITTER["seeds"] + 1)), key=lambda r: r["samples_per_second"])
    return runs[len(runs) // 2]


# The calibration's CPU costs of communication that `trial --cpu_factor` multiplies.
CPU_COST_FIELDS = ("send_s_per_byte", "recv_s_per_byte", "shaped_s_per_byte_at_1g", "per_message_s")


def trial(args):
    """Predicted / measured for the points of some sets with a changed calibration (a
    what-if; nothing is written): every CPU cost of communication x --cpu_factor, and/or
    the link's payload share set to --goodput_factor, the computation's speed on shared
    cores set to --compute_speed, or both from a side-by-side measurement (--side_by_side).
    compute_scale is fitted again."""
    pts = sp.points()
    for set_name in args.sets.split(","):
        cal_set = sp.calibration_of(set_name)
        with open(os.path.join(ROOT, cal_set["file"])) as f:
            cal = json.load(f)
        cal.update({k: cal[k] * args.cpu_factor for k in CPU_COST_FIELDS})
        if args.goodput_factor:
            cal["goodput_factor"] = args.goodput_factor
        if args.compute_speed:
            cal["shared_host_compute_speed"] = args.compute_speed
        if args.preempt_s >= 0:
            cal["preempt_s"] = args.preempt_s
        if args.side_by_side:
            # Computation and communication measured side by side
            # (simulator_side_by_side.py): the computation's speed beside both, the
            # communication's CPU x its factor.
            sbs = csv_io.read_rows(os.path.join(ROOT, args.side_by_side))
            cal["shared_host_compute_speed"] = statistics.median(
                float(r["compute_speed"]) for r in sbs)
            comm = statistics.median(float(r["comm_factor"]) for r in sbs)
            cal.update({k: cal[k] * comm for k in CPU_COST_FIELDS})
        if args.ring_streaming_share:
            trial_ring_share(pts, set_name, cal, cal_set)
            continue
        calibration.with_temporary(cal, lambda path: trial_set(args, pts, set_name, cal,
                                                               cal_set, path))


def trial_ring_share(pts, set_name, cal, cal_set):
    """Prints predicted / measured of a set's DDP points on shaped links, as calibrated and
    with gloo's ring given the share of the link that the set's own streaming runs (P3's
    one flow) reached at the point's rate (goodput / rate) as its goodput_factor."""
    measured = calibration.streaming_measured(os.path.join(ROOT, cal_set["streaming"]))
    scales = {}
    for p in pts:
        if p["set"] != set_name or p["system"] != "ddp" or not p["bandwidth"] \
                or p["bandwidth"] not in measured:
            continue
        share = measured[p["bandwidth"]]["goodput"] / p["bandwidth"]

        def one(path):
            if p["model"] not in scales:
                scales[p["model"]] = calibration.compute_scale(
                    p["model"], sp.local_of(pts, set_name, p["model"]), path)
            return predict(p, path, scales[p["model"]], cal_set["extra"])["samples_per_second"]
        base = calibration.with_temporary(cal, one)
        p3_share = {k: v for k, v in cal.items() if "link_share" not in k}
        alt = calibration.with_temporary(dict(p3_share, goodput_factor=share), one)
        print(f"{set_name:20} {p['model']:13} ddp {p['bandwidth']:4} Gbit/s: streaming share "
              f"{share:.3f}: predicted / measured {base / p['measured']:.3f} -> "
              f"{alt / p['measured']:.3f}", flush=True)


def trial_set(args, pts, set_name, cal, cal_set, path):
    """Prints the predicted / measured of one set's points with the calibration at path."""
    scales = {}
    for p in pts:
        if p["set"] != set_name or p["system"] in ("local", "ddp"):
            continue
        if p["model"] not in scales:
            scales[p["model"]] = calibration.compute_scale(
                p["model"], sp.local_of(pts, set_name, p["model"]), path)
        r = predict(p, path, scales[p["model"]], cal_set["extra"])
        print(f"{set_name:20} {p['model']:13} {p['system']:9} {p['bandwidth']:4} w{p['workers']} "
              f"{p.get('placement') or 'colocated':9} cpu x{args.cpu_factor:g} goodput "
              f"{cal.get('goodput_factor', 'default')} compute speed "
              f"{cal['shared_host_compute_speed']:g} preempt {cal.get('preempt_s', 0) * 1e6:g} us: "
              f"predicted / measured "
              f"{r['samples_per_second'] / p['measured']:.3f}", flush=True)


def validate(out="", override=None, systems=()):
    """Predicts every point and writes simulator_validation.csv and simulator.md's table,
    or only the CSV `out` (a what-if). override: calibration fields that replace every
    set's, or a function of (calibration set, its fields, the point) that returns the
    fields to replace for that point (a what-if; with `out` only). systems: predict only
    the points of these systems (a what-if of their fields alone; with `out` only)."""
    if (override or systems) and not out:
        sys.exit("validate: an override or a part of the points is a what-if: give --out too")
    overridden = {}
    try:
        rows = predict_all(override, overridden, systems)
    finally:
        for path in overridden.values():
            os.unlink(path)
    score_rows(rows, simulator_noise.point_runs())
    csv_io.write_rows(out or sp.results(VALIDATION), rows)  # every set's columns
    if not out:
        write_table(rows)


def overridden_file(cal_set, override, overridden, point):
    """A temporary copy of calibration set `cal_set`'s file with the fields of `override`
    replaced (override: the fields, or a function of the set, its fields and the point
    that returns them), made once per file and replacement and kept in `overridden`."""
    cal = cal_set["file"]
    with open(os.path.join(paths.ROOT, cal)) as f:
        fields = json.load(f)
    update = override(cal_set, fields, point) if callable(override) else override
    key = (cal, json.dumps(update, sort_keys=True))
    if key not in overridden:
        fields.update(update)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(fields, f)
        overridden[key] = f.name
    return overridden[key]


def predict_all(override, overridden, systems=()):
    """Every point's validation row (validate), or those of `systems`; with `override`, a
    calibration file per set and replacement, into a temporary file named in
    `overridden`."""
    pts = sp.points()
    scales = {}
    rows = []
    for p in pts:
        if systems and p["system"] not in systems:
            continue
        cal_set = sp.calibration_of(p["set"])
        cal = overridden_file(cal_set, override, overridden, p) if override \
            else cal_set["file"]
        key = (p["set"], p["model"])
        if key not in scales:
            scales[key] = calibration.compute_scale(p["model"],
                                                    sp.local_of(pts, p["set"], p["model"]), cal)
        system = p["system"]
        r = predict(p, cal, scales[key], cal_set["extra"])
        ratio = r["samples_per_second"] / p["measured"]
        w = r["workers"][0]
        rows.append(dict(p, predicted=round(r["samples_per_second"], 3), ratio=round(ratio, 3),
                         within_10pct=abs(ratio - 1) <= 0.10, compute_scale=round(scales[key], 3),
                         compute_s=round(w["compute_s"], 4),
                         exposed_comm_s=round(w["exposed_comm_s"], 4), idle_s=round(w["idle_s"], 4),
                         fitted=system == "local" or (p["set"], p["model"], system,
                                                      p["bandwidth"], p["workers"]) == sp.RING_POINT))
        print(f"{p['set']:20} {p['model']:13} {system:14} {p['bandwidth']:4} w{p['workers']} "
              f"s{p['slice_params']:<8} measured {p['measured']:7.2f} predicted "
              f"{r['samples_per_second']:7.2f} ratio {ratio:.2f}", flush=True)
    return rows


def score_rows(rows, runs):
    """Adds the protocol's columns to each validation row (simulator_protocol.py): the
    runs' min and max, checkable (enough runs), protocol_hit. A point's runs are taken
    from `runs` only when they are as many as the point's (or stand for them by their min
    and max, as for the sweep of 2026-11-30); else only its median is known."""
    for r in rows:
        v = runs.get(simulator_noise.point_key(r), [])
        if len(v) != int(r["runs"]) and not (r["set"] == "2026-11-30" and v):
            v = []
        s = protocol.score_point(float(r["predicted"]), float(r["measured"]), v,
                                 int(r["runs"]), fresh=r["set"] in protocol.FRESH_SETS)
        r.update(runs_min=round(s["runs_min"], 3), runs_max=round(s["runs_max"], 3),
                 checkable=s["checkable"], protocol_hit=s["hit"])


SET_ORDER = ("credit-2026-12-07", "remeasure-2026-12-06", "pieces-2026-12-06", "fresh-2026-12-06b", "models-2026-12-06", "fresh-2026-12-06", "fresh-2026-12-05d", "auto-2026-12-05", "slices-2026-12-05",
             "fresh-2026-12-05c", "ddp-2026-12-05", "fresh-2026-12-05b", "fresh-2026-12-05", "2026-12-03", "wire",
             "2026-12-02", "cc-bbr", "cc-cubic", "fresh-5", "fresh-4", "fresh-3", "fresh-2",
             "fresh", "current-interleaved", "current", "2026-11-30")


def ordered(rows):
    """Rows sorted by SET_ORDER (the newest set first), the order within a set kept."""
    rank = {name: i for i, name in enumerate(SET_ORDER)}
    return sorted(rows, key=lambda r: rank.get(r["set"], len(rank)))


def write_table(rows):
    summaries = protocol.summary(ordered(rows))
    every = summaries[-1] if summaries[-1]["set"] == "all" else summaries[-2]
    lines = [f"**Under the protocol: {every['hits']} of {every['checkable']} checkable points "
             f"are hits; median |error| {every['median_abs_error']:.3f}; "
             f"{every['not_checkable']} points not checkable (fewer than "
             f"{protocol.MIN_RUNS} runs).**", ""]
    lines += protocol.table(summaries)
    lines.append("")
    by_set = {s["set"]: s for s in summaries}
    for set_name in SET_ORDER:
        sub = [r for r in rows if r["set"] == set_name]
        if not sub:
            continue
        s = by_set[set_name]
        err = f"{s['median_abs_error']:.3f}" if s["median_abs_error"] is not None else "–"
        lines.append(f"**{set_name}** ({sub[0]['source']}): {s['hits']} of {s['checkable']} "
                     f"checkable points are hits; median |ratio − 1| {err}; "
                     f"{s['not_checkable']} not checkable.")
        lines.append("")
        lines.append("| model | system | Gbit/s | workers | placement | slice | measured (median) | "
                     "runs min – max | predicted | predicted ÷ measured | runs |")
        lines.append("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        for r in sorted(sub, key=lambda r: (r["model"], r["system"], r["workers"],
                                            r["slice_params"], r["bandwidth"] or 99,
                                            r.get("wire_dtype") or "")):
            bw = "unlimited" if r["bandwidth"] == 0 else f"{r['bandwidth']:g}"
            mark = (" (fitted)" if r["fitted"] else " (not checkable)" if not r["checkable"]
                    else "" if r["protocol_hit"] else " **✗**")
            system = r["system"] + (f", {r['wire_dtype']} wire" if r.get("wire_dtype") else "")
            if int(r.get("output_pieces") or 1) > 1:
                system += f", output in {r['output_pieces']} pieces"
            if raw_csv.credit_bytes(r):
                system += f", credit {raw_csv.credit_bytes(r) / 2**20:g} MiB"
            lines.append(f"| {r['model']} | {system} | {bw} | {r['workers']} | "
                         f"{r.get('placement') or 'colocated'} | {r['slice_params']} | "
                         f"{r['measured']:.2f} | {r['runs_min']:.2f} – {r['runs_max']:.2f} | "
                         f"{r['predicted']:.2f} | {r['ratio']:.2f}{mark} | {r['runs']} |")
        lines.append("")
    # The last line is empty: the block ends with one newline before END.
    markdown.rewrite_block(sp.results(PAGE), BEGIN, END, "\n".join(lines[:-1]),
                           new_page=f"{BEGIN}\n{END}\n")


def score(args):
    """The protocol's scores per set from simulator_validation.csv (or --after), beside
    those of another validation CSV (--before) where given: nothing is simulated."""
    def only(rows):  # --system, --bandwidth, --inputs: a part of the points
        return [r for r in rows if (not args.system or r["system"] == args.system)
                and (args.bandwidth is None or float(r["bandwidth"]) == args.bandwidth)
                and (not args.inputs or
                     ("preemption" in sp.calibration_of(r["set"])) == (args.inputs == "own"))]
    after = protocol.summary(ordered(only(read_validation(args.after or None))))
    if not args.before:
        print("\n".join(protocol.table(after)))
        return
    before = {s["set"]: s for s in
              protocol.summary(ordered(only(read_validation(args.before))))}
    print("| set | checkable | hits before → after | median \\|error\\| before → after |")
    print("|---|---:|---:|---|")
    for s in after:
        b = before.get(s["set"])
        if b is None:
            continue

        def err(x):
            return f"{x:.3f}" if x is not None else "–"
        bold = "**" if s["set"] in ("all", protocol.FRESH_SUMMARY) else ""
        print(f"| {bold}{s['set']}{bold} | {s['checkable']} | {b['hits']} → {bold}{s['hits']}{bold} | "
              f"{err(b['median_abs_error'])} → {err(s['median_abs_error'])} |")


def fresh(args):
    """Collects bench_throughput raw.csv files (DIR=placement) into docs/results/<--file>,
    each row with its placement and the commit of the binaries (--commit, else this
    worktree's HEAD, which is theirs when the runs used this tree's bazel-bin)."""
    files = [f for _, f in sp.FRESH_SETS + sp.SITTING_SETS]
    if args.file not in files:
        raise SystemExit("fresh: --file must name one of " + ", ".join(files))
    commit = args.commit or paths.git_commit()
    rows = []
    for spec in args.dirs:
        d, placement = spec.split("=")
        for r in csv_io.read_rows(os.path.join(d, "raw.csv")):
            rows.append(dict(r, placement=placement, commit=commit))
    csv_io.write_rows(sp.results(args.file), rows, list(rows[0].keys()))
    print(f"{len(rows)} runs -> docs/results/{args.file}")


# The slice sweeps of the automatic slice size (ResNet-50 at fixed sizes).
SLICE_SWEEP = "simulator/slice_tuning_sweep.csv"


def sweep():
    """The slice sweeps of slice_tuning_sweep.csv against the launcher's search's predictions
    (ResNet-50, the `current` set's calibration, calibration_cpu_2026-12-01.json, which was
    the launcher's until issue 36; 6 iterations of which 2 left out, compute_scale 1)."""
    runs = raw_csv.group(raw_csv.read_finished(sp.results(SLICE_SWEEP)),
                         lambda r: (float(r["bandwidth_gbps"]), int(r["slice_params"])))
    print("| Gbit/s | slice | measured median samples/s | min | max | predicted | "
          "predicted ÷ measured |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ratios = []
    for (bw, slice_params), v in sorted(runs.items()):
        r = p3_sim.run("configs/bench/resnet50.textproto",
                       calibration.profile("resnet50_b8_cpu.json"), sp.SETS["current"]["file"],
                       ["mode=p3", f"network.bandwidth_gbps={bw}",
                        f"scheduling.slice_params={slice_params}",
                        "scheduling.pack_params=0"],  # runs from before packs
                       sp.HOST + ["--iterations=6", "--warmup=2"])
        measured = statistics.median(v)
        ratios.append(r["samples_per_second"] / measured)
        print(f"| {bw:g} | {slice_params:,} | {measured:.2f} | {min(v):.2f} | {max(v):.2f} | "
              f"{r['samples_per_second']:.2f} | {ratios[-1]:.2f} |")
    print(f"\n{sum(abs(x - 1) <= 0.10 for x in ratios)} of {len(ratios)} points within ±10 %; "
          f"median |ratio − 1| {statistics.median(abs(x - 1) for x in ratios):.3f}")


def cpu():
    """Where the CPU went in each run of a set with a CPU breakdown (simulator_cpu_breakdown.py),
    beside where the simulator puts it: the workers' main threads (forward and backward)
    against `compute` + `preempt`, every other thread of the workers and servers against send +
    receive + update, and the host's busy cores against the total. Medians over rounds;
    core-seconds per iteration of the whole cluster."""
    pts = sp.points()
    for set_name, file_name in sp.CPU_BREAKDOWN.items():
        path = sp.results(file_name)
        if not os.path.exists(path):
            continue
        cal = sp.calibration_of(set_name)["file"]
        scales = {}
        runs = {}
        for r in csv_io.read_rows(path):
            key = (r["model"], r["mode"], float(r["bandwidth_gbps"]), int(r["workers"]),
                   r["placement"])
            one = runs.setdefault(key, {}).setdefault(r["round"], {})
            one[r["group"]] = float(r["core_s_per_iteration"])
            one["iteration"] = float(r["iteration_seconds"])
            if r["model"] not in scales:
                scales[r["model"]] = calibration.compute_scale(
                    r["model"], sp.local_of(pts, set_name, r["model"]), cal)
        print(f"**{set_name}** ({os.path.basename(file_name)}; compute_scale "
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
            r = predict(p, cal, scales[model], sp.calibration_of(set_name)["extra"])
            c = r["cpu_s_per_iteration"]
            sim_comm = c["send"] + c["receive"] + c["update"] + c["ring"]
            sim_compute = c["compute"] + c.get("preempt", 0.0) + c.get("interference", 0.0)
            name = f"{mode} {'unlimited' if bw == 0 else f'{bw:g} Gbit/s'}" + (
                f", {workers} + {workers}" if workers == 3 else "") + (
                ", separate" if placement == "separate" else "")
            print(f"| {name} | {med(lambda g: g['iteration']):.3f} / {r['iteration_seconds']:.3f} "
                  f"| {main_s:.3f} / {sim_compute:.3f} | {comm:.3f} / {sim_comm:.3f} "
                  f"| {total:.3f} / {c['total']:.3f} | {med(lambda g: g['host:busy']):.3f} "
                  f"| {med(lambda g: g['host:softirq']):.3f} |", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["calibrate", "validate", "table", "fresh", "sweep", "trial",
                                            "cpu", "noise", "score"])
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
    ap.add_argument("--ring_streaming_share", action="store_true",
                    help="trial: DDP's points on shaped links, gloo's ring given the link share "
                         "of the set's streaming runs at each rate as its goodput_factor")
    ap.add_argument("--side_by_side", default="",
                    help="trial: a simulator_side_by_side.py CSV: its medians as the computation's "
                         "speed and a factor on the communication's CPU costs")
    ap.add_argument("--system", default="",
                    help="score: only this system's points (e.g. ddp)")
    ap.add_argument("--bandwidth", type=float, default=None,
                    help="score: only the points at this rate (Gbit/s; 0: unlimited)")
    ap.add_argument("--inputs", choices=["", "own", "older"], default="",
                    help="score: only the sets whose sitting measured the model's inputs (their "
                         "calibration set has the sitting's own preemption runs), or the others")
    ap.add_argument("--before", default="",
                    help="score: a validation CSV to compare with, set by set")
    ap.add_argument("--after", default="",
                    help="score: the validation CSV to score (default: simulator_validation.csv)")
    ap.add_argument("--only", default="",
                    help="calibrate: only these calibration sets (comma-separated names of "
                         "simulator_points.SETS)")
    ap.add_argument("--wake_per_bytes", action="store_true",
                    help="calibrate: shaped_bytes_per_wake as measured (streaming_wakeups.py on "
                         "a 5 Gbit/s link), not 0: the what-if of issue 36")
    ap.add_argument("--stream_turns", action="store_true",
                    help="calibrate: the streams' charge split into side by side and the "
                         "writers' turns at credit 0 (the what-if of issue 36), not one "
                         "charge at every credit")
    ap.add_argument("--block_jitter", type=float, default=sp.BLOCK_JITTER,
                    help="validate: each block's computation varying by this log-sd in every "
                         "mode but local (p3_sim --block_jitter); 0: none")
    ap.add_argument("--seeds", type=int, default=sp.JITTER_SEEDS,
                    help="validate with --block_jitter: the seeds per point (their median)")
    ap.add_argument("--out", default="",
                    help="validate: write this CSV only (simulator_validation.csv and the "
                         "doc's table stay)")
    ap.add_argument("--calibration", default="",
                    help="validate --out: a JSON object of calibration fields that replace "
                         "every set's, e.g. '{\"shaped_s_per_byte_at_1g\": 0}' (a what-if)")
    ap.add_argument("--file", default="",
                    help="fresh: the CSV in docs/results to write (one of "
                         "simulator_points.FRESH_SETS' or SITTING_SETS' files)")
    ap.add_argument("--commit", default="",
                    help="fresh: the commit of the binaries that ran (default: this worktree's HEAD)")
    args = ap.parse_intermixed_args()
    if args.command == "fresh":
        fresh(args)
    elif args.command == "calibrate":
        calibration.calibrate(args.only, args.wake_per_bytes, args.stream_turns)
    elif args.command == "validate":
        JITTER.update(block_jitter=args.block_jitter, seeds=args.seeds)
        validate(args.out, json.loads(args.calibration) if args.calibration else None)
    elif args.command == "sweep":
        sweep()
    elif args.command == "trial":
        trial(args)
    elif args.command == "cpu":
        cpu()
    elif args.command == "noise":
        simulator_noise.noise()
    elif args.command == "score":
        score(args)
    else:
        write_table(read_validation())


def read_validation(path=None):
    """simulator_validation.csv's rows (or another validation CSV's), typed as validate()
    made them; the protocol's columns computed where the CSV has none."""
    rows = []
    for r in csv_io.read_rows(path or sp.results(VALIDATION)):
        for k in ("bandwidth", "measured", "predicted", "ratio"):
            r[k] = float(r[k])
        for k in ("workers", "slice_params", "runs"):
            r[k] = int(r[k])
        r["within_10pct"] = r["within_10pct"] == "True"
        r["fitted"] = r["fitted"] == "True"
        rows.append(r)
    if rows and "protocol_hit" not in rows[0]:
        score_rows(rows, simulator_noise.point_runs())
    for r in rows:
        r["checkable"] = r["checkable"] in (True, "True")
        r["protocol_hit"] = r["protocol_hit"] in (True, "True")
        r["runs_min"], r["runs_max"] = float(r["runs_min"]), float(r["runs_max"])
    return rows

if __name__ == "__main__":
    main()

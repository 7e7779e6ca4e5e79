#!/usr/bin/env python3
"""Fresh points for the simulator's validation protocol (issue 36;
docs/results/simulator/simulator.md, "Validation protocol"): configurations no
calibration was fitted on, predicted by the frozen model and committed before any of
them is measured, then measured in interleaved rounds with a streaming run per round
(that sitting's own calibration). The sets themselves: simulator_fresh_sets.py.

  bazel build //tools:p3_sim
  S="/usr/bin/python3 tools/experiments/simulator_fresh.py"
  $S predict --set=fresh-2026-12-06  # -> docs/results/simulator/fresh_predictions_2026-12-06.{csv,md}
  # commit those two files, then, as root (about 5 min a round on a quiet 2-core host):
  bazel build //tools:bench_streaming //tools:launch_cluster //worker:p3_worker //server:p3_server
  sudo $S measure --set=fresh-2026-12-06 --rounds=5       # into out/fresh1206
  $S collect --set=fresh-2026-12-06   # raw runs + streaming CSV into docs/results; each row
                                      # with the commit its servers were built from
  /usr/bin/python3 tools/experiments/simulator.py calibrate --only=fresh-2026-12-06
  /usr/bin/python3 tools/experiments/simulator.py validate   # scored as a fresh set

--set names one of FRESH (default: the newest); the first set, fresh-2026-12-05, was
measured into out/fresh1205, the second into out/fresh1205b, and so on.
Every run's 1-minute load average is in its raw.csv row (`load1`).
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import simulator  # noqa: E402
import simulator_calibration as calibration  # noqa: E402
import simulator_points as sp  # noqa: E402
from simulator_fresh_sets import FRESH, NEWEST  # noqa: E402
from results_lib import csv_io, paths  # noqa: E402


# The slice size of a point that names none (bench_throughput.py's and the config's).
DEFAULT_SLICE_PARAMS = 40000


# The systems that run through the launcher (p3_worker, p3_server) and so take a set's
# packs; DDP (tools/ddp_peer.py) and `local` have none.
PACKED_SYSTEMS_EXCLUDE = ("ddp", "local")


def point(set_name, model, system, bw, workers=2, placement="colocated", wire="",
          slice_params=DEFAULT_SLICE_PARAMS, credit_bytes=0):
    """One point of a set. pack_params: the set's packs (scheduling.pack_params, its
    "pack_params"; absent: 0, none, as every set measured before packs existed) for the
    systems the launcher runs, 0 for DDP and `local`; predict and the runs both take it.
    credit_bytes: scheduling.credit_bytes of the point's processes (0, the default)."""
    its, warm = FRESH[set_name]["iterations"][model]
    packs = 0 if system in PACKED_SYSTEMS_EXCLUDE else FRESH[set_name].get("pack_params", 0)
    return {"set": set_name, "model": model, "system": system, "bandwidth": bw,
            "workers": workers, "slice_params": slice_params, "placement": placement,
            "wire_dtype": wire, "iterations": its, "warmup": warm, "pack_params": packs,
            "credit_bytes": credit_bytes}


def points_of(set_name):
    return [point(set_name, *p) for p in FRESH[set_name]["points"]]


def name(p):
    """A point's name (its runs' folder): a slice size other than the default is in it."""
    return (f"{p['model']}_{p['system']}_{p['bandwidth']:g}g_w{p['workers']}_{p['placement']}"
            + (f"_{p['wire_dtype']}" if p["wire_dtype"] else "")
            + (f"_s{p['slice_params']}" if p["slice_params"] != DEFAULT_SLICE_PARAMS else "")
            + (f"_c{p['credit_bytes']}" if p.get("credit_bytes") else ""))


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
    dtype, slice size, credit."""
    return (p["model"], p["system"], float(p["bandwidth"]), int(p["workers"]),
            p.get("placement") or "colocated", p.get("wire_dtype") or "",
            int(p["slice_params"]), int(p.get("credit_bytes") or 0))


def measured_before(set_name, pts):
    """The points of set_name whose configuration a set other than itself measured, among
    pts (simulator_points.points(): the sets it reads, not every CSV in docs/results)."""
    seen = {kind(p) for p in pts if p["set"] != set_name}
    return [p for p in points_of(set_name) if kind(p) in seen]


def earlier_scores(p):
    """How the model scored p's configuration in every earlier set: "set ratio (hit)"."""
    rows = csv_io.read_rows(sp.results("simulator/simulator_validation.csv"))
    out = []
    for r in rows:
        if r["set"] == p["set"] or kind(r) != kind(p):
            continue
        verdict = ("**hit**" if r["protocol_hit"] == "True" else "miss") \
            if r["checkable"] == "True" else "*not checkable*"
        out.append(f"{r['set']} {float(r['ratio']):.3f} ({verdict})")
    return "; ".join(out) or "none"


def predict(args):
    """The frozen model's predictions, each with its predict_with set's calibration and
    compute_scale; refused where a point of the set was measured before (not fresh),
    unless the set is a re-measurement ("remeasure"), whose page then lists the earlier
    sets' scores of each point."""
    fresh = FRESH[args.set]
    pts = sp.points()
    repeated = measured_before(args.set, pts)
    if repeated and not fresh.get("remeasure"):
        raise SystemExit("predict: measured before, not fresh: "
                         + ", ".join(name(p) for p in repeated))
    commit = paths.git_commit(mark_dirty=True)
    credits = any(p["credit_bytes"] for p in points_of(args.set))  # a column if any has one
    rows = []
    for p in points_of(args.set):
        with_name, cal_set, local = predict_with(pts, fresh, p["model"])
        scale = calibration.compute_scale(p["model"], local, cal_set["file"])
        r = simulator.predict(p, cal_set["file"], scale, cal_set["extra"])
        rows.append({"point": name(p), "model": p["model"], "system": p["system"],
                     "bandwidth_gbps": p["bandwidth"], "workers": p["workers"],
                     "placement": p["placement"], "wire_dtype": p["wire_dtype"] or "float32",
                     "slice_params": p["slice_params"],
                     # A set that names its packs says each point's (older sets' CSVs
                     # stay as they were committed: no packs, no column).
                     **({"pack_params": p["pack_params"]} if "pack_params" in fresh else {}),
                     **({"credit_bytes": p["credit_bytes"]} if credits else {}),
                     "iterations": p["iterations"], "warmup": p["warmup"],
                     "predicted_sps": round(r["samples_per_second"], 3),
                     "calibration": cal_set["file"], "local_set": with_name,
                     "local_sps": local, "compute_scale": round(scale, 4),
                     "model_commit": commit})
        print(f"{rows[-1]['point']:45} {rows[-1]['predicted_sps']:8.3f} samples/s", flush=True)
    csv_io.write_rows(sp.results(fresh["predictions"] + ".csv"), rows)
    packs = "pack_params" in fresh
    lines = ["| point | predicted samples/s | calibration | `local` of (samples/s) | "
             "compute_scale |" + (" pack_params |" if packs else "")
             + (" credit_bytes |" if credits else ""),
             "|---|---:|---|---|---:|" + ("---:|" if packs else "") + ("---:|" if credits else "")]
    lines += [f"| {r['point']} | {r['predicted_sps']:.2f} | "
              f"{os.path.basename(r['calibration'])} | {r['local_set']} ({r['local_sps']}) | "
              f"{r['compute_scale']} |" + (f" {r['pack_params']} |" if packs else "")
              + (f" {r['credit_bytes']} |" if credits else "")
              for r in rows]
    if fresh.get("remeasure"):
        lines += ["", "Where each point was measured before, and how the model scored there "
                  "(predicted ÷ measured; **hit** under the protocol, *not checkable* with too "
                  "few runs), from simulator_validation.csv:", "",
                  "| point | earlier sets |", "|---|---|"]
        lines += [f"| {name(p)} | {earlier_scores(p)} |" for p in points_of(args.set)]
    title = fresh.get("title") or ("Predictions before a re-measurement"
                                   if fresh.get("remeasure") else "Fresh predictions")
    with open(sp.results(fresh["predictions"] + ".md"), "w") as f:
        f.write(f"# {title}, set `{args.set}` (frozen model {commit})\n\n"
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
        if p.get("pack_params"):
            # Stated, not left to the launcher's default: the packs predict simulated.
            args.append(f"--set=scheduling.pack_params={p['pack_params']}")
        if p.get("credit_bytes"):
            args.append(f"--set=scheduling.credit_bytes={p['credit_bytes']}")
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


def binaries_commit(out):
    """The commit that every run's p3_server under `out` says it was built from (its log's
    first line), '' when no log says one; exits when the runs disagree."""
    said = set()
    for log in glob.glob(os.path.join(out, "*", "runs", "*", "logs", "server_*.log")):
        with open(log, errors="replace") as f:
            m = re.match(r"\S+ \d+ built from (\S+)", f.readline())
        if m and m.group(1) != "unstamped":
            said.add(m.group(1))
    if len(said) > 1:
        sys.exit(f"the runs under {out} come from binaries of several commits "
                 f"({', '.join(sorted(said))}): give the one to record with --commit")
    return said.pop() if said else ""


def collect(args):
    """The measured runs into docs/results (simulator.py fresh's layout) and the streaming
    runs into docs/results/streaming. The rows' commit: --commit, else the binaries' own
    (their servers' logs), else the tree's HEAD (unstamped binaries: said)."""
    dirs = [f"{os.path.join(args.out, f'local_{m}')}=colocated"
            for m in FRESH[args.set]["iterations"]]
    dirs += [f"{os.path.join(args.out, name(p))}={p['placement']}" for p in points_of(args.set)]
    commit = args.commit or binaries_commit(args.out)
    if not commit:
        print("the servers' logs name no stamped build: the rows take this tree's HEAD "
              "(give the binaries' commit with --commit)")
    subprocess.run([sys.executable, os.path.join(paths.ROOT, "tools/experiments/simulator.py"),
                    "fresh", f"--file={dict(sp.FRESH_SETS)[args.set]}"]
                   + ([f"--commit={commit}"] if commit else []) + dirs, check=True)
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
    ap.add_argument("--commit", default="",
                    help="collect: the binaries' commit for the rows (default: the one the "
                    "runs' servers say they were built from)")
    args = ap.parse_args()
    args.out = args.out or FRESH[args.set]["out"]
    {"predict": predict, "measure": measure, "collect": collect}[args.command](args)


if __name__ == "__main__":
    main()

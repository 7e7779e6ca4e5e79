#!/usr/bin/env python3
"""The online slice-size search against fixed slice sizes: table and CSV from the runs.

Reads the runs of tools/bench_throughput.py under each OUT (default out/online_search:
auto_bw<rate>/runs/* with scheduling.slice_params=0, the launcher's simulator choice and
the online search; fixed_bw<rate>/runs/* at fixed sizes) and writes one row per run to
docs/results/online_search/online_search.csv and a markdown table to stdout.

Per run, as the throughput benchmark counts it: for each iteration the mean over the
workers of their samples/s, then the median over the iterations after the first 2
(`whole`). For the searched runs also the median over the iterations from the one where
the final plan took effect (`after_search`).

  /usr/bin/python3 tools/experiments/online_search.py [--out=DIR[=BINARIES] ...] [--csv=...]

--out may be given several times; BINARIES (the commit the runs' binaries were built
from) goes into the CSV's `binaries` column, and runs of different binaries are tabled
apart. The CSV's rows of runs that are not under any OUT are kept (out/ does not outlive a
machine; the CSV is the record), unless --replace; a run found again replaces its row.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, paths, records, runs  # noqa: E402

NAME = re.compile(r"^(?P<model>[a-z0-9_]+?)_p3_bw(?P<bw>[0-9.]+)_s(?P<slice>\d+)_w2_r0_(?P<time>\d+)$")


def typed(row):
    """A row read back from the CSV, with the numbers the tables compute on as numbers."""
    for key in ("bandwidth_gbps", "samples_per_second_whole", "wall_samples_per_second_whole"):
        row[key] = float(row[key])
    row["chosen_slice_params"] = int(row["chosen_slice_params"])
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", action="append", default=[],
                    help="DIR or DIR=BINARIES; repeatable (default out/online_search)")
    ap.add_argument("--csv", default=paths.results("online_search", "online_search.csv"))
    ap.add_argument("--replace", action="store_true",
                    help="write only the runs under the OUTs, dropping the CSV's other rows")
    a = ap.parse_args()
    rows = []
    found = []
    for spec in a.out or ["out/online_search"]:
        folder, _, binaries = spec.partition("=")
        found += [(binaries, run)
                  for run in sorted(glob.glob(os.path.join(folder, "*_bw*", "runs", "*")))]
    for binaries, run in found:
        m = NAME.search(os.path.basename(run))
        result = os.path.join(run, "results", "worker_0.json")
        if not m or not os.path.exists(result):
            continue
        with open(result) as f:
            r0 = json.load(f)
        # Per iteration the mean over the workers of their samples/s (where both have it).
        rates = records.mean_over_workers(run, "samples_per_second", min_workers=2)
        if not rates:
            continue
        whole = statistics.median(v for i, v in rates.items() if i >= 2)
        search = r0.get("online_search")
        start_from = ""
        if m["slice"] == "0" and os.path.exists(os.path.join(run, "summary.json")):
            tuning = runs.summary(run).get("tuning", {})
            start_from = ("simulator" if tuning.get("searched")
                          else "default (no prediction: " + tuning.get("reason", "")[:60] + ")")
        row = {"run": os.path.basename(run), "binaries": binaries, "model": m["model"],
               "time_hhmmss": m["time"],
               "bandwidth_gbps": float(m["bw"]), "iterations": r0["iterations"],
               "kind": "auto" if m["slice"] == "0" else "fixed", "start_from": start_from,
               "start_slice_params": "", "chosen_slice_params": int(m["slice"]),
               "done_iteration": "", "timed": "",
               "samples_per_second_whole": round(whole, 3), "samples_per_second_after_search": "",
               "wall_samples_per_second_whole": round(records.wall_rate(run, 2), 3),
               "param_l2": r0["param_l2"]}
        if search:
            timed = search["timed"]
            row["start_slice_params"] = timed[0]["slice_params"]
            row["chosen_slice_params"] = search["chosen_slice_params"]
            row["done_iteration"] = search["done_iteration"]
            # Runs before the search timed by window mean recorded the median.
            row["timed"] = " ".join(
                f"{t['slice_params']}:{t.get('mean_seconds', t.get('median_seconds')):.3f}"
                for t in timed)
            after = [v for i, v in rates.items() if i >= search["done_iteration"]]
            row["samples_per_second_after_search"] = round(statistics.median(after), 3)
        rows.append(row)
    if not rows:
        raise SystemExit(f"no runs under {a.out or 'out/online_search'}")
    if not a.replace and os.path.exists(a.csv):
        again = {r["run"] for r in rows}
        rows = [typed(r) for r in csv_io.read_rows(a.csv) if r["run"] not in again] + rows
    csv_io.write_rows(a.csv, rows, list(rows[0].keys()))

    for measure, label in (("samples_per_second_whole", "the benchmark's figure (median over iterations)"),
                           ("wall_samples_per_second_whole", "samples over wall time")):
        print(f"\n### {label}\n")
        print("| model | Gbit/s | binaries | online search: runs, median (min – max) | chosen | "
              "best fixed size, median | ÷ best | default 40000 | ÷ default |")
        print("|---|---:|---|---|---|---:|---:|---:|---:|")
        for model, bw, binaries in sorted({(r["model"], r["bandwidth_gbps"], r["binaries"]) for r in rows}):
            mine = [r for r in rows if r["model"] == model and r["bandwidth_gbps"] == bw
                    and r["binaries"] == binaries]
            auto = [r[measure] for r in mine if r["kind"] == "auto"]
            fixed = {}
            for r in mine:
                if r["kind"] == "fixed":
                    fixed.setdefault(r["chosen_slice_params"], []).append(r[measure])
            if not auto or not fixed:
                continue
            med = {size: statistics.median(v) for size, v in fixed.items()}
            best = max(med, key=med.get)
            a_med = statistics.median(auto)
            chosen = ", ".join(str(r["chosen_slice_params"]) for r in mine if r["kind"] == "auto")
            default = med.get(40000)
            print(f"| {model} | {bw:g} | {binaries or '–'} | {len(auto)}: {a_med:.2f} ({min(auto):.2f} – {max(auto):.2f}) "
                  f"| {chosen} | {best}: {med[best]:.2f} | {a_med / med[best]:.2f} | "
                  + (f"{default:.2f} | {a_med / default:.2f} |" if default else "– | – |"))
    print()
    for r in rows:
        if r["kind"] == "auto":
            print(f"- {r['model']} {r['bandwidth_gbps']:g} Gbit/s, {r['run']}: start {r['start_slice_params']} "
                  f"({r['start_from']}), "
                  f"timed {r['timed']} -> {r['chosen_slice_params']} from iteration "
                  f"{r['done_iteration']}; whole run {r['samples_per_second_whole']} "
                  f"({r['wall_samples_per_second_whole']} over wall time), after the "
                  f"search {r['samples_per_second_after_search']} samples/s")


if __name__ == "__main__":
    main()

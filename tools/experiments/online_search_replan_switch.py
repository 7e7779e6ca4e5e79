#!/usr/bin/env python3
"""What a re-plan's switch costs, from the traces of runs with the online search forced on.

Each RUN is an output folder of launch_cluster run with `trace=true` and
`scheduling.online_search=true` (online_search_replan_memory.sh's cluster, 14 iterations:
docs/simulator.md, "The cost of a switch"). A server switches plans inside the update of
its last slice of the old plan, so the longest update of the iteration before each
switch is the switch's cost. Per run, one CSV row: for the iterations before the first
three switches the longest server update; every iteration's time (the mean over the
workers); and per iteration the time of all server updates, summed over the servers.

  /usr/bin/python3 tools/experiments/online_search_replan_switch.py \\
      --csv=docs/results/online_search/replan_switch.csv \\
      RUN=BINARIES[=NOTE] ...
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, records  # noqa: E402

REPLAN = re.compile(r"re-plan to slices of (\d+) from iteration (\d+)")


def switches(run):
    """(from_iteration, slice_params) of the re-plans, from server 0's log."""
    found = []
    with open(os.path.join(run, "logs", "server_0.log")) as f:
        for line in f:
            m = REPLAN.search(line)
            if m:
                found.append((int(m.group(2)), int(m.group(1))))
    return found


def server_updates(run):
    """{iteration: seconds of its longest server update}, {iteration: seconds of all its
    server updates, summed over the servers}."""
    with open(os.path.join(run, "trace.json")) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    longest, total = {}, {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "update" or e.get("pid", 0) < 200:
            continue
        it = e.get("args", {}).get("iteration")
        if it is not None:
            longest[it] = max(longest.get(it, 0.0), e["dur"] / 1e6)
            total[it] = total.get(it, 0.0) + e["dur"] / 1e6
    return longest, total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="RUN=BINARIES[=NOTE]")
    ap.add_argument("--csv", required=True)
    args = ap.parse_args()
    rows = []
    for spec in args.runs:
        run, binaries, *note = spec.split("=", 2)
        sw = switches(run)
        longest, total = server_updates(run)
        row = {"run": os.path.basename(run.rstrip("/")), "binaries": binaries,
               "note": note[0] if note else ""}
        for k in range(3):
            if k < len(sw):
                it, size = sw[k]
                row[f"switch{k + 1}_to"] = size
                row[f"switch{k + 1}_seconds"] = f"{longest.get(it - 1, 0.0):.3f}"
            else:
                row[f"switch{k + 1}_to"] = row[f"switch{k + 1}_seconds"] = ""
        # Every iteration's time, the mean over the workers.
        times = records.mean_over_workers(run, "iteration_seconds").values()
        row["iteration_seconds"] = " ".join(f"{s:.2f}" for s in times)
        row["server_update_seconds"] = " ".join(f"{total[i]:.2f}" for i in sorted(total))
        rows.append(row)
        print(f"{row['run']} ({binaries}{', ' + row['note'] if row['note'] else ''}): switches "
              + ", ".join(f"to {row[f'switch{k}_to']} {row[f'switch{k}_seconds']} s"
                          for k in (1, 2, 3) if row[f"switch{k}_to"] != ""))
        print(f"  iterations: {row['iteration_seconds']}")
        print(f"  server updates: {row['server_update_seconds']}")
    csv_io.write_rows(args.csv, rows, list(rows[0]))


if __name__ == "__main__":
    main()

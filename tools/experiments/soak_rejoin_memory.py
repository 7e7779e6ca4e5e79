#!/usr/bin/python3
"""Runs //tools:rejoin_memory for one or more builds, interleaved, and fits the growth
(docs/results/reliability/soak.md, "Leak or high-water mark").

  /usr/bin/python3 tools/experiments/soak_rejoin_memory.py \
      --binary after=bazel-bin/tools/rejoin_memory [--binary before=/tmp/rejoin_memory_before] \
      [--tunables tcache_off=glibc.malloc.tcache_count=0] --runs 3 --rejoins 500 \
      --csv docs/results/reliability/rejoin_memory.csv

Each run is one process taking a ParameterServer through --rejoins worker rejoins, over
the stream and with shared memory (--shared_memory). Writes every row of every run to
--csv (columns: build, mode, run, then rejoin_memory's) and prints per build and mode the
least-squares slope of the heap in use (mallinfo2) and of RSS per rejoin, fitted over the
rejoins from --skip on, for each run and their median; and RSS after rejoin 100 minus RSS
after rejoin 1 (issue 38: within 1 MB), each run's and their median.
"""

import argparse
import csv
import io
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io  # noqa: E402


def slope(xs, ys):
    mx, my = statistics.mean(xs), statistics.mean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def rss_growth(data, last):
    """RSS after rejoin `last` minus RSS after the first (issue 38's measure), or None."""
    rss = {int(r["rejoin"]): int(r["rss_bytes"]) for r in data}
    return rss[last] - rss[1] if last in rss and 1 in rss else None


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", action="append", required=True, help="NAME=PATH")
    p.add_argument("--tunables", action="append", default=[],
                   help="NAME=GLIBC_TUNABLES: also run every build with these glibc tunables "
                        "(e.g. tcache_off=glibc.malloc.tcache_count=0), as build+NAME")
    p.add_argument("--flags", action="append", default=[],
                   help="NAME=FLAGS: also run every build with these flags of rejoin_memory "
                        "(space-separated, e.g. per_thread_arenas=--one_arena=false), as "
                        "build+NAME")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--rejoins", type=int, default=500)
    p.add_argument("--skip", type=int, default=50, help="rejoins left out of the fit (warm-up)")
    p.add_argument("--csv", required=True)
    args = p.parse_args()
    builds = []
    for name, path in (b.split("=", 1) for b in args.binary):
        builds.append((name, path, None, []))
        for tname, tunables in (t.split("=", 1) for t in args.tunables):
            builds.append((name + "+" + tname, path, tunables, []))
        for fname, flags in (f.split("=", 1) for f in args.flags):
            builds.append((name + "+" + fname, path, None, flags.split()))
    rows, fits = [], {}
    for run in range(args.runs):
        for mode in ("stream", "shared_memory"):
            for name, path, tunables, flags in builds:  # interleaved: the same machine
                cmd = [path, "--rejoins=%d" % args.rejoins] + flags
                if mode == "shared_memory":
                    cmd.append("--shared_memory")
                env = dict(os.environ)
                if tunables:
                    env["GLIBC_TUNABLES"] = tunables
                out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                                     env=env).stdout
                data = list(csv.DictReader(io.StringIO(out)))
                for r in data:
                    rows.append(dict(build=name, mode=mode, run=run, **r))
                tail = [r for r in data if int(r["rejoin"]) >= args.skip]
                xs = [int(r["rejoin"]) for r in tail]
                fits.setdefault((name, mode), []).append(
                    (slope(xs, [int(r["heap_in_use_bytes"]) for r in tail]),
                     slope(xs, [int(r["rss_bytes"]) for r in tail]),
                     int(data[args.skip]["heap_in_use_bytes"]),
                     int(data[-1]["heap_in_use_bytes"]),
                     rss_growth(data, 100)))
    csv_io.write_rows(args.csv, rows, list(rows[0].keys()))
    print("build,mode,runs,heap_slope_bytes_per_rejoin(median;each),"
          "rss_slope_bytes_per_rejoin(median),heap_at_skip->end(first run),"
          "rss_rejoin_1_to_100_kb(median;each)")
    for (name, mode), fs in fits.items():
        growths = [x[4] for x in fs if x[4] is not None]
        print("%s,%s,%d,%.0f;%s,%.0f,%d->%d,%s" % (
            name, mode, len(fs), statistics.median(x[0] for x in fs),
            "/".join("%.0f" % x[0] for x in fs), statistics.median(x[1] for x in fs),
            fs[0][2], fs[0][3],
            "%.0f;%s" % (statistics.median(growths) / 1024,
                         "/".join("%.0f" % (g / 1024) for g in growths)) if growths else "-"))


if __name__ == "__main__":
    main()

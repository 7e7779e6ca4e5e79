#!/usr/bin/python3
"""Streaming micro-benchmark of the data path (docs/results/streaming/streaming.md): one
worker and one server move slices with no computation over an emulated link, iperf3 on the
same link right before each run. Runs bazel-bin/tools/bench_streaming (build it first) once per rate
and repetition, rates interleaved, and writes every run to a CSV and the table of medians
into the markdown page.

  bazel build --config=stamp //tools:bench_streaming //server:p3_server
  sudo /usr/bin/python3 tools/bench_streaming.py                 # 1, 2.5, 5 Gbit/s, unlimited; 3 runs
  /usr/bin/python3 tools/bench_streaming.py --report             # the table again from the CSV
  sudo /usr/bin/python3 tools/bench_streaming.py --rates=1 --runs=1 --csv=/tmp/s.csv --md=
  sudo /usr/bin/python3 tools/bench_streaming.py --runs=1 --csv=F --append   # one more round into F
  sudo /usr/bin/python3 tools/bench_streaming.py --shared_memory   # the rates, then shared memory

Rates are Gbit/s per machine and direction (tools/launcher/netem.h builds the network);
0 = "unlimited": loopback, no namespaces, no shaping (no root needed for that one).
--shared_memory adds a run of the colocated path (worker and server on this machine,
values through shared memory) to each round, after the rates; --rates= runs it alone.

CPU per GB, ours and iperf3's, is per GB of payload that crossed between the two
processes: ours counts both directions (gradients up plus values down), iperf3's its one
direction (bench_streaming_main.cc's header), so the two compare like for like. The
shared-memory row sets goodput (one direction, as in every row) against one thread's
memcpy on the same machine, in Gbit/s.

Both directions at once (on unless --no_iperf3_bidir; after the one-way iperf3, as long,
on the same link), P3's own pattern: two opposite one-way iperf3 pairs started together
(`iperf3_bidir_method` two_pairs, bench_streaming's default), each direction with its own
sender and receiver process. On the shaped links each direction has its own tbf and it
matches one way. iperf3 --bidir (the CSV's runs before the column, 2026-12-05 17:06) is
bound on loopback by iperf3's own threading (3.12: one thread per end, sending and
receiving), not by TCP: the two pairs move about twice as much each way there
(tools/experiments/iperf3_directions.py; docs/results/streaming/streaming.md, "Both
directions at once"). `iperf3_bidir_gbps` is the mean of its two directions' received rates (the same traffic
split evenly, as ours is; both are kept, as iperf3_bidir_up_gbps and
iperf3_bidir_down_gbps), and its host CPU per GB counts both directions' bytes, as ours
does. Context beside the issue's target, never instead of it:
`ratio` stays goodput ÷ one-way iperf3.

Which code ran: the CSV's `commit` is the commit the bench_streaming binary was built
from and `server_commit` the p3_server binary's, as each binary carries it
(p3/base/build_commit.h; "+dirty": built from a tree with changes to tracked files).
They are known only for a build with --config=stamp; otherwise they say "unstamped"
("unknown": a binary from before the stamp). `driver_commit` is this script's worktree
HEAD when it ran, which need not be the binaries'.
"""
import argparse
import csv
import datetime
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_lib import csv_io, markdown, paths  # noqa: E402

ROOT = paths.ROOT
BENCH = os.path.join(ROOT, "bazel-bin/tools/bench_streaming")
SERVER = os.path.join(ROOT, "bazel-bin/server/p3_server")
# Measured iterations per rate: each run's window is a few seconds (100 MB each way per
# iteration with the default 25 M parameters).
ITERATIONS = {1.0: 4, 2.5: 8, 5.0: 10, 0.0: 10}
SHARED_MEMORY_ITERATIONS = 10
FIELDS = ["date", "commit", "server_commit", "driver_commit", "rate_gbps", "run", "iperf3_gbps",
          "goodput_gbps", "ratio", "cpu_s_per_gb", "worker_cpu_s", "worker_training_thread_cpu_s",
          "server_cpu_s",
          "host_cpu_s_per_gb", "host_busy_s", "host_softirq_s",
          "iperf3_host_cpu_s_per_gb", "iperf3_host_busy_s", "iperf3_softirq_s", "iperf3_bytes",
          "cpu_ratio_to_iperf3", "iperf3_cpu_s_per_gb", "iperf3_sender_cpu_percent",
          "iperf3_receiver_cpu_percent", "shared_memory", "memcpy_gbps", "goodput_to_memcpy",
          "memcpy_cpu_s_per_gb", "memcpy_bytes",
          "seconds", "bytes_sent", "bytes_received", "params", "tensors", "slice_params",
          "iterations", "worker_max_rss_mb", "load1_start", "load1_end",
          # iperf3 --bidir (columns added later, so at the end: older CSVs lack them)
          "iperf3_bidir_gbps", "iperf3_bidir_up_gbps", "iperf3_bidir_down_gbps",
          "iperf3_bidir_bytes", "iperf3_bidir_host_busy_s", "iperf3_bidir_softirq_s",
          "iperf3_bidir_host_cpu_s_per_gb", "iperf3_bidir_cpu_s_per_gb",
          "ratio_to_iperf3_bidir", "cpu_ratio_to_iperf3_bidir",
          # how both directions were loaded: two_pairs (the default since 2026-12-05
          # evening) or bidir (iperf3 --bidir; blank in the rows before the column)
          "iperf3_bidir_method",
          # GRPC_EXPERIMENTS as both processes started: reads sized to the message since
          # scheduling.sized_reads (blank in rows before the column, and where it was off)
          "grpc_experiments"]
BEGIN = "<!-- streaming-table:begin (tools/bench_streaming.py) -->"
END = "<!-- streaming-table:end -->"


def build_commit(path):
    """The commit the binary at `path` was built from, as //p3/base:build_commit stamped it
    into the file ("P3_BUILD_COMMIT=<commit>"): "unstamped" for a build without
    --config=stamp, "unknown" for a binary without the stamp."""
    with open(path, "rb") as f:
        found = re.search(rb"P3_BUILD_COMMIT=([0-9a-f]+(?:\+dirty)?|unstamped)\0", f.read())
    return found.group(1).decode() if found else "unknown"


def run_once(a, rate, rep, out_dir, shared=False):
    """One run of the benchmark: at `rate` (0: loopback), or `shared` (memory, colocated)."""
    iterations = a.iterations or (SHARED_MEMORY_ITERATIONS if shared else ITERATIONS.get(rate, 8))
    cmd = ([a.bench, f"--server_binary={a.server}", f"--bandwidth_gbps={rate}",
            f"--iperf3_seconds={a.iperf3_seconds:g}", f"--params={a.params}",
            f"--slice_params={a.slice_params}", f"--iterations={iterations}",
            f"--out_dir={out_dir}", f"--iperf3_bidir={str(not a.no_iperf3_bidir).lower()}"]
           + (["--shared_memory"] if shared else []))
    print("[bench] " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    if p.returncode != 0:
        sys.exit(f"bench_streaming failed ({p.returncode}):\n{p.stderr}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    row = {k: r.get(k, "") for k in FIELDS}
    row.update(date=datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), commit=a.commit,
               server_commit=a.server_commit, driver_commit=a.driver_commit, rate_gbps=rate,
               run=rep, goodput_gbps=r["goodput_up_gbps"], shared_memory=int(shared))
    print("[bench]   " + " ".join(f"{k}={row[k]}" for k in
                                  ["rate_gbps", "shared_memory", "iperf3_gbps", "goodput_gbps",
                                   "ratio", "host_cpu_s_per_gb", "cpu_ratio_to_iperf3",
                                   "iperf3_bidir_gbps", "ratio_to_iperf3_bidir",
                                   "cpu_ratio_to_iperf3_bidir", "goodput_to_memcpy",
                                   "load1_start"]), flush=True)
    return row


def is_shared(row):
    """Whether a CSV row ran the shared-memory path (rows from before the column: no)."""
    return str(row.get("shared_memory") or "0").strip().lower() in ("1", "true")


def fmt_rate(key, sizes=False):
    """A table row's label; with `sizes` (the rows hold more than one slice size), the
    slice size too."""
    rate, shared, slice_params = key
    label = ("shared memory (colocated)" if shared
             else "unlimited (loopback)" if rate == 0 else f"{rate:g}")
    return f"{label}, slices of {slice_params:,}" if sizes else label


def table(rows):
    # One row per rate (and shared memory), and per slice size where the runs have several.
    groups = {}
    for r in rows:
        key = (float(r["rate_gbps"]), is_shared(r), int(float(r.get("slice_params") or 0)))
        groups.setdefault(key, []).append(r)
    sizes = len({k[2] for k in groups}) > 1
    # Runs of binaries from before the host's CPU was recorded have no host column; the
    # iperf3 CPU and memcpy columns appear once a run has them ("–" in the rows without).
    host = all(r.get("host_cpu_s_per_gb") for r in rows)
    iperf3_cpu = any(r.get("iperf3_host_cpu_s_per_gb") for r in rows)
    bidir = any(r.get("iperf3_bidir_gbps") for r in rows)
    memcpy = any(r.get("memcpy_gbps") for r in rows)
    head = ("| rate (Gbit/s) | iperf3 (Gbit/s) | p3 goodput (Gbit/s) | ratio | CPU s/GB "
            "| worker / server CPU s per GB | "
            + ("host CPU s/GB (of it softirq) | " if host else "")
            + ("iperf3 host CPU s/GB (of it softirq) | p3 ÷ iperf3 host CPU | "
               if iperf3_cpu else "")
            + ("iperf3 bidir Gbit/s each way | p3 ÷ iperf3 bidir | iperf3 bidir host CPU s/GB "
               "(of it softirq) | p3 ÷ iperf3 bidir host CPU | " if bidir else "")
            + ("memcpy Gbit/s (CPU s/GB) | goodput ÷ memcpy | " if memcpy else "")
            + "runs | load1 |")
    lines = [head, "|---|---:|---:|---:|---:|---:|" + ("---:|" if host else "")
             + ("---:|---:|" if iperf3_cpu else "") + ("---:|---:|---:|---:|" if bidir else "")
             + ("---:|---:|" if memcpy else "")
             + "---:|---|"]

    def values(rs, k):
        return [float(r[k]) for r in rs if r.get(k, "") != ""]

    def rng(rs, k, f):  # runs with --iperf3_seconds=0 have no iperf3 figure or ratio
        v = values(rs, k)
        if not v:
            return "–"
        return f"{statistics.median(v):{f}} ({min(v):{f}}–{max(v):{f}})"

    def per_gb(rs, seconds, gb):  # median of a CPU time per GB over the runs with both
        v = [float(r[seconds]) / g for r in rs if r.get(seconds, "") != ""
             for g in [gb(r)] if g > 0]
        return f"{statistics.median(v):.2f}" if v else "–"

    def both_ways_gb(r):
        return (float(r["bytes_sent"]) + float(r["bytes_received"])) / 1e9

    def iperf3_gb(r):
        return float(r.get("iperf3_bytes") or 0) / 1e9

    def iperf3_bidir_gb(r):  # both directions' bytes, as ours
        return float(r.get("iperf3_bidir_bytes") or 0) / 1e9

    for key in sorted(groups, key=lambda k: (k[1], k[0] == 0, k[0], k[2])):
        rs = groups[key]
        loads = [float(r["load1_start"]) for r in rs]
        cells = [fmt_rate(key, sizes), rng(rs, "iperf3_gbps", ".2f"), rng(rs, "goodput_gbps", ".2f"),
                 rng(rs, "ratio", ".2f"), rng(rs, "cpu_s_per_gb", ".2f"),
                 f"{per_gb(rs, 'worker_cpu_s', both_ways_gb)} / "
                 f"{per_gb(rs, 'server_cpu_s', both_ways_gb)}"]
        if host:
            cells.append(f"{rng(rs, 'host_cpu_s_per_gb', '.2f')} "
                         f"({per_gb(rs, 'host_softirq_s', both_ways_gb)})")
        if iperf3_cpu:
            cell = rng(rs, "iperf3_host_cpu_s_per_gb", ".2f")
            if cell != "–":
                cell += f" ({per_gb(rs, 'iperf3_softirq_s', iperf3_gb)})"
            cells += [cell, rng(rs, "cpu_ratio_to_iperf3", ".2f")]
        if bidir:
            cell = rng(rs, "iperf3_bidir_host_cpu_s_per_gb", ".2f")
            if cell != "–":
                cell += f" ({per_gb(rs, 'iperf3_bidir_softirq_s', iperf3_bidir_gb)})"
            cells += [rng(rs, "iperf3_bidir_gbps", ".2f"), rng(rs, "ratio_to_iperf3_bidir", ".2f"),
                      cell, rng(rs, "cpu_ratio_to_iperf3_bidir", ".2f")]
        if memcpy:
            cell = rng(rs, "memcpy_gbps", ".1f")
            if cell != "–":
                cell += f" ({statistics.median(values(rs, 'memcpy_cpu_s_per_gb')):.2f})"
            cells += [cell, rng(rs, "goodput_to_memcpy", ".2f")]
        cells += [str(len(rs)), f"{min(loads):.1f}–{max(loads):.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_table(md, rows):
    try:
        markdown.rewrite_block(md, BEGIN, END, table(rows),
                               new_page=f"# Streaming\n\n{BEGIN}\n{END}\n")
    except markdown.MarkersMissing:
        sys.exit(f"{md}: no {BEGIN} ... {END} markers")
    print(f"[bench] wrote the table into {md}")


def earlier_runs(path):
    """The runs of a CSV this script wrote (any earlier version: its columns are a subset
    of FIELDS); none if the file does not exist. Exits naming a column it does not know."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        reader = csv.DictReader(f)
        unknown = [c for c in reader.fieldnames or [] if c not in FIELDS]
        if unknown or "run" not in (reader.fieldnames or []):
            sys.exit(f"--append: {path} is not a CSV of this benchmark (columns "
                     f"{', '.join(unknown) or 'without run'})")
        return list(reader)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1,2.5,5,0", help="Gbit/s, 0 = unlimited (loopback)")
    ap.add_argument("--runs", type=int, default=3, help="repetitions per rate (median)")
    ap.add_argument("--iperf3_seconds", type=int, default=2,
                    help="iperf3 on the same link before each run (whole seconds); 0: none")
    ap.add_argument("--no_iperf3_bidir", action="store_true",
                    help="skip iperf3 --bidir after the one-way iperf3 (default: run it, as "
                         "long, on the same link: the reference for both directions at once)")
    ap.add_argument("--shared_memory", action="store_true",
                    help="also run the shared-memory (colocated) path in each round, with "
                         "memcpy measured beside it")
    ap.add_argument("--params", type=int, default=25_000_000)
    ap.add_argument("--slice_params", type=int, default=40_000)
    ap.add_argument("--iterations", type=int, default=0, help="0: per rate (ITERATIONS)")
    ap.add_argument("--timeout", type=float, default=180, help="seconds per run")
    ap.add_argument("--bench", default=BENCH,
                    help="the bench_streaming binary (the commit it was built from is recorded)")
    ap.add_argument("--server", default=SERVER,
                    help="the p3_server binary (likewise)")
    ap.add_argument("--out_dir", default=os.path.join(ROOT, "out/bench_streaming"))
    ap.add_argument("--csv", default=paths.results("streaming", "streaming.csv"))
    ap.add_argument("--md", default=paths.results("streaming", "streaming.md"),
                    help="page whose table is rewritten; empty: none")
    ap.add_argument("--append", action="store_true",
                    help="keep the runs already in --csv and add these (their run numbers "
                         "continue); the table is then of all of them")
    ap.add_argument("--report", action="store_true", help="only rewrite the table from --csv")
    a = ap.parse_args()
    if a.report:
        write_table(a.md, csv_io.read_rows(a.csv))
        return
    rates = [float(x) for x in a.rates.split(",") if x.strip()]
    if not rates and not a.shared_memory:
        sys.exit("nothing to run: --rates is empty and no --shared_memory")
    if any(r > 0 for r in rates) and os.geteuid() != 0:
        sys.exit("emulated links need root (network namespaces, tbf); run as root, or --rates=0")
    for path in (a.bench, a.server):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path}: not built; bazel build --config=stamp //tools:bench_streaming "
                     "//server:p3_server")
    kept = earlier_runs(a.csv) if a.append else []
    first = 1 + max((int(r["run"]) for r in kept), default=-1)
    a.commit, a.server_commit = build_commit(a.bench), build_commit(a.server)
    a.driver_commit = paths.git_commit(mark_dirty=True)
    print(f"[bench] binaries built from {a.commit} (bench_streaming), {a.server_commit} "
          f"(p3_server); this worktree is at {a.driver_commit}", flush=True)
    rows = list(kept)
    # Rates interleaved: a burst of load hits every rate alike.
    for rep in range(first, first + a.runs):
        for rate in rates:
            rows.append(run_once(a, rate, rep, os.path.join(a.out_dir, f"r{rate:g}_{rep}")))
        if a.shared_memory:
            rows.append(run_once(a, 0.0, rep, os.path.join(a.out_dir, f"shm_{rep}"), shared=True))
    csv_io.write_rows(a.csv, rows, FIELDS)
    print(f"[bench] wrote {len(rows) - len(kept)} runs to {a.csv}"
          + (f" after the {len(kept)} it had" if a.append else ""))
    print(table(rows))
    if a.md:
        write_table(a.md, rows)


if __name__ == "__main__":
    main()

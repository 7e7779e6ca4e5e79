#!/usr/bin/env python3
"""Where each CPU second of the data path goes (docs/results/streaming/streaming.md, "Where
each CPU second goes"): one bench_streaming run on loopback (or --shared_memory) under
`perf record`, its samples grouped by what they do, and each group's share turned into CPU
seconds per GB moved and CPU microseconds per slice round trip with the run's own
`cpu_s_per_gb` (the worker's and the server's CPU time per GB across, both directions).

  # needs perf (linux-perf) and root or kernel.perf_event_paranoid <= 0
  /usr/bin/python3 tools/experiments/streaming_cpu_breakdown.py --label=after \\
      --csv=docs/results/streaming/cpu_breakdown_2026-12-04.csv --append
  /usr/bin/python3 tools/experiments/streaming_cpu_breakdown.py --table \\
      --csv=docs/results/streaming/cpu_breakdown_2026-12-04.csv

Only samples of the benchmark's two processes count: the process perf started and its
descendants (the server), by process id from `perf report --tasks`, so that other people's
p3_server processes on the same machine (whose gRPC threads bear the same names) and a
benchmark binary copied under another name are told apart. The
run's start-up (the dynamic loader, libtorch's operator registry) is sampled too: it is a
group of its own, so that it can be set aside. perf samples at --frequency per CPU; a share
is of the samples of the two processes.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Thread names of the benchmark's processes (comm, as perf truncates it to 15 characters).
OUR_COMMS = ("bench_streaming", "p3_server", "grpcpp_sync_ser", "default-executo",
             "grpc_global_tim", "resolver-execut", "timer_manager")

# (group, test on (dso, symbol)), first match wins; the order is the table's.
GROUPS = [
    ("kernel: socket copies", lambda d, s: s in ("_copy_from_iter", "_copy_to_iter")),
    ("kernel: page faults and zeroing", lambda d, s: d == "kernel" and (
        "page_fault" in s or "clear_page" in s or s in ("do_anonymous_page", "__handle_mm_fault",
                                                         "handle_mm_fault", "get_page_from_freelist",
                                                         "unmap_page_range", "__free_frozen_pages"))),
    ("kernel: scheduling and wake-ups", lambda d, s: d == "kernel" and (
        "spin_unlock" in s or "schedule" in s or "task_switch" in s or "futex" in s
        or "wake" in s or s.startswith("irqentry_exit") or "spin_lock" in s)),
    ("kernel: TCP and the rest", lambda d, s: d == "kernel"),
    ("libc: memcpy / memmove", lambda d, s: d.startswith("libc.") and ("memmove" in s or "memcpy" in s)),
    ("libc: malloc / free", lambda d, s: d.startswith("libc.") and (
        "malloc" in s or "free" in s or s in ("cfree@GLIBC_2.2.5",))),
    ("server: the optimizer", lambda d, s: "SliceOptimizer" in s),
    ("p3: everything else", lambda d, s: d in ("p3_server", "bench_streaming")),
    ("libtorch (the worker's model)", lambda d, s: d.startswith(("libtorch", "libc10", "libgomp"))),
    ("gRPC, protobuf, Abseil", lambda d, s: d.startswith(("libgrpc", "libgpr", "libprotobuf",
                                                          "libabsl", "libaddress_sorting",
                                                          "libupb", "libre2"))),
    ("start-up: dynamic loader", lambda d, s: d.startswith("ld-linux")),
    ("other", lambda d, s: True),
]

FIELDS = ["label", "commit", "mode", "run", "group", "share", "cpu_s_per_gb", "cpu_us_per_slice",
          "samples", "run_cpu_s_per_gb", "goodput_gbps", "slice_params"]


def parse_tasks(task_lines):
    """perf report --tasks lines ("pid tid ppid | comm") -> ({pid: (ppid, comm)} of the
    processes (pid == tid), [(pid, tid)] of every thread)."""
    procs, threads = {}, []
    for line in task_lines:
        head, sep, comm = line.partition("|")
        fields = head.split()
        if not sep or len(fields) != 3 or not all(f.isdigit() for f in fields):
            continue
        pid, tid, ppid = (int(f) for f in fields)
        threads.append((pid, tid))
        if pid == tid:
            procs[pid] = (ppid, comm.strip())
    return procs, threads


def our_pids(task_lines, bench):
    """perf report --tasks lines ("pid tid ppid | comm") -> the thread ids of the run (what
    perf's sort key `pid` shows): the threads of the process perf started from `bench` (its
    name, as the kernel truncates it to 15 characters) and of every process descending
    from it."""
    procs, threads = parse_tasks(task_lines)
    name = os.path.basename(bench)[:15]
    pids = {pid for pid, (ppid, comm) in procs.items()
            if comm == name and procs.get(ppid, (0, ""))[1] == "perf"}
    grown = True
    while grown:
        more = {pid for pid, (ppid, _) in procs.items() if ppid in pids} - pids
        pids |= more
        grown = bool(more)
    return {tid for pid, tid in threads if pid in pids}


def group_samples(report_lines, pids=None):
    """perf report lines (--sort comm,dso,sym, tab-separated, -q) -> {group: percent} over
    the samples of OUR_COMMS, normalised to 1. With `pids` (thread ids), the lines are of
    --sort pid,dso,sym ("tid:comm" first) and the samples of those threads count instead."""
    totals = {name: 0.0 for name, _ in GROUPS}
    ours = 0.0
    for line in report_lines:
        parts = [p.strip() for p in line.split("\t")]
        if len(parts) < 4 or not parts[0].endswith("%"):
            continue
        percent = float(parts[0].rstrip("%"))
        comm, dso, sym = parts[1], parts[2], parts[3]
        if pids is not None:
            pid = comm.split(":", 1)[0]
            if not pid.isdigit() or int(pid) not in pids:
                continue
        elif comm not in OUR_COMMS:
            continue
        dso = "kernel" if dso.startswith("[kernel") else dso
        sym = sym.split("] ", 1)[-1]
        for name, test in GROUPS:
            if test(dso, sym):
                totals[name] += percent
                break
        ours += percent
    if ours == 0:
        raise SystemExit("streaming_cpu_breakdown: no samples of the benchmark's processes")
    return {name: value / ours for name, value in totals.items()}


def rows_for(label, commit, mode, run, shares, result, samples):
    run_cpu = float(result["cpu_s_per_gb"])
    slice_params = int(result.get("slice_params", 40000))
    # One slice's round trip: its gradient up and its values down, 4 bytes a value each.
    slice_gb = 2 * 4 * slice_params / 1e9
    return [{"label": label, "commit": commit, "mode": mode, "run": run, "group": name,
             "share": f"{share:.4f}", "cpu_s_per_gb": f"{share * run_cpu:.4f}",
             "cpu_us_per_slice": f"{share * run_cpu * slice_gb * 1e6:.2f}", "samples": samples,
             "run_cpu_s_per_gb": f"{run_cpu:.4f}",
             "goodput_gbps": f"{float(result['goodput_up_gbps']):.3f}",
             "slice_params": slice_params} for name, share in shares.items()]


def table(rows):
    """Markdown: a column per label (and mode), a row per group: CPU s per GB (share),
    medians over the runs of that label."""
    columns = []
    for r in rows:
        key = (r["label"], r["mode"])
        if key not in columns:
            columns.append(key)
    by = {}
    for r in rows:
        by.setdefault((r["label"], r["mode"], r["group"]), []).append(r)

    def median(values):
        return statistics.median(float(v) for v in values)
    cell = {}
    for key, rs in by.items():
        cell[key] = {"share": median(r["share"] for r in rs),
                     "cpu_s_per_gb": median(r["cpu_s_per_gb"] for r in rs),
                     "cpu_us_per_slice": median(r["cpu_us_per_slice"] for r in rs)}
    head = "| where | " + " | ".join(f"{l} ({m}): CPU s/GB (share) | µs per slice" for l, m in columns)
    lines = [head + " |", "|---|" + "---:|---:|" * len(columns)]
    for name, _ in GROUPS:
        cells = []
        for l, m in columns:
            r = cell.get((l, m, name))
            cells += ([f"{r['cpu_s_per_gb']:.3f} ({100 * r['share']:.1f} %)",
                       f"{r['cpu_us_per_slice']:.1f}"] if r else ["–", "–"])
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    totals = []
    runs = []
    for l, m in columns:
        rs = {x["run"]: x for x in rows if x["label"] == l and x["mode"] == m}.values()
        cpu = median(x["run_cpu_s_per_gb"] for x in rs)
        goodput = median(x["goodput_gbps"] for x in rs)
        slice_gb = 2 * 4 * int(next(iter(rs))["slice_params"]) / 1e9
        totals += [f"**{cpu:.3f}** ({goodput:.2f} Gbit/s)", f"**{cpu * slice_gb * 1e6:.1f}**"]
        runs.append(str(len(rs)))
    lines.append("| all (the run's cpu_s_per_gb; goodput) | " + " | ".join(totals) + " |")
    lines.append("")
    lines.append("Runs per column: " + ", ".join(runs) + " (medians).")
    return "\n".join(lines)


def measure(a):
    bench = os.path.join(ROOT, "bazel-bin/tools/bench_streaming")
    server = os.path.join(ROOT, "bazel-bin/server/p3_server")
    bench = a.bench or bench
    server = a.server or server
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        cmd = [a.perf, "record", "-a", "-F", str(a.frequency), "-o", data, "--", bench,
               f"--server_binary={server}", f"--iterations={a.iterations}",
               f"--params={a.params}", f"--out_dir={d}/out"]
        if a.shared_memory:
            cmd.append("--shared_memory")
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"streaming_cpu_breakdown: {' '.join(cmd)} failed:\n{run.stderr}")
        result = json.loads(run.stdout)
        tasks = subprocess.run([a.perf, "report", "-i", data, "--tasks"], capture_output=True,
                               text=True, check=True).stdout
        pids = our_pids(tasks.splitlines(), bench)
        if not pids:
            raise SystemExit(f"streaming_cpu_breakdown: no process of {bench} in perf's tasks")
        report = subprocess.run([a.perf, "report", "-i", data, "--no-children", "--sort",
                                 "pid,dso,sym", "-g", "none", "-q", "--field-separator=\t"],
                                capture_output=True, text=True, check=True).stdout
        counts = subprocess.run([a.perf, "report", "-i", data, "--no-children", "--sort", "pid",
                                 "-n", "-q", "-g", "none", "--field-separator=\t"],
                                capture_output=True, text=True).stdout
    samples = 0
    for line in counts.splitlines():
        parts = [p.strip() for p in line.split("\t")]
        pid = parts[2].split(":", 1)[0] if len(parts) >= 3 else ""
        if pid.isdigit() and int(pid) in pids and parts[1].isdigit():
            samples += int(parts[1])
    return group_samples(report.splitlines(), pids), result, samples


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="run")
    ap.add_argument("--commit", default="")
    ap.add_argument("--shared_memory", action="store_true")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--params", type=int, default=25000000)
    ap.add_argument("--frequency", type=int, default=999)
    ap.add_argument("--bench", default="", help="bench_streaming (default: bazel-bin)")
    ap.add_argument("--server", default="", help="p3_server (default: bazel-bin)")
    ap.add_argument("--perf", default="perf")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--table", action="store_true", help="print the table from --csv only")
    a = ap.parse_args(argv)
    if a.table:
        print(table(list(csv.DictReader(open(a.csv)))))
        return 0
    commit = a.commit or subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()
    shares, result, samples = measure(a)
    mode = "shared memory" if a.shared_memory else "loopback"
    keep = list(csv.DictReader(open(a.csv))) if a.append and os.path.exists(a.csv) else []
    run = 1 + len({r["run"] for r in keep if r["label"] == a.label and r["mode"] == mode})
    rows = rows_for(a.label, commit, mode, run, shares, result, samples)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(keep + rows)
    print(table(keep + rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Wake-ups, context switches and system calls per slice of the data path
(docs/results/streaming/streaming.md, "Wake-ups and system calls per slice"), beside
iperf3's per as many bytes, on loopback (the benchmark also over an emulated link:
--bandwidth_gbps, as root).

One slice's round trip is its gradient up (slice_params x 4 bytes) and its values down
(as many again). A bench_streaming run is recorded under `perf record` with scheduler
and system-call tracepoints twice, with --iterations=SHORT and --iterations=LONG; the
difference between the two runs is (LONG - SHORT) x params / slice_params round trips,
without the start-up, the warm-up and the end, which both runs share. iperf3 (one TCP
stream, 127.0.0.1, its default 128 KiB writes) is recorded the same way over its whole
run and counted per 2 x slice_params x 4 bytes received: the same bytes across as one
of our round trips.

Per thread (by name: the worker's p3-send-s0 / p3-recv-s0 and its training thread
bench_streaming, the server's p3-recv-w0 / p3-send-w0, gRPC's own), per round trip:
  sleeps      the thread switched out not runnable (it blocked): each ends with a wake-up
  preempted   switched out while still runnable
  syscalls    system calls entered, and by kind (futex, sendmsg, recvmsg, epoll_wait, ...)
  sendmsg_bytes / recvmsg_bytes, read_bytes / write_bytes: bytes per successful call
and who woke whom (sched_waking in the waker's context: a waker outside the two
processes, e.g. an interrupt on another task, is not seen).

  # root, or kernel.perf_event_paranoid <= -1, and tracefs mounted on /sys/kernel/tracing
  /usr/bin/python3 tools/experiments/streaming_wakeups.py --label=before \\
      --bench=/tmp/wake5-before/bench_streaming --server=/tmp/wake5-before/p3_server \\
      --csv=docs/results/streaming/wakeups_2026-12-05.csv --raw_dir=docs/results/streaming/wakeups_raw --append
  /usr/bin/python3 tools/experiments/streaming_wakeups.py --iperf3 --label=iperf3 --csv=... --append
  /usr/bin/python3 tools/experiments/streaming_wakeups.py --table --csv=docs/results/streaming/wakeups_2026-12-05.csv

And the A/B of two builds' bench_streaming.py CSVs (rounds matched by `run`): medians of
each, and the median (min - max) of the per-round after / before:
  /usr/bin/python3 tools/experiments/streaming_wakeups.py --ab \
      docs/results/streaming/wakeups_ab_2026-12-05_v2_before.csv docs/results/streaming/wakeups_ab_2026-12-05_v2_after.csv
"""
import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENTS = ["sched:sched_switch", "sched:sched_waking", "raw_syscalls:sys_enter",
          "syscalls:sys_exit_sendmsg", "syscalls:sys_exit_recvmsg", "syscalls:sys_exit_read",
          "syscalls:sys_exit_write"]
UNISTD = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"
FIELDS = ["label", "commit", "run", "what", "process", "thread", "metric", "per_round_trip",
          "short_count", "long_count", "round_trips", "load1"]


def syscall_names(path=UNISTD):
    names = {}
    try:
        for line in open(path):
            m = re.match(r"#define __NR_(\w+)\s+(\d+)", line)
            if m:
                names[int(m.group(2))] = m.group(1)
    except OSError:
        pass
    return names


# perf script -F comm,pid,tid,event,trace:  "<comm> <pid>/<tid> <event>: <trace>"
LINE = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+([\w:]+):\s?(.*)$")


def parse(lines, names):
    """perf script lines -> (counts, edges, processes): counts[(pid, thread, metric)] = n
    (bytes metrics hold [calls, bytes]); edges[(pid, waker thread, wakee pid, wakee thread)];
    processes[pid] = the name of its main thread (its last comm where tid == pid)."""
    counts = collections.Counter()
    sizes = collections.defaultdict(lambda: [0, 0])
    edges = collections.Counter()
    processes = {}
    tid_pid = {}
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, tid, event, trace = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5)
        tid_pid[tid] = pid
        if pid == tid:
            processes[pid] = comm  # the last name: a child's after its exec
        if event == "sched:sched_switch":
            state = re.search(r"prev_state=(\S+)", trace)
            prev = re.search(r"prev_comm=(.+?) prev_pid=", trace)
            thread = prev.group(1) if prev else comm
            runnable = state is not None and state.group(1) in ("R", "R+")
            counts[(pid, thread, "preempted" if runnable else "sleeps")] += 1
        elif event == "sched:sched_waking":
            w = re.search(r"comm=(.+?) pid=(\d+)", trace)
            if w:
                edges[(pid, comm, int(w.group(2)), w.group(1))] += 1
        elif event == "raw_syscalls:sys_enter":
            nr = re.search(r"NR (\d+)", trace)
            if nr:
                name = names.get(int(nr.group(1)), "NR " + nr.group(1))
                counts[(pid, comm, "syscalls")] += 1
                counts[(pid, comm, "sys_" + name)] += 1
        elif event.startswith("syscalls:sys_exit_"):
            ret = trace.strip().split()[-1] if trace.strip() else ""
            try:
                value = int(ret, 16) if ret.startswith("0x") else int(ret)
            except ValueError:
                continue
            if value > 0 and value < 1 << 40:
                s = sizes[(pid, comm, event.split("sys_exit_", 1)[1] + "_bytes")]
                s[0] += 1
                s[1] += value
    # Wakees by their process: a wakee tid seen in events of its own.
    named_edges = collections.Counter()
    for (pid, waker, wakee_tid, wakee), n in edges.items():
        named_edges[(pid, waker, tid_pid.get(wakee_tid, -1), wakee)] += n
    return counts, sizes, named_edges, processes


def record(cmd, data, perf, env=None):
    full = [perf, "record", "-q", "--mmap-pages=4096", "-o", data]
    for e in EVENTS:
        full += ["-e", e]
    full += ["--"] + cmd
    return subprocess.run(full, capture_output=True, text=True, env=env)


def environment(pairs):
    """--env KEY=VALUE pairs on top of this process's environment (e.g. gRPC's
    GRPC_POLL_STRATEGY for both processes: the server inherits the benchmark's)."""
    env = dict(os.environ)
    for pair in pairs:
        key, _, value = pair.partition("=")
        env[key] = value
    return env


def script(data, perf):
    out = subprocess.run([perf, "script", "-i", data, "-F", "comm,pid,tid,event,trace"],
                         capture_output=True, text=True)
    return out.stdout.splitlines(), out.stderr


def flatten(parsed, bench_name):
    """-> {(process, thread, metric): value}: counts summed by thread name (a thread's
    several tids, e.g. gRPC's handler threads, count together), sizes as [calls, bytes],
    edges as metric "woke <process>/<thread>"."""
    counts, sizes, edges, processes = parsed
    # The process perf started: the one named after the benchmark; the server is "p3_server".
    def proc(pid):
        name = processes.get(pid, str(pid))
        return "worker" if name == bench_name else ("server" if name == "p3_server" else name)
    out = collections.defaultdict(float)
    byte_sums = collections.defaultdict(lambda: [0, 0])
    for (pid, thread, metric), n in counts.items():
        out[(proc(pid), thread, metric)] += n
    for (pid, thread, metric), (calls, total) in sizes.items():
        b = byte_sums[(proc(pid), thread, metric)]
        b[0] += calls
        b[1] += total
    for (pid, waker, wakee_pid, wakee), n in edges.items():
        out[(proc(pid), waker, f"woke {proc(wakee_pid)}/{wakee}")] += n
    return out, byte_sums


def measure_p3(a, iterations, raw):
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        cmd = [a.bench, f"--server_binary={a.server}", f"--iterations={iterations}",
               f"--params={a.params}", f"--slice_params={a.slice_params}", f"--out_dir={d}/out"]
        if a.bandwidth_gbps:  # an emulated link (root), without its iperf3 runs
            cmd += [f"--bandwidth_gbps={a.bandwidth_gbps:g}", "--iperf3_seconds=0"]
        run = record(cmd, data, a.perf, environment(a.env))
        if run.returncode != 0:
            raise SystemExit(f"streaming_wakeups: {' '.join(cmd)} failed:\n{run.stderr}")
        result = json.loads(run.stdout.strip().splitlines()[-1])
        lines, err = script(data, a.perf)
    if raw is not None:
        raw["stderr"] = err[-2000:]
    parsed = parse(lines, syscall_names())
    return flatten(parsed, os.path.basename(a.bench)[:15]), result


def measure_iperf3(a, raw):
    port = str(a.iperf3_port)
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        js = os.path.join(d, "client.json")
        sh = (f"iperf3 -s -1 -B 127.0.0.1 -p {port} >{d}/server.log 2>&1 & sleep 0.5; "
              f"iperf3 -c 127.0.0.1 -p {port} -t {a.iperf3_seconds} -J >{js}; wait")
        run = record(["sh", "-c", sh], data, a.perf)
        if run.returncode != 0:
            raise SystemExit(f"streaming_wakeups: iperf3 failed:\n{run.stderr}")
        report = json.load(open(js))
        lines, err = script(data, a.perf)
    if raw is not None:
        raw["stderr"] = err[-2000:]
    counts, sizes, edges, processes = parse(lines, syscall_names())
    # Both iperf3 processes are "iperf3": tell them apart as the perf-started shell's
    # first child (the server, started first) and the second.
    pids = sorted(p for p, n in processes.items() if n == "iperf3")
    names = {p: ("iperf3 server" if i == 0 else "iperf3 client") for i, p in enumerate(pids)}
    out = collections.defaultdict(float)
    byte_sums = collections.defaultdict(lambda: [0, 0])
    for (pid, thread, metric), n in counts.items():
        if pid in names:
            out[(names[pid], thread, metric)] += n
    for (pid, thread, metric), (calls, total) in sizes.items():
        if pid in names:
            b = byte_sums[(names[pid], thread, metric)]
            b[0] += calls
            b[1] += total
    for (pid, waker, wakee_pid, wakee), n in edges.items():
        if pid in names:
            out[(names[pid], waker, f"woke {names.get(wakee_pid, wakee_pid)}/{wakee}")] += n
    received = report["end"]["sum_received"]["bytes"]
    return (out, byte_sums), received, report["end"]["sum_received"]["bits_per_second"] / 1e9


def rows_p3(a, commit, run, short, long_, round_trips, load1):
    (s_out, s_bytes), (l_out, l_bytes) = short, long_
    rows = []
    for key in sorted(set(s_out) | set(l_out)):
        process, thread, metric = key
        sc, lc = s_out.get(key, 0), l_out.get(key, 0)
        rows.append(dict(label=a.label, commit=commit, run=run, what="p3", process=process,
                         thread=thread, metric=metric,
                         per_round_trip=f"{(lc - sc) / round_trips:.4f}",
                         short_count=int(sc), long_count=int(lc), round_trips=round_trips,
                         load1=load1))
    for key in sorted(set(s_bytes) | set(l_bytes)):
        process, thread, metric = key
        sc, sb = s_bytes.get(key, [0, 0])
        lc, lb = l_bytes.get(key, [0, 0])
        calls = lc - sc
        rows.append(dict(label=a.label, commit=commit, run=run, what="p3", process=process,
                         thread=thread, metric=metric + "_per_call",
                         per_round_trip=f"{(lb - sb) / calls:.1f}" if calls > 0 else "",
                         short_count=int(sb), long_count=int(lb), round_trips=round_trips,
                         load1=load1))
    return rows


def rows_iperf3(a, commit, run, measured, received, load1):
    out, byte_sums = measured
    round_trips = received / (2 * 4 * a.slice_params)  # as many bytes across as ours
    rows = []
    for (process, thread, metric), n in sorted(out.items()):
        rows.append(dict(label=a.label, commit=commit, run=run, what="iperf3", process=process,
                         thread=thread, metric=metric, per_round_trip=f"{n / round_trips:.4f}",
                         short_count=0, long_count=int(n), round_trips=f"{round_trips:.1f}",
                         load1=load1))
    for (process, thread, metric), (calls, total) in sorted(byte_sums.items()):
        rows.append(dict(label=a.label, commit=commit, run=run, what="iperf3", process=process,
                         thread=thread, metric=metric + "_per_call",
                         per_round_trip=f"{total / calls:.1f}" if calls else "",
                         short_count=0, long_count=int(total), round_trips=f"{round_trips:.1f}",
                         load1=load1))
    return rows


# The table's rows: (what it counts, metric, how rows sum: "sum" over threads).
TABLE = [("sleeps (blocked, then woken)", "sleeps"), ("preempted", "preempted"),
         ("system calls", "syscalls"), ("futex", "sys_futex"), ("sendmsg", "sys_sendmsg"),
         ("recvmsg", "sys_recvmsg"), ("write", "sys_write"), ("read", "sys_read"),
         ("epoll_wait", "sys_epoll_wait"), ("poll / ppoll", "sys_poll")]


def table(rows):
    """Markdown: per label, per process, medians over runs of the per-round-trip sums."""
    labels = []
    for r in rows:
        if r["label"] not in labels:
            labels.append(r["label"])
    per = collections.defaultdict(lambda: collections.defaultdict(float))
    runs = collections.defaultdict(set)
    for r in rows:
        if r["per_round_trip"] == "" or r["metric"].endswith("_per_call"):
            continue
        key = (r["label"], r["run"])
        runs[r["label"]].add(r["run"])
        metric = r["metric"]
        if metric in ("sys_ppoll",):
            metric = "sys_poll"
        per[key][(r["process"], metric)] += float(r["per_round_trip"])
        per[key][("all", metric)] += float(r["per_round_trip"])
    procs = ["all"] + sorted({p for d in per.values() for p, _ in d if p != "all"})
    lines = ["| per round trip (2 x 160 kB across) | " +
             " | ".join(f"{l} ({len(runs[l])} runs)" for l in labels) + " |",
             "|---|" + "---:|" * len(labels)]
    for proc in procs:
        for title, metric in TABLE:
            cells = []
            for l in labels:
                vals = [per[(l, run)].get((proc, metric), 0.0) for run in sorted(runs[l])]
                cells.append(f"{statistics.median(vals):.2f}" if vals else "–")
            if all(c in ("0.00", "–") for c in cells):
                continue
            lines.append(f"| {proc}: {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


THREAD_COLUMNS = [("sleeps", "sleeps"), ("preempted", "preempted"), ("syscalls", "syscalls"),
                  ("futex", "sys_futex"), ("sendmsg", "sys_sendmsg"), ("recvmsg", "sys_recvmsg"),
                  ("write", "sys_write"), ("read", "sys_read"), ("epoll_wait", "sys_epoll_wait"),
                  ("B/sendmsg", "sendmsg_bytes_per_call"), ("B/recvmsg", "recvmsg_bytes_per_call"),
                  ("B/write", "write_bytes_per_call"), ("B/read", "read_bytes_per_call")]


def thread_table(rows, label, top=14):
    """Markdown for one label: a row per thread (medians over runs, per round trip), then
    who woke whom, the most frequent first."""
    rows = [r for r in rows if r["label"] == label and r["per_round_trip"] != ""]
    runs = sorted({r["run"] for r in rows})
    vals = collections.defaultdict(list)
    for r in rows:
        vals[(r["process"], r["thread"], r["metric"])].append(float(r["per_round_trip"]))

    def med(key):
        v = vals.get(key)
        return statistics.median(v) if v else None
    threads = sorted({(p, t) for p, t, m in vals})
    threads = [pt for pt in threads if (med(pt + ("syscalls",)) or 0) + (med(pt + ("sleeps",)) or 0) >= 0.05]
    lines = [f"{label}, {len(runs)} runs, per round trip (2 x 160 kB across):", "",
             "| process / thread | " + " | ".join(c for c, _ in THREAD_COLUMNS) + " |",
             "|---|" + "---:|" * len(THREAD_COLUMNS)]
    for p, t in threads:
        cells = []
        for title, metric in THREAD_COLUMNS:
            v = med((p, t, metric))
            cells.append("–" if v is None else (f"{v:.0f}" if title.startswith("B/") else f"{v:.2f}"))
        lines.append(f"| {p} / {t} | " + " | ".join(cells) + " |")
    edges = [(med(k), k) for k in vals if k[2].startswith("woke ")]
    edges = sorted((e for e in edges if e[0] and e[0] >= 0.01), reverse=True)[:top]
    lines += ["", "| waker (process / thread) | woke | per round trip |", "|---|---|---:|"]
    for v, (p, t, m) in edges:
        lines.append(f"| {p} / {t} | {m[5:]} | {v:.2f} |")
    return "\n".join(lines)


AB_FIELDS = [("goodput Gbit/s", "goodput_gbps"), ("goodput / iperf3", "ratio"),
             ("CPU s/GB, worker + server", "cpu_s_per_gb"), ("host CPU s/GB", "host_cpu_s_per_gb"),
             ("server CPU s", "server_cpu_s")]


def ab_table(before_rows, after_rows):
    """Markdown: per mode (rate, shared memory), per field: before's and after's medians
    and the per-round after / before, median (min - max); rounds matched by `run`."""
    key = lambda r: (r["rate_gbps"], r["shared_memory"], r["run"])
    before = {key(r): r for r in before_rows}
    after = {key(r): r for r in after_rows}
    lines = ["| mode | what | before | after | after / before, per round: median (min – max) "
             "| rounds | load1 at the starts |", "|---|---|---:|---:|---:|---:|---|"]
    modes = sorted({k[:2] for k in before if k in after}, key=lambda m: (m[1], -float(m[0])))
    for rate, shared in modes:
        keys = sorted(k for k in before if k[:2] == (rate, shared) and k in after)
        mode = ("shared memory" if shared in ("1", "True") else
                "loopback" if float(rate) == 0 else f"{float(rate):g} Gbit/s")
        loads = [float(r[k]["load1_start"]) for r in (before, after) for k in keys]
        for title, field in AB_FIELDS:
            if shared in ("1", "True") and field == "ratio":
                title, field = "goodput / memcpy", "goodput_to_memcpy"
            try:
                b = [float(before[k][field]) for k in keys]
                a = [float(after[k][field]) for k in keys]
            except (KeyError, ValueError):
                continue
            ratios = [y / x for x, y in zip(b, a) if x]
            lines.append(f"| {mode} | {title} | {statistics.median(b):.3f} | "
                         f"{statistics.median(a):.3f} | {statistics.median(ratios):.2f} "
                         f"({min(ratios):.2f} – {max(ratios):.2f}) | {len(keys)} | "
                         f"{min(loads):.1f} – {max(loads):.1f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="run")
    ap.add_argument("--commit", default="")
    ap.add_argument("--bench", default=os.path.join(ROOT, "bazel-bin/tools/bench_streaming"))
    ap.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/server/p3_server"))
    ap.add_argument("--params", type=int, default=25_000_000)
    ap.add_argument("--slice_params", type=int, default=40_000)
    ap.add_argument("--bandwidth_gbps", type=float, default=0,
                    help="the benchmark over an emulated link of this rate (root; 0: loopback)")
    ap.add_argument("--short", type=int, default=1, help="iterations of the short run")
    ap.add_argument("--long", type=int, default=11, help="iterations of the long run")
    ap.add_argument("--iperf3", action="store_true", help="measure iperf3 instead")
    ap.add_argument("--iperf3_seconds", type=int, default=2)
    ap.add_argument("--iperf3_port", type=int, default=5299)
    ap.add_argument("--env", action="append", default=[],
                    help="KEY=VALUE in the benchmark's environment (repeatable)")
    ap.add_argument("--threads", default="",
                    help="with --table: a table per thread for this label instead")
    ap.add_argument("--ab", nargs=2, metavar=("BEFORE_CSV", "AFTER_CSV"),
                    help="print the A/B table of two bench_streaming.py CSVs and exit")
    ap.add_argument("--perf", default="perf")
    ap.add_argument("--csv", default="")
    ap.add_argument("--raw_dir", default="",
                    help="also write each run's facts here (JSON: load, goodput, perf's "
                         "warnings); its counts are the CSV's short_count and long_count")
    ap.add_argument("--append", action="store_true")
    ap.add_argument("--table", action="store_true", help="print the table from --csv only")
    a = ap.parse_args(argv)
    if a.ab:
        print(ab_table(*(csv_io.read_rows(p) for p in a.ab)))
        return 0
    if not a.csv:
        ap.error("--csv is required")
    if a.table:
        rows = csv_io.read_rows(a.csv)
        print(thread_table(rows, a.threads) if a.threads else table(rows))
        return 0
    commit = a.commit or subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                        capture_output=True, text=True).stdout.strip()
    keep = csv_io.read_rows(a.csv) if a.append and os.path.exists(a.csv) else []
    run = str(1 + len({r["run"] for r in keep if r["label"] == a.label}))
    load1 = open("/proc/loadavg").read().split()[0]
    raw = {"label": a.label, "run": run, "load1": load1,
           "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if a.iperf3:
        measured, received, gbps = measure_iperf3(a, raw)
        rows = rows_iperf3(a, commit, run, measured, received, load1)
        raw.update(iperf3_gbps=gbps, bytes_received=received)
    else:
        short, rs = measure_p3(a, a.short, raw)
        long_, rl = measure_p3(a, a.long, raw)
        params = int(rl["params"])
        round_trips = (a.long - a.short) * params // a.slice_params
        rows = rows_p3(a, commit, run, short, long_, round_trips, load1)
        raw.update(goodput_gbps_long=rl["goodput_up_gbps"], cpu_s_per_gb_long=rl["cpu_s_per_gb"],
                   round_trips=round_trips)
    if a.raw_dir:
        os.makedirs(a.raw_dir, exist_ok=True)
        path = os.path.join(a.raw_dir, f"{a.label}_run{run}.json")
        with open(path, "w") as f:
            json.dump(raw, f, indent=0)
    csv_io.write_rows(a.csv, keep + rows, FIELDS)
    print(table(keep + rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

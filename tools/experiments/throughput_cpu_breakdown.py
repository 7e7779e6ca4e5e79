#!/usr/bin/env python3
"""Where P3's CPU goes against DDP's in a real training run (docs/results/throughput/
throughput.md, "Where P3's CPU goes against DDP's"): one `tools/bench_throughput.py run`
(P3, or DDP) under `perf record -a -g`, its samples in the timed iterations counted by
process (worker, server, DDP rank, launcher) and grouped by what they do, with the groups
of tools/experiments/streaming_cpu_breakdown.py, in CPU milliseconds per training iteration.

  # needs perf (linux-perf) and root; one run each, under the machine lock
  T=tools/experiments/throughput_cpu_breakdown.py
  /usr/bin/python3 $T record --system=p3 --period_ms=4 --dir=out/cpu/p3_1
  /usr/bin/python3 $T record --system=ddp --period_ms=4 --dir=out/cpu/ddp_1
  # the table, and the CSV (one row per run, process kind and group)
  /usr/bin/python3 $T analyse --csv=docs/results/throughput/cpu_breakdown_p3_ddp_2026-12-05.csv \\
      out/cpu/p3_1 out/cpu/ddp_1
  /usr/bin/python3 $T table --csv=docs/results/throughput/cpu_breakdown_p3_ddp_2026-12-05.csv
  # where one group's time goes, call site by call site
  /usr/bin/python3 $T sites --group="libc: memcpy / memmove" out/cpu/p3_1

The window is the timed iterations: from the moment the first worker's (DDP: rank 0's)
progress line says the warm-up has ended to the moment it says the last iteration has,
both seen by polling its log every 10 ms (perf's clock is CLOCK_MONOTONIC, -k monotonic, as
Python's time.monotonic()). perf samples the cpu-clock every --period_ms of CPU time
(-c), so a sample is that many ms; at 1 ms perf slowed these runs by about a third, at 4 ms
by 4 – 10 %. Only samples of the run's processes count: the process
perf started and its descendants, by process id (streaming_cpu_breakdown.our_pids). Kernel
samples that land where interrupts are enabled again (pvm_irq_enable, the unlock of a
spinlock taken with interrupts off: a paravirtual guest defers the timer's interrupt there)
are given to the first caller that is not such a frame.
"""
import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import streaming_cpu_breakdown as streaming  # noqa: E402  (the groups, the run's pids)
from results_lib import csv_io  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"
PERIOD_NS = 1000000  # the default: one sample per ms of CPU (record --period_ms)

_STREAMING = dict(streaming.GROUPS)
_MODEL_DSOS = ("libdnnl", "libopenblas", "libblas", "libXNNPACK", "libsleef", "libpthreadpool")

# (group, test on (dso, symbol)), first match wins; the order is the table's. The kernel's,
# libc's, the optimizer's, gRPC's and the loader's are streaming_cpu_breakdown's.
GROUPS = [(name, _STREAMING[name]) for name in (
    "kernel: socket copies", "kernel: page faults and zeroing",
    "kernel: scheduling and wake-ups", "kernel: TCP and the rest", "libc: memcpy / memmove",
    "libc: malloc / free", "server: the optimizer")] + [
    ("gloo (DDP's all-reduce)", lambda d, s: d.startswith("libgloo")),
    ("Python and torch's bindings (DDP)", lambda d, s: d.startswith(
        ("python3", "libpython", "libtorch_python"))),
    ("p3: everything else", lambda d, s: d in ("p3_worker", "p3_server", "launch_cluster")),
    # By the call chain (group_of): libtorch's element-wise loops; DDP's optimizer, its
    # gradients' copies into and out of the buckets and their division by the world size
    # are such loops, as are the model's own (ReLU, the residual sums).
    (ELEMENTWISE := "libtorch: element-wise kernels (DDP: its optimizer, bucket copies)",
     lambda d, s: False),
    # perf-<pid>.map: code generated at run time, in these processes oneDNN's kernels.
    ("libtorch, oneDNN, OpenBLAS: the model's other kernels", lambda d, s: (
        _STREAMING["libtorch (the worker's model)"](d, s) or d.startswith(_MODEL_DSOS)
        or (d.startswith("perf-") and d.endswith(".map")))),
    ("gRPC, protobuf, Abseil", _STREAMING["gRPC, protobuf, Abseil"]),
    # The loader's, but not start-up: each thread-local variable of a shared library
    # (gRPC's ExecCtx among them) is looked up there, in the window too.
    ("loader: thread-local look-ups (__tls_get_addr)", lambda d, s: s == "__tls_get_addr"),
] + [(name, _STREAMING[name]) for name in ("start-up: dynamic loader", "other")]

# Kernel frames where a deferred interrupt lands: the sample goes to their caller.
_DEFERRED = re.compile(r"^(pvm_irq_enable|__raw_callee_save_\w+|_raw_spin_unlock\w*"
                       r"|__local_bh_enable_ip|native_irq_enable)$")

KINDS = ("worker", "server", "DDP rank", "launcher", "benchmark script")
FIELDS = ["label", "commit", "system", "run", "kind", "group", "cpu_ms_per_iteration",
          "samples", "iterations", "window_s", "iteration_ms", "samples_per_second",
          "load1", "run_cpu_s"]


def group_of(frames):
    """A sample's call chain, leaf first, as [(dso, symbol)] ("kernel" for the kernel's)
    -> its group."""
    dso, sym = frames[0]
    if dso == "kernel":
        for d, s in frames:
            if d == "kernel" and not _DEFERRED.match(s):
                dso, sym = d, s
                break
    elif dso.startswith("libtorch") and any(
            "TensorIteratorBase::serial_for_each" in s or "TensorIteratorBase::for_each" in s
            for _, s in frames[:3]):
        return ELEMENTWISE
    for name, test in GROUPS:
        if test(dso, sym):
            return name
    return "other"


def kind_of(comm, parent_comm):
    """The kind of a process of the run, from its name (and its parent's)."""
    if comm.startswith("p3_worker"):
        return "worker"
    if comm.startswith("p3_server"):
        return "server"
    if comm.startswith("launch_cluster"):
        return "launcher"
    if comm.startswith("python3") and parent_comm != "perf":
        return "DDP rank"
    return "benchmark script"


def process_kinds(task_lines, tids):
    """perf report --tasks lines and the run's thread ids -> {thread id: kind}."""
    procs, threads = streaming.parse_tasks(task_lines)
    kinds = {}
    for pid, tid in threads:
        if tid in tids and pid in procs:
            ppid, comm = procs[pid]
            kinds[tid] = kind_of(comm, procs.get(ppid, (0, ""))[1])
    return kinds


_HEAD = re.compile(r"^\S.*?\s+(\d+)/(\d+)\s+(\d+\.\d+):")
_FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.*)\s+\((.*)\)$")


def samples(script_lines):
    """perf script -F comm,pid,tid,time,ip,sym,dso (with call chains) -> [(tid, time,
    [(dso, symbol)], leaf first)]."""
    out, cur = [], None
    for line in script_lines:
        head = _HEAD.match(line)
        if head:
            cur = (int(head.group(2)), float(head.group(3)), [])
            out.append(cur)
            continue
        frame = _FRAME.match(line)
        if frame and cur is not None:
            dso = frame.group(2)
            dso = "kernel" if dso.startswith("[kernel") else os.path.basename(dso)
            cur[2].append((dso, frame.group(1)))
    return [s if s[2] else (s[0], s[1], [("[unknown]", "[unknown]")]) for s in out]


def tally(sample_list, kinds, start, end):
    """{(kind, group): samples} of the run's threads (`kinds`) in [start, end], and the
    samples of every other thread in the window (kind "outside the run")."""
    counts = {}
    for tid, t, frames in sample_list:
        if not start <= t <= end:
            continue
        if tid == 0:
            continue  # idle
        key = (kinds[tid], group_of(frames)) if tid in kinds else ("outside the run", "all")
        counts[key] = counts.get(key, 0) + 1
    return counts


# ---- record -------------------------------------------------------------------------------


def _progress(system, bench_out):
    """The finished iterations rank 0 has reported so far (0 before its log exists)."""
    if system == "p3":
        logs = glob.glob(os.path.join(bench_out, "runs", "*", "logs", "worker_0.log"))
        pattern = re.compile(r"^PROGRESS iteration=(\d+) ")
    else:
        logs = glob.glob(os.path.join(bench_out, "runs", "*", "rank0.log"))
        pattern = re.compile(r"^ddp iter (\d+)/")
    done = 0
    for path in logs:
        with open(path, errors="replace") as f:
            for line in f:
                m = pattern.match(line)
                if m:
                    done = max(done, int(m.group(1)))
    return done


def record(a):
    os.makedirs(a.dir, exist_ok=True)
    bench_out = os.path.join(a.dir, "bench")
    data = os.path.join(a.dir, "perf.data")
    bench = [PY, os.path.join(ROOT, "tools/bench_throughput.py"), "run", f"--model={a.model}",
             f"--bandwidths={a.bandwidth}", "--runs=1", f"--out={bench_out}"]
    bench += ["--modes=p3", f"--slice_params={a.slice_params}"] if a.system == "p3" else \
        ["--modes=", "--ddp"]
    cmd = [a.perf, "record", "-a", "-g", "-e", "cpu-clock", "-c", str(a.period_ms * 1000000), "-k",
           "monotonic", "-o", data, "--"] + bench
    cfg = open(os.path.join(ROOT, "configs/bench", f"{a.model}.textproto")).read()
    iterations = int(re.search(r"\biterations: (\d+)", cfg).group(1))
    warmup = int(re.search(r"\bwarmup_iterations: (\d+)", cfg).group(1))
    marks = {}
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            done = _progress(a.system, bench_out)
            now = time.monotonic()
            if done >= warmup and "start" not in marks:
                marks["start"], marks["start_iteration"] = now, done
            if done >= iterations and "end" not in marks:
                marks["end"] = now
                return
            time.sleep(0.01)
    watcher = threading.Thread(target=watch)
    watcher.start()
    with open(os.path.join(a.dir, "perf_record.log"), "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    stop.set()
    watcher.join()
    rows = csv_io.read_rows(os.path.join(bench_out, "raw.csv"))
    meta = {"system": a.system, "model": a.model, "bandwidth": a.bandwidth, "rc": rc,
            "period_ns": a.period_ms * 1000000,
            "iterations": iterations, "warmup": warmup, "window": marks,
            "commit": a.commit, "binaries": {k: os.environ.get(k, "") for k in
                                             ("P3_LAUNCHER", "P3_SERVER", "P3_WORKER")},
            "raw": rows[-1] if rows else {}}
    json.dump(meta, open(os.path.join(a.dir, "meta.json"), "w"), indent=1)
    ok = rc == 0 and rows and rows[-1].get("status") == "ok" and "end" in marks
    print(f"[cpu] {a.system}: rc {rc}, status {rows[-1].get('status') if rows else '-'}, "
          f"samples/s {rows[-1].get('samples_per_second') if rows else '-'}, "
          f"load1 {rows[-1].get('load1') if rows else '-'}, window {marks}", flush=True)
    return 0 if ok else 1


# ---- analyse ------------------------------------------------------------------------------


def _load(d, perf):
    """A recorded run -> (meta, its samples, {thread id: kind} of the run's threads,
    {thread id: thread name})."""
    meta = json.load(open(os.path.join(d, "meta.json")))
    data = os.path.join(d, "perf.data")
    tasks = subprocess.run([perf, "report", "-i", data, "--tasks"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    kinds = process_kinds(tasks, streaming.our_pids(tasks, "python3"))
    names = {}
    for line in tasks:
        head, sep, comm = line.partition("|")
        fields = head.split()
        if sep and len(fields) == 3 and all(f.isdigit() for f in fields):
            names[int(fields[1])] = comm.strip()
    script = subprocess.run([perf, "script", "-i", data, "-F", "comm,pid,tid,time,ip,sym,dso"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return meta, samples(script), kinds, names


def analyse_dir(d, perf="perf"):
    """A recorded run -> (meta, {(kind, group): samples} in the window, iterations in the
    window, the run's CPU seconds over the whole run)."""
    meta, got, kinds, _ = _load(d, perf)
    w = meta["window"]
    counts = tally(got, kinds, w["start"], w["end"])
    whole = sum(1 for tid, _, _ in got if tid in kinds) * meta.get("period_ns", PERIOD_NS) / 1e9
    return meta, counts, meta["iterations"] - w["start_iteration"], whole


def site_of(frames):
    """(leaf symbol, the first caller in p3:: or at::) of a call chain: where a group's
    time is spent, and on whose behalf (e.g. which memcpy)."""
    leaf = frames[0][1]
    if frames[0][0] == "kernel":
        leaf = next((s for d, s in frames if d == "kernel" and not _DEFERRED.match(s)), leaf)
    caller = next((s for _, s in frames[1:] if s.startswith(("p3::", "at::"))), "–")
    return leaf, caller


def sites(a):
    """Markdown: CPU ms per iteration (mean over the runs) by process kind, thread (digits
    folded) and site_of, for the samples of one group in the window."""
    total = {}
    for d in a.dirs:
        meta, got, kinds, names = _load(d, a.perf)
        w = meta["window"]
        ms = meta.get("period_ns", PERIOD_NS) / 1e6 / (meta["iterations"] - w["start_iteration"])
        for tid, t, frames in got:
            if tid in kinds and w["start"] <= t <= w["end"] and group_of(frames) == a.group:
                key = (kinds[tid], re.sub(r"\d+$", "N", names.get(tid, "?"))) + site_of(frames)
                total[key] = total.get(key, 0.0) + ms / len(a.dirs)
    print(f"| CPU ms per iteration ({a.group}) | process | thread | symbol | first p3::/at:: caller |")
    print("|---:|---|---|---|---|")
    for key, v in sorted(total.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"| {v:.1f} | " + " | ".join(k[:70] for k in key) + " |")
    return 0


def rows_for(label, run, meta, counts, iterations, whole):
    w = meta["window"]
    window = w["end"] - w["start"]
    raw = meta["raw"]
    common = {"label": label, "commit": meta.get("commit", ""), "system": meta["system"],
              "run": run, "iterations": iterations, "window_s": f"{window:.3f}",
              "iteration_ms": f"{1000 * window / iterations:.1f}",
              "samples_per_second": raw.get("samples_per_second", ""),
              "load1": raw.get("load1", ""), "run_cpu_s": f"{whole:.2f}"}
    rows = []
    kinds = [k for k in KINDS + ("outside the run",) if any(c[0] == k for c in counts)]
    for kind in kinds:
        groups = [g for g, _ in GROUPS] if kind != "outside the run" else ["all"]
        for g in groups:
            n = counts.get((kind, g), 0)
            ms = n * meta.get("period_ns", PERIOD_NS) / 1e6 / iterations
            rows.append(dict(common, kind=kind, group=g, samples=n,
                             cpu_ms_per_iteration=f"{ms:.2f}"))
    return rows


def table(rows):
    """Markdown: a row per group, CPU ms per iteration (medians over each system's runs) per
    process kind, each system's total over its processes, and P3 - DDP."""
    def per_run(system, kinds, group=None):
        out = {}
        for r in rows:
            if r["system"] == system and r["kind"] in kinds and (group is None or
                                                                 r["group"] == group):
                key = (r["label"], r["run"])
                out[key] = out.get(key, 0.0) + float(r["cpu_ms_per_iteration"])
        return out

    def med(values):
        return statistics.median(values) if values else None
    script = ("launcher", "benchmark script")
    cols = [("P3 workers", "p3", ("worker",)), ("P3 servers", "p3", ("server",)),
            ("P3 launcher, script", "p3", script),
            ("P3 all", "p3", ("worker", "server") + script),
            ("DDP ranks", "ddp", ("DDP rank",)), ("DDP all", "ddp", ("DDP rank",) + script)]
    lines = ["| where (CPU ms per iteration) | " + " | ".join(c[0] for c in cols) +
             " | P3 − DDP |", "|---|" + "---:|" * (len(cols) + 1)]

    def fmt(v):
        return "–" if v is None else f"{v:.1f}"
    for g, _ in GROUPS:
        vals = [med(list(per_run(s, k, g).values())) for _, s, k in cols]
        diff = None if vals[3] is None or vals[5] is None else vals[3] - vals[5]
        lines.append(f"| {g} | " + " | ".join(fmt(v) for v in vals) +
                     f" | {'–' if diff is None else f'{diff:+.1f}'} |")
    tot = [med(list(per_run(s, k).values())) for _, s, k in cols]
    diff = None if tot[3] is None or tot[5] is None else tot[3] - tot[5]
    lines.append("| **all** | " + " | ".join(f"**{fmt(v)}**" for v in tot) +
                 f" | **{'–' if diff is None else f'{diff:+.1f}'}** |")
    extra = []
    for system in ("p3", "ddp"):
        runs = {(r["label"], r["run"]): r for r in rows if r["system"] == system}
        if not runs:
            continue
        outside = per_run(system, ("outside the run",))
        loads = ", ".join(f"{float(r['load1']):.2f}" for r in runs.values())
        extra.append(
            f"{system.upper()}: {len(runs)} runs; iteration "
            f"{med([float(r['iteration_ms']) for r in runs.values()]):.0f} ms "
            f"(window over rank 0's timed iterations), samples/s "
            f"{med([float(r['samples_per_second'] or 'nan') for r in runs.values()]):.2f}, "
            f"other processes in the window {med(list(outside.values()) or [0.0]):.1f} ms per "
            f"iteration, load1 at the starts {loads}")
    return "\n".join(lines + [""] + extra)


def analyse(a):
    keep = csv_io.read_rows(a.csv) if a.append and os.path.exists(a.csv) else []
    new = []
    for d in a.dirs:
        meta, counts, iterations, whole = analyse_dir(d, a.perf)
        run = 1 + len({(r["run"]) for r in keep + new
                       if r["label"] == a.label and r["system"] == meta["system"]})
        new += rows_for(a.label, run, meta, counts, iterations, whole)
    csv_io.write_rows(a.csv, keep + new, FIELDS)
    print(table([r for r in keep + new if r["label"] == a.label]))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="one run under perf record")
    r.add_argument("--system", choices=("p3", "ddp"), required=True)
    r.add_argument("--dir", required=True)
    r.add_argument("--model", default="resnet50")
    r.add_argument("--bandwidth", default="0")
    r.add_argument("--slice_params", type=int, default=0, help="0: the launcher's choice")
    r.add_argument("--commit", default="", help="the binaries' commit, for the CSV")
    r.add_argument("--period_ms", type=int, default=1, help="CPU ms per sample")
    r.add_argument("--perf", default="perf")
    n = sub.add_parser("analyse", help="recorded runs -> CSV rows and the table")
    n.add_argument("dirs", nargs="+")
    n.add_argument("--csv", required=True)
    n.add_argument("--label", default="main")
    n.add_argument("--append", action="store_true")
    n.add_argument("--perf", default="perf")
    w = sub.add_parser("sites", help="where one group's time goes, call site by call site")
    w.add_argument("dirs", nargs="+")
    w.add_argument("--group", required=True)
    w.add_argument("--top", type=int, default=20)
    w.add_argument("--perf", default="perf")
    t = sub.add_parser("table", help="the table from --csv")
    t.add_argument("--csv", required=True)
    t.add_argument("--label", default="")
    a = ap.parse_args(argv)
    if a.cmd == "record":
        return record(a)
    if a.cmd == "analyse":
        return analyse(a)
    if a.cmd == "sites":
        return sites(a)
    rows = csv_io.read_rows(a.csv)
    print(table([r for r in rows if not a.label or r["label"] == a.label]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

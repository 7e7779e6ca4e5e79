#!/usr/bin/python3
"""Where a long-lived p3 process's RSS goes, without faults (issue 38, item 2;
docs/results/reliability/soak.md, "Creep without faults").

Runs one or more fault-free copies of the soak's reference run side by side (soak_faults.py's
config: 2 workers and 2 servers, small_cnn on synthetic data, batch 16, P3, emulated
1 Gbit/s links, checkpoints every 100 iterations), each with its own binaries
(--binaries LABEL=DIR, DIR holding p3_server, p3_worker and launch_cluster). Every
--sample_s it records, per process: RSS, the anonymous and file-backed parts
(/proc/PID/smaps_rollup), threads, and the run's iteration (worker 0's progress). With
--sampler (tools:libmalloc_sampler.so, preloaded) each process also writes its glibc
heap figures (mallinfo2: heap taken, in use, free) to --out/LABEL/mallinfo_PID.csv, which
are merged into --csv by the nearest time.

With --local N it runs instead, for each --binaries, one p3_worker in mode `local` (an
MLP on 8x8 synthetic images, batch 32, epochs of 2,048 iterations) for N iterations, side
by side, and takes every figure from the sampler (needed), every --sample_s: thousands
of iterations a second show in minutes what the cluster shows in an hour.

Needs root (the emulated links). Example (2026-12-05):

  R=docs/results/reliability/rss_creep_2026-12-05
  /usr/bin/python3 tools/experiments/soak_creep.py --iterations 24000 \\
      --binaries before=/tmp/rss-before --binaries after=/tmp/rss-after \\
      --sampler bazel-bin/tools/libmalloc_sampler.so --out /tmp/rss-ab \\
      --csv $R.csv --plot $R.png
  /usr/bin/python3 tools/experiments/soak_creep.py --csv $R.csv --report   # the table
  /usr/bin/python3 tools/experiments/soak_creep.py --local 300000 --sample_s 2 \\
      --binaries before=/tmp/rss-before --binaries after=/tmp/rss-after \\
      --sampler bazel-bin/tools/libmalloc_sampler.so --out /tmp/rss-local \\
      --from_s 20 --csv ${R}_local.csv --plot ${R}_local.png
"""

import argparse
import bisect
import csv
import datetime
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_lib import runs  # noqa: E402
import link_faults  # noqa: E402
import soak_faults  # noqa: E402

FIELDS = ["t_s", "unix_s", "run", "process", "pid", "iteration", "load1", "rss_kb", "anon_kb",
          "file_kb", "threads", "heap_kb", "in_use_kb", "free_kb"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--binaries", action="append", default=[],
                   help="LABEL=DIR with p3_server, p3_worker, launch_cluster (repeatable)")
    p.add_argument("--iterations", type=int, default=30000)
    p.add_argument("--sample_s", type=float, default=15)
    p.add_argument("--sampler", default="", help="libmalloc_sampler.so to preload")
    p.add_argument("--local", type=int, default=0,
                   help="iterations of one p3_worker in mode local per --binaries instead")
    p.add_argument("--out", default="/tmp/p3_soak_creep")
    p.add_argument("--csv", required=True)
    p.add_argument("--plot", default="")
    p.add_argument("--report", action="store_true", help="only print the table of --csv")
    p.add_argument("--from_s", type=float, default=120,
                   help="the table's window starts at the first sample after this (warm-up)")
    a = p.parse_args(argv)
    # soak_faults' defaults for everything the config needs
    a.mode, a.workers, a.servers, a.batch_size = "p3", 2, 2, 16
    a.bandwidth_gbps, a.peer_timeout_s, a.checkpoint_every, a.log_every = 1.0, 20, 100, 50
    return a


def smaps_rollup_kb(pid):
    """(anonymous, file-backed) resident kB of `pid`, or (None, None)."""
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    fields[parts[0].rstrip(":")] = int(parts[1])
    except OSError:
        return None, None
    anon = fields.get("Anonymous")
    rss = fields.get("Rss")
    return anon, (rss - anon if rss is not None and anon is not None else None)


def threads_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run(a):
    labels = []
    procs = []
    root = os.path.abspath(a.out)
    for spec in a.binaries:
        label, folder = spec.split("=", 1)
        out_dir = os.path.join(root, label)
        os.makedirs(out_dir, exist_ok=True)
        config = os.path.join(root, label + ".textproto")
        with open(config, "w") as f:
            f.write(link_faults.config_text(a.mode, a.iterations, a.workers, a.servers,
                                            a.bandwidth_gbps, a.peer_timeout_s, a.batch_size,
                                            os.path.join(root, label + "_ckpt"),
                                            a.checkpoint_every))
        env = dict(os.environ)
        if a.sampler:
            env["LD_PRELOAD"] = os.path.abspath(a.sampler)
            env["P3_MALLOC_SAMPLER_DIR"] = out_dir
            env["P3_MALLOC_SAMPLER_S"] = str(int(a.sample_s))
        cmd = [os.path.join(folder, "launch_cluster"), f"--config={config}",
               f"--server_binary={os.path.join(folder, 'p3_server')}",
               f"--worker_binary={os.path.join(folder, 'p3_worker')}",
               f"--set=output_dir={out_dir}/run", "--plot=false", "--kill_grace_s=2",
               f"--set=training.log_every={a.log_every}"]
        log = open(os.path.join(root, label + ".launcher.log"), "w")
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
        labels.append((label, out_dir))
    print(f"[rss] started {datetime.datetime.utcnow().isoformat(timespec='seconds')}Z: "
          + ", ".join(l for l, _ in labels), flush=True)
    rows = []
    start = time.monotonic()
    next_sample = start + 5
    while any(p.poll() is None for p, _ in procs):
        if time.monotonic() >= next_sample:
            next_sample += a.sample_s
            t = round(time.monotonic() - start, 1)
            load1 = os.getloadavg()[0]
            dirs = {label: os.path.join(d, "run") for label, d in labels}
            for (label, name), pid in sorted(soak_faults.processes(dirs).items()):
                kb = soak_faults.soak.rss_kb(pid)
                if kb is None:
                    continue
                anon, file_kb = smaps_rollup_kb(pid)
                rows.append({"t_s": t, "unix_s": int(time.time()), "run": label,
                             "process": name, "pid": pid,
                             "iteration": runs.progress_iteration(runs.worker_log(dirs[label])),
                             "load1": load1, "rss_kb": kb, "anon_kb": anon, "file_kb": file_kb,
                             "threads": threads_of(pid)})
            print(f"[rss] {t:6.0f} s " + "  ".join(
                f"{r['run']}/{r['process']} {r['rss_kb']}" for r in rows[-4 * len(labels):]),
                flush=True)
        time.sleep(0.5)
    for p, log in procs:
        log.close()
    merge_mallinfo(rows, labels)
    return rows, [p.returncode for p, _ in procs], labels


LOCAL_CONFIG = """name: "rss_local"
mode: "local"
model {{ name: "mlp" image_size: 8 in_channels: 1 }}
data {{ dataset: "synthetic" synthetic_size: 65536 }}
optimizer {{ name: "sgd" lr: 0.05 }}
training {{ batch_size: 32 iterations: {iterations} warmup_iterations: 2 log_every: 10000
           evaluate: false threads: 1 }}
output {{ save_model: false }}
"""


def run_local(a):
    """One local p3_worker per label, side by side; rows from the sampler's lines."""
    root = os.path.abspath(a.out)
    procs = []
    for spec in a.binaries:
        label, folder = spec.split("=", 1)
        out_dir = os.path.join(root, label)
        os.makedirs(out_dir, exist_ok=True)
        config = os.path.join(out_dir, "local.textproto")
        with open(config, "w") as f:
            f.write(LOCAL_CONFIG.format(iterations=a.local))
        env = dict(os.environ, LD_PRELOAD=os.path.abspath(a.sampler),
                   P3_MALLOC_SAMPLER_DIR=out_dir, P3_MALLOC_SAMPLER_S=str(int(a.sample_s)))
        log = open(os.path.join(out_dir, "worker.log"), "w")
        cmd = [os.path.join(folder, "p3_worker"), f"--config={config}",
               f"--records_file={out_dir}/records.csv", f"--result_file={out_dir}/result.json"]
        procs.append((label, out_dir, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                       env=env), log))
    rows = []
    codes = []
    for label, out_dir, proc, log in procs:
        codes.append(proc.wait())
        log.close()
        for name in sorted(os.listdir(out_dir)):
            if not (name.startswith("mallinfo_") and name.endswith(".csv")):
                continue
            with open(os.path.join(out_dir, name)) as f:
                lines = list(csv.DictReader(f))
            # The last line may be taken while the process exits (its model freed).
            for m in lines[:-1]:
                rows.append({"t_s": int(m["unix_s"]) - int(lines[0]["unix_s"]),
                             "unix_s": m["unix_s"], "run": label, "process": "worker_0",
                             "pid": name[len("mallinfo_"):-4], "rss_kb": m["rss_kb"],
                             "threads": m["threads"],
                             "heap_kb": (int(m["arena"]) + int(m["hblkhd"])) // 1024,
                             "in_use_kb": (int(m["uordblks"]) + int(m["hblkhd"])) // 1024,
                             "free_kb": int(m["fordblks"]) // 1024})
        try:
            with open(os.path.join(out_dir, "result.json")) as f:
                result = json.load(f)
            print(f"[rss] {label}: exit {codes[-1]}, param_l2 {result['param_l2']!r}, "
                  f"final_loss {result['final_loss']!r}, samples/s "
                  f"{result['samples_per_second']:.0f}", flush=True)
        except (OSError, ValueError, KeyError):
            print(f"[rss] {label}: exit {codes[-1]}, no result", flush=True)
    return rows, codes


def merge_mallinfo(rows, labels):
    """Adds each row's mallinfo2 figures (the sampler's line nearest in time, same pid)."""
    lines = {}
    for _, out_dir in labels:
        for name in os.listdir(out_dir):
            if name.startswith("mallinfo_") and name.endswith(".csv"):
                pid = int(name[len("mallinfo_"):-4])
                with open(os.path.join(out_dir, name)) as f:
                    lines[pid] = sorted(((int(r["unix_s"]), r) for r in csv.DictReader(f)),
                                        key=lambda x: x[0])
    for row in rows:
        samples = lines.get(row["pid"])
        if not samples:
            continue
        times = [s[0] for s in samples]
        i = bisect.bisect_left(times, row["unix_s"])
        best = min((j for j in (i - 1, i) if 0 <= j < len(samples)),
                   key=lambda j: abs(times[j] - row["unix_s"]))
        m = samples[best][1]
        row["heap_kb"] = (int(m["arena"]) + int(m["hblkhd"])) // 1024
        row["in_use_kb"] = (int(m["uordblks"]) + int(m["hblkhd"])) // 1024
        row["free_kb"] = int(m["fordblks"]) // 1024


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def report(rows, from_s=120):
    """Per process: first sample after `from_s` -> last, and kB per hour, per column."""
    out = ["| run | process | minutes | RSS kB | anon kB | file kB | heap kB | in use kB "
           "| free kB | threads | RSS kB per hour | in use kB per hour |",
           "|---|---|---:|---|---|---|---|---|---|---|---:|---:|"]
    keys = sorted({(r["run"], r["process"]) for r in rows})
    for run_label, name in keys:
        mine = [r for r in rows if r["run"] == run_label and r["process"] == name
                and float(r["t_s"]) >= from_s]
        if len(mine) < 2:
            continue
        first, last = mine[0], mine[-1]
        hours = (float(last["t_s"]) - float(first["t_s"])) / 3600

        def span(col):
            if first.get(col) in ("", None) or last.get(col) in ("", None):
                return "-"
            return f"{int(first[col]):,} → {int(last[col]):,}"

        def per_hour(col):
            if first.get(col) in ("", None) or last.get(col) in ("", None) or hours <= 0:
                return "-"
            return f"{(int(last[col]) - int(first[col])) / hours:+,.0f}"

        out.append(f"| {run_label} | {name} | {hours * 60:.1f} | {span('rss_kb')} | "
                   f"{span('anon_kb')} | {span('file_kb')} | {span('heap_kb')} | "
                   f"{span('in_use_kb')} | {span('free_kb')} | {span('threads')} | "
                   f"{per_hour('rss_kb')} | {per_hour('in_use_kb')} |")
    return "\n".join(out)


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True)
    keys = sorted({(r["run"], r["process"]) for r in rows})
    for run_label, name in keys:
        mine = [r for r in rows if r["run"] == run_label and r["process"] == name]
        col = 0 if name.startswith("server") else 1
        t = [float(r["t_s"]) / 60 for r in mine]
        base = int(mine[0]["rss_kb"])
        axes[0][col].plot(t, [(int(r["rss_kb"]) - base) / 1024 for r in mine],
                          label=f"{run_label}/{name}")
        if mine[0].get("in_use_kb") not in ("", None):
            b2 = int(mine[0]["in_use_kb"])
            axes[1][col].plot(t, [(int(r["in_use_kb"]) - b2) / 1024 if r["in_use_kb"] else None
                                  for r in mine], label=f"{run_label}/{name}")
    for col, role in enumerate(("servers", "workers")):
        axes[0][col].set_title(f"{role}: RSS − first sample (MiB)")
        axes[1][col].set_title(f"{role}: heap in use (mallinfo2) − first sample (MiB)")
        axes[1][col].set_xlabel("minutes")
        for row in (0, 1):
            if axes[row][col].get_lines():
                axes[row][col].legend(fontsize=7)
            axes[row][col].grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    a = parse_args()
    if a.report:
        print(report(read_rows(a.csv), a.from_s))
        return 0
    if a.local:
        if not a.sampler:
            print("--local needs --sampler", file=sys.stderr)
            return 2
        rows, codes = run_local(a)
        labels = []
    else:
        rows, codes, labels = run(a)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k, "") for k in FIELDS})
    for (label, out_dir), code in zip(labels, codes):
        s = runs.summary_or_empty(os.path.join(out_dir, "run"))
        print(f"[rss] {label}: exit {code}, status {s.get('status')}, param_l2 "
              f"{s.get('param_l2')!r}, samples/s {s.get('samples_per_second')}")
    print(report(rows, a.from_s))
    if a.plot:
        plot(rows, a.plot)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())

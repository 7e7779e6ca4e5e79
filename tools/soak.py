#!/usr/bin/python3
"""Soak benchmark: a long cluster run with resident memory sampled from every process.

    /usr/bin/python3 tools/soak.py [--minutes 10] [--workers 4] [--servers 2] [--out out/soak]

Builds the binaries, calibrates the iteration rate for 20 s, then runs the cluster long
enough for --minutes through bazel-bin/tools/launch_cluster, sampling each p3_server and
p3_worker process's resident set size (VmRSS) every --every seconds. Prints and writes
(<out>/soak.md, soak_rss.csv, soak_throughput.csv) the resident memory of every process
at start and end, and the throughput per minute from rank 0's per-iteration records.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def children(pid):
    """Descendant pids of `pid` with their command names."""
    out = {}
    try:
        ps = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,comm="], capture_output=True,
                            text=True, check=True).stdout
    except subprocess.CalledProcessError:
        return out
    parent = {}
    name = {}
    for line in ps.splitlines():
        p, pp, comm = line.split(None, 2)
        parent[int(p)] = int(pp)
        name[int(p)] = comm.strip()
    for p in parent:
        q = p
        while q in parent and q != pid and q > 1:
            q = parent[q]
        if q == pid and name[p] in ("p3_server", "p3_worker"):
            out[p] = name[p]
    return out


def launch(args, iterations, out_dir):
    cmd = [os.path.join(ROOT, "bazel-bin/tools/launch_cluster"),
           f"--config={os.path.join(ROOT, 'configs/synthetic_smoke.textproto')}",
           f"--server_binary={os.path.join(ROOT, 'bazel-bin/server/p3_server')}",
           f"--worker_binary={os.path.join(ROOT, 'bazel-bin/worker/p3_worker')}",
           f"--set=cluster.workers={args.workers}", f"--set=cluster.servers={args.servers}",
           f"--set=training.iterations={iterations}", "--set=training.log_every=50",
           "--set=training.evaluate=false", "--set=data.synthetic_size=8192",
           "--set=training.batch_size=16", f"--set=output_dir={out_dir}"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--every", type=float, default=5, help="seconds between RSS samples")
    ap.add_argument("--out", default="out/soak")
    args = ap.parse_args()
    out = os.path.join(ROOT, args.out)
    os.makedirs(out, exist_ok=True)
    subprocess.run(["bazel", "build", "--jobs=2", "//tools:launch_cluster", "//server:p3_server",
                    "//worker:p3_worker"], cwd=ROOT, check=True)

    # Calibration: how many iterations fit in the time asked for.
    cal = launch(args, 400, os.path.join(out, "calibration"))
    cal_out, _ = cal.communicate()
    if cal.returncode != 0:
        sys.exit("calibration run failed:\n" + cal_out[-2000:])
    with open(os.path.join(out, "calibration/records/worker_0.csv")) as f:
        secs = [float(r["iteration_seconds"]) for r in csv.DictReader(f)]
    per_iter = statistics.median(secs[50:] or secs)
    iterations = max(100, int(args.minutes * 60 / per_iter))
    print(f"soak: {per_iter * 1000:.1f} ms per iteration; running {iterations} iterations "
          f"(~{args.minutes:g} min) with {args.workers} workers and {args.servers} servers",
          flush=True)

    run_dir = os.path.join(out, "run")
    proc = launch(args, iterations, run_dir)
    samples = []  # (seconds, pid, name, rss_kib)
    start = time.time()
    while proc.poll() is None:
        now = time.time() - start
        for pid, name in children(proc.pid).items():
            r = rss_kib(pid)
            if r is not None:
                samples.append((now, pid, name, r))
        time.sleep(args.every)
    tail = proc.stdout.read()
    if proc.returncode != 0:
        sys.exit("soak run failed:\n" + tail[-3000:])

    with open(os.path.join(out, "soak_rss.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["seconds", "pid", "process", "rss_kib"])
        w.writerows(samples)
    # Per process: first sample after 30 s (start-up allocations done) against the last.
    rows = []
    for pid in sorted({s[1] for s in samples}):
        mine = [s for s in samples if s[1] == pid]
        settled = [s for s in mine if s[0] >= 30] or mine
        first, last = settled[0], mine[-1]
        rows.append((mine[0][2], pid, first[3] / 1024, last[3] / 1024, last[0] - first[0]))
    with open(os.path.join(run_dir, "records/worker_0.csv")) as f:
        recs = list(csv.DictReader(f))
    t = 0.0
    per_minute = {}
    for r in recs:
        t += float(r["iteration_seconds"])
        per_minute.setdefault(int(t // 60), []).append(float(r["samples_per_second"]))
    with open(os.path.join(out, "soak_throughput.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["minute", "iterations", "median_samples_per_second"])
        for m in sorted(per_minute):
            w.writerow([m, len(per_minute[m]), f"{statistics.median(per_minute[m]):.1f}"])

    lines = [f"# Soak run: {args.workers} workers, {args.servers} servers, small_cnn on "
             f"synthetic data, batch 16 per worker, {iterations} iterations "
             f"({(time.time() - start) / 60:.1f} min), {time.strftime('%Y-%m-%d')}", "",
             "| process | pid | RSS at 30 s (MiB) | RSS at end (MiB) | change | over |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, pid, a, b, span in rows:
        lines.append(f"| {name} | {pid} | {a:.1f} | {b:.1f} | {b - a:+.1f} | {span / 60:.1f} min |")
    lines += ["", "| minute | iterations | median samples/s (rank 0) |", "|---:|---:|---:|"]
    for m in sorted(per_minute):
        lines.append(f"| {m} | {len(per_minute[m])} | {statistics.median(per_minute[m]):.0f} |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "soak.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()

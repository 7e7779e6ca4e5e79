#!/usr/bin/python3
"""Kill trials for worker rejoin (docs/reliability.md, "A worker dies: it is restarted").

Each trial runs launch_cluster with --max_restarts=1 on a small real cluster (2 servers,
2 workers, small_cnn on synthetic data), SIGKILLs a random worker when its log shows a
random iteration, and checks that the run completes with param_l2 equal, bit for bit, to
an uninterrupted run of the same config. Everything random comes from --seed.

Per trial it also measures the cost of the restart. The stall: on a worker that was not
killed, the time above the median of its two slowest iterations (it waits for the missing
worker's gradients within one or two iterations; taking only those keeps the noise of the
others out). The process start: from the kill to the new process's RESUMED
line in its log (exec, libtorch, data set, connecting, the servers' Welcome). The cost
beyond the start, in iterations: (stall - start) / median iteration time. Also the wall
time of the run minus the uninterrupted one's (noisier: it includes the launcher's own
start and stop).

  /usr/bin/python3 tools/experiments/kill_trials.py --trials 20 --seed 1 \
      --csv docs/results/reliability/rejoin_kill_trials.csv

--kill server instead SIGKILLs a random server (checkpoints every --checkpoint_every
iterations): the launcher must restart every process from the newest checkpoint common to
all servers, and the run must again end bit-identical to the uninterrupted one.

  /usr/bin/python3 tools/experiments/kill_trials.py --kill server --trials 20 --seed 1 \
      --csv docs/results/reliability/server_kill_trials.csv

--exhaust instead checks a restart budget that runs out: the same worker killed twice
with --max_restarts=1 must fail the run with a report naming it and its last log lines.
--late checks a restart slower than cluster.rejoin_timeout_s (with --restart_delay_s
above it): the servers must stop the run with an error naming the missing rank.

Prints a table; exits 1 if any trial failed.
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, records, runs  # noqa: E402

MODES = ["p3", "baseline", "slicing_only", "priority_only", "values_only",
         "no_backward_overlap", "no_forward_overlap", "no_overlap"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--launcher", default="bazel-bin/tools/launch_cluster")
    p.add_argument("--server_binary", default="bazel-bin/server/p3_server")
    p.add_argument("--worker_binary", default="bazel-bin/worker/p3_worker")
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--modes", default=",".join(MODES),
                   help="modes to draw from (comma-separated)")
    p.add_argument("--rejoin_timeout_s", type=float, default=30)
    p.add_argument("--peer_timeout_s", type=float, default=2)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--restart_delay_s", type=float, default=0,
                   help="a restarted worker sleeps this long before it starts (through a "
                        "wrapper script): a slow process start; above --peer_timeout_s the "
                        "other workers must sit it out on the rejoin bound")
    p.add_argument("--kill", choices=["worker", "server"], default="worker",
                   help="what each trial SIGKILLs")
    p.add_argument("--checkpoint_every", type=int, default=5,
                   help="with --kill server: the servers' checkpoint interval")
    p.add_argument("--csv", default="", help="write the trials here")
    p.add_argument("--plot", default="",
                   help="draw the recovery time of each trial here (PNG; needs matplotlib); "
                        "with --from_csv, from a CSV written earlier instead of new trials")
    p.add_argument("--from_csv", default="", help="with --plot: draw this CSV, run nothing")
    p.add_argument("--out", default="", help="run folders here (default: a temporary one)")
    p.add_argument("--exhaust", action="store_true",
                   help="check a restart budget that runs out instead of trials")
    p.add_argument("--late", action="store_true",
                   help="check a rejoin later than rejoin_timeout_s instead of trials")
    return p.parse_args()


def config_text(mode, iterations, workers, servers, shared_memory, rejoin_timeout_s,
                batch_size=16, peer_timeout_s=2, checkpoint_dir="", checkpoint_every=0):
    checkpoint = (f'checkpoint {{ dir: "{checkpoint_dir}" every: {checkpoint_every} }}\n'
                  if checkpoint_dir else "")
    return checkpoint + f"""name: "kill_trial"
mode: "{mode}"
cluster {{ workers: {workers} servers: {servers} peer_timeout_s: {peer_timeout_s} rejoin_timeout_s: {rejoin_timeout_s} }}
model {{ name: "small_cnn" }}
data {{ dataset: "synthetic" synthetic_size: 2048 }}
training {{ batch_size: {batch_size} iterations: {iterations} log_every: 1 evaluate: false threads: 1 warmup_iterations: 2 }}
scheduling {{ slice_params: 5000 shared_memory: {"true" if shared_memory else "false"} }}
output {{ save_model: false }}
"""


def pid_of(binary, flag):
    """The pid of the process running `binary` (a path ending) with argument `flag`."""
    needle = flag.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if needle in args and args[0].endswith(binary.encode()):
            return int(entry)
    return None


def worker_pid(out_dir, rank):
    """The pid of the p3_worker process of `rank` writing into `out_dir` (none: None)."""
    return pid_of("p3_worker", f"--result_file={os.path.abspath(out_dir)}/results/worker_{rank}.json")


def server_pid(out_dir, index):
    """The pid of the p3_server process `index` writing into `out_dir` (none: None)."""
    return pid_of("p3_server", f"--port_file={os.path.abspath(out_dir)}/ports/server_{index}.port")


log_has = runs.log_has
wait_for = runs.wait_for


def launch(args, out_dir, config_path, max_restarts):
    cmd = [args.launcher, f"--config={config_path}", f"--server_binary={args.server_binary}",
           f"--worker_binary={args.worker_binary}", f"--set=output_dir={out_dir}", "--plot=false",
           f"--max_restarts={max_restarts}", "--kill_grace_s=2"]
    log = open(os.path.join(os.path.dirname(out_dir), os.path.basename(out_dir) + ".launcher.log"),
               "w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log


def median_iteration_s(out_dir, rank=0):
    return statistics.median(records.iteration_seconds(out_dir, rank)[2:])


def run_reference(args, root, mode, shared_memory):
    tag = f"ref_{mode}_{'shm' if shared_memory else 'tcp'}"
    out_dir = os.path.join(root, tag)
    config_path = os.path.join(root, tag + ".textproto")
    with open(config_path, "w") as f:
        f.write(config_text(mode, args.iterations, args.workers, args.servers, shared_memory,
                            args.rejoin_timeout_s, args.batch_size, args.peer_timeout_s))
    start = time.monotonic()
    proc, log = launch(args, out_dir, config_path, max_restarts=1)
    rc = proc.wait()
    log.close()
    wall = time.monotonic() - start
    if rc != 0:
        sys.exit(f"kill_trials: the uninterrupted {mode} run failed (exit {rc}); see {log.name}")
    s = runs.summary(out_dir)
    return {"param_l2": s["param_l2"], "wall_s": wall,
            "iteration_s": median_iteration_s(out_dir),
            "all_l2": [w["param_l2"] for w in s["workers_results"]]}


def start_trial(args, root, index, mode, shared_memory, references, checkpoint=False):
    """Writes trial `index`'s config and launches it; returns (reference, out_dir, proc,
    log, start time)."""
    key = (mode, shared_memory)
    if key not in references:
        references[key] = run_reference(args, root, mode, shared_memory)
    tag = f"trial_{index:02d}"
    out_dir = os.path.join(root, tag)
    config_path = os.path.join(root, tag + ".textproto")
    with open(config_path, "w") as f:
        f.write(config_text(mode, args.iterations, args.workers, args.servers, shared_memory,
                            args.rejoin_timeout_s, args.batch_size, args.peer_timeout_s,
                            os.path.join(root, tag + "_ckpt") if checkpoint else "",
                            args.checkpoint_every))
    start = time.monotonic()
    proc, log = launch(args, out_dir, config_path, max_restarts=1)
    return references[key], out_dir, proc, log, start


def run_server_trial(args, root, index, rng, references):
    """Kills a random server at a random iteration; checkpoints every args.checkpoint_every."""
    mode = rng.choice(args.mode_list)
    shared_memory = rng.random() < 0.5
    server = rng.randrange(args.servers)
    kill_at = rng.randrange(1, args.iterations - 1)
    ref, out_dir, proc, log, start = start_trial(args, root, index, mode, shared_memory,
                                                 references, checkpoint=True)
    worker_log = os.path.join(out_dir, "logs", "worker_0.log")
    row = {"trial": index, "mode": mode, "shared_memory": int(shared_memory),
           "killed_server": server, "kill_at_iteration": kill_at, "resumed_at": "",
           "param_l2": "", "reference_param_l2": repr(ref["param_l2"]), "identical": 0,
           "completed": 0, "wall_s": "", "reference_wall_s": f"{ref['wall_s']:.3f}",
           "iteration_s": f"{ref['iteration_s']:.4f}", "extra_wall_s": ""}
    seen = wait_for(lambda: log_has(worker_log, f"PROGRESS iteration={kill_at + 1} "), proc, 120)
    pid = server_pid(out_dir, server) if seen else None
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
    rc = proc.wait()
    log.close()
    wall = time.monotonic() - start
    row["wall_s"] = f"{wall:.3f}"
    if pid is None:
        row["note"] = "no kill (worker 0's log never reached the iteration)"
    elif rc == 0:
        s = runs.summary(out_dir)
        row["completed"] = 1
        row["param_l2"] = repr(s["param_l2"])
        all_l2 = [w["param_l2"] for w in s["workers_results"]]
        row["identical"] = int(s["param_l2"] == ref["param_l2"] and all_l2 == ref["all_l2"])
        with open(log.name) as f:
            text = f.read()
        if "restarting every process from" not in text:
            row["identical"] = 0
            row["note"] = "the launcher did not report the restart from checkpoints"
        with open(worker_log, "rb") as f:
            w = f.read().decode(errors="replace")
        row["resumed_at"] = w.split("RESUMED iteration=")[1].split()[0] if "RESUMED iteration=" in w else "0"
        row["extra_wall_s"] = f"{wall - ref['wall_s']:.3f}"
    return row


def run_trial(args, root, index, rng, references):
    if args.kill == "server":
        return run_server_trial(args, root, index, rng, references)
    mode = rng.choice(args.mode_list)
    shared_memory = rng.random() < 0.5
    rank = rng.randrange(args.workers)
    kill_at = rng.randrange(1, args.iterations - 1)
    ref, out_dir, proc, log, start = start_trial(args, root, index, mode, shared_memory,
                                                 references)
    worker_log = os.path.join(out_dir, "logs", f"worker_{rank}.log")
    row = {"trial": index, "mode": mode, "shared_memory": int(shared_memory),
           "killed_rank": rank, "kill_at_iteration": kill_at, "resumed_at": "",
           "param_l2": "", "reference_param_l2": repr(ref["param_l2"]), "identical": 0,
           "completed": 0, "wall_s": "", "reference_wall_s": f"{ref['wall_s']:.3f}",
           "iteration_s": f"{ref['iteration_s']:.4f}", "start_s": "", "stall_s": "",
           "beyond_start_iterations": "", "extra_wall_s": ""}
    # PROGRESS counts from 1: "iteration=k" is printed after iteration k-1.
    seen = wait_for(lambda: log_has(worker_log, f"PROGRESS iteration={kill_at + 1} "), proc, 120)
    pid = worker_pid(out_dir, rank) if seen else None
    killed_at = None
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()
        if wait_for(lambda: log_has(worker_log, "RESUMED iteration="), proc, 120):
            row["start_s"] = f"{time.monotonic() - killed_at:.3f}"
            with open(worker_log, "rb") as f:
                text = f.read().decode(errors="replace")
            row["resumed_at"] = text.split("RESUMED iteration=")[1].split()[0]
    rc = proc.wait()
    log.close()
    wall = time.monotonic() - start
    row["wall_s"] = f"{wall:.3f}"
    if rc == 0 and killed_at is not None:
        s = runs.summary(out_dir)
        row["completed"] = 1
        row["param_l2"] = repr(s["param_l2"])
        all_l2 = [w["param_l2"] for w in s["workers_results"]]
        row["identical"] = int(s["param_l2"] == ref["param_l2"] and all_l2 == ref["all_l2"])
        with open(log.name) as f:
            if f"restarted worker {rank} ×1" not in f.read():
                row["identical"] = 0
                row["note"] = "the launcher did not report the restart"
        row["extra_wall_s"] = f"{wall - ref['wall_s']:.3f}"
        survivor = (rank + 1) % args.workers
        times = records.iteration_seconds(out_dir, survivor)
        median = statistics.median(times[2:])
        stall = sum(max(0.0, t - median) for t in sorted(times[2:])[-2:])
        row["stall_s"] = f"{stall:.3f}"
        if row["start_s"] and args.workers > 1:
            beyond = (stall - float(row["start_s"])) / median
            row["beyond_start_iterations"] = f"{beyond:.2f}"
    elif killed_at is None:
        row["note"] = "no kill (worker log never reached the iteration)"
    return row


def exhaust(args, root):
    """Kills worker 1 twice with --max_restarts=1: the run must fail naming it."""
    config_path = os.path.join(root, "exhaust.textproto")
    with open(config_path, "w") as f:
        f.write(config_text("p3", 200, args.workers, args.servers, True, args.rejoin_timeout_s,
                            args.batch_size, args.peer_timeout_s))
    out_dir = os.path.join(root, "exhaust")
    proc, log = launch(args, out_dir, config_path, max_restarts=1)
    worker_log = os.path.join(out_dir, "logs", "worker_1.log")
    ok = True
    for text in ["PROGRESS iteration=3 ", "RESUMED iteration="]:
        pid = worker_pid(out_dir, 1) if wait_for(lambda: log_has(worker_log, text), proc, 120) \
            else None
        if pid is None:
            print(f"FAIL: worker 1 never logged {text!r}")
            ok = False
            break
        os.kill(pid, signal.SIGKILL)
    rc = proc.wait()
    log.close()
    with open(log.name) as f:
        report = f.read()
    checks = [
        (rc == 1, f"the launcher exits 1 (got {rc})"),
        ("restarting it with --rejoin (restart 1 of 1)" in report, "the restart is reported"),
        ("worker 1 (pid" in report and "no restarts left (--max_restarts=1, 1 used)" in report,
         "the failure names worker 1 and the spent budget"),
        (f"--- last lines of {os.path.abspath(worker_log)}" in report or
         "--- last lines of " in report and "worker_1.log" in report,
         "its last log lines are shown"),
        ("RESUMED iteration=" in report, "the log lines include the restarted process's"),
    ]
    return report_checks(checks, report) and ok


def report_checks(checks, report):
    """Prints each (passed, what) check; prints `report` when one failed; all passed?"""
    ok = True
    for passed, what in checks:
        print(("ok: " if passed else "FAIL: ") + what)
        ok = ok and passed
    if not ok:
        print(report)
    return ok


def wrap_worker(args, root):
    """With --restart_delay_s: a wrapper that delays a worker started with --rejoin."""
    if args.restart_delay_s <= 0:
        return
    wrapper = os.path.join(root, "delayed_p3_worker.sh")
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\n"
                f"for a in \"$@\"; do [ \"$a\" = --rejoin ] && sleep {args.restart_delay_s}; done\n"
                f"exec {os.path.abspath(args.worker_binary)} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    args.worker_binary = wrapper


def late(args, root):
    """Worker 1 comes back after rejoin_timeout_s: the run must fail naming it."""
    config_path = os.path.join(root, "late.textproto")
    with open(config_path, "w") as f:
        f.write(config_text("p3", 200, args.workers, args.servers, True, args.rejoin_timeout_s,
                            args.batch_size, args.peer_timeout_s))
    out_dir = os.path.join(root, "late")
    proc, log = launch(args, out_dir, config_path, max_restarts=1)
    worker_log = os.path.join(out_dir, "logs", "worker_1.log")
    pid = worker_pid(out_dir, 1) if wait_for(
        lambda: log_has(worker_log, "PROGRESS iteration=3 "), proc, 120) else None
    if pid is None:
        print("FAIL: worker 1 never logged its third iteration")
        proc.kill()
        return False
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    rc = proc.wait()
    log.close()
    with open(log.name) as f:
        report = f.read()
    want = f"worker 1: died and did not rejoin within {args.rejoin_timeout_s:g}s"
    checks = [
        (rc == 1, f"the launcher exits 1 (got {rc})"),
        (want in report, f"the failure says {want!r}"),
        (time.monotonic() - killed < args.restart_delay_s + 10,
         "the run ends within the bound, not at the peers' own timeouts"),
    ]
    return report_checks(checks, report)


def plot(rows, path):
    """Per trial: the stall of the other workers, split into the new process's start and
    the rest, in seconds, with the uninterrupted run's 2-iteration mark above the start."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in rows if r["start_s"] and r["stall_s"]]
    x = list(range(len(rows)))
    start = [float(r["start_s"]) for r in rows]
    rest = [max(0.0, float(r["stall_s"]) - float(r["start_s"])) for r in rows]
    two = [2 * float(r["iteration_s"]) for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4.6))
    ax.bar(x, start, label="process start (kill to RESUMED)", color="#9db4d6")
    ax.bar(x, rest, bottom=start, label="the rest of the stall", color="#d6785e")
    ax.scatter(x, [a + b for a, b in zip(start, two)], marker="_", s=200, color="black",
               label="start + 2 iterations", zorder=3)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r['trial']} {r['mode']}" for r in rows], fontsize=7, rotation=60,
                       ha="right")
    ax.set_ylabel("seconds the other workers stalled")
    ax.set_xlabel("trial (mode)")
    ax.set_title("Cost of one worker restart (tools/experiments/kill_trials.py)")
    ax.set_ylim(0, 1.3 * max(a + b for a, b in zip(start, two)))
    ax.legend(fontsize=8, ncol=3, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    args = parse_args()
    args.mode_list = [m for m in args.modes.split(",") if m]
    if args.from_csv:
        plot(csv_io.read_rows(args.from_csv), args.plot)
        return
    root = args.out or tempfile.mkdtemp(prefix="kill_trials_")
    os.makedirs(root, exist_ok=True)
    wrap_worker(args, root)
    if args.exhaust:
        sys.exit(0 if exhaust(args, root) else 1)
    if args.late:
        sys.exit(0 if late(args, root) else 1)
    rng = random.Random(args.seed)
    references = {}
    rows = []
    for i in range(args.trials):
        row = run_trial(args, root, i, rng, references)
        rows.append(row)
        victim = (f"server {row['killed_server']}" if args.kill == "server"
                  else f"worker {row['killed_rank']}")
        print(f"trial {i:2d}  {row['mode']:<20} shm={row['shared_memory']} kill {victim}"
              f" at iteration {row['kill_at_iteration']:>2}  resumed at "
              f"{row['resumed_at'] or '-':>2}  completed={row['completed']} identical="
              f"{row['identical']}  param_l2={row['param_l2'] or '-'}  stall "
              f"{row.get('stall_s') or '-'} s = start {row.get('start_s') or '-'} s + "
              f"{row.get('beyond_start_iterations') or '-'} it  extra wall "
              f"{row['extra_wall_s'] or '-'} s", flush=True)
    fields = list(rows[0].keys()) if rows else []
    fields += [k for r in rows for k in r if k not in fields]
    if args.csv:
        csv_io.write_rows(args.csv, rows, fields)
    if args.plot:
        plot(rows, args.plot)
    good = sum(r["identical"] for r in rows)
    print(f"{good} of {len(rows)} trials completed with param_l2 identical to the "
          f"uninterrupted run (seed {args.seed}; runs in {root})")
    extras = [float(r["beyond_start_iterations"]) for r in rows if r.get("beyond_start_iterations")]
    starts = [float(r["start_s"]) for r in rows if r.get("start_s")]
    if extras:
        print(f"restart cost beyond the process start: median {statistics.median(extras):.2f} "
              f"iterations (max {max(extras):.2f}); process start median "
              f"{statistics.median(starts):.2f} s")
    sys.exit(0 if good == len(rows) else 1)


if __name__ == "__main__":
    main()

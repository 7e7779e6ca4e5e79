#!/usr/bin/python3
"""The soak under every fault at once (issue 38, item 2; docs/results/reliability/soak.md).

One run of launch_cluster --max_restarts on an emulated network (link_faults.py's config:
small_cnn on synthetic data, one process per machine, checkpoints every
--checkpoint_every iterations) while, on a fixed schedule:

  every --worker_kill_every_s (120)  a worker (seeded choice) is SIGKILLed: it rejoins
  every --server_kill_every_s (600)  a server (in turn) is SIGKILLed: the launcher restarts
                                     every process from the newest common checkpoint
  every --fault_every_s (300)        one link fault (link_faults.py's injections, cycling
                                     loss_1, loss_5, outage, brownout) on the link of one
                                     worker or server, also in turn

A reference run of the same config, with no faults, runs beside it. The RSS of every
process of both runs is sampled every --sample_s. Faults stop after --faults_for_s and
within --end_guard iterations of the end (a worker killed after its Done cannot rejoin).
At the end the soak must have ended with status ok and param_l2 (every worker's) equal,
bit for bit, to the reference's.

Needs root (namespaces, nft, tc) and a built tree (bazel build //tools:launch_cluster
//server:p3_server //worker:p3_worker). The hour (2026-12-05):

  R=docs/results/reliability/soak_faults_2026-12-05
  nice -n 10 /usr/bin/python3 tools/experiments/soak_faults.py --iterations N \\
      --out /tmp/soak-faults --rss $R_rss.csv --events $R_events.csv --json $R.json \\
      --plot $R_rss.png
  # the plot again from the CSVs, running nothing
  /usr/bin/python3 tools/experiments/soak_faults.py --plot_only --rss $R_rss.csv \\
      --events $R_events.csv --plot $R_rss.png
"""

import argparse
import datetime
import json
import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_lib import csv_io, runs  # noqa: E402
import link_faults  # noqa: E402
import soak  # noqa: E402

RSS_FIELDS = ["t_s", "run", "process", "pid", "rss_kb"]
EVENT_FIELDS = ["t_s", "kind", "target", "pid", "seconds", "note"]
TARGET_ORDER = ["worker 0", "server 0", "worker 1", "server 1"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--launcher", default="bazel-bin/tools/launch_cluster")
    p.add_argument("--server_binary", default="bazel-bin/server/p3_server")
    p.add_argument("--worker_binary", default="bazel-bin/worker/p3_worker")
    p.add_argument("--iterations", type=int, default=40000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--mode", default="p3")
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--bandwidth_gbps", type=float, default=1.0)
    p.add_argument("--peer_timeout_s", type=float, default=20,
                   help="above the longest link fault (as link_faults.py)")
    p.add_argument("--checkpoint_every", type=int, default=100)
    p.add_argument("--log_every", type=int, default=50)
    p.add_argument("--worker_kill_every_s", type=float, default=120)
    p.add_argument("--server_kill_every_s", type=float, default=600)
    p.add_argument("--fault_every_s", type=float, default=300)
    p.add_argument("--server_kill_offset_s", type=float, default=60,
                   help="server kills at k * every + offset: apart from the worker kills")
    p.add_argument("--fault_offset_s", type=float, default=-45,
                   help="link faults at k * every + offset")
    p.add_argument("--faults_for_s", type=float, default=3600,
                   help="no kill or fault is started after this")
    p.add_argument("--end_guard", type=int, default=0,
                   help="no kill or fault once worker 0 is this close to the end "
                        "(default: 2 %% of --iterations, at least 20)")
    p.add_argument("--faults", default=",".join(link_faults.SHORT_FAULTS))
    p.add_argument("--loss_s", type=float, default=5)
    p.add_argument("--outage_s", type=float, default=5)
    p.add_argument("--brownout_s", type=float, default=10)
    p.add_argument("--brownout_rate_bits", type=int, default=1_000_000)
    p.add_argument("--sample_s", type=float, default=15)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="/tmp/p3_soak_faults", help="the runs' folders")
    p.add_argument("--rss", required=True, help="RSS samples (CSV)")
    p.add_argument("--events", required=True, help="kills and faults (CSV)")
    p.add_argument("--json", default="", help="the verdict")
    p.add_argument("--plot", default="", help="RSS per process over time, events marked (PNG)")
    p.add_argument("--plot_only", action="store_true", help="only draw --plot from the CSVs")
    p.add_argument("--report", default="",
                   help="only print the markdown tables of this verdict JSON; run nothing")
    if argv is None:
        argv = sys.argv[1:]
    if "--report" in argv or any(x.startswith("--report=") for x in argv):
        argv = argv + ["--rss=-", "--events=-"]  # not read
    a = p.parse_args(argv)
    a.fault_list = [f for f in a.faults.split(",") if f]
    for f in a.fault_list:
        if f not in link_faults.SHORT_FAULTS:
            p.error(f"--faults: {f!r} is not one of {','.join(link_faults.SHORT_FAULTS)}")
    if not a.plot_only and not a.report and not a.json:
        p.error("--json is required")
    if a.end_guard <= 0:
        a.end_guard = max(20, a.iterations // 50)
    return a


# ---- The pure part: the schedule and the RSS figures (tests/tools/experiments).

def schedule(a):
    """Every planned event as (t_s, kind, target), sorted by time: kinds "worker_kill",
    "server_kill" and the link faults; the targets drawn or taken in turn."""
    rng = random.Random(a.seed)
    events = []
    t = a.worker_kill_every_s
    while t <= a.faults_for_s:
        events.append((t, "worker_kill", f"worker {rng.randrange(a.workers)}"))
        t += a.worker_kill_every_s
    k = 0
    t = a.server_kill_every_s + a.server_kill_offset_s
    while t <= a.faults_for_s:
        events.append((t, "server_kill", f"server {k % a.servers}"))
        k += 1
        t += a.server_kill_every_s
    targets = [x for x in TARGET_ORDER if int(x.split()[1]) < (
        a.workers if x.startswith("worker") else a.servers)]
    i = 0
    t = a.fault_every_s + a.fault_offset_s
    while t <= a.faults_for_s:
        # The target moves on one more every full cycle of faults, so that each fault
        # meets every target over the run.
        target = targets[(i + i // len(a.fault_list)) % len(targets)]
        events.append((t, a.fault_list[i % len(a.fault_list)], target))
        i += 1
        t += a.fault_every_s
    return sorted(events)


def rss_figures(samples):
    """Per run and process label: the first, last and largest RSS sampled (kB), the
    number of processes (pids) that had the label, and the same over the last of them."""
    out = {}
    for key in dict.fromkeys((s["run"], s["process"]) for s in samples):
        rows = [s for s in samples if (s["run"], s["process"]) == key]
        pids = list(dict.fromkeys(s["pid"] for s in rows))
        last = [s for s in rows if s["pid"] == pids[-1]]
        out[f"{key[0]}/{key[1]}"] = {
            "first_kb": rows[0]["rss_kb"], "last_kb": rows[-1]["rss_kb"],
            "max_kb": max(s["rss_kb"] for s in rows), "processes": len(pids),
            "last_process": {"pid": pids[-1], "from_s": last[0]["t_s"], "to_s": last[-1]["t_s"],
                             "first_kb": last[0]["rss_kb"], "last_kb": last[-1]["rss_kb"],
                             "max_kb": max(s["rss_kb"] for s in last)}}
    return out


# ---- Processes of a run.

def processes(run_dirs):
    """{(run, label): pid} of every p3_server / p3_worker writing into one of `run_dirs`
    ({run: folder}), from one pass over /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if not args or not args[0].endswith(("p3_server", "p3_worker")):
            continue
        for run, folder in run_dirs.items():
            for arg in args:
                if arg.startswith((f"--port_file={folder}/", f"--result_file={folder}/")):
                    name = os.path.basename(arg).split(".")[0]  # server_0, worker_1
                    found[(run, name)] = int(entry)
    return found


def plot(rss_path, events_path, out):
    """RSS per process over time, servers above and workers below (the soak's solid, the
    reference's dashed); worker kills dotted, server kills red dashed, link faults as
    shaded spans."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = csv_io.read_rows(rss_path)
    events = csv_io.read_rows(events_path)
    fig, axes = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    labels = sorted({r["process"] for r in rows})
    colors = {p: f"C{i}" for i, p in enumerate(labels)}
    for ax, role in zip(axes, ("server", "worker")):
        for run in ("soak", "reference"):
            for proc in [p for p in labels if p.startswith(role)]:
                pts = [(float(r["t_s"]) / 60, int(r["rss_kb"]) / 1024) for r in rows
                       if r["run"] == run and r["process"] == proc]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], color=colors[proc],
                            linewidth=1.2 if run == "soak" else 0.8,
                            linestyle="-" if run == "soak" else "--",
                            label=proc + (" (reference)" if run == "reference" else ""))
        for e in events:
            t = float(e["t_s"]) / 60
            if e["kind"] == "worker_kill":
                ax.axvline(t, color="grey", linestyle=":", linewidth=0.8)
            elif e["kind"] == "server_kill":
                ax.axvline(t, color="red", linestyle="--", linewidth=0.9)
            elif e["seconds"]:
                ax.axvspan(t, t + float(e["seconds"]) / 60, color="orange", alpha=0.35)
        ax.set_ylabel(f"{role}s' RSS (MiB)")
        ax.legend(fontsize=7, ncol=4, loc="lower right")
        ax.grid(alpha=0.3)
    axes[1].set_xlabel("minutes (dotted: worker SIGKILLed; red dashed: server SIGKILLed; "
                       "orange: link fault)")
    axes[0].set_title("Soak under faults: resident memory of every process")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print("wrote", out)


def report(verdict):
    """The verdict as markdown: the run, then the RSS of every process (MiB)."""
    mib = lambda kb: f"{kb / 1024:.1f}"  # noqa: E731
    done = verdict["events_done"]
    lines = [
        "| figure | value |", "|---|---|",
        f"| started | {verdict['started_utc']} |",
        f"| length | {verdict['soak_seconds'] / 60:.1f} min, {verdict['iterations']} iterations "
        f"({verdict['workers']} workers, {verdict['servers']} servers, batch "
        f"{verdict['batch_size']}, mode {verdict['mode']}) |",
        f"| workers killed | {done.get('worker_kill', 0)} |",
        f"| servers killed | {done.get('server_kill', 0)} |",
        "| link faults | " + ", ".join(f"{k} {done[k]}" for k in link_faults.SHORT_FAULTS
                                      if k in done) + " |",
        f"| events not done | {len(verdict['events_not_done'])} |",
        f"| launcher restarts | workers {verdict['launcher']['worker_restarts']}, every process "
        f"(a server died) {verdict['launcher']['server_restarts']} |",
        f"| exit, status | soak {verdict['soak_exit']} ({verdict['soak_status']}), reference "
        f"{verdict['reference_exit']} |",
        f"| param_l2 soak = reference | {verdict['soak_param_l2']!r} = "
        f"{verdict['reference_param_l2']!r} (every worker's equal too: {verdict['identical']}) |",
        f"| 1-min load average | {verdict['load1_before']} before, median "
        f"{verdict['load1_median']} during |",
        "", "| process | processes (pids) | RSS first | last | max | last process: first | "
        "last | max | lived (min) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in sorted(verdict["rss"].items()):
        lp = r["last_process"]
        lines.append(f"| {name} | {r['processes']} | {mib(r['first_kb'])} | {mib(r['last_kb'])} | "
                     f"{mib(r['max_kb'])} | {mib(lp['first_kb'])} | {mib(lp['last_kb'])} | "
                     f"{mib(lp['max_kb'])} | {(lp['to_s'] - lp['from_s']) / 60:.1f} |")
    return "\n".join(lines)


def launcher_counts(log_path):
    text = link_faults.read(log_path)
    return {"worker_restarts": text.count("restarting it with --rejoin"),
            "server_restarts": text.count("restarting every process from")}


class Soak:
    def __init__(self, a):
        self.a = a
        self.root = os.path.abspath(a.out)
        os.makedirs(self.root, exist_ok=True)
        self.injections = link_faults.Injections()
        self.live = []
        self.events = []
        self.samples = []

    def start(self, name, extra):
        a = self.a
        out_dir = os.path.join(self.root, name)
        ckpt = os.path.join(self.root, name + "_ckpt")
        config = os.path.join(self.root, name + ".textproto")
        with open(config, "w") as f:
            f.write(link_faults.config_text(a.mode, a.iterations, a.workers, a.servers,
                                            a.bandwidth_gbps, a.peer_timeout_s, a.batch_size,
                                            ckpt, a.checkpoint_every))
        proc, log = link_faults.launch(a, out_dir, config,
                                       [f"--set=training.log_every={a.log_every}", *extra])
        self.live.append(proc)
        return proc, log, out_dir

    def stop(self):
        errors = self.injections.undo_all()
        link_faults.stop_processes(self.live, 20)
        return errors

    def sample(self, t, dirs):
        for (run, name), pid in sorted(processes(dirs).items()):
            kb = soak.rss_kb(pid)
            if kb is not None:
                self.samples.append({"t_s": round(t, 1), "run": run, "process": name,
                                     "pid": pid, "rss_kb": kb})

    def fire(self, kind, target, t, proc, out_dir):
        """Kills or injects; returns the event row, or None when the target has no process
        now (it is being restarted): the caller tries again."""
        a = self.a
        role, index = target.split()
        if kind in ("worker_kill", "server_kill"):
            pid = processes({"soak": out_dir}).get(("soak", f"{role}_{index}"))
            if pid is None:
                return None
            os.kill(pid, signal.SIGKILL)
            return {"t_s": round(t, 1), "kind": kind, "target": target, "pid": pid,
                    "seconds": "", "note": ""}
        link = link_faults.link_of(proc.pid, link_faults.machine_of(target, a.workers))
        inject, undo, seconds = link_faults.fault_commands(kind, link, a)
        self.injections.inject(kind + f"@{t:.0f}", inject, undo)
        return {"t_s": round(t, 1), "kind": kind, "target": target, "pid": "",
                "seconds": seconds, "note": f"{link['ns']} {link['bridge_ns']}/{link['port']}"}

    def run(self):
        a = self.a
        plan = schedule(a)
        print(f"[soak] {len(plan)} events planned: "
              + ", ".join(f"{k} {sum(1 for e in plan if e[1] == k)}"
                          for k in dict.fromkeys(e[1] for e in plan)), flush=True)
        load_before = os.getloadavg()
        started_utc = datetime.datetime.utcnow().isoformat(timespec="seconds") + "Z"
        soak_proc, soak_log, soak_dir = self.start("soak", ["--max_restarts=1000000"])
        ref_proc, ref_log, ref_dir = self.start("reference", [])
        dirs = {"soak": soak_dir, "reference": ref_dir}
        start = time.monotonic()
        next_sample = start + 5
        due_undo = []  # (monotonic time, key, event row)
        loads = []
        while soak_proc.poll() is None:
            now = time.monotonic()
            t = now - start
            for item in [d for d in due_undo if d[0] <= now]:
                due_undo.remove(item)
                errors = self.injections.undo(item[1])
                if errors:
                    item[2]["note"] += " undo errors: " + "; ".join(errors)
            if now >= next_sample:
                next_sample += a.sample_s
                self.sample(t, dirs)
                loads.append(os.getloadavg()[0])
                it = runs.progress_iteration(runs.worker_log(soak_dir))
                ref_it = runs.progress_iteration(runs.worker_log(ref_dir))
                print(f"[soak] {t:6.0f} s  iteration {it} (reference {ref_it})  events "
                      f"{len(self.events)}  load {loads[-1]:.1f}", flush=True)
            if plan and plan[0][0] <= t:
                when, kind, target = plan[0]
                near_end = (runs.progress_iteration(runs.worker_log(soak_dir))
                            >= a.iterations - a.end_guard)
                if near_end:
                    print(f"[soak] {t:6.0f} s  {kind} on {target} skipped: near the end",
                          flush=True)
                    plan.pop(0)
                    continue
                try:
                    row = self.fire(kind, target, t, soak_proc, soak_dir)
                except Exception as e:  # noqa: BLE001 — recorded, the run goes on
                    row = {"t_s": round(t, 1), "kind": kind, "target": target, "pid": "",
                           "seconds": "", "note": f"failed: {type(e).__name__}: {e}"}
                if row is None and t < when + 60:
                    time.sleep(0.2)
                    continue  # no process just now: try again
                plan.pop(0)
                if row is None:
                    row = {"t_s": round(t, 1), "kind": kind, "target": target, "pid": "",
                           "seconds": "", "note": "skipped: no process for 60 s"}
                row["planned_s"] = when
                self.events.append(row)
                if row["seconds"]:
                    due_undo.append((now + float(row["seconds"]), kind + f"@{t:.0f}", row))
                print(f"[soak] {t:6.0f} s  {kind} {target} {row['pid']} {row['note']}",
                      flush=True)
            time.sleep(0.2)
        for _, key, row in due_undo:
            errors = self.injections.undo(key)
            if errors:
                row["note"] += " undo errors: " + "; ".join(errors)
        soak_rc = soak_proc.wait()
        soak_s = time.monotonic() - start
        soak_log.close()
        ref_rc = ref_proc.wait()
        ref_log.close()
        return self.verdict(soak_rc, ref_rc, soak_s, soak_dir, ref_dir, soak_log.name,
                            started_utc, load_before, loads)

    def verdict(self, soak_rc, ref_rc, soak_s, soak_dir, ref_dir, soak_log, started_utc,
                load_before, loads):
        a = self.a
        s, r = runs.summary_or_empty(soak_dir), runs.summary_or_empty(ref_dir)
        l2 = lambda x: [w.get("param_l2") for w in x.get("workers_results", [])]  # noqa: E731
        kinds = {}
        for e in self.events:
            if not e["note"].startswith(("skipped", "failed")):
                kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
        loads = sorted(loads)
        return {
            "started_utc": started_utc, "iterations": a.iterations, "workers": a.workers,
            "servers": a.servers, "batch_size": a.batch_size, "mode": a.mode,
            "checkpoint_every": a.checkpoint_every, "peer_timeout_s": a.peer_timeout_s,
            "soak_seconds": round(soak_s, 1), "events_done": kinds,
            "events_not_done": [e for e in self.events
                                if e["note"].startswith(("skipped", "failed"))],
            "launcher": launcher_counts(soak_log),
            "soak_exit": soak_rc, "reference_exit": ref_rc, "soak_status": s.get("status"),
            "soak_first_failure": s.get("first_failure"),
            "soak_param_l2": s.get("param_l2"), "reference_param_l2": r.get("param_l2"),
            "soak_workers_param_l2": l2(s), "reference_workers_param_l2": l2(r),
            "identical": (s.get("param_l2") is not None and s.get("param_l2") == r.get("param_l2")
                          and l2(s) == l2(r)),
            "load1_before": round(load_before[0], 2),
            "load1_median": round(loads[len(loads) // 2], 2) if loads else None,
            "rss": rss_figures(self.samples)}


def main(argv=None):
    a = parse_args(argv)
    if a.report:
        with open(a.report) as f:
            print(report(json.load(f)))
        return 0
    if a.plot_only:
        plot(a.rss, a.events, a.plot)
        return 0
    if os.geteuid() != 0:
        sys.exit("soak_faults: needs root (network namespaces, nft, tc)")
    s = Soak(a)

    def on_signal(signum, _frame):
        errors = s.stop()
        print(f"soak_faults: signal {signum}: faults undone, runs stopped"
              + (f" (errors: {errors})" if errors else ""), file=sys.stderr, flush=True)
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        verdict = s.run()
    finally:
        leftover = s.stop()
        if leftover:
            print(f"soak_faults: undo errors: {leftover}", file=sys.stderr)
        csv_io.write_rows(a.rss, s.samples, RSS_FIELDS)
        csv_io.write_rows(a.events, s.events, EVENT_FIELDS + ["planned_s"])
    with open(a.json, "w") as f:
        json.dump(verdict, f, indent=1)
    print(json.dumps({k: v for k, v in verdict.items() if k != "rss"}, indent=1))
    if a.plot:
        plot(a.rss, a.events, a.plot)
    ok = verdict["identical"] and verdict["soak_exit"] == 0 and verdict["reference_exit"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

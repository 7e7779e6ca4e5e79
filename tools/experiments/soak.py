#!/usr/bin/env python3
"""Soak test (issue 13): a long run of 4 workers + 2 servers under launch_cluster
--max_restarts, one worker SIGKILLed every --kill_every_s seconds (seeded choice), beside
an uninterrupted run of the same config started at the same time. Samples the RSS of every
process every --sample_s seconds. At the end: both runs must succeed with identical
param_l2, and the RSS of the long-lived processes (servers, workers never killed) is
reported as the growth between the first sample after --warmup_s and the last.

  bazel build //tools:launch_cluster
  R=docs/results/reliability
  /usr/bin/python3 tools/experiments/soak.py --iterations 7000 --csv $R/soak_rss.csv \\
      --kills $R/soak_kills.csv --json $R/soak.json --plot $R/soak_rss.png
  # the plot again from the CSVs, running nothing
  /usr/bin/python3 tools/experiments/soak.py --plot_only --csv $R/soak_rss.csv \\
      --kills $R/soak_kills.csv --plot $R/soak_rss.png

  # memory across 100 rejoins (issue 38): worker 0 is never killed, a kill every 6 s
  /usr/bin/python3 tools/experiments/soak.py --iterations 4000 --kill_every_s 6 \\
      --kill_ranks 1,2,3 --max_kills 100 --sample_s 3 --warmup_s 30 --csv ... --kills ... --json ...

Prints progress every sample; takes as long as the run (about 30 min at 7000 iterations
on 2 shared cores). The plot: the RSS of every process over time, the kills marked.
The verdict also gives, for each long-lived process, its RSS at the first sample after
the first kill's rejoin and at the last sample, and the kills in between
("rss_across_rejoins"): issue 38's "RSS after 100 rejoins within 1 MB of the RSS after
the first".
"""
import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io, runs  # noqa: E402

RSS_FIELDS = ["t_s", "process", "pid", "rss_kb"]
KILL_FIELDS = ["t_s", "rank", "pid"]


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def pids_of(pattern):
    out = subprocess.run(["pgrep", "-f", "--", pattern], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def plot(rss_path, kills_path, out):
    """Draws the RSS samples per process over time, with the kills marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = csv_io.read_rows(rss_path)
    kills = csv_io.read_rows(kills_path)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for proc in sorted({r["process"] for r in rows}):
        pts = [(float(r["t_s"]) / 60, int(r["rss_kb"]) / 1024) for r in rows if r["process"] == proc]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", linewidth=1, label=proc)
    for k in kills:
        ax.axvline(float(k["t_s"]) / 60, color="grey", linestyle=":", linewidth=0.8)
    ax.set_xlabel("minutes (dotted: a worker SIGKILLed)")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("Soak: resident memory of every process")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


def plot_growth(rss_path, kills_path, out, warmup_s):
    """Draws the long-lived processes' RSS (servers, workers never killed, and the
    reference run's, dashed) as the change since the first sample after warm-up, in MiB."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = csv_io.read_rows(rss_path)
    kills = csv_io.read_rows(kills_path)
    killed = {int(k["rank"]) for k in kills}
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for proc in sorted({r["process"] for r in rows}):
        if proc.startswith("worker_") and int(proc.split("_")[1]) in killed:
            continue
        pts = [(float(r["t_s"]), int(r["rss_kb"])) for r in rows
               if r["process"] == proc and float(r["t_s"]) >= warmup_s]
        if len(pts) < 2:
            continue
        ax.plot([t / 60 for t, _ in pts], [(kb - pts[0][1]) / 1024 for _, kb in pts],
                linestyle="--" if proc.startswith("ref_") else "-", linewidth=1.2, label=proc)
    for k in kills:
        ax.axvline(float(k["t_s"]) / 60, color="grey", linestyle=":", linewidth=0.5)
    ax.axhline(1, color="red", linewidth=0.8)
    ax.set_xlabel("minutes (dotted: a worker SIGKILLed; dashed lines: the run without kills)")
    ax.set_ylabel("RSS change since warm-up (MiB)")
    ax.set_title("Long-lived processes while their peers are killed and rejoin (red: +1 MiB)")
    ax.legend(fontsize=7, ncol=3)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print("wrote", out)


def growth(samples, kills, warmup_s):
    """RSS growth of the long-lived processes (servers, workers never killed) between the
    first sample after warm-up and the last."""
    killed = {k["rank"] for k in kills}
    out = {}
    for proc in sorted({x["process"] for x in samples}):
        if proc.startswith("worker_") and int(proc.split("_")[1]) in killed:
            continue  # not long-lived: its processes were replaced
        rows = [x for x in samples if x["process"] == proc and x["t_s"] >= warmup_s]
        if len(rows) >= 2:
            out[proc] = {"after_warmup_kb": rows[0]["rss_kb"], "last_kb": rows[-1]["rss_kb"],
                         "growth_kb": rows[-1]["rss_kb"] - rows[0]["rss_kb"],
                         "from_s": rows[0]["t_s"], "to_s": rows[-1]["t_s"]}
    return out


def across_rejoins(samples, kills, settle_s, warmup_s):
    """RSS of the long-lived processes from the first sample --settle_s after the first
    kill (its rejoin done) and not before warm-up, to the first sample --settle_s after
    the last kill (or the last sample), with the kills between the two samples; also the
    last sample and the largest. The reference run's processes (ref_*), if sampled, over
    the same window."""
    if not kills:
        return {}
    killed = {k["rank"] for k in kills}
    first = max(kills[0]["t_s"] + settle_s, warmup_s)
    last = kills[-1]["t_s"] + settle_s
    out = {}
    for proc in sorted({x["process"] for x in samples}):
        if proc.startswith("worker_") and int(proc.split("_")[1]) in killed:
            continue
        rows = [x for x in samples if x["process"] == proc and x["t_s"] >= first]
        if len(rows) < 2:
            continue
        end = next((x for x in rows if x["t_s"] >= last), rows[-1])
        window = [x for x in rows if x["t_s"] <= end["t_s"]]
        out[proc] = {"after_first_rejoin_kb": rows[0]["rss_kb"],
                     "after_last_rejoin_kb": end["rss_kb"],
                     "growth_kb": end["rss_kb"] - rows[0]["rss_kb"],
                     "max_kb": max(x["rss_kb"] for x in window),
                     "last_kb": rows[-1]["rss_kb"],
                     "kills_between": sum(1 for k in kills
                                          if rows[0]["t_s"] < k["t_s"] <= end["t_s"]),
                     "from_s": rows[0]["t_s"], "to_s": end["t_s"]}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--launcher", default="bazel-bin/tools/launch_cluster")
    p.add_argument("--config", default="configs/synthetic_smoke.textproto")
    p.add_argument("--iterations", type=int, default=7000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--servers", type=int, default=2)
    p.add_argument("--kill_every_s", type=float, default=180)
    p.add_argument("--sample_s", type=float, default=30)
    p.add_argument("--warmup_s", type=float, default=120)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--launcher_arg", action="append", default=[],
                   help="passed on to both launchers, e.g. --launcher_arg=--worker_binary=/tmp/w")
    p.add_argument("--kill_ranks", default="",
                   help="comma-separated worker ranks that may be killed (default: all); the "
                        "others live through the run, to measure a worker whose peers rejoin")
    p.add_argument("--max_kills", type=int, default=0,
                   help="stop killing after this many (0: no limit); the run then goes on")
    p.add_argument("--settle_s", type=float, default=10,
                   help="rss_across_rejoins starts this long after the first kill, and not "
                        "before --warmup_s")
    p.add_argument("--sample_reference", action="store_true",
                   help="also sample the reference run's processes (as ref_server_0, ...): "
                        "what grows without any kill")
    p.add_argument("--out", default="/tmp/p3_soak")
    p.add_argument("--csv", required=True, help="RSS samples")
    p.add_argument("--kills", required=True, help="kills made")
    p.add_argument("--json", help="the verdict (required unless --plot_only)")
    p.add_argument("--plot", default="", help="draw the RSS samples and kills here (PNG)")
    p.add_argument("--plot_only", action="store_true",
                   help="only draw --plot from --csv and --kills; run nothing")
    p.add_argument("--plot_growth_only", default="",
                   help="only draw the long-lived processes' RSS change since warm-up from "
                        "--csv and --kills into this PNG; run nothing")
    p.add_argument("--rss_only", action="store_true",
                   help="only compute rss_long_lived and rss_across_rejoins from --csv and "
                        "--kills (with --warmup_s, --settle_s) into --json; run nothing")
    a = p.parse_args()
    if a.rss_only:
        num = lambda r: {k: (v if k == "process" else float(v) if k == "t_s" else int(v))
                         for k, v in r.items()}
        samples = [num(r) for r in csv_io.read_rows(a.csv)]
        kills = [num(r) for r in csv_io.read_rows(a.kills)]
        out = {"warmup_s": a.warmup_s, "settle_s": a.settle_s,
               "rss_long_lived": growth(samples, kills, a.warmup_s),
               "rss_across_rejoins": across_rejoins(samples, kills, a.settle_s, a.warmup_s)}
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)
        print(json.dumps(out, indent=1))
        return 0
    if a.plot_only:
        if not a.plot:
            p.error("--plot_only needs --plot")
        plot(a.csv, a.kills, a.plot)
        return 0
    if a.plot_growth_only:
        plot_growth(a.csv, a.kills, a.plot_growth_only, a.warmup_s)
        return 0
    if not a.json:
        p.error("--json is required")
    rng = random.Random(a.seed)
    ranks = ([int(r) for r in a.kill_ranks.split(",")] if a.kill_ranks
             else list(range(a.workers)))
    common = [a.launcher, f"--config={a.config}", f"--set=cluster.workers={a.workers}",
              f"--set=cluster.servers={a.servers}", f"--set=training.iterations={a.iterations}",
              "--set=training.log_every=100", "--set=cluster.peer_timeout_s=30",
              "--set=output.save_model=false"] + a.launcher_arg
    started = {}
    for name, extra in (("soak", [f"--max_restarts={10 ** 6}"]), ("reference", [])):
        out_dir = os.path.join(a.out, name)
        log = open(os.path.join(a.out, name + ".out"), "w") if os.makedirs(a.out, exist_ok=True) is None else None
        started[name] = (subprocess.Popen(common + extra + [f"--set=output_dir={out_dir}"],
                                       stdout=log, stderr=subprocess.STDOUT), out_dir)
    start = time.time()
    soak_dir = started["soak"][1]
    kills, samples = [], []
    next_kill = start + a.kill_every_s
    next_sample = start + 5
    while started["soak"][0].poll() is None:
        now = time.time()
        if now >= next_sample:
            next_sample += a.sample_s
            sampled = [("", soak_dir)] + ([("ref_", started["reference"][1])]
                                          if a.sample_reference else [])
            for prefix, run_dir in sampled:
                for role, count in (("server", a.servers), ("worker", a.workers)):
                    for i in range(count):
                        flag = (f"--server_index={i} --port_file={run_dir}/ports/server_{i}.port"
                                if role == "server"
                                else f"--result_file={run_dir}/results/worker_{i}.json")
                        for pid in pids_of(flag):
                            kb = rss_kb(pid)
                            if kb is not None:
                                samples.append({"t_s": round(now - start, 1),
                                                "process": f"{prefix}{role}_{i}",
                                                "pid": pid, "rss_kb": kb})
            print(f"[soak] {now - start:6.0f} s  kills {len(kills)}  samples {len(samples)}",
                  flush=True)
        if now >= next_kill and (a.max_kills <= 0 or len(kills) < a.max_kills):
            next_kill += a.kill_every_s
            rank = rng.choice(ranks)
            pids = pids_of(f"--result_file={soak_dir}/results/worker_{rank}.json")
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                kills.append({"t_s": round(now - start, 1), "rank": rank, "pid": pids[0]})
                print(f"[soak] {now - start:6.0f} s  SIGKILL worker {rank} (pid {pids[0]})", flush=True)
        time.sleep(0.5)
    soak_rc = started["soak"][0].wait()
    soak_s = time.time() - start
    ref_rc = started["reference"][0].wait()

    csv_io.write_rows(a.csv, samples, RSS_FIELDS)
    csv_io.write_rows(a.kills, kills, KILL_FIELDS)
    s, r = runs.summary_or_empty(soak_dir), runs.summary_or_empty(started["reference"][1])
    verdict = {"iterations": a.iterations, "workers": a.workers, "servers": a.servers,
               "soak_seconds": round(soak_s, 1), "kills": len(kills), "soak_exit": soak_rc,
               "reference_exit": ref_rc, "soak_status": s.get("status"),
               "soak_param_l2": s.get("param_l2"), "reference_param_l2": r.get("param_l2"),
               "identical": s.get("param_l2") is not None and s.get("param_l2") == r.get("param_l2"),
               "rss_long_lived": growth(samples, kills, a.warmup_s),
               "rss_across_rejoins": across_rejoins(samples, kills, a.settle_s, a.warmup_s)}
    with open(a.json, "w") as f:
        json.dump(verdict, f, indent=1)
    print(json.dumps(verdict, indent=1))
    if a.plot:
        plot(a.csv, a.kills, a.plot)
    return 0 if verdict["identical"] and soak_rc == 0 and ref_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A server that stops reading, mid-run: do the worker's other links go on?

One worker trains ResNet-50 (configs/bench/resnet50.textproto's model, batch and optimizer)
on two servers over loopback streams (no shared memory: both streams share the worker's
link, its one priority order and credit 0). After iteration --stop_after, server 1 is stopped with SIGSTOP
for --stop_s seconds (at a random offset within one iteration, so the stop lands in every
phase of an iteration), then continued. The worker's trace says what it wrote to each
server while server 1 was stopped. Trials alternate scheduling.stalled_write_s between
the values of --stalled_write (default 1, the default, and 0 = never: a stalled write
holds the link, as before 2026-12-05).

Per trial: MB written to server 0 and to server 1 during the stop; of the iteration whose
gradients were on their way at the stop, the MB of server 0's gradients written during
the stop and those held back until after the SIGCONT (what the stopped peer cost the other
link); the seconds from the SIGCONT to the worker's next PROGRESS line; whether the run
ended ok, and param_l2 (equal across trials: a stall changes timing only).

--forever: the stopped process is never continued (server 1, or with --victim worker
worker 1 of two workers). Per trial: the seconds from SIGSTOP until every other process
has exited, and each one's error line: the bound is cluster.peer_timeout_s (--peer_timeout).

  bazel build //server:p3_server //worker:p3_worker
  /usr/bin/python3 tools/experiments/stalled_peer.py --trials 4 \\
      --csv docs/results/reliability/stalled_peer.csv
  /usr/bin/python3 tools/experiments/stalled_peer.py --forever --victim worker --trials 3 \\
      --peer_timeout 5 --csv docs/results/reliability/stalled_peer_forever.csv
"""
import argparse
import csv
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = """name: "stalled_peer"
mode: "p3"
cluster {{ workers: {workers} servers: 2 peer_timeout_s: {peer_timeout} stall_report_s: 2 }}
model {{ name: "resnet50" num_classes: 1000 image_size: 32 in_channels: 3 }}
data {{ dataset: "synthetic" synthetic_size: 256 }}
optimizer {{ name: "sgd" lr: 0.001 momentum: 0.9 weight_decay: 1e-4 }}
training {{ batch_size: 8 iterations: {iterations} log_every: 1 evaluate: false threads: 1 }}
scheduling {{ slice_params: 40000 stalled_write_s: {stalled_write} shared_memory: false }}
output {{ save_model: false }}
"""


def wait_for(predicate, timeout_s, what):
  deadline = time.time() + timeout_s
  while time.time() < deadline:
    if predicate():
      return
    time.sleep(0.02)
  raise RuntimeError(f"timed out after {timeout_s} s waiting for {what}")


def progress_lines(path):
  with open(path, errors="replace") as f:
    return [l for l in f if l.startswith("PROGRESS ")]


def send_events(trace_path):
  """(server, name, iteration, start_us, end_us, bytes) of every send of the worker."""
  with open(trace_path) as f:
    trace = json.load(f)
  events = trace["traceEvents"] if isinstance(trace, dict) else trace
  tracks = {e["tid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name"}
  sends = []
  for e in events:
    if e.get("ph") != "X" or e.get("cat") != "send":
      continue
    track = tracks.get(e["tid"], "")
    if not track.startswith("send to server "):
      continue
    a = e.get("args", {})
    sends.append((int(track.rsplit(" ", 1)[1]), e.get("name", ""), a.get("iteration"),
                  e["ts"], e["ts"] + e.get("dur", 0), a.get("bytes", 0)))
  return sends


def sends_by_server(trace_path, start_us, end_us):
  """MB of messages the worker finished writing to each server within [start, end]."""
  mb = {0: 0.0, 1: 0.0}
  for server, _, _, _, end, size in send_events(trace_path):
    if start_us <= end <= end_us:
      mb[server] += size / 1e6
  return mb


def held_back(trace_path, stop_us, cont_us):
  """The iteration whose gradients were on their way during the stop (the newest one a
  gradient send had started of before the SIGCONT), and MB of server 0's gradients of it
  written during the stop and after the SIGCONT: the second is what the stopped server held
  back on the other link. None when no gradient had started."""
  sends = [s for s in send_events(trace_path) if s[1].startswith("gradient ")]
  started = [s[2] for s in sends if s[3] < cont_us]
  if not started:
    return None, 0.0, 0.0
  it = max(started)
  mine = [s for s in sends if s[0] == 0 and s[2] == it]
  during = sum(s[5] for s in mine if stop_us <= s[4] <= cont_us) / 1e6
  after = sum(s[5] for s in mine if s[4] > cont_us) / 1e6
  return it, during, after


def start_cluster(bin_dir, workers, tmp, cfg, trace_worker0):
  """Two servers and `workers` workers; returns (servers, workers) as Popen lists."""
  servers = []
  for s in range(2):
    port = os.path.join(tmp, f"s{s}.port")
    if os.path.exists(port):
      os.remove(port)
    servers.append(subprocess.Popen(
        [f"{bin_dir}/server/p3_server", f"--config={cfg}", f"--server_index={s}",
         f"--port_file={port}"], stdout=open(os.path.join(tmp, f"server_{s}.log"), "w"),
        stderr=subprocess.STDOUT))
  for s in range(2):
    port = os.path.join(tmp, f"s{s}.port")
    wait_for(lambda: os.path.exists(port) and os.path.getsize(port) > 0, 30, "ports")
  addresses = ",".join("127.0.0.1:" + open(os.path.join(tmp, f"s{s}.port")).read().strip()
                       for s in range(2))
  procs = []
  for r in range(workers):
    extra = [f"--trace_file={tmp}/worker.json", f"--result_file={tmp}/worker.result.json"]
    procs.append(subprocess.Popen(
        [f"{bin_dir}/worker/p3_worker", f"--config={cfg}", f"--rank={r}",
         f"--servers={addresses}"] + (extra if r == 0 and trace_worker0 else []),
        stdout=open(os.path.join(tmp, f"worker_{r}.log"), "w"), stderr=subprocess.STDOUT))
  return servers, procs


def stop_all(procs):
  """Ends what is left of a trial's processes (only ours), stopped ones included."""
  for p in procs:
    if p.poll() is None:
      p.send_signal(signal.SIGCONT)
      p.kill()
      p.wait()


def last_error(path):
  with open(path, errors="replace") as f:
    lines = [l.strip() for l in f if l.strip() and not l.startswith(("PROGRESS", "[stall]"))]
  return lines[-1][:300] if lines else ""


def trial_forever(bin_dir, args, tmp):
  """The victim is never continued: how long until the others end, and what they say."""
  workers = 2 if args.victim == "worker" else 1
  cfg = os.path.join(tmp, "c.textproto")
  with open(cfg, "w") as f:
    f.write(CONFIG.format(iterations=200, stalled_write=1, workers=workers,
                          peer_timeout=args.peer_timeout))
  servers, procs = start_cluster(bin_dir, workers, tmp, cfg, trace_worker0=False)
  everyone = servers + procs
  try:
    log0 = os.path.join(tmp, "worker_0.log")
    wait_for(lambda: len(progress_lines(log0)) >= args.stop_after, 300, "progress")
    victim = procs[1] if args.victim == "worker" else servers[1]
    victim.send_signal(signal.SIGSTOP)
    stopped = time.time()
    others = [p for p in everyone if p is not victim]
    wait_for(lambda: all(p.poll() is not None for p in others), 10 * args.peer_timeout + 60,
             "the others to end")
    ended_s = time.time() - stopped
    names = [f"server_{s}" for s in range(2)] + [f"worker_{r}" for r in range(workers)]
    victim_name = "worker_1" if args.victim == "worker" else "server_1"
    errors = {n: last_error(os.path.join(tmp, n + ".log")) for n in names if n != victim_name}
    return {"victim": victim_name, "peer_timeout_s": args.peer_timeout,
            "others_ended_after_s": round(ended_s, 2),
            "all_failed": all(p.returncode != 0 for p in others),
            "errors": " | ".join(f"{n}: {e}" for n, e in errors.items())}
  finally:
    stop_all(everyone)


def trial(bin_dir, stalled_write, args, rng, tmp):
  cfg = os.path.join(tmp, "c.textproto")
  with open(cfg, "w") as f:
    f.write(CONFIG.format(iterations=args.iterations, stalled_write=stalled_write, workers=1,
                          peer_timeout=args.peer_timeout))
  servers, workers = start_cluster(bin_dir, 1, tmp, cfg, trace_worker0=True)
  procs = servers + workers
  worker = workers[0]
  log = os.path.join(tmp, "worker_0.log")
  trace = os.path.join(tmp, "worker.json")
  result = os.path.join(tmp, "worker.result.json")
  try:
    wait_for(lambda: len(progress_lines(log)) >= args.stop_after, 300, "progress")
    lines = progress_lines(log)
    iteration_s = 1.0
    if len(lines) >= 2:
      # PROGRESS lines carry no time; estimate one iteration from the wall clock instead.
      t0 = time.time()
      n0 = len(lines)
      wait_for(lambda: len(progress_lines(log)) > n0, 60, "one more iteration")
      iteration_s = time.time() - t0
    time.sleep(rng.uniform(0, iteration_s))
    procs[1].send_signal(signal.SIGSTOP)
    stopped = time.time()
    n_at_cont = None
    time.sleep(args.stop_s)
    n_at_cont = len(progress_lines(log))
    procs[1].send_signal(signal.SIGCONT)
    continued = time.time()
    wait_for(lambda: len(progress_lines(log)) > n_at_cont or worker.poll() is not None, 120,
             "progress after SIGCONT")
    resumed_s = time.time() - continued
    code = worker.wait(timeout=300)
    for p in procs[:2]:
      p.wait(timeout=60)
    mb = sends_by_server(trace, stopped * 1e6, continued * 1e6)
    it, during, after = held_back(trace, stopped * 1e6, continued * 1e6)
    l2 = json.load(open(result)).get("param_l2") if code == 0 else None
    return {"stalled_write_s": stalled_write, "ok": code == 0, "mb_to_server0": round(mb[0], 1),
            "mb_to_server1": round(mb[1], 1), "iteration_at_stop": it,
            "server0_mb_during_stop": round(during, 1), "server0_mb_held_back": round(after, 1),
            "progress_after_cont_s": round(resumed_s, 2),
            "iteration_s": round(iteration_s, 2), "param_l2": l2}
  finally:
    stop_all(procs)


def write_csv(path, rows):
  if not path or not rows:
    return
  with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--trials", type=int, default=4, help="trials per setting")
  ap.add_argument("--stalled_write", default="1,0", help="values of stalled_write_s")
  ap.add_argument("--stop_s", type=float, default=5)
  ap.add_argument("--stop_after", type=int, default=4, help="iterations before the stop")
  ap.add_argument("--iterations", type=int, default=9)
  ap.add_argument("--seed", type=int, default=1)
  ap.add_argument("--peer_timeout", type=float, default=60, help="cluster.peer_timeout_s")
  ap.add_argument("--forever", action="store_true", help="never continue the stopped process")
  ap.add_argument("--victim", choices=["server", "worker"], default="server",
                  help="with --forever: stop server 1, or worker 1 of two")
  ap.add_argument("--csv", default="")
  ap.add_argument("--bin_dir", default=os.path.join(ROOT, "bazel-bin"))
  args = ap.parse_args()
  rng = random.Random(args.seed)
  settings = [float(v) for v in args.stalled_write.split(",")]
  rows = []
  if args.forever:
    for t in range(args.trials):
      with tempfile.TemporaryDirectory() as tmp:
        row = dict(trial=t, **trial_forever(args.bin_dir, args, tmp))
      row["load1"] = round(os.getloadavg()[0], 1)
      rows.append(row)
      print(json.dumps(row), flush=True)
    write_csv(args.csv, rows)
    return 0 if all(r["all_failed"] for r in rows) else 1
  for t in range(args.trials):
    for v in settings:
      with tempfile.TemporaryDirectory() as tmp:
        row = dict(trial=t, **trial(args.bin_dir, v, args, rng, tmp))
      row["load1"] = round(os.getloadavg()[0], 1)
      rows.append(row)
      print(json.dumps(row), flush=True)
  write_csv(args.csv, rows)
  print(f"\n{'stalled_write_s':>15} {'runs':>4} {'ok':>3} {'pending to server 0':>20} "
        f"{'held back (MB, each run)':>34} {'s to progress after SIGCONT (median)':>37}")
  for v in settings:
    sel = [r for r in rows if r["stalled_write_s"] == v]
    pending = sum(1 for r in sel if r["server0_mb_during_stop"] + r["server0_mb_held_back"] > 0)
    held = ", ".join(f"{r['server0_mb_held_back']:g}" for r in sel)
    med = sorted(r["progress_after_cont_s"] for r in sel)[len(sel) // 2]
    print(f"{v:>15g} {len(sel):>4} {sum(r['ok'] for r in sel):>3} "
          f"{str(pending) + ' runs':>20} {held:>34} {med:>37}")
  return 0


if __name__ == "__main__":
  sys.exit(main())

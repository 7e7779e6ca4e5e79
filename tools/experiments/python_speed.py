#!/usr/bin/python3
"""Python workers against C++ workers (docs/results/python/python_speed.md).

Each trial starts 2 p3_servers and 2 workers on loopback — either C++ p3_worker or Python
workers (`import p3`: the zoo's small_cnn as a PyTorch twin, fed the C++ trainer's own
batches through p3._p3.TrainingData) — and measures each worker's training throughput over
the iterations after --warmup: the whole cluster's samples / the summed iteration times
(C++: p3_worker's records CSV; Python: measured the same way, from before the forward pass
to after step() and the loss's value, leaving out the batch's loading). Trials alternate C++ / Python (interleaved, so that the
machine's load hits both alike); the table gives each trial's mean over its workers and
the median per kind, and Python ÷ C++ of the medians. Run from the repository root after

  bazel build //server:p3_server //worker:p3_worker //worker/python:p3
  /usr/bin/python3 tools/experiments/python_speed.py --trials 3 \\
      --csv docs/results/python/python_speed.csv
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time

BIN = "bazel-bin"
CONFIG = """name: "python_speed"
mode: "{mode}"
cluster {{ workers: 2 servers: 2 peer_timeout_s: 60 }}
model {{ name: "small_cnn" }}
data {{ dataset: "synthetic" synthetic_size: 4096 }}
training {{ batch_size: {batch} iterations: {iterations} evaluate: false threads: 1
           log_every: 1000 }}
optimizer {{ name: "sgd" lr: 0.05 momentum: 0.9 }}
output {{ save_model: false }}
output_dir: "{out}"
"""


def python_worker(iterations, warmup, out_file):
    """The Python worker's loop (run with the P3_* environment)."""
    import torch
    from torch import nn
    import p3
    from p3 import _p3
    torch.set_num_threads(1)
    ctx = p3.init()

    class SmallCnn(nn.Module):  # models/small_cnn.cc
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(),
                                       nn.MaxPool2d(2))
            self.conv2 = nn.Sequential(nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(),
                                       nn.MaxPool2d(2))
            self.fc1 = nn.Sequential(nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU())
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc2(self.fc1(self.conv2(self.conv1(x))))

    model = p3.distribute(SmallCnn())
    data = _p3.TrainingData(config=ctx.config, overrides=[], rank=ctx.rank)
    times = []
    for it in range(iterations):
        x, y = data.batch(it)
        start = time.perf_counter()  # as p3_worker: the step, not the batch's loading
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        model.step()
        loss.item()
        times.append(time.perf_counter() - start)
    model.finish()
    with open(out_file, "w") as f:
        f.write("\n".join(str(t) for t in times[warmup:]) + "\n")


def start_servers(config, folder):
    procs, addresses = [], []
    for s in range(2):
        port = os.path.join(folder, "s{}.port".format(s))
        log = open(os.path.join(folder, "server_{}.log".format(s)), "w")
        procs.append(subprocess.Popen(
            [BIN + "/server/p3_server", "--config=" + config, "--server_index={}".format(s),
             "--port_file=" + port], stdout=log, stderr=subprocess.STDOUT))
        while not (os.path.exists(port) and os.path.getsize(port) > 0):
            time.sleep(0.05)
        with open(port) as f:
            addresses.append("127.0.0.1:" + f.read().strip())
    return procs, addresses


def trial(kind, args):
    folder = tempfile.mkdtemp(prefix="p3_python_speed.")
    config = os.path.join(folder, "c.textproto")
    with open(config, "w") as f:
        f.write(CONFIG.format(mode=args.mode, batch=args.batch, iterations=args.iterations,
                              out=folder))
    servers, addresses = start_servers(config, folder)
    workers = []
    for r in range(2):
        if kind == "c++":
            cmd = [BIN + "/worker/p3_worker", "--config=" + config, "--rank={}".format(r),
                   "--servers=" + ",".join(addresses),
                   "--records_file=" + os.path.join(folder, "records_{}.csv".format(r))]
            env = dict(os.environ)
        else:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker",
                   "--iterations={}".format(args.iterations), "--warmup={}".format(args.warmup),
                   "--times_file=" + os.path.join(folder, "times_{}.txt".format(r))]
            env = dict(os.environ, P3_RANK=str(r), P3_WORLD_SIZE="2",
                       P3_SERVERS=",".join(addresses), P3_CONFIG=config,
                       PYTHONPATH=BIN + "/worker/python", OMP_NUM_THREADS="1")
        workers.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE))
    for w in workers:
        _, err = w.communicate(timeout=600)
        if w.returncode != 0:
            for s in servers:
                s.kill()
            raise RuntimeError("{} worker failed: {} (server logs in {})".format(
                kind, err.decode()[-2000:], folder))
    for s in servers:
        s.wait(timeout=60)
    rates = []
    global_batch = 2 * args.batch
    for r in range(2):
        if kind == "c++":
            with open(os.path.join(folder, "records_{}.csv".format(r))) as f:
                rows = list(csv.DictReader(f))
            times = [float(row["iteration_seconds"]) for row in rows[args.warmup:]]
        else:
            with open(os.path.join(folder, "times_{}.txt".format(r))) as f:
                times = [float(t) for t in f.read().split()]
        rates.append(global_batch * len(times) / sum(times))
    return statistics.mean(rates)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="per kind")
    parser.add_argument("--iterations", type=int, default=80)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--batch", type=int, default=32, help="per worker")
    parser.add_argument("--mode", default="p3")
    parser.add_argument("--csv", default="")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--times_file", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        python_worker(args.iterations, args.warmup, args.times_file)
        return
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    rows = []
    for t in range(args.trials):
        for kind in ("c++", "python"):
            load = os.getloadavg()[0]
            # A trial whose process died from outside (a shared machine) is run again.
            for retries in range(3):
                try:
                    rate = trial(kind, args)
                    break
                except RuntimeError as e:
                    print("trial {} {} failed, again: {}".format(t, kind, e), flush=True)
            else:
                raise SystemExit("trial {} {} failed 3 times".format(t, kind))
            rows.append(dict(trial=t, kind=kind, samples_per_second=round(rate, 1),
                             load_average_1min=round(load, 2), retries=retries,
                             mode=args.mode,
                             model="small_cnn", batch_per_worker=args.batch,
                             iterations=args.iterations, warmup=args.warmup,
                             link="loopback", commit=commit,
                             date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
            print("trial {} {:7s} {:8.1f} samples/s (load {:.1f})".format(
                t, kind, rate, load), flush=True)
    med = {k: statistics.median(r["samples_per_second"] for r in rows if r["kind"] == k)
           for k in ("c++", "python")}
    print("median: c++ {:.1f}, python {:.1f} samples/s; python / c++ = {:.3f}".format(
        med["c++"], med["python"], med["python"] / med["c++"]))
    if args.csv:
        os.makedirs(os.path.dirname(args.csv), exist_ok=True)
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()

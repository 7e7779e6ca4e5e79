#!/usr/bin/python3
"""The kernel's send buffer of p3's TCP connections during a cluster run: the input of the
simulator's Calibration::kernel_buffer_bytes (issue 36; docs/results/simulator/simulator.md,
"The kernel's send buffer").

Runs one `tools/bench_throughput.py run` point (a mode, a model, one rate) and, while it
runs, samples every emulated machine's sockets that belong to its p3_worker and p3_server
processes with `ss -tmipn` inside the machine's namespace: each established connection's
send buffer (skmem `tb`, sk_sndbuf, which Linux autotunes up to net.ipv4.tcp_wmem's
maximum), the bytes queued in it (`w`, sk_wmem_queued, counted as the kernel allocates
them), the payload not yet sent (`notsent`) and sent but not acknowledged (`unacked`
segments x `mss`). A write through gRPC (write-through) completes once its last byte is in
that buffer, so the payload the buffer holds when full is what the simulator's kernel
buffer stands for. Rate 0 (loopback) has no namespaces and is not sampled.

  sudo /usr/bin/python3 tools/experiments/socket_buffers.py --mode=baseline --rate=3 \\
      --csv=docs/results/simulator/socket_buffers_2026-12-05.csv
  /usr/bin/python3 tools/experiments/socket_buffers.py --report --csv=F

One CSV row per sample and connection (`network` 1: across the shaped link); --report
prints, per point and process kind, over the connections across the link, the median and
max of `tb` and of the payload queued (notsent + unacked x mss), and the median of the
payload queued per byte of `w` while it is at least half of `tb` (how much of the buffer
holds payload when it is full).
"""
import argparse
import csv
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIELDS = ["round", "mode", "model", "rate_gbps", "t_s", "namespace", "process", "local", "peer",
          "network", "tb", "w", "notsent", "unacked", "mss", "cwnd", "load1"]


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def descends_from(pid, root):
    """Whether process `pid` is `root` or one of its descendants."""
    while pid > 1:
        if pid == root:
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


SKMEM = re.compile(r"skmem:\(([^)]*)\)")
USERS = re.compile(r'users:\(\("([^"]+)",pid=(\d+)')


def sample(ns, root):
    """The p3 connections of namespace `ns` whose process descends from `root`."""
    p = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tmipnH", "state", "established"],
                       capture_output=True, text=True)
    return parse(p.stdout, ns, lambda pid: descends_from(pid, root))


def parse(text_out, ns, ours):
    """The rows of `ss -tmipnH state established` output whose process is a p3_worker or
    p3_server for which ours(pid) holds."""
    rows = []
    lines = text_out.splitlines()
    # ss prints a connection on one line, its -m/-i details on the next (indented) ones.
    conns, cur = [], None
    for line in lines:
        if line and not line[0].isspace():
            cur = [line]
            conns.append(cur)
        elif cur is not None:
            cur.append(line)
    for c in conns:
        text = " ".join(c)
        u = USERS.search(text)
        m = SKMEM.search(text)
        if not u or not m or u.group(1) not in ("p3_worker", "p3_server"):
            continue
        if not ours(int(u.group(2))):
            continue
        sk = dict((k, int(v)) for k, v in re.findall(r"([a-z]+)(\d+)", m.group(1)))
        head = c[0].split()
        def num(key):
            x = re.search(rf"\b{key}:(\d+)", text)
            return int(x.group(1)) if x else 0
        # A connection between two emulated machines crosses the shaped link; one within a
        # machine (a colocated pair's stream, whose values go through shared memory) not.
        network = head[2].rsplit(":", 1)[0] != head[3].rsplit(":", 1)[0]
        rows.append({"namespace": ns, "process": u.group(1), "local": head[2], "peer": head[3],
                     "network": int(network),
                     "tb": sk.get("tb", 0), "w": sk.get("w", 0), "notsent": num("notsent"),
                     "unacked": num("unacked"), "mss": num("mss"), "cwnd": num("cwnd")})
    return rows


def measure(a):
    write_header = not os.path.exists(a.csv)
    out = open(a.csv, "a", newline="")
    w = csv.DictWriter(out, fieldnames=FIELDS)
    if write_header:
        w.writeheader()
    before = set(namespaces())
    cmd = [sys.executable, os.path.join(ROOT, "tools/bench_throughput.py"), "run",
           f"--model={a.model}", f"--bandwidths={a.rate}", f"--modes={a.mode}", "--runs=1",
           f"--out={a.out}"]
    if a.iterations:
        cmd.append(f"--iterations={a.iterations}")
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    n = 0
    while run.poll() is None:
        for ns in set(namespaces()) - before:
            for r in sample(ns, run.pid):
                with open("/proc/loadavg") as f:
                    load1 = f.read().split()[0]
                w.writerow(dict(r, round=a.round, mode=a.mode, model=a.model, rate_gbps=a.rate,
                                t_s=round(time.time() - t0, 3), load1=load1))
                n += 1
        time.sleep(a.interval)
    print(run.stdout.read().strip().splitlines()[-1], flush=True)
    print(f"{n} samples of {a.mode} {a.model} at {a.rate} Gbit/s into {a.csv}", flush=True)


def report(a):
    """Per point and process kind, the connections across the shaped link only."""
    rows = [r for r in csv.DictReader(open(a.csv)) if r["network"] == "1"]
    keys = sorted({(r["mode"], r["model"], r["rate_gbps"], r["process"]) for r in rows})
    print("mode model rate process samples tb_median tb_max payload_median payload_max "
          "payload_per_w_when_full")
    for k in keys:
        v = [r for r in rows if (r["mode"], r["model"], r["rate_gbps"], r["process"]) == k]
        tb = [int(r["tb"]) for r in v]
        pay = [int(r["notsent"]) + int(r["unacked"]) * int(r["mss"]) for r in v]
        ratio = [p / int(r["w"]) for p, r in zip(pay, v) if int(r["w"]) >= int(r["tb"]) / 2]
        print(k, len(v), statistics.median(tb), max(tb), statistics.median(pay), max(pay),
              round(statistics.median(ratio), 3) if ratio else "-")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", default="baseline")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--rate", type=float, default=3)
    p.add_argument("--iterations", type=int, default=0, help="default: the model's config")
    p.add_argument("--round", type=int, default=1)
    p.add_argument("--interval", type=float, default=0.05, help="seconds between samples")
    p.add_argument("--out", default="/tmp/socket_buffers")
    p.add_argument("--csv", required=True)
    p.add_argument("--report", action="store_true")
    a = p.parse_args()
    report(a) if a.report else measure(a)


if __name__ == "__main__":
    main()

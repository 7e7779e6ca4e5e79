#!/usr/bin/python3
"""gloo's ring all-reduce alone on the emulated links: the link share DDP's ring reaches
(issue 36; docs/results/simulator/simulator.md, "gloo's own link share").

Two torch.distributed gloo ranks, one in each emulated machine of the network that
tools/bench_throughput.py builds for DDP (two namespaces on a bridge, the same tbf on both
ends of each veth), all-reduce float32 tensors of fixed sizes again and again with nothing
else running in those processes: ResNet-50's and VGG-19's whole gradients (the zoo's
parameter counts, docs/models.md) and one DDP bucket (25 MB, DDP's bucket cap). iperf3 runs
on the same link right before the ranks start. Rates interleaved, their order reversed every
other round; rate 0 is loopback (no namespaces), as in bench_throughput.

A ring all-reduce of S bytes over N ranks sends 2 (N - 1) / N * S bytes each way on every
link (reduce-scatter, then all-gather; S with 2 ranks), so its link goodput is those bytes
over the all-reduce's time, and its link share that goodput over the link rate (what
p3/sim's ring uses in place of goodput_factor, Calibration::ring_link_share).

  sudo /usr/bin/python3 tools/experiments/ring_streaming.py --rounds=5 \\
      --csv=docs/results/simulator/ring_streaming_2026-12-05.csv
  /usr/bin/python3 tools/experiments/ring_streaming.py --report --csv=F   # medians again

One CSV row per run (round x rate x size): the median over its timed all-reduces, the
iperf3 figure of the same link, the two ranks' CPU per GB crossing, and load1 at the start.

--beside_compute=0,1 also runs each rate with a single-thread computation beside the
all-reduces in each rank (a 512 x 512 product and tanh in a loop, one torch thread), as
DDP's backward runs beside its buckets' all-reduces on this 2-core host; those rows have
beside_compute 1 and no CPU figure (the process's CPU holds the computation's).

  sudo /usr/bin/python3 tools/experiments/ring_streaming.py --rounds=5 --rates=1,2.5,5 \
      --sizes=bucket25mb:8 --beside_compute=0,1 --csv=F
"""
import argparse
import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from results_lib import paths  # noqa: E402

PY = "/usr/bin/python3"
# bench_throughput's allocator settings for the DDP peer (p3/base/allocator.h).
GLIBC_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824"
# name: float32 values. ResNet-50 and VGG-19 at 1000 classes (docs/models.md); DDP's
# bucket cap, 25 MB (torch.nn.parallel.DistributedDataParallel's bucket_cap_mb).
SIZES = {"resnet50": 25_557_032, "vgg19": 143_667_240, "bucket25mb": 25 * 1024 * 1024 // 4}
FIELDS = ["date", "driver_commit", "round", "rate_gbps", "size", "beside_compute", "values",
          "world",
          "link_bytes", "reps", "seconds", "seconds_all", "goodput_gbps", "link_share",
          "iperf3_gbps", "iperf3_share", "ratio_to_iperf3", "cpu_s_per_gb", "load1"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def link_figures(values, world, seconds, rate_gbps, iperf3_gbps):
    """A ring all-reduce of `values` float32 values over `world` ranks that took `seconds`:
    bytes each way on every link (2 (N - 1) / N of the tensor), its link goodput (Gbit/s),
    its share of a shaped link's rate (None at rate 0) and its ratio to iperf3."""
    link_bytes = 2 * (world - 1) / world * values * 4
    gbps = link_bytes * 8 / seconds / 1e9
    return {"link_bytes": link_bytes, "goodput_gbps": gbps,
            "link_share": gbps / rate_gbps if rate_gbps > 0 else None,
            "ratio_to_iperf3": gbps / iperf3_gbps}


# ---- one rank (run inside its namespace) ----------------------------------------------

def compute_beside(stop):
    """A single-thread computation in the rank's process until `stop` is set, as DDP's
    backward runs beside its all-reduces (torch releases the GIL inside the products)."""
    import torch
    a = torch.rand(512, 512)
    while not stop.is_set():
        a = torch.tanh(a @ a)

def peer(a):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{a.master}", rank=a.rank,
                            world_size=a.world)
    stop = threading.Event()
    beside = threading.Thread(target=compute_beside, args=(stop,))
    if a.beside_compute == "1":
        beside.start()
    out = {}
    for item in a.sizes.split(","):
        name, reps = item.split(":")
        t = torch.ones(SIZES[name], dtype=torch.float32)
        dist.all_reduce(t)  # warm-up: gloo's buffers and connections for this size
        secs, cpus = [], []
        for _ in range(int(reps)):
            dist.barrier()
            c0, t0 = time.process_time(), time.perf_counter()
            dist.all_reduce(t)
            secs.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        out[name] = {"seconds": secs, "cpu_seconds": cpus}
    stop.set()
    if beside.is_alive():
        beside.join()
    dist.barrier()
    with open(a.out, "w") as f:
        json.dump(out, f)


# ---- the driver -----------------------------------------------------------------------

def sh(args, check=True):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def bench_throughput():
    """tools/bench_throughput.py: the network DDP runs on in the throughput benchmark."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import bench_throughput as module
    return module


def network(prefix, bw):
    bench_throughput().ddp_network(prefix, bw)


def network_remove(prefix):
    bench_throughput().ddp_network_remove(prefix)


def iperf3(prefix, bw, seconds):
    """iperf3 from machine 0 to machine 1 (loopback at rate 0), Gbit/s received."""
    port = free_port()
    ns = (lambda i: ["ip", "netns", "exec", f"{prefix}-m{i}"]) if bw > 0 else (lambda i: [])
    host = "10.78.0.2" if bw > 0 else "127.0.0.1"
    srv = subprocess.Popen(ns(1) + ["iperf3", "-s", "-1", "-B", host, "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            r = sh(ns(0) + ["iperf3", "-c", host, "-p", str(port), "-t", str(seconds), "-J"],
                   check=False)
            try:
                return json.loads(r.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
            except (ValueError, KeyError):
                time.sleep(0.1)  # the server not listening yet, or the test refused
        return float("nan")
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()


def run_rate(a, rnd, bw, writer, beside=False):
    prefix = f"rs-{os.getpid()}"
    load1 = paths.load1()
    tmp = tempfile.mkdtemp(prefix="ring6-")
    procs = []
    try:
        if bw > 0:
            network(prefix, bw)
            master, ifname = "10.78.0.1:29500", "eth0"
        else:
            master, ifname = f"127.0.0.1:{free_port()}", "lo"
        ip3 = iperf3(prefix, bw, a.iperf3_seconds) if a.iperf3_seconds > 0 else float("nan")
        for r in range(2):
            cmd = [PY, os.path.abspath(__file__), "--peer", f"--rank={r}", "--world=2",
                   f"--master={master}", f"--sizes={a.sizes}", f"--out={tmp}/rank{r}.json"]
            if beside:
                cmd.append("--beside_compute=1")
            if bw > 0:
                cmd = ["ip", "netns", "exec", f"{prefix}-m{r}"] + cmd
            env = dict(os.environ, GLOO_SOCKET_IFNAME=ifname, OMP_NUM_THREADS="1",
                       GLIBC_TUNABLES=GLIBC_TUNABLES)
            procs.append(subprocess.Popen(cmd, env=env, stdout=open(f"{tmp}/rank{r}.log", "w"),
                                          stderr=subprocess.STDOUT, start_new_session=True))
        rcs = [p.wait(timeout=a.timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        if bw > 0:
            network_remove(prefix)
    if any(rcs):
        sys.exit(f"rank failed at {bw} Gbit/s: {rcs}; logs in {tmp}")
    ranks = [json.load(open(f"{tmp}/rank{r}.json")) for r in range(2)]
    for item in a.sizes.split(","):
        name = item.split(":")[0]
        values = SIZES[name]
        secs = ranks[0][name]["seconds"]
        sec = statistics.median(secs)
        fig = link_figures(values, 2, sec, bw, ip3)
        link_bytes, gbps = fig["link_bytes"], fig["goodput_gbps"]
        cpu = sum(statistics.median(rk[name]["cpu_seconds"]) for rk in ranks)
        row = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "driver_commit": paths.git_commit(mark_dirty=True), "round": rnd,
               "rate_gbps": bw, "size": name, "beside_compute": int(beside),
               "values": values, "world": 2,
               "link_bytes": int(link_bytes), "reps": len(secs), "seconds": f"{sec:.5f}",
               "seconds_all": " ".join(f"{s:.4f}" for s in secs),
               "goodput_gbps": f"{gbps:.4f}",
               "link_share": f"{fig['link_share']:.4f}" if bw > 0 else "",
               "iperf3_gbps": f"{ip3:.4f}",
               "iperf3_share": f"{ip3 / bw:.4f}" if bw > 0 else "",
               "ratio_to_iperf3": f"{fig['ratio_to_iperf3']:.4f}",
               # both ranks' CPU over the GB that crossed between them, both directions
               # (none beside a computation: the process's CPU then holds the computation's)
               "cpu_s_per_gb": "" if beside else f"{cpu / (2 * link_bytes / 1e9):.4f}", "load1": round(load1, 2)}
        writer(row)
        print(f"round {rnd} {bw:>4} Gbit/s {name:10}{' +compute' if beside else ''} {sec:.4f} s  {gbps:.3f} Gbit/s "
              f"share {row['link_share'] or '-':6} iperf3 {ip3:.3f} ratio "
              f"{row['ratio_to_iperf3']} cpu {row['cpu_s_per_gb'] or '-'} s/GB load1 {load1}",
              flush=True)


def report(path):
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        r["beside_compute"] = r.get("beside_compute") or "0"  # CSVs from before the column
    keys = sorted({(float(r["rate_gbps"]), r["size"], r["beside_compute"]) for r in rows},
                  key=lambda k: (k[0] == 0, k[0], k[1], k[2]))
    print("| rate (Gbit/s) | size | beside a computation | runs | seconds | goodput (Gbit/s) "
          "| ÷ rate | iperf3 (Gbit/s) | iperf3 ÷ rate | ring ÷ iperf3 | CPU s/GB | load1 |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for rate, size, beside in keys:
        rs = [r for r in rows if float(r["rate_gbps"]) == rate and r["size"] == size
              and r["beside_compute"] == beside]

        def med(k, fmt=".3f"):
            v = [float(r[k]) for r in rs if r[k] not in ("", "nan")]
            return format(statistics.median(v), fmt) if v else "–"
        loads = sorted(float(r["load1"]) for r in rs)
        print(f"| {rate:g} | {size} | {'yes' if beside == '1' else 'no'} | {len(rs)} | {med('seconds', '.4f')} | "
              f"{med('goodput_gbps')} | {med('link_share')} | {med('iperf3_gbps')} | "
              f"{med('iperf3_share')} | {med('ratio_to_iperf3')} | {med('cpu_s_per_gb')} | "
              f"{loads[0]:.2f} – {loads[-1]:.2f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1,2.5,5,0", help="Gbit/s; 0: loopback")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", default="bucket25mb:8,resnet50:3,vgg19:2",
                    help="name:timed all-reduces, names from SIZES")
    ap.add_argument("--iperf3_seconds", type=int, default=2)
    ap.add_argument("--beside_compute", default="0",
                    help="0: the ranks only all-reduce; 1: a single-thread computation runs "
                         "beside in each rank, as DDP's backward; 0,1: both, interleaved")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--csv", default="/tmp/ring_streaming.csv")
    ap.add_argument("--report", action="store_true", help="the medians table from --csv")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--master", default="", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        return peer(a)
    if a.report:
        return report(a.csv)
    rates = [float(x) for x in a.rates.split(",")]
    if any(r > 0 for r in rates) and os.geteuid() != 0:
        sys.exit("emulated links need root (network namespaces, tbf); run as root, or --rates=0")
    new = not os.path.exists(a.csv)
    with open(a.csv, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()

        def writer(row):
            w.writerow(row)
            f.flush()
        for rnd in range(1, a.rounds + 1):
            besides = [x == "1" for x in a.beside_compute.split(",")]
            for bw in (rates if rnd % 2 else rates[::-1]):
                for beside in (besides if rnd % 2 else besides[::-1]):
                    run_rate(a, rnd, bw, writer, beside)
    report(a.csv)


if __name__ == "__main__":
    main()

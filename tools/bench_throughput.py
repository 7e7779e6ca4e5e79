#!/usr/bin/python3
"""Throughput benchmark: the p3 cluster (modes baseline, slicing_only, priority_only,
values_only, p3, no_overlap, no_backward_overlap, no_forward_overlap, local; docs/modes.md)
over emulated links, side by side with PyTorch DDP (tools/ddp_peer.py)
over the same kind of links. See docs/results/throughput/throughput.md.

  # the whole sweep of docs/results/throughput/throughput.md (root: network namespaces), ~1 hour
  bazel run //tools:bench_throughput -- sweep
  # tables (docs/results/throughput/throughput.csv) and plots from <out>/raw.csv
  # (tools/bench_throughput_report.py)
  bazel run //tools:bench_throughput -- report
  # one model, chosen modes and bandwidths (Gbit/s per machine; 0 = unlimited)
  bazel run //tools:bench_throughput -- run --model=vgg19 --bandwidths=1,5 \
      --modes=baseline,p3 --ddp --local --runs=2
  # slice sizes at one bandwidth
  bazel run //tools:bench_throughput -- run --model=resnet50 --bandwidths=1 --modes= \
      --slices=10000,160000,1000000
  # per-iteration forward / backward / wait of a traced run
  bazel run //tools:bench_throughput -- trace out/bench/runs/<run>/trace.json

Batch, iterations and warm-up come from configs/bench/<model>.textproto unless given.
Every run appends one row to <out>/raw.csv (default out/bench/raw.csv) as soon as it ends,
so a sweep cut short still leaves its finished points; every run is bounded by --timeout.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_throughput_report  # noqa: E402  (the `report` sub-command)
from results_lib import models, paths, raw_csv, records, runs, textproto  # noqa: E402

# Under `bazel run //tools:bench_throughput` the wrapper (tools/bench_throughput.sh) names
# the binaries it built and the workspace; run directly, they come from bazel-bin/.
ROOT = os.environ.get("BUILD_WORKSPACE_DIRECTORY") or paths.ROOT
LAUNCHER = os.environ.get("P3_LAUNCHER") or os.path.join(ROOT, "bazel-bin/tools/launch_cluster")
SERVER = os.environ.get("P3_SERVER") or os.path.join(ROOT, "bazel-bin/server/p3_server")
WORKER = os.environ.get("P3_WORKER") or os.path.join(ROOT, "bazel-bin/worker/p3_worker")
DDP_PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_peer.py")
PY = "/usr/bin/python3"

# The allocator settings p3's binaries make for themselves (p3/base/allocator.h), given to the
# DDP peer's Python processes so that neither side pays page faults the other does not.
GLIBC_TUNABLES_BASE = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824"
HUGE_PAGE_TUNABLE = "glibc.malloc.hugetlb"


def peer_glibc_tunables(environ=None):
    """GLIBC_TUNABLES for a peer's Python processes (DDP, Python workers): the settings p3's
    binaries make for themselves, and the heap in huge pages as the launcher gives every p3
    process it starts (tools/launch_cluster.cc, RequestHugePageHeapForChildren): a
    glibc.malloc.hugetlb already in this process's GLIBC_TUNABLES wins, as it does there, so
    that GLIBC_TUNABLES=glibc.malloc.hugetlb=0 turns huge pages off on both sides."""
    own = (os.environ if environ is None else environ).get("GLIBC_TUNABLES", "")
    huge = [t for t in own.split(":") if t.split("=")[0] == HUGE_PAGE_TUNABLE]
    return GLIBC_TUNABLES_BASE + ":" + (huge[-1] if huge else HUGE_PAGE_TUNABLE + "=1")


GLIBC_TUNABLES = peer_glibc_tunables()


def congestion_control(a):
    """The TCP congestion control the emulated machines run: --congestion_control, else what
    a new namespace inherits, the host's (docs/network.md)."""
    if a.congestion_control:
        return a.congestion_control
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


def append_row(path, row):
    raw_csv.append(path, row)
    print("[bench] " + " ".join(f"{k}={row.get(k, '')}" for k in raw_csv.FIELDS[1:12]),
          flush=True)


def run_p3(a, mode, bw, slice_params, workers=2, trace=False, tag="", wire_dtype="float32"):
    dtype_tag = "" if wire_dtype == "float32" else f"_{wire_dtype}"
    if not trace and "trace=true" in [x.replace(" ", "") for x in a.set]:
        tag += "_trace"  # traced through --set: named so that reports leave it out too
    name = f"{a.model}_{mode}_bw{bw}_s{slice_params}_w{workers}{dtype_tag}{tag}"
    out = os.path.join(a.out, "runs", name + time.strftime("_%H%M%S", time.gmtime()))
    cmd = [LAUNCHER, f"--config={textproto.bench_config(a.model, ROOT)}", f"--server_binary={SERVER}",
           f"--worker_binary={WORKER}", f"--set=name={name}", f"--set=mode={mode}",
           f"--set=model.name={a.model}",
           f"--set=training.batch_size={a.batch}", f"--set=training.iterations={a.iterations}",
           f"--set=training.warmup_iterations={a.warmup}",
           f"--set=scheduling.slice_params={slice_params}",
           f"--set=cluster.workers={workers}", f"--set=cluster.servers={workers}",
           f"--set=network.bandwidth_gbps={bw if mode != 'local' else 0}",
           f"--set=scheduling.wire_dtype={wire_dtype}",
           f"--set=output_dir={out}"]
    if a.model in models.TOKEN_MODELS:
        cmd += ["--set=data.dataset=synthetic_tokens", f"--set=model.seq_len={a.seq_len}"]
    else:
        cmd += [f"--set=model.image_size={a.image_size}"]
    if a.congestion_control and mode != "local":
        cmd.append(f"--set=network.congestion_control={a.congestion_control}")
    cmd += [f"--set={x}" for x in a.set]
    if trace:
        cmd.append("--set=trace=true")
    row = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "model": a.model,
           "system": "p3", "mode": mode, "bandwidth_gbps": bw, "batch_per_worker": a.batch,
           "workers": workers, "slice_params": slice_params, "iterations": a.iterations,
           "warmup": a.warmup, "load1": paths.load1(), "output_dir": out, "wire_dtype": wire_dtype,
           "congestion_control": congestion_control(a) if mode != "local" and bw > 0 else ""}
    t0 = time.time()
    with open(os.path.join(a.out, "launcher.log"), "a") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT,
                                timeout=a.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"  # subprocess.run sent SIGKILL: clean the namespaces up
            subprocess.run([LAUNCHER, "--cleanup_network"], stdout=log, stderr=subprocess.STDOUT)
    row["wall_seconds"] = round(time.time() - t0, 1)
    summary = os.path.join(out, "summary.json")
    if rc == 0 and os.path.exists(summary):
        s = runs.summary(out)
        med, mean = records.throughput([records.iteration_seconds(out, r)
                                        for r in range(workers)], a.batch, a.warmup)
        row["samples_per_second"] = round(med, 3)
        row["mean_samples_per_second"] = round(mean, 3)
        row["rank0_samples_per_second"] = s["samples_per_second"]
        row["bytes_sent_rank0"] = s["workers_results"][0].get("bytes_sent", "")
        if slice_params == 0 and mode != "local":
            # The launcher's automatic choice (summary.json "tuning"), so that the row
            # names the size the run trained with; a mode that does not slice keeps 40000.
            row["slice_params"] = s.get("tuning", {}).get("slice_params",
                                                          raw_csv.DEFAULT_SLICE_PARAMS)
            row["slice_auto"] = 1
        pack = runs.resolved_pack_params(out)
        if pack is not None:
            row["pack_params"] = pack
        credit = runs.resolved_credit_bytes(out)
        if credit:
            row["credit_bytes"] = credit
        pieces = runs.resolved_output_pieces(out)
        if pieces is not None and pieces > 1:
            row["output_pieces"] = pieces
        experiments = runs.grpc_experiments(out)  # reads sized to the message, by default
        if experiments:
            row["grpc_experiments"] = experiments
        row["status"] = "ok"
    else:
        row["status"] = f"failed:{rc}"
    append_row(os.path.join(a.out, "raw.csv"), row)


def sh(args, check=True):
    return subprocess.run(args, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def ddp_network(prefix, bw, cc=""):
    """Two machines on a bridge, tbf on both ends of each veth (as tools/launcher/netem.cc does),
    and the TCP congestion control `cc` in each machine (empty: the host's)."""
    br = f"{prefix}-br"
    cmds = [["ip", "netns", "add", br], ["ip", "-n", br, "link", "add", "br0", "type", "bridge"],
            ["ip", "-n", br, "link", "set", "br0", "up"]]
    rate = int(bw * 1e9)
    burst = max(131072, rate // 8 // 1000)
    tbf = ["root", "tbf", "rate", f"{rate}bit", "burst", str(burst), "latency", "20ms"]
    for i in range(2):
        ns, port = f"{prefix}-m{i}", f"m{i}"
        cmds += [["ip", "netns", "add", ns], ["ip", "-n", ns, "link", "set", "lo", "up"],
                 ["ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
                  "netns", br],
                 ["ip", "-n", ns, "addr", "add", f"10.78.0.{i + 1}/24", "dev", "eth0"],
                 ["ip", "-n", ns, "link", "set", "eth0", "up"],
                 ["ip", "-n", br, "link", "set", port, "master", "br0"],
                 ["ip", "-n", br, "link", "set", port, "up"],
                 ["tc", "-n", ns, "qdisc", "add", "dev", "eth0"] + tbf,
                 ["tc", "-n", br, "qdisc", "add", "dev", port] + tbf]
        if cc:
            cmds.append(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                         f"net.ipv4.tcp_congestion_control={cc}"])
    for c in cmds:
        sh(c)


def ddp_network_remove(prefix):
    for n in (f"{prefix}-m0", f"{prefix}-m1", f"{prefix}-br"):
        sh(["ip", "netns", "delete", n], check=False)


def run_ddp(a, bw):
    out = os.path.join(a.out, "runs", f"{a.model}_ddp_bw{bw}" + time.strftime("_%H%M%S", time.gmtime()))
    os.makedirs(out, exist_ok=True)
    prefix = f"p3b-{os.getpid()}"
    row = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "model": a.model,
           "system": "ddp", "mode": "ddp", "bandwidth_gbps": bw, "batch_per_worker": a.batch,
           "workers": 2, "slice_params": "", "iterations": a.iterations, "warmup": a.warmup,
           "load1": paths.load1(), "output_dir": out,
           "congestion_control": congestion_control(a) if bw > 0 else ""}
    t0 = time.time()
    procs = []
    try:
        if bw > 0:
            ddp_network(prefix, bw, a.congestion_control)
            master, env_if = "10.78.0.1:29500", "eth0"
        else:
            master, env_if = "127.0.0.1:29500", "lo"
        for r in range(2):
            cmd = [PY, DDP_PEER, f"--rank={r}", "--world=2",
                   f"--master={master}", f"--model={a.model}", f"--batch={a.batch}",
                   f"--image_size={a.image_size}", f"--seq_len={a.seq_len}",
                   f"--iterations={a.iterations}",
                   f"--warmup={a.warmup}", f"--out={out}/rank{r}.json"]
            if bw > 0:
                cmd = ["ip", "netns", "exec", f"{prefix}-m{r}"] + cmd
            env = dict(os.environ, GLOO_SOCKET_IFNAME=env_if, OMP_NUM_THREADS="1",
                       GLIBC_TUNABLES=GLIBC_TUNABLES)
            procs.append(subprocess.Popen(cmd, env=env, stdout=open(f"{out}/rank{r}.log", "w"),
                                          stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.time() + a.timeout
        rcs = []
        for p in procs:
            try:
                rcs.append(p.wait(timeout=max(1, deadline - time.time())))
            except subprocess.TimeoutExpired:
                rcs.append("timeout")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        if bw > 0:
            ddp_network_remove(prefix)
    row["wall_seconds"] = round(time.time() - t0, 1)
    res = os.path.join(out, "rank0.json")
    if all(r == 0 for r in rcs) and os.path.exists(res):
        ranks = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(2)]
        med, mean = records.throughput([j["iteration_seconds"] for j in ranks], a.batch,
                                       a.warmup)
        row["samples_per_second"] = round(med, 3)
        row["mean_samples_per_second"] = round(mean, 3)
        row["rank0_samples_per_second"] = round(ranks[0]["samples_per_second"], 3)
        row["status"] = "ok"
    else:
        row["status"] = f"failed:{rcs}"
    append_row(os.path.join(a.out, "raw.csv"), row)


def cmd_run(a):
    cfg = textproto.bench_config(a.model, ROOT)
    if a.batch is None:
        a.batch = textproto.int_field(cfg, "batch_size", 8)
    if a.iterations is None:
        a.iterations = textproto.int_field(cfg, "iterations", 8)
    if a.warmup is None:
        a.warmup = textproto.int_field(cfg, "warmup_iterations", 2)
    if a.seq_len is None:
        a.seq_len = textproto.int_field(cfg, "seq_len", 16)
    if a.image_size is None:
        a.image_size = textproto.int_field(cfg, "image_size", 32)
    print(f"[bench] {a.model}: config {cfg}, batch {a.batch}/worker, {a.iterations} iterations "
          f"({a.warmup} warm-up)", flush=True)
    os.makedirs(a.out, exist_ok=True)
    bws = [float(b) for b in a.bandwidths.split(",") if b]
    modes = [m for m in a.modes.split(",") if m]
    for rep in range(a.runs):
        if a.local:
            run_p3(a, "local", 0, a.slice_params, workers=1, tag=f"_r{rep}")
        for bw in bws:
            for m in modes:  # modes (and wire dtypes) side by side at each bandwidth
                for dtype in [d for d in a.wire_dtypes.split(",") if d]:
                    run_p3(a, m, bw, a.slice_params, workers=a.workers, tag=f"_r{rep}",
                           wire_dtype=dtype)
            if a.ddp:
                run_ddp(a, bw)
        for s in [int(x) for x in a.slices.split(",") if x]:
            run_p3(a, "p3", bws[0], s, tag=f"_r{rep}")
        if a.one_plus_one:
            run_p3(a, "p3", 0, a.slice_params, workers=1, tag=f"_r{rep}")
            run_p3(a, "local", 0, a.slice_params, workers=1, tag=f"_r{rep}b")
    if a.trace_at is not None:
        run_p3(a, "p3", a.trace_at, a.slice_params, trace=True, tag="_trace")
        run_p3(a, "baseline", a.trace_at, a.slice_params, trace=True, tag="_trace")


# The sweep of docs/results/throughput/throughput.md: (model, extra `run` arguments), in this order.
MODES = ("baseline,slicing_only,priority_only,values_only,p3,no_overlap,no_backward_overlap,"
         "no_forward_overlap")
SWEEP = [
    ("resnet50", ["--bandwidths=1,2.5,5,0", f"--modes={MODES}", "--ddp", "--local",
                  "--one_plus_one", "--runs=3"]),
    ("vgg19", ["--bandwidths=1,2.5,5,0", f"--modes={MODES}", "--ddp", "--local", "--runs=2",
               "--timeout=400"]),
    ("seq2seq_lstm", ["--bandwidths=1,2.5,5,0", f"--modes={MODES}", "--ddp", "--local",
                      "--runs=2"]),
    ("resnet50", ["--bandwidths=1", "--modes=", "--slices=10000,20000,80000,160000,1000000",
                  "--runs=3"]),
    ("seq2seq_lstm", ["--bandwidths=1", "--modes=", "--iterations=7", "--trace_at=1"]),
]


def cmd_sweep(a, parser):
    for i, (model, extra) in enumerate(SWEEP):
        print(f"[bench] sweep step {i + 1}/{len(SWEEP)}: {model} {' '.join(extra)} "
              f"({time.strftime('%H:%M:%S', time.gmtime())} UTC)", flush=True)
        cmd_run(parser.parse_args(["run", f"--model={model}", f"--out={a.out}"] + extra))


def cmd_trace(a):
    """Per iteration of worker 0 in a merged trace.json: forward and backward time (track
    `compute`), time waiting for parameters, and the iteration's span."""
    t = json.load(open(a.trace))
    ev = t["traceEvents"] if isinstance(t, dict) else t
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
              if e.get("ph") == "M" and e.get("name") == "thread_name"}
    w = [e for e in ev if e.get("ph") == "X" and e["pid"] == 100 + a.rank]
    per = {}
    for e in w:
        tr = tracks.get((e["pid"], e["tid"]))
        if tr == "compute":
            it = e["args"]["iteration"]
            d = per.setdefault(it, {"forward": 0.0, "backward": 0.0, "start": e["ts"]})
            d[e["cat"]] += e["dur"] / 1e6
            d["start"] = min(d["start"], e["ts"])
    waits = sorted([e for e in w if tracks.get((e["pid"], e["tid"])) == "wait for parameters"],
                   key=lambda e: e["ts"])
    its = sorted(per)
    print("iteration forward_s backward_s wait_s iteration_s")
    for i, it in enumerate(its):
        end = per[its[i + 1]]["start"] if i + 1 < len(its) else None
        wt = sum(e["dur"] for e in waits if e["ts"] >= per[it]["start"] and
                 (end is None or e["ts"] < end)) / 1e6
        span = (end - per[it]["start"]) / 1e6 if end else float("nan")
        print(f"{it} {per[it]['forward']:.3f} {per[it]['backward']:.3f} {wt:.3f} {span:.3f}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", default="resnet50")
    r.add_argument("--batch", type=int, default=None, help="default: the model's config")
    r.add_argument("--image_size", type=int, default=None, help="default: the model's config")
    r.add_argument("--seq_len", type=int, default=None,
                   help="token models: tokens per side (default: the model's config)")
    r.add_argument("--iterations", type=int, default=None, help="default: the model's config")
    r.add_argument("--warmup", type=int, default=None, help="default: the model's config")
    r.add_argument("--bandwidths", default="0.5,1,2.5,0")
    r.add_argument("--modes", default="baseline,p3,no_overlap")
    r.add_argument("--slice_params", type=int, default=40000,
                   help="0: the launcher's automatic slice size; the row records its choice "
                        "(slice_params) and slice_auto=1")
    r.add_argument("--slices", default="", help="extra p3 runs at the first bandwidth")
    r.add_argument("--runs", type=int, default=1)
    r.add_argument("--wire_dtypes", default="float32",
                   help="scheduling.wire_dtype of each mode's runs, interleaved, e.g. "
                        "float32,bfloat16,float16")
    r.add_argument("--workers", type=int, default=2,
                   help="workers (and as many servers) of the --modes runs")
    r.add_argument("--ddp", action="store_true")
    r.add_argument("--local", action="store_true")
    r.add_argument("--one_plus_one", action="store_true")
    r.add_argument("--trace_at", type=float, default=None)
    r.add_argument("--timeout", type=float, default=240)
    r.add_argument("--congestion_control", default="",
                   help="TCP congestion control of the emulated machines, p3's and DDP's "
                        "(network.congestion_control); default: the host's. Recorded per run")
    r.add_argument("--out", default=os.path.join(ROOT, "out/bench"))
    r.add_argument("--set", action="append", default=[],
                   help="extra launcher override for the p3 runs (repeatable), e.g. "
                        "data.dataset=synthetic_tokens")
    w = sub.add_parser("sweep", help="the documented sweep, every model")
    w.add_argument("--out", default=os.path.join(ROOT, "out/bench"))
    q = sub.add_parser("report")
    q.add_argument("--out", default=os.path.join(ROOT, "out/bench"))
    q.add_argument("--slice_params", type=int, default=40000)
    t = sub.add_parser("trace")
    t.add_argument("trace")
    t.add_argument("--rank", type=int, default=0)
    a = p.parse_args()
    if a.cmd == "sweep":
        cmd_sweep(a, p)
    else:
        {"run": cmd_run, "report": bench_throughput_report.cmd_report,
         "trace": cmd_trace}[a.cmd](a)


if __name__ == "__main__":
    main()

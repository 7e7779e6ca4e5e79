#!/usr/bin/python3
"""Throughput benchmark: the p3 cluster (modes baseline, slicing_only, priority_only,
values_only, p3, no_overlap, no_backward_overlap, no_forward_overlap, local; docs/modes.md)
over emulated links, side by side with PyTorch DDP (tools/ddp_peer.py)
over the same kind of links. See docs/results/throughput.md.

  # the whole sweep of docs/results/throughput.md (root: network namespaces), ~1 hour
  bazel run //tools:bench_throughput -- sweep
  # tables (docs/results/throughput.csv) and plots from <out>/raw.csv
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
import csv
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

# Under `bazel run //tools:bench_throughput` the wrapper (tools/bench_throughput.sh) names
# the binaries it built and the workspace; run directly, they come from bazel-bin/.
ROOT = os.environ.get("BUILD_WORKSPACE_DIRECTORY") or \
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.environ.get("P3_LAUNCHER") or os.path.join(ROOT, "bazel-bin/tools/launch_cluster")
SERVER = os.environ.get("P3_SERVER") or os.path.join(ROOT, "bazel-bin/server/p3_server")
WORKER = os.environ.get("P3_WORKER") or os.path.join(ROOT, "bazel-bin/worker/p3_worker")
DDP_PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_peer.py")


def base_config(model):
    """configs/bench/<model>.textproto: the documented config of each benchmarked model
    (batch, iterations, warm-up chosen per model); other models start from the generic
    configs/bench_throughput.textproto."""
    own = os.path.join(ROOT, "configs/bench", model + ".textproto")
    return own if os.path.exists(own) else os.path.join(ROOT, "configs/bench_throughput.textproto")


def config_int(path, field, default):
    """An integer field of a text-format config (`field: 12`), comments ignored."""
    for line in open(path):
        line = line.split("#")[0].strip()
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    return default
PY = "/usr/bin/python3"

# torchvision / p3 zoo parameter counts with 1000 classes (docs/models.md)
PARAMS = {"resnet50": 25557032, "vgg19": 143667240, "vgg16": 138357544,
          "seq2seq_lstm": 58114816, "transformer": 76938496, "inception_v3": 27161264}
TOKEN_MODELS = ("seq2seq_lstm", "transformer")
# The allocator settings p3's binaries make for themselves (p3/base/allocator.h), given to the
# DDP peer's Python processes so that neither side pays page faults the other does not.
GLIBC_TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824"
TCP_GOODPUT = 0.957  # payload share of a tbf-shaped link (docs/network.md)

FIELDS = ["time_utc", "model", "system", "mode", "bandwidth_gbps", "batch_per_worker", "workers",
          "slice_params", "iterations", "warmup", "samples_per_second", "mean_samples_per_second",
          "rank0_samples_per_second", "wall_seconds", "bytes_sent_rank0", "load1", "status",
          "output_dir", "wire_dtype", "congestion_control"]


def congestion_control(a):
    """The TCP congestion control the emulated machines run: --congestion_control, else what
    a new namespace inherits, the host's (docs/network.md)."""
    if a.congestion_control:
        return a.congestion_control
    with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
        return f.read().strip()


def throughput(per_worker_seconds, batch, warmup):
    """(median, mean) samples/s over the iterations after warm-up. Every worker times its
    own iterations; in synchronous training they take turns waiting, so one worker's
    iteration i can be short where the other's is long. Iteration i's time is therefore the
    mean over workers of their iteration i; the median is over those iterations (the
    issue's definition), the mean is the global batch times the iterations over their
    summed time (a cross-check that no phase pattern biases the median)."""
    n = min(len(s) for s in per_worker_seconds)
    times = [statistics.mean(s[i] for s in per_worker_seconds) for i in range(warmup, n)]
    if not times:
        return float("nan"), float("nan")
    g = batch * len(per_worker_seconds)
    return statistics.median(g / t for t in times), g * len(times) / sum(times)


def records_seconds(path):
    return [float(r["iteration_seconds"]) for r in csv.DictReader(open(path))]


def load1():
    return float(open("/proc/loadavg").read().split()[0])


def append_row(path, row):
    new = not os.path.exists(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # A raw.csv from before a column was added keeps its own columns.
    fields = FIELDS if new else next(csv.reader(open(path)))
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({k: row.get(k, "") for k in fields})
    print("[bench] " + " ".join(f"{k}={row.get(k, '')}" for k in FIELDS[1:12]), flush=True)


def run_p3(a, mode, bw, slice_params, workers=2, trace=False, tag="", wire_dtype="float32"):
    dtype_tag = "" if wire_dtype == "float32" else f"_{wire_dtype}"
    name = f"{a.model}_{mode}_bw{bw}_s{slice_params}_w{workers}{dtype_tag}{tag}"
    out = os.path.join(a.out, "runs", name + time.strftime("_%H%M%S", time.gmtime()))
    cmd = [LAUNCHER, f"--config={base_config(a.model)}", f"--server_binary={SERVER}",
           f"--worker_binary={WORKER}", f"--set=name={name}", f"--set=mode={mode}",
           f"--set=model.name={a.model}",
           f"--set=training.batch_size={a.batch}", f"--set=training.iterations={a.iterations}",
           f"--set=training.warmup_iterations={a.warmup}",
           f"--set=scheduling.slice_params={slice_params}",
           f"--set=cluster.workers={workers}", f"--set=cluster.servers={workers}",
           f"--set=network.bandwidth_gbps={bw if mode != 'local' else 0}",
           f"--set=scheduling.wire_dtype={wire_dtype}",
           f"--set=output_dir={out}"]
    if a.model in TOKEN_MODELS:
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
           "warmup": a.warmup, "load1": load1(), "output_dir": out, "wire_dtype": wire_dtype,
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
        s = json.load(open(summary))
        recs = [records_seconds(os.path.join(out, "records", f"worker_{r}.csv"))
                for r in range(workers)]
        med, mean = throughput(recs, a.batch, a.warmup)
        row["samples_per_second"] = round(med, 3)
        row["mean_samples_per_second"] = round(mean, 3)
        row["rank0_samples_per_second"] = s["samples_per_second"]
        row["bytes_sent_rank0"] = s["workers_results"][0].get("bytes_sent", "")
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
           "load1": load1(), "output_dir": out,
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
        med, mean = throughput([j["iteration_seconds"] for j in ranks], a.batch, a.warmup)
        row["samples_per_second"] = round(med, 3)
        row["mean_samples_per_second"] = round(mean, 3)
        row["rank0_samples_per_second"] = round(ranks[0]["samples_per_second"], 3)
        row["status"] = "ok"
    else:
        row["status"] = f"failed:{rcs}"
    append_row(os.path.join(a.out, "raw.csv"), row)


def cmd_run(a):
    cfg = base_config(a.model)
    if a.batch is None:
        a.batch = config_int(cfg, "batch_size", 8)
    if a.iterations is None:
        a.iterations = config_int(cfg, "iterations", 8)
    if a.warmup is None:
        a.warmup = config_int(cfg, "warmup_iterations", 2)
    if a.seq_len is None:
        a.seq_len = config_int(cfg, "seq_len", 16)
    if a.image_size is None:
        a.image_size = config_int(cfg, "image_size", 32)
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


# The sweep of docs/results/throughput.md: (model, extra `run` arguments), in this order.
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


def bandwidth_bound(model, bw, batch, workers=2, bytes_per_value=4):
    """Samples/s if each machine link carried its bytes at the TCP goodput and nothing else
    took time. With 2 machines (colocated worker + server each), machine 0's upload carries
    worker 0's pushes of the slices server 1 owns AND server 0's replies to worker 1 for the
    slices server 0 owns: all P parameters (4 bytes each) per iteration, each direction,
    whatever the slice assignment. DDP's ring all-reduce with 2 ranks sends the same P.
    bytes_per_value=2: the same on a 16-bit wire (scheduling.wire_dtype)."""
    if bw <= 0:
        return float("inf")
    seconds = PARAMS[model] * bytes_per_value * 8 / (bw * 1e9 * TCP_GOODPUT)
    return batch * workers / seconds


ORDER = ["baseline", "slicing_only", "priority_only", "values_only", "p3", "no_overlap",
         "no_backward_overlap", "no_forward_overlap", "ddp"]


def fmt_bw(bw):
    return "unlimited" if bw == 0 else f"{bw:g}"


def num(x):
    return x if isinstance(x, str) else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def markdown_tables(agg, rows, default_slice, source="out/bench/raw.csv"):
    """The tables of docs/results/throughput.md, generated (throughput_tables.md): one
    column per mode that has a run (in ORDER)."""
    out = [f"<!-- Generated by `bazel run //tools:bench_throughput -- report` from {source}; "
           "do not edit. -->", ""]
    order = [m for m in ORDER if any(g["mode"] == m for g in agg)]
    def cell(g):
        if g is None:
            return ""
        d = 2 if g["median_sps"] < 10 else 1  # VGG-19's few samples/s need two decimals
        rng = f" ({g['min_sps']:.{d}f}–{g['max_sps']:.{d}f})" if g["runs"] > 1 else ""
        return f"{g['median_sps']:.{d}f}{rng}"
    def find(model, mode, bw, workers=2, slice_params=None):
        for g in agg:
            if (g["model"], g["mode"], g["bandwidth_gbps"], g["workers"]) == (model, mode, bw, workers) \
                    and (slice_params is None or g["slice_params"] in ("", str(slice_params))):
                return g
        return None
    def paired(model, bw, num, den):
        """Median over repetitions of num/den measured in the same repetition (runs of one
        bandwidth follow each other: side by side in time)."""
        def runs(mode):
            return [r for r in rows if r["model"] == model and r["mode"] == mode and
                    float(r["bandwidth_gbps"]) == bw and r["workers"] == "2" and
                    r["slice_params"] in ("", str(default_slice))]
        n, d = runs(num), runs(den)
        pairs = [float(x["samples_per_second"]) / float(y["samples_per_second"])
                 for x, y in zip(n, d)]
        return statistics.median(pairs) if pairs else float("nan")
    for model in sorted({g["model"] for g in agg}):
        pts = [g for g in agg if g["model"] == model and g["workers"] == 2 and g["mode"] != "local"]
        if not pts:
            continue
        bws = sorted({g["bandwidth_gbps"] for g in pts}, key=lambda b: (b == 0, b))
        batch = pts[0]["batch"]
        runs = sorted({g["runs"] for g in pts})
        out.append(f"### {model} (batch {batch} per worker, 2 workers; samples/s, median over "
                   f"{'/'.join(map(str, runs))} runs, min–max in brackets)")
        out.append("")
        out.append("| Gbit/s | " + " | ".join("PyTorch DDP" if m == "ddp" else m for m in order) +
                   " | compute bound | bandwidth bound | p3 ÷ baseline (paired) | p3 efficiency |")
        out.append("|---:|" + "---:|" * (len(order) + 4))
        for bw in bws:
            gs = {m: find(model, m, bw, slice_params=default_slice) for m in order}
            p3, base = gs.get("p3"), gs.get("baseline")
            ref = p3 or next((g for g in gs.values() if g), None)
            ratio = (f"{p3['median_sps'] / base['median_sps']:.2f} "
                     f"({paired(model, bw, 'p3', 'baseline'):.2f})") if p3 and base else ""
            out.append(f"| {fmt_bw(bw)} | " + " | ".join(cell(gs[m]) for m in order) +
                       f" | {num(ref['compute_bound_sps'])} | {num(ref['bandwidth_bound_sps'])} | {ratio} | "
                       f"{p3['efficiency'] if p3 else ''} |")
        out.append("")
        slices = sorted({int(g["slice_params"]) for g in agg if g["model"] == model and
                         g["mode"] == "p3" and g["workers"] == 2 and g["slice_params"]})
        if len(slices) > 1:
            out.append(f"Slice size ({model}, p3):")
            out.append("")
            sbws = sorted({g["bandwidth_gbps"] for g in agg if g["model"] == model and
                           g["mode"] == "p3" and g["workers"] == 2 and
                           g["slice_params"] != str(default_slice)})
            for bw in sbws:
                out.append(f"| slice_params (at {fmt_bw(bw)} Gbit/s) | " +
                           " | ".join(f"{x:,}" for x in slices) + " |")
                out.append("|---|" + "---:|" * len(slices))
                out.append("| samples/s | " + " | ".join(
                    cell(find(model, "p3", bw, slice_params=x)) for x in slices) + " |")
                out.append("| runs | " + " | ".join(
                    str((find(model, "p3", bw, slice_params=x) or {"runs": 0})["runs"])
                    for x in slices) + " |")
            out.append("")
        one = find(model, "p3", 0.0, workers=1)
        loc = find(model, "local", 0.0, workers=1)
        if one and loc:
            out.append(f"1 worker + 1 server, unlimited ({model}): p3 {cell(one)} samples/s, "
                       f"`local` {cell(loc)}: p3 ÷ local = {one['median_sps'] / loc['median_sps']:.2f}.")
            out.append("")
    return "\n".join(out) + "\n"


def cmd_report(a):
    rows = [r for r in csv.DictReader(open(os.path.join(a.out, "raw.csv")))
            if r["status"] == "ok" and "_trace" not in r["output_dir"]  # traced: apart
            # 16-bit wire runs: tools/wire_dtype_report.py
            and r.get("wire_dtype", "float32") in ("", "float32")]
    groups = {}
    for r in rows:
        key = (r["model"], r["mode"], float(r["bandwidth_gbps"]), int(r["batch_per_worker"]),
               int(r["workers"]), r["slice_params"])
        groups.setdefault(key, []).append(r)
    agg = []
    for key, rs in sorted(groups.items()):
        sps = [float(r["samples_per_second"]) for r in rs]
        means = [float(r["mean_samples_per_second"]) for r in rs]
        agg.append({"model": key[0], "mode": key[1], "bandwidth_gbps": key[2], "batch": key[3],
                    "workers": key[4], "slice_params": key[5], "runs": len(sps),
                    "median_sps": statistics.median(sps), "min_sps": min(sps), "max_sps": max(sps),
                    "mean_sps": statistics.median(means),
                    "load1": statistics.median(float(r["load1"]) for r in rs)})
    # compute bound: local mode, one process, same per-worker batch, x2 machines
    local = {}
    for g in agg:
        if g["mode"] == "local" and g["workers"] == 1:
            local.setdefault((g["model"], g["batch"]), []).append(g["median_sps"])
    out_csv = os.path.join(ROOT, "docs/results/throughput.csv")
    with open(out_csv, "w", newline="") as f:
        fields = ["model", "mode", "bandwidth_gbps", "batch", "workers", "slice_params", "runs",
                  "median_sps", "min_sps", "max_sps", "mean_sps", "load1", "compute_bound_sps",
                  "bandwidth_bound_sps", "efficiency"]
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for g in agg:
            loc = local.get((g["model"], g["batch"]))
            cb = (statistics.median(loc) * g["workers"]) if loc else float("nan")
            bb = bandwidth_bound(g["model"], g["bandwidth_gbps"], g["batch"], g["workers"]) \
                if g["mode"] != "local" else float("inf")
            g["compute_bound_sps"] = round(cb, 3)
            g["bandwidth_bound_sps"] = round(bb, 3) if bb != float("inf") else "inf"
            lb = min(cb, bb)
            g["efficiency"] = round(g["median_sps"] / lb, 3) if lb == lb else ""
            for k in ("median_sps", "min_sps", "max_sps", "mean_sps"):
                g[k] = round(g[k], 3)
            w.writerow({k: g[k] for k in fields})
    print(f"wrote {out_csv}")
    tables = os.path.join(ROOT, "docs/results/throughput_tables.md")
    with open(tables, "w") as f:
        f.write(markdown_tables(agg, rows, a.slice_params,
                                os.path.relpath(os.path.join(a.out, "raw.csv"), ROOT)))
    print(f"wrote {tables}")
    # plots: throughput vs bandwidth per model, one line per mode and the peer
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for model in sorted({g["model"] for g in agg}):
        fig, ax = plt.subplots(figsize=(6, 4))
        pts = [g for g in agg if g["model"] == model and g["workers"] == 2 and
               g["mode"] != "local" and g["slice_params"] in ("", str(a.slice_params))]
        bws = sorted({g["bandwidth_gbps"] for g in pts})
        xpos = {b: (b if b > 0 else max(bws) * 2 if bws else 10) for b in bws}
        for mode in ["baseline", "slicing_only", "priority_only", "values_only", "no_overlap",
                     "no_backward_overlap", "no_forward_overlap", "p3", "ddp"]:
            mp = sorted([g for g in pts if g["mode"] == mode], key=lambda g: xpos[g["bandwidth_gbps"]])
            if not mp:
                continue
            colors = {"baseline": "C0", "slicing_only": "C1", "priority_only": "C2",
                      "no_overlap": "C3", "p3": "C4", "ddp": "C5", "values_only": "C6",
                      "no_backward_overlap": "C7", "no_forward_overlap": "C8"}
            ax.plot([xpos[g["bandwidth_gbps"]] for g in mp], [g["median_sps"] for g in mp],
                    marker="o", color=colors[mode], label=("PyTorch DDP (gloo)" if mode == "ddp" else mode))
        batch = pts[0]["batch"] if pts else 0
        bb = [(xpos[b], bandwidth_bound(model, b, batch)) for b in bws if b > 0]
        cb = local.get((model, batch))
        if cb:
            ax.axhline(statistics.median(cb) * 2, color="gray", ls="--", label="compute bound (2x local)")
        if bb:
            ax.plot([x for x, _ in bb], [y for _, y in bb], color="black", ls=":", marker="x",
                    label="bandwidth bound")
        ax.set_xscale("log")
        ax.set_xticks([xpos[b] for b in bws])
        ax.set_xticklabels([("unlim." if b == 0 else f"{b:g}") for b in bws])
        ax.set_xlabel("bandwidth per machine and direction (Gbit/s)")
        ax.set_ylabel("samples/s (2 workers)")
        shape = "16+16 tokens" if model in TOKEN_MODELS else "32x32"
        ax.set_title(f"{model}, {shape}, batch {batch}/worker, 2 emulated machines")
        top = max([g["median_sps"] for g in pts] + ([statistics.median(cb) * 2] if cb else [1]))
        ax.set_ylim(0, top * 1.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        png = os.path.join(ROOT, f"docs/results/throughput_{model}.png")
        fig.savefig(png, dpi=110)
        print(f"wrote {png}")
        plt.close(fig)
        sl = sorted([g for g in agg if g["model"] == model and g["mode"] == "p3" and
                     g["workers"] == 2 and g["slice_params"]],
                    key=lambda g: int(g["slice_params"]))
        sbw = [b for b in sorted({g["bandwidth_gbps"] for g in sl})
               if len([g for g in sl if g["bandwidth_gbps"] == b]) > 1]
        if sbw:
            fig, ax = plt.subplots(figsize=(6, 3.5))
            for b in sbw:
                gs = [g for g in sl if g["bandwidth_gbps"] == b]
                xs = [int(g["slice_params"]) for g in gs]
                ys = [g["median_sps"] for g in gs]
                err = [[y - g["min_sps"] for y, g in zip(ys, gs)],
                       [g["max_sps"] - y for y, g in zip(ys, gs)]]
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3,
                            label=f"p3, {fmt_bw(b)} Gbit/s (median, min–max)")
            ax.axvline(a.slice_params, color="gray", ls="--", label="default")
            ax.set_xscale("log")
            ax.set_xlabel("slice_params (parameters per slice)")
            ax.set_ylabel("samples/s (2 workers)")
            ax.set_title(f"{model}: throughput against slice size")
            ax.set_ylim(0, max(g["max_sps"] for g in sl) * 1.25)
            ax.legend(fontsize=7)
            fig.tight_layout()
            png = os.path.join(ROOT, f"docs/results/throughput_{model}_slices.png")
            fig.savefig(png, dpi=110)
            print(f"wrote {png}")
            plt.close(fig)


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
    r.add_argument("--slice_params", type=int, default=40000)
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
        {"run": cmd_run, "report": cmd_report, "trace": cmd_trace}[a.cmd](a)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Where each emulated link idles during a traced run, and what the workers did then
(docs/results/throughput/throughput.md, "The LSTM at 1 Gbit/s: where the link idles").

  # a traced P3 run whose links are sampled every 5 ms (root: the run's namespaces)
  sudo /usr/bin/python3 tools/experiments/link_idle.py record --samples=/tmp/x.csv -- \\
      /usr/bin/python3 tools/bench_throughput.py run --model=seq2seq_lstm --bandwidths=1 \\
      --modes=p3 --set=trace=true --out=/tmp/lstm1g-out
  # per iteration: each link direction's unused time, and what the local worker was doing
  /usr/bin/python3 tools/experiments/link_idle.py analyse --samples=/tmp/x.csv \\
      --trace=/tmp/lstm1g-out/runs/<run>/trace.json --bandwidth=1 \\
      --profile=configs/sim/profiles/seq2seq_lstm_b16_cpu.json \\
      --run=NAME --csv_iterations=iterations.csv --csv_causes=causes.csv
  # the schedule bound of a model: the link's time plus the span in which no schedule can
  # have anything to send (from a committed profile, and from a traced run)
  /usr/bin/python3 tools/experiments/link_idle.py bound --model=seq2seq_lstm --bandwidth=1 \\
      --profile=configs/sim/profiles/seq2seq_lstm_b16_cpu.json [--trace=.../trace.json]

`record` runs the command and, once a launcher below it has built its emulated network
(namespace p3-<launcher pid>-br), enters that namespace and reads /proc/net/dev every
--interval_s: on the bridge, port m<i>'s received bytes are what machine i uploaded (after
its eth0's tbf) and its sent bytes what machine i downloaded (after the port's tbf). It
writes one row per sample: wall-clock time (the trace's clock) and two counters per
emulated machine (every m<i> port of the bridge: the servers' machines of a separate
placement too).

`analyse` turns consecutive samples into each direction's use of the link (bytes ÷ what a
saturated link carries in that time, link_use()), and an iteration's **unused link time**
= Σ (1 − use) × dt over its samples. Each sample is attributed to what worker i (the
machine's own worker) was doing at its middle, from the trace's `compute` and `wait for
parameters` tracks: `forward <block>`, `backward <block>` (to the block's last gradient;
traces before 2026-12-07: to its first; with --profile, cut at each of its tensors'
gradients, worker_timeline()), `wait <block>` (the forward waiting for that block's
values), `loss+step` (between the forward's last block and the backward's start: the loss;
and after the backward: the trainer's bookkeeping).

The pure parts (parse, use, attribution, the bound) are tested by
//tests/tools/experiments:link_idle_test.
"""
import argparse
import bisect
import csv
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import models, runs, trace_file  # noqa: E402

DIRECTIONS = ["m0_up", "m0_down", "m1_up", "m1_down"]  # two machines' (the default)
CLONE_NEWNET = 0x40000000


# ---- record -------------------------------------------------------------------------------

def parse_net_dev(text):
    """{interface: (rx_bytes, tx_bytes)} of a /proc/net/dev text."""
    out = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        if len(f) >= 9:
            out[name.strip()] = (int(f[0]), int(f[8]))
    return out


def directions(machines):
    """The CSV's counter columns for machines 0 .. machines - 1."""
    return [f"m{i}_{d}" for i in range(machines) for d in ("up", "down")]


def machine_of(direction):
    """The machine of a counter column: 3 for "m3_up"."""
    return int(direction[1:direction.index("_")])


def machines_in(devs):
    """How many bridge ports m0, m1, ... (consecutive from m0) a parsed /proc/net/dev has."""
    n = 0
    while f"m{n}" in devs:
        n += 1
    return n


def sample_row(t, devs, machines=2):
    """One CSV row from a parsed /proc/net/dev: machine i's upload is what its bridge port
    m<i> received, its download what the port sent, for machines 0 .. machines - 1. None
    until every one of those ports exists."""
    if machines_in(devs) < machines:
        return None
    return [f"{t:.6f}"] + [x for i in range(machines) for x in devs[f"m{i}"]]


def descendants_of(root_pid):
    """Pids whose ancestry includes root_pid (root_pid included)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    parent[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out = {root_pid}
    changed = True
    while changed:
        changed = False
        for p, pp in parent.items():
            if pp in out and p not in out:
                out.add(p)
                changed = True
    return out


def find_bridge_namespace(root_pid):
    """The name of the bridge namespace built by a launcher below root_pid, or None."""
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return None
    mine = None
    for n in names:
        m = re.fullmatch(r"p3-(\d+)-br", n)
        if m:
            if mine is None:
                mine = descendants_of(root_pid)
            if int(m.group(1)) in mine:
                return n
    return None


def cmd_record(a):
    child = subprocess.Popen(a.command)
    ns = None
    while ns is None and child.poll() is None:
        ns = find_bridge_namespace(child.pid)
        if ns is None:
            time.sleep(0.05)
    if ns is None:
        sys.exit(f"link_idle: the command ended (status {child.returncode}) before any "
                 "emulated network of it appeared")
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        sys.exit(f"link_idle: setns({ns}): {os.strerror(ctypes.get_errno())}")
    os.close(fd)
    print(f"[link_idle] sampling {ns} every {a.interval_s} s", flush=True)
    rows, machines = [], 0
    cpu0 = os.times()
    while child.poll() is None:
        try:
            with open("/proc/net/dev") as f:
                devs = parse_net_dev(f.read())
        except OSError:
            devs = {}
        n = machines_in(devs)
        if n < 2:
            if rows:
                break  # the run removed its network
        else:
            machines = max(machines, n)
            rows.append(sample_row(time.time(), devs, n))
        time.sleep(a.interval_s)
    cpu1 = os.times()
    rc = child.wait()
    rows = [r for r in rows if len(r) == 1 + 2 * machines]  # the ports all built
    with open(a.samples, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["time_s"] + directions(machines))
        w.writerows(rows)
    busy = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    span = float(rows[-1][0]) - float(rows[0][0]) if len(rows) > 1 else 0.0
    print(f"[link_idle] {len(rows)} samples over {span:.1f} s in {a.samples}; the sampler's "
          f"own CPU {busy:.2f} s ({100 * busy / max(span, 1e-9):.1f} % of a core)", flush=True)
    sys.exit(rc)


# ---- analyse ------------------------------------------------------------------------------

def sample_directions(path):
    """The counter columns of a samples CSV (older files: the two machines')."""
    with open(path) as f:
        return next(csv.reader(f))[1:]


def read_samples(path):
    """[(time, [counter of each of sample_directions(path)])]."""
    with open(path) as f:
        reader = csv.DictReader(f)
        names = reader.fieldnames[1:]
        return [(float(r["time_s"]), [int(r[d]) for d in names]) for r in reader]


def link_use(samples, bandwidth_gbps, goodput=models.TCP_GOODPUT):
    """[(t0, t1, [use of each direction])] between consecutive samples: the bytes that
    crossed over what a saturated link carries in t1 - t0. The counters count an IP packet
    of up to 64 KB (GSO) with its headers once, tbf every frame's headers, so a saturated
    link shows about TCP's goodput in counter bytes (measured: the best 0.5 s of a run,
    best_window()). Not capped at 1: the sampler's wake-ups jitter, so one sample's share of
    the bytes can exceed its dt; summed over an iteration the uses are exact."""
    rate = bandwidth_gbps * 1e9 / 8 * goodput
    out = []
    for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
        if t1 <= t0:
            continue
        out.append((t0, t1, [(b - a) / (rate * (t1 - t0)) for a, b in zip(c0, c1)]))
    return out


def best_window(samples, direction, seconds=0.5):
    """The highest rate (bit/s, counter bytes) over any `seconds` of the samples."""
    best, j = 0.0, 0
    for i, (t, c) in enumerate(samples):
        while j < len(samples) and samples[j][0] - t < seconds:
            j += 1
        if j < len(samples):
            best = max(best, (samples[j][1][direction] - c[direction]) * 8 /
                       (samples[j][0] - t))
    return best


def trace_events(path):
    return trace_file.complete_events(path)  # a gzipped trace too


def require_no_packs(trace_path):
    """Exits when the traced run packed small tensors (scheduling.pack_params > 0 in the
    config.textproto beside its trace.json; the launcher's default since 31c53d8):
    slice_tensors() numbers the slices of a plan without packs, so a packed run's slice ids
    name the wrong tensors. A run without the field predates packs."""
    packs = runs.resolved_pack_params(os.path.dirname(os.path.abspath(trace_path)))
    if packs:
        sys.exit(f"{trace_path}: the run packed small tensors (pack_params {packs}); the "
                 "slices map to tensors only without packs: trace it with "
                 "--set=scheduling.pack_params=0")


def slice_tensors(blocks, slice_params):
    """[(block name, tensor index, parameters of the tensor)] per slice id of P3's plan
    (p3/core/slice_plan.h, no ownership stripes): each tensor, in forward order, cut into
    slices of slice_params, the last one shorter. `blocks`: a profile's blocks (name,
    params: the block's tensor sizes in forward order)."""
    out, t = [], 0
    for blk in blocks:
        for n in blk["params"]:
            out += [(blk["name"], t, n)] * (-(-n // slice_params))
            t += 1
    return out


def gradient_times(events, rank, slices):
    """{iteration: {tensor: (the first write of one of its gradient slices, block name,
    parameters)}} of worker `rank`: when a tensor's gradient existed (autograd's hook
    queues its slices at once; an idle link writes the first at once)."""
    out = {}
    for e in events:
        if e["pid"] != 100 + rank or e.get("cat") != "send" or \
                not e["name"].startswith("gradient "):
            continue
        block, t, n = slices[e["args"]["slice"]]
        per = out.setdefault(e["args"]["iteration"], {})
        ts = e["ts"] / 1e6
        if t not in per or ts < per[t][0]:
            per[t] = (ts, block, n)
    return out


def worker_timeline(events, rank, slices=None):
    """Worker `rank`'s activity as sorted (start_s, end_s, label, iteration): its compute
    events, and its waits labelled by the block whose forward follows them. With `slices`
    (slice_tensors()), an iteration's backward is cut at each tensor's gradient instead of
    each block's first: `backward <block>` up to the gradient of each of the block's
    tensors (traces before 2026-12-07 end a block at its first gradient, which for a
    Linear layer is the bias's, long before the weight's)."""
    mine = [e for e in events if e["pid"] == 100 + rank]
    compute = sorted((e for e in mine if e["track"] == "compute"), key=lambda e: e["ts"])
    out = [(e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6, e["name"], e["args"]["iteration"])
           for e in compute]
    if slices is not None:
        grads = gradient_times(events, rank, slices)
        cut = []
        for it in sorted({c[3] for c in out}):
            bwd = [c for c in out if c[3] == it and c[2].startswith("backward")]
            if not bwd or it not in grads:
                cut += [c for c in out if c[3] == it]
                continue
            cut += [c for c in out if c[3] == it and not c[2].startswith("backward")]
            prev = min(c[0] for c in bwd)
            for ts, block, _ in sorted(grads[it].values()):
                if ts > prev:
                    cut.append((prev, ts, f"backward {block}", it))
                    prev = ts
        out = sorted(cut)
    starts = [c[0] for c in out]
    for e in mine:
        if e["track"] != "wait for parameters":
            continue
        s, end = e["ts"] / 1e6, (e["ts"] + e["dur"]) / 1e6
        i = bisect.bisect_left(starts, end - 1e-6)
        nxt = out[i] if i < len(out) else None
        label = "wait " + nxt[2].split(" ", 1)[1] if nxt and nxt[2].startswith("forward") \
            else "wait"
        out.append((s, end, label, nxt[3] if nxt else -1))
    return sorted(out)


def iteration_starts(timeline):
    """{iteration: the start of its first forward block} of a worker timeline."""
    starts = {}
    for s, _, label, it in timeline:
        if label.startswith("forward") or label.startswith("wait"):
            starts[it] = min(starts.get(it, s), s)
    return starts


def label_at(timeline, t):
    """What the worker did at time t: the timeline's event covering t, else `loss+step`."""
    for s, e, label, _ in timeline:  # timelines are a few hundred events long
        if s <= t < e:
            return label
    return "loss+step"


def analyse(use, timelines, first_iteration, names=DIRECTIONS):
    """(per-iteration rows, {label: unused seconds summed over the iterations and
    directions}) from link_use() and each machine's worker's timeline (timelines[i]: the
    worker on machine i; empty for a machine without one), the uses' directions named by
    `names`; iteration i spans from worker 0's start of i to its start of i + 1, for
    i >= first_iteration."""
    starts = iteration_starts(timelines[0])
    its = [i for i in sorted(starts) if i >= first_iteration and i + 1 in starts]
    rows, by_label = [], {}
    for it in its:
        lo, hi = starts[it], starts[it + 1]
        unused = [0.0] * len(names)
        for t0, t1, u in use:
            a, b = max(t0, lo), min(t1, hi)
            if b <= a:
                continue
            mid = (a + b) / 2
            for d, name in enumerate(names):
                idle = (1 - u[d]) * (b - a)
                unused[d] += idle
                m = machine_of(name)
                if m >= len(timelines) or not timelines[m]:
                    continue  # no worker on that machine (a server's machine)
                label = label_at(timelines[m], mid)
                by_label[label] = by_label.get(label, 0.0) + idle
        rows.append({"iteration": it, "span_s": round(hi - lo, 4),
                     **{f"{n}_unused_s": round(x, 4) for n, x in zip(names, unused)}})
    return rows, by_label


def cmd_analyse(a):
    names = sample_directions(a.samples)
    samples = read_samples(a.samples)
    use = link_use(samples, a.bandwidth)
    print("best 0.5 s of each direction, Gbit/s of counter bytes (a saturated link is "
          f"about {a.bandwidth * models.TCP_GOODPUT:.3f}): " +
          " ".join(f"{d} {best_window(samples, i) / 1e9:.3f}" for i, d in enumerate(names)))
    events = trace_events(a.trace)
    slices = None
    if a.profile:
        require_no_packs(a.trace)
        with open(a.profile) as f:
            slices = slice_tensors(json.load(f)["blocks"], a.slice_params)
    # Worker r is on machine r in either placement (docs/network.md).
    timelines = [worker_timeline(events, r, slices) for r in range(len(names) // 2)]
    rows, by_label = analyse(use, timelines, a.first_iteration, names)
    if not rows:
        sys.exit("link_idle: no complete iteration in both the samples and the trace")
    print("iteration span_s " + " ".join(f"{d}_unused_s" for d in names))
    for r in rows:
        print(" ".join(str(r[k]) for k in r))
    spans = [r["span_s"] for r in rows]
    worked = [d for d in names if timelines[machine_of(d)]]
    unused = [statistics.mean(r[f"{d}_unused_s"] for d in worked) for r in rows]
    total = sum(by_label.values())
    print(f"median span {statistics.median(spans):.3f} s; unused link time per iteration and "
          f"direction: median {statistics.median(unused):.3f} s "
          f"({100 * statistics.median(unused) / statistics.median(spans):.1f} % of the span)")
    print("what the machine's own worker did while its link was unused "
          "(seconds per iteration and direction, share):")
    n = len(rows) * len(worked)
    for label, x in sorted(by_label.items(), key=lambda kv: -kv[1]):
        if x / n >= 0.001:
            print(f"  {label:24s} {x / n:.3f} s  {100 * x / total:5.1f} %")
    causes = [(label, x / n, x / total) for label, x in sorted(by_label.items(),
                                                           key=lambda kv: -kv[1])]
    if a.csv_iterations:
        append_csv(a.csv_iterations, ["run"] + list(rows[0]),
                   [[a.run] + list(r.values()) for r in rows])
    if a.csv_causes:
        append_csv(a.csv_causes, ["run", "worker_doing", "unused_s_per_iteration_and_direction",
                                  "share"],
                   [[a.run, label, round(x, 4), round(sh, 4)] for label, x, sh in causes])


def append_csv(path, header, rows):
    """Appends rows to a CSV, writing the header first when the file is new."""
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(header)
        w.writerows(rows)


# ---- bound --------------------------------------------------------------------------------

def block_times_from_trace(events, rank, first_iteration):
    """(blocks in forward order, {block: (median forward s, median backward s)}) of worker
    `rank` over the iterations from first_iteration on, from the trace's own events."""
    per, order = {}, []
    for s, e, label, it in worker_timeline(events, rank):
        kind, _, block = label.partition(" ")
        if it >= first_iteration and kind in ("forward", "backward"):
            per.setdefault(block, {"forward": [], "backward": []})[kind].append(e - s)
            if kind == "forward" and block not in order:
                order.append(block)
    return order, {b: (statistics.median(v["forward"]), statistics.median(v["backward"]))
                   for b, v in per.items()}


def dead_spans(events, rank, slices, first_iteration, link_bytes_per_s):
    """Per iteration from first_iteration on, the link time no schedule can use after the
    last block's forward starts: max over the iteration's gradients g of (g − that start −
    the link time of every gradient that existed before g, each tensor's 4 bytes per
    parameter per direction). Before the first gradient nothing can be sent at all (every
    value of this iteration has been consumed); after it, at most what exists."""
    last_block = slices[-1][0]
    starts = {it: s for s, _, label, it in worker_timeline(events, rank)
              if label == f"forward {last_block}"}
    out = []
    for it, per in sorted(gradient_times(events, rank, slices).items()):
        if it < first_iteration or it not in starts:
            continue
        released, best = 0.0, 0.0
        for ts, _, n in sorted(per.values()):
            best = max(best, ts - starts[it] - released)
            released += 4 * n / link_bytes_per_s
        out.append(best)
    return out


def schedule_bound(params, bandwidth_gbps, dead_span_s):
    """(link seconds per iteration and direction, the schedule bound's seconds per
    iteration, its ratio to the bandwidth bound). Between the last block's forward start
    and its first gradient, every block's values of this iteration have been consumed and
    no gradient of it exists, so no schedule has anything to send, in either direction:
    the period is at least the link's time plus that span."""
    link_s = params * 4 * 8 / (bandwidth_gbps * 1e9 * models.TCP_GOODPUT)
    t = link_s + dead_span_s
    return link_s, t, link_s / t


def cmd_bound(a):
    params = models.PARAMS[a.model]
    with open(a.profile) as f:
        p = json.load(f)
    goodput = a.bandwidth * 1e9 * models.TCP_GOODPUT / 8
    print(f"profile {a.profile}, blocks in forward order: parameters, MB per link "
          f"direction and iteration (half gradients, half values), link seconds at "
          f"{goodput / 1e6:.1f} MB/s, forward and backward s")
    for blk in p["blocks"]:
        n = sum(blk["params"])
        print(f"  {blk['name']:12s} {n:>11,d} {4 * n / 1e6:8.2f} MB {4 * n / goodput:7.4f} s"
              f"  {blk['forward_s']:.4f} {blk['backward_s']:.4f}")
    last = p["blocks"][-1]
    span = last["forward_s"] + last["backward_s"]
    print(f"'{last['name']}' forward {last['forward_s']:.3f} + backward {last['backward_s']:.3f}"
          f" = {span:.3f} s (the profile's backward of the last block includes the loss: "
          "models/model_bench.cc)")
    report(a, params, span, "profile")
    if a.trace:
        require_no_packs(a.trace)
        events = trace_events(a.trace)
        order, times = block_times_from_trace(events, a.rank, a.first_iteration)
        print(f"traced, worker {a.rank}, medians over iterations >= {a.first_iteration} (s; "
              "the trace's backward of a block ends at its first gradient):")
        for b in order:
            print(f"  {b:12s} forward {times[b][0]:.4f}  backward {times[b][1]:.4f}")
        spans = dead_spans(events, a.rank, slice_tensors(p["blocks"], a.slice_params),
                           a.first_iteration, goodput)
        print("  dead span per iteration (from the last block's forward start to its "
              "gradients, less what was released before): " +
              " ".join(f"{x:.3f}" for x in spans))
        report(a, params, statistics.median(spans), "traced, median dead span")


def report(a, params, span, what):
    link_s, t, ratio = schedule_bound(params, a.bandwidth, span)
    bound_sps = models.bandwidth_bound(a.model, a.bandwidth, a.batch)
    print(f"[{what}] link {link_s:.3f} s + dead span {span:.3f} s = {t:.3f} s per iteration: "
          f"{a.batch * 2 / t:.2f} samples/s = {ratio:.3f} of the bandwidth bound "
          f"({bound_sps:.2f} samples/s)")


# ---- levers -------------------------------------------------------------------------------

def lever_rounds(rows, labels, per_round):
    """[{label: (samples/s, load1)}] per round: rows in the order they ran, `per_round` to
    a round, each labelled by `labels` (same order)."""
    rounds = []
    for i, (r, label) in enumerate(zip(rows, labels)):
        if i % per_round == 0:
            rounds.append({})
        if r["status"] == "ok":
            rounds[-1][label] = (float(r["samples_per_second"]), float(r["load1"]))
    return rounds


def lever_table(rounds, default):
    """Rows per label: runs, median / min / max samples/s, the median / min / max over the
    rounds of its ratio to the same round's `default` run, load1 median / min / max."""
    labels = []
    for rd in rounds:
        labels += [k for k in rd if k not in labels]
    out = []
    for label in labels:
        sps = [rd[label][0] for rd in rounds if label in rd]
        loads = [rd[label][1] for rd in rounds if label in rd]
        ratios = [rd[label][0] / rd[default][0] for rd in rounds if label in rd and default in rd]
        out.append({"config": label, "runs": len(sps),
                    "median_sps": round(statistics.median(sps), 3), "min_sps": min(sps),
                    "max_sps": max(sps),
                    "ratio_to_default_median": round(statistics.median(ratios), 3),
                    "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
                    "load1_median": round(statistics.median(loads), 2),
                    "load1_min": round(min(loads), 2), "load1_max": round(max(loads), 2)})
    return out


def cmd_levers(a):
    with open(a.raw) as f:
        rows = sorted(csv.DictReader(f), key=lambda r: r["time_utc"])
    if a.labels:
        with open(a.labels) as f:
            labels = [line.strip().split("=", 1)[1] for line in f if line.strip()]
    else:
        labels = [f"slice_params={r['slice_params']}" for r in rows]
    table = lever_table(lever_rounds(rows, labels, a.per_round), a.default)
    print(" ".join(table[0]))
    for r in table:
        print(" ".join(str(v) for v in r.values()))
    if a.csv:
        append_csv(a.csv, list(table[0]), [list(r.values()) for r in table])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--samples", required=True)
    r.add_argument("--interval_s", type=float, default=0.005)
    r.add_argument("command", nargs="+")
    n = sub.add_parser("analyse")
    n.add_argument("--samples", required=True)
    n.add_argument("--trace", required=True)
    n.add_argument("--bandwidth", type=float, required=True, help="Gbit/s per direction")
    n.add_argument("--first_iteration", type=int, default=3, help="the first after warm-up")
    n.add_argument("--run", default="", help="the label of this run in the CSVs")
    n.add_argument("--csv_iterations", default="", help="appends a row per iteration")
    n.add_argument("--csv_causes", default="", help="appends a row per cause")
    n.add_argument("--profile", default="", help="with it, a backward is cut at each "
                   "tensor's gradient (worker_timeline)")
    n.add_argument("--slice_params", type=int, default=40000, help="the traced run's")
    b = sub.add_parser("bound")
    b.add_argument("--model", required=True)
    b.add_argument("--bandwidth", type=float, required=True)
    b.add_argument("--batch", type=int, default=16, help="per worker (2 workers)")
    b.add_argument("--profile", required=True, help="the model's blocks and their sizes")
    b.add_argument("--trace", default="")
    b.add_argument("--slice_params", type=int, default=40000, help="the traced run's")
    b.add_argument("--rank", type=int, default=0)
    b.add_argument("--first_iteration", type=int, default=3)
    v = sub.add_parser("levers", help="interleaved runs of several configs: each against "
                       "its round's default run")
    v.add_argument("--raw", required=True, help="bench_throughput's raw.csv")
    v.add_argument("--labels", default="", help="a file of lines config=<label>, one per row "
                   "of --raw in time order (default: slice_params=<the row's>)")
    v.add_argument("--per_round", type=int, required=True)
    v.add_argument("--default", default="slice_params=40000")
    v.add_argument("--csv", default="")
    a = p.parse_args()
    {"record": cmd_record, "analyse": cmd_analyse, "bound": cmd_bound,
     "levers": cmd_levers}[a.cmd](a)


if __name__ == "__main__":
    main()

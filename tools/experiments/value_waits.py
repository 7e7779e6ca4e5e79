#!/usr/bin/python3
"""What a P3 worker waits for, from traced runs, real or simulated: each block's wait per
iteration side by side, and what the first block's wait is made of
(docs/results/simulator/simulator.md, "Separate placement at 1 Gbit/s, traced").

  # each block's wait per iteration (and forward, backward), traces side by side
  /usr/bin/python3 tools/experiments/value_waits.py blocks --trace=real=<run>/trace.json \\
      --trace=model=/tmp/sim.json [--first_iteration=3] [--csv=F]
  # the first block's wait cut into the spans of its last slice's round trip
  /usr/bin/python3 tools/experiments/value_waits.py first --trace=<run>/trace.json \\
      [--first_iteration=3] [--run=NAME --csv=F]
  # how far apart a slice's gradients reach its server, and how long values then wait
  /usr/bin/python3 tools/experiments/value_waits.py servers --trace=real=<run>/trace.json \\
      --trace=model=/tmp/sim.json [--first_iteration=3 --last_iteration=11] [--csv=F]
  # which slices each worker writes while its backward still runs, and how alike
  /usr/bin/python3 tools/experiments/value_waits.py early --trace=real=<run>/trace.json \\
      --trace=model=/tmp/sim.json [--first_iteration=3] [--csv=F]

All four read the launcher's trace (`trace=true`) and p3_sim's (`--trace`), which carry the
same events: a worker's `wait v<version>` with the slices it waits for (first_slice,
last_slice: the block's), `forward` / `backward` on its compute track, `gradient s` and
`params s` on its send and receive tracks; a server's `aggregate s` (a slice's first
gradient of an iteration) and `aggregate+update s` (its last) on each worker's track,
and `params s` to each worker.

`blocks`: a block is known by its slices; its wait per iteration is the waits' sum
over the iterations from --first_iteration (both workers' alike) ÷ those iterations.
It also gives how much the computation varies: a worker's forward + backward from
iteration to iteration, and each block's (p3_sim's --block_jitter). In traces from before
2026-12-07 each `backward <block>` span holds mostly the work of the block before it in
the backward pass (worker/backward_spans.h).

`first`: block 0's wait (the narrowest wait from slice 0 in a version; the backward wrote
its gradients last). Of its slices, the one that reached the worker last ended the wait;
its way, from the worker handing the gradient to gRPC to the values arriving:
  uplink     the worker's `gradient s` -> the server's aggregate of that worker's gradient
             (the kernel's queues, the link, the server's reader);
  others     -> the server's last aggregate of the slice (waiting for the slowest
             worker's gradient: the workers' phase);
  server     -> the server's `params s` write to this worker (sum, update, send queue);
  downlink   -> the worker's `params s` receipt.
The spans add up to the round trip; the wait is the part of it the worker's own work did
not cover. A wait under 20 us is not traced (the values were in): that iteration has no
row.

`servers`: quantiles, per trace, of a slice's first-to-last gradient at its server (the
workers' send orders apart) and of its last two gradients', of the workers' writes of
its gradient (first to last), of its update to each values write (the values waiting in
the server's send queue), and of a worker's last gradient write to its last value of the
next version (the values' tail), over iterations --first_iteration .. --last_iteration.

`early`: per worker and iteration, the slices it handed to gRPC before its own backward
ended (P3 writes what the backward has just produced, the most urgent so far), their
share of its writes, and how alike two workers' such slices are.

The pure parts are tested by //tests/tools/experiments:value_waits_test.
"""
import argparse
import collections
import csv
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import trace_file  # noqa: E402

SPANS = ("uplink", "others", "server", "downlink")


def read_events(path):
    """The trace's complete events, each with its track's name as "track" (a .gz file
    read as its gzip'd JSON)."""
    return trace_file.complete_events(path)


def is_worker(e):
    return 100 <= e["pid"] < 200  # workers are pids 100 + rank, servers 200 + index


def waits_of(events, first_iteration):
    """[(worker, version, first_slice, last_slice, start_s, seconds)] of the block waits of
    versions > first_iteration (the values of iteration first_iteration's gradients on)."""
    out = []
    for e in events:
        a = e.get("args", {})
        if is_worker(e) and e["name"].startswith("wait v") and "first_slice" in a:
            version = int(e["name"][len("wait v"):])
            if version > first_iteration:
                out.append((e["pid"] - 100, version, a["first_slice"], a["last_slice"],
                            e["ts"] / 1e6, e["dur"] / 1e6))
    return out


def block_names(events):
    """{(first slice, last slice): block name}: the forward that follows each wait."""
    forwards = collections.defaultdict(list)
    for e in events:
        if is_worker(e) and e["track"] == "compute" and e["name"].startswith("forward "):
            forwards[e["pid"] - 100].append((e["ts"] / 1e6, e["name"][len("forward "):]))
    for f in forwards.values():
        f.sort()
    names = {}
    for w, _, first, last, start, dur in waits_of(events, -1):
        after = [name for ts, name in forwards[w] if ts >= start + dur - 1e-6]
        if after and (first, last) not in names:
            names[(first, last)] = after[0]
    return names


def blocks(events, first_iteration):
    """({(first, last slice): wait seconds per iteration and worker}, forward s, backward s
    per iteration and worker, the relative standard deviation of a worker's forward +
    backward over those iterations and workers): the waits of versions after
    first_iteration (the final Sync's, over every slice, left out), the computation of
    those iterations that the trace holds."""
    waits = waits_of(events, first_iteration)
    if not waits:
        return {}, 0.0, 0.0, 0.0
    if any(w[2] > 0 for w in waits):  # several blocks: one wait over all is the final Sync's
        every = max(w[3] for w in waits)
        waits = [w for w in waits if (w[2], w[3]) != (0, every)]
    versions = sorted({w[1] for w in waits})
    workers = {w[0] for w in waits}
    n = len(versions) * len(workers)
    per = collections.defaultdict(float)
    for w in waits:
        per[(w[2], w[3])] += w[5] / n
    compute = {"forward": 0.0, "backward": 0.0}
    each = collections.defaultdict(float)  # (worker, iteration): forward + backward
    for e in events:
        it = e.get("args", {}).get("iteration")
        if is_worker(e) and e["track"] == "compute" and it is not None and \
                e["pid"] - 100 in workers and versions[0] <= it <= versions[-1]:
            kind = e["name"].split(" ", 1)[0]
            if kind in compute:
                compute[kind] += e["dur"] / 1e6
                each[(e["pid"], it)] += e["dur"] / 1e6
    n = max(1, len(each))
    spread = statistics.stdev(each.values()) / statistics.mean(each.values()) \
        if len(each) > 1 else 0.0
    return dict(per), compute["forward"] / n, compute["backward"] / n, spread


def slice_events(events):
    """The per-slice events of a trace, in seconds: "written" {(worker, slice, iteration):
    [its gradient writes]}, "received" {(worker, slice, version): the values' receipt},
    "aggregated" {(server pid, slice, iteration): {worker: receipt of its gradient}},
    "updated" {(server pid, slice, iteration): receipt of the gradient that completed it},
    "value_writes" {(server pid, worker, slice, version): the values' write}."""
    out = {k: {} for k in ("written", "received", "aggregated", "updated", "value_writes")}
    for e in events:
        name, a, t = e["name"], e.get("args", {}), e["ts"] / 1e6
        if is_worker(e):
            w = e["pid"] - 100
            if e["track"].startswith("send to server") and name.startswith("gradient "):
                out["written"].setdefault((w, a["slice"], a["iteration"]), []).append(t)
            elif e["track"].startswith("receive from server") and name.startswith("params "):
                out["received"][(w, a["slice"], a["version"])] = t
        elif e["track"].startswith("from worker ") and name.startswith("aggregate"):
            # Each starts on the gradient's receipt (server/stream_handler.cc); the last of
            # a slice's is an `aggregate+update`.
            key = (e["pid"], a["slice"], a["iteration"])
            out["aggregated"].setdefault(key, {})[int(e["track"].split()[-1])] = t
            if name.startswith("aggregate+update"):
                out["updated"][key] = t
        elif e["track"].startswith("to worker ") and name.startswith("params "):
            out["value_writes"][(e["pid"], int(e["track"].split()[-1]), a["slice"],
                                 a["version"])] = t
    return out


def decompose(events, first_iteration):
    """[{iteration, worker, slice, wait_s, round_trip_s, uplink_s, others_s, server_s,
    downlink_s}] for each worker's block-0 wait of version i + 1, i >= first_iteration."""
    ev = slice_events(events)
    recv = ev["received"]
    agg = {(s, it): by for (_, s, it), by in ev["aggregated"].items()}
    sent = {(w, s, v): t for (_, w, s, v), t in ev["value_writes"].items()}
    waits = [w for w in waits_of(events, first_iteration) if w[2] == 0]
    narrowest = min((w[3] for w in waits), default=0)
    rows = []
    for w, version, _, last, _, dur in sorted(waits, key=lambda x: (x[1], x[0])):
        # A later block's wait may start at slice 0 too (a pack of small tensors leads the
        # plan), and the final Sync's does; where block 0's own wait was not traced, the
        # version has no row.
        if last != narrowest:
            continue
        it = version - 1
        arrived = [(recv[(w, s, version)], s) for s in range(last) if (w, s, version) in recv]
        if not arrived:
            continue
        r, s = max(arrived)
        writes, by_worker = ev["written"].get((w, s, it)), agg.get((s, it), {})
        p = sent.get((w, s, version))
        if not writes or w not in by_worker or p is None:
            continue
        g, own, latest = min(writes), by_worker[w], max(by_worker.values())
        rows.append({"iteration": it, "worker": w, "slice": s, "wait_s": round(dur, 6),
                     "round_trip_s": round(r - g, 6), "uplink_s": round(own - g, 6),
                     "others_s": round(latest - own, 6), "server_s": round(p - latest, 6),
                     "downlink_s": round(r - p, 6)})
    return rows


def quantiles(values, ps=(0.5, 0.75, 0.9, 1.0)):
    """The values' quantiles at ps (nearest rank below), None without values."""
    v = sorted(values)
    return [v[int(p * (len(v) - 1))] if v else None for p in ps]


def servers(events, first_iteration, last_iteration):
    """For iterations first_iteration .. last_iteration: {"gradient_gap": a slice's first
    to last gradient at its server, "last_two_gap": its last two gradients' (with more than
    two workers), "write_gap": the workers' writes of its gradient, first to last,
    "write_lag": its update to each `params` write (the values in the server's send
    queue), "values_tail": a worker's last gradient write to its last value of the next
    version} as lists of seconds."""
    ev = slice_events(events)
    arrivals, last = ev["aggregated"], ev["updated"]
    writes = collections.defaultdict(list)  # (server pid, slice, iteration): values' writes
    for (pid, _, sl, version), t in ev["value_writes"].items():
        writes[(pid, sl, version - 1)].append(t)
    grads = collections.defaultdict(list)  # (worker, iteration): its gradient writes
    written = collections.defaultdict(dict)  # (slice, iteration): {worker: first write}
    for (w, sl, it), ts in ev["written"].items():
        grads[(w, it)] += ts
        written[(sl, it)][w] = min(ts)
    values = collections.defaultdict(list)  # (worker, version): its values' receipts
    for (w, _, version), t in ev["received"].items():
        values[(w, version)].append(t)
    ours = lambda it: first_iteration <= it <= last_iteration  # noqa: E731
    done = [k for k in last if ours(k[2]) and len(arrivals[k]) > 1]
    return {
        "gradient_gap": [last[k] - min(arrivals[k].values()) for k in done],
        # The last two: with a colocated worker (its gradient through shared memory,
        # mostly first), the two slowest of the network's.
        "last_two_gap": [last[k] - sorted(arrivals[k].values())[-2] for k in done],
        # When the workers handed the same slice's gradient to gRPC, first to last: the
        # part of the gap the network did not make.
        "write_gap": [max(v.values()) - min(v.values()) for (s, it), v in written.items()
                      if ours(it) and len(v) > 1],
        "write_lag": [t - last[k] for k in last if ours(k[2]) for t in writes.get(k, [])],
        "values_tail": [max(values[(w, it + 1)]) - max(ts) for (w, it), ts in grads.items()
                        if ours(it) and (w, it + 1) in values],
    }


def early_writes(events, first_iteration):
    """How alike the workers write during the backward: for each worker and iteration from
    first_iteration, the slices it handed to gRPC before its backward ended (its last
    `backward` span's end). {"share": each worker-iteration's share of its gradient
    writes, "overlap": per iteration, |A ∩ B| ÷ |A ∪ B| of those slices, the mean over
    pairs of workers}."""
    ends, written = {}, collections.defaultdict(list)
    for e in events:
        it = e.get("args", {}).get("iteration", -1)
        if not is_worker(e) or it < first_iteration:
            continue
        key = (e["pid"] - 100, it)
        if e["track"] == "compute" and e["name"].startswith("backward "):
            ends[key] = max(ends.get(key, 0.0), (e["ts"] + e["dur"]) / 1e6)
        elif e["track"].startswith("send to server") and e["name"].startswith("gradient "):
            written[key].append((e["ts"] / 1e6, e["args"]["slice"]))
    early = collections.defaultdict(dict)  # iteration: {worker: its early slices}
    share = []
    for key, ws in sorted(written.items()):
        if key in ends:
            mine = {s for t, s in ws if t <= ends[key]}
            early[key[1]][key[0]] = mine
            share.append(len(mine) / len(ws))
    overlap = []
    for by_worker in early.values():
        sets = list(by_worker.values())
        pairs = [(a, b) for i, a in enumerate(sets) for b in sets[i + 1:] if a | b]
        if pairs:
            overlap.append(statistics.mean(len(a & b) / len(a | b) for a, b in pairs))
    return {"share": share, "overlap": overlap}


def labelled(spec):
    """A --trace argument LABEL=PATH (or PATH alone): (label, path), the label the path
    where none is given."""
    label, _, path = spec.rpartition("=")
    return label or path, path


def append_csv(path, rows):
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)


def block_spread(events, first_iteration):
    """How much each block's computation varies: per `forward <block>` or `backward
    <block>` of iterations from first_iteration (every worker's), the standard deviation of
    its durations' logs; their mean weighted by each one's mean duration (p3_sim's
    --block_jitter). 0 without three of any."""
    durations = collections.defaultdict(list)
    for e in events:
        if is_worker(e) and e["track"] == "compute" and \
                e.get("args", {}).get("iteration", -1) >= first_iteration:
            durations[e["name"]].append(max(e["dur"], 1.0) / 1e6)
    weighted = [(statistics.mean(v), statistics.pstdev([math.log(d) for d in v]))
                for v in durations.values() if len(v) >= 3]
    total = sum(m for m, _ in weighted)
    return sum(m * sd for m, sd in weighted) / total if total else 0.0


def cmd_blocks(a):
    labels, results, names = [], [], {}
    for spec in a.trace:
        label, path = labelled(spec)
        labels.append(label)
        events = read_events(path)
        results.append(blocks(events, a.first_iteration) +
                       (block_spread(events, a.first_iteration),))
        names = {**block_names(events), **names}
    keys = sorted(set().union(*(r[0] for r in results)))
    print("| block (its slices) | " + " | ".join(f"{x} wait ms" for x in labels) + " |")
    print("|---|" + "---:|" * len(labels))
    rows = []
    for k in keys:
        print(f"| {names.get(k, '?')} ({k[0]} – {k[1] - 1}) | " +
              " | ".join(f"{1e3 * r[0].get(k, 0.0):.1f}" for r in results) + " |")
        rows += [{"trace": x, "block": names.get(k, ""), "slices": f"{k[0]}-{k[1] - 1}",
                  "wait_s_per_iteration": round(r[0].get(k, 0.0), 6)}
                 for x, r in zip(labels, results)]
    for name, i in (("all waits", None), ("forward", 1), ("backward", 2)):
        vals = [sum(r[0].values()) if i is None else r[i] for r in results]
        print(f"| **{name}** | " + " | ".join(f"**{1e3 * v:.1f}**" for v in vals) + " |")
        rows += [{"trace": x, "block": name, "slices": "", "wait_s_per_iteration": round(v, 6)}
                 for x, v in zip(labels, vals)]
    print("| forward + backward: sd ÷ mean over iterations and workers | " +
          " | ".join(f"{r[3]:.3f}" for r in results) + " |")
    print("| each block's computation: sd of the log, weighted by its time | " +
          " | ".join(f"{r[4]:.3f}" for r in results) + " |")
    for x, r in zip(labels, results):
        rows.append({"trace": x, "block": "compute sd / mean", "slices": "",
                     "wait_s_per_iteration": round(r[3], 4)})
        rows.append({"trace": x, "block": "block log sd", "slices": "",
                     "wait_s_per_iteration": round(r[4], 4)})
    if a.csv:
        append_csv(a.csv, rows)


def cmd_first(a):
    rows = decompose(read_events(a.trace[0]), a.first_iteration)
    if not rows:
        sys.exit("value_waits: no traced block-0 wait with all of its slice's events "
                 "(a P3 run with trace=true?)")
    cols = ("wait_s", "round_trip_s") + tuple(f"{x}_s" for x in SPANS)
    print("| iteration | worker | slice | " + " | ".join(c[:-2] + " ms" for c in cols) + " |")
    print("|---:|---:|---:|" + "---:|" * len(cols))
    for r in rows:
        print(f"| {r['iteration']} | {r['worker']} | {r['slice']} | " +
              " | ".join(f"{1e3 * r[c]:.1f}" for c in cols) + " |")
    print("| **median** | | | " + " | ".join(
        f"**{1e3 * statistics.median(r[c] for r in rows):.1f}**" for c in cols) + " |")
    print(f"{len(rows)} waits, iterations {rows[0]['iteration']} - {rows[-1]['iteration']}")
    if a.csv:
        append_csv(a.csv, [dict({"run": a.run}, **r) for r in rows])


def cmd_servers(a):
    print("| trace | what | n | median ms | p75 ms | p90 ms | max ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    rows = []
    for spec in a.trace:
        label, path = labelled(spec)
        for what, v in servers(read_events(path), a.first_iteration, a.last_iteration).items():
            q = quantiles(v)
            if q[0] is None:
                continue
            print(f"| {label} | {what} | {len(v)} | " +
                  " | ".join(f"{1e3 * x:.1f}" for x in q) + " |")
            rows.append({"trace": label, "what": what, "n": len(v),
                         **{f"{k}_s": round(x, 6) for k, x in zip(("median", "p75", "p90", "max"), q)}})
    if a.csv:
        append_csv(a.csv, rows)


def cmd_early(a):
    print("| trace | gradient writes before the writer's backward ended: median (min – max) | "
          "the workers' early slices, in common ÷ in either: median (min – max) |")
    print("|---|---:|---:|")
    rows = []
    for spec in a.trace:
        label, path = labelled(spec)
        r = early_writes(read_events(path), a.first_iteration)
        cells = [f"{statistics.median(v):.2f} ({min(v):.2f} – {max(v):.2f})" if v else "–"
                 for v in (r["share"], r["overlap"])]
        print(f"| {label} | {cells[0]} | {cells[1]} |")
        rows += [{"trace": label, "what": k, "median": round(statistics.median(v), 4),
                  "min": round(min(v), 4), "max": round(max(v), 4), "n": len(v)}
                 for k, v in r.items() if v]
    if a.csv:
        append_csv(a.csv, rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["blocks", "first", "servers", "early"])
    ap.add_argument("--trace", action="append", required=True,
                    help="a trace.json (blocks, servers, early: LABEL=PATH, repeatable)")
    ap.add_argument("--first_iteration", type=int, default=3, help="the first after warm-up")
    ap.add_argument("--last_iteration", type=int, default=11,
                    help="servers: the last whose next version the run completed")
    ap.add_argument("--run", default="", help="first: this run's label in --csv")
    ap.add_argument("--csv", help="appends the rows printed")
    a = ap.parse_args()
    {"blocks": cmd_blocks, "first": cmd_first, "servers": cmd_servers,
     "early": cmd_early}[a.what](a)


if __name__ == "__main__":
    main()

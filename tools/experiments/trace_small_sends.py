#!/usr/bin/env python3
"""How many of a traced cluster run's messages are small, and how many of those a writer
could have put in one message with the one before (docs/results/throughput/throughput.md,
"Packs of small tensors"). Reads a merged launcher trace (trace.json, or .json.gz: a run
with --set=trace=true): every "send" event of every writer track (a worker's "send to
server i", a server's "to worker r"), in time order per track. A send is *small* when it
carries at most --small_bytes; it is *foldable* when it and the send before it on the same
track are both small and it starts within --gap_us of that one's end (the writer did not
wait for it: it was queued while the other went out, so a writer that batched the queue
could have sent both in one message).

  /usr/bin/python3 tools/experiments/trace_small_sends.py \\
      docs/results/throughput/trace_resnet50_p3_unlimited_2026-12-05.json.gz
"""
import argparse
import collections
import gzip
import json


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        t = json.load(f)
    return t["traceEvents"] if isinstance(t, dict) else t


def count(events, small_bytes, gap_us):
    """{track name: (sends, small, foldable)} and the totals under "all"."""
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    tracks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "send":
            tracks[(e["pid"], e["tid"])].append(e)
    out = {}
    totals = [0, 0, 0]
    for key, sends in sorted(tracks.items()):
        sends.sort(key=lambda e: e["ts"])
        small = foldable = 0
        prev = None
        for e in sends:
            is_small = e["args"].get("bytes", 0) <= small_bytes
            if is_small:
                small += 1
                if (prev is not None and prev["args"].get("bytes", 0) <= small_bytes and
                        e["ts"] - (prev["ts"] + prev["dur"]) < gap_us):
                    foldable += 1
            prev = e
        name = f"{key[0]}:{names.get(key, key[1])}"
        out[name] = (len(sends), small, foldable)
        totals = [totals[0] + len(sends), totals[1] + small, totals[2] + foldable]
    out["all"] = tuple(totals)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--small_bytes", type=int, default=65536)
    ap.add_argument("--gap_us", type=float, default=30.0)
    a = ap.parse_args()
    counts = count(load(a.trace), a.small_bytes, a.gap_us)
    print(f"| writer | sends | at most {a.small_bytes} bytes | foldable into the one before "
          f"(within {a.gap_us:g} µs) |")
    print("|---|---:|---:|---:|")
    for name, (n, small, foldable) in counts.items():
        share = f" ({small / n:.0%}; {foldable / n:.1%})" if name == "all" and n else ""
        print(f"| {name} | {n} | {small} | {foldable}{share} |")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""TCP on loopback in one direction and in both at once: the reference for P3's streaming,
which moves gradients up and values down at the same time (issue 35;
docs/results/streaming/streaming.md, "Both directions at once").

Three ways to load loopback, each for --seconds, interleaved over --rounds:
- one_way: one iperf3 client sending to one iperf3 server (the issue's reference);
- bidir: iperf3 --bidir, both directions over one client and one server process. iperf3
  3.12 runs one thread per end, so each thread both sends and receives;
- two_pairs: two independent one-way pairs in opposite directions at once (the second
  with -R: its server sends), four processes, so each direction has its own sender and
  receiver, as P3's worker and server each have a writer and a reader thread.
The figure is each direction's receiver rate (end.sum_received, and
end.sum_received_bidir_reverse for --bidir's second direction).

  /usr/bin/python3 tools/experiments/iperf3_directions.py --rounds=5 --seconds=3 \\
      --csv=docs/results/streaming/iperf3_directions_2026-12-05.csv
  /usr/bin/python3 tools/experiments/iperf3_directions.py --report --csv=F   # medians again

One CSV row per run: round, kind, up_gbps, down_gbps (empty for one_way), each_way_gbps
(their mean; one_way: up), load1 at its start.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from results_lib import csv_io  # noqa: E402

FIELDS = ["date", "round", "kind", "up_gbps", "down_gbps", "each_way_gbps", "seconds", "load1"]
KINDS = ["one_way", "bidir", "two_pairs"]
BASE_PORT = 5301


def received_gbps(report, reverse=False):
    """Gbit/s the receiver of one direction got in iperf3's -J `report` (a dict): the
    forward one, or with `reverse` --bidir's second direction. An error names what is
    missing."""
    key = "sum_received_bidir_reverse" if reverse else "sum_received"
    if "error" in report:
        raise ValueError(f"iperf3 failed: {report['error']}")
    try:
        bits = report["end"][key]["bits_per_second"]
    except (KeyError, TypeError):
        raise ValueError(f"no end.{key}.bits_per_second in iperf3's report") from None
    if bits <= 0:
        raise ValueError(f"end.{key}: nothing received")
    return bits / 1e9


def row(rnd, kind, up, down, seconds, load1):
    each = up if down is None else (up + down) / 2
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "round": rnd,
            "kind": kind, "up_gbps": f"{up:.4f}",
            "down_gbps": "" if down is None else f"{down:.4f}",
            "each_way_gbps": f"{each:.4f}", "seconds": seconds, "load1": load1}


def start_server(port):
    """An iperf3 server for one test on 127.0.0.1:`port`; returns its process."""
    p = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 5
    while time.time() < deadline:  # listening once ss shows the port
        out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                             text=True).stdout
        if out.strip():
            return p
        time.sleep(0.05)
    p.kill()
    raise RuntimeError(f"iperf3 server on port {port} did not listen within 5 s")


def client(port, seconds, extra=()):
    """An iperf3 client's process, its -J report to a pipe."""
    return subprocess.Popen(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds),
                             "-J", *extra], stdout=subprocess.PIPE, text=True)


def report_of(p, timeout):
    out, _ = p.communicate(timeout=timeout)
    return json.loads(out)


def measure(kind, seconds):
    """One run of `kind`: (up Gbit/s, down Gbit/s or None)."""
    timeout = seconds + 20
    if kind == "one_way":
        server = start_server(BASE_PORT)
        up = received_gbps(report_of(client(BASE_PORT, seconds), timeout))
        server.wait(timeout=10)
        return up, None
    if kind == "bidir":
        server = start_server(BASE_PORT + 1)
        report = report_of(client(BASE_PORT + 1, seconds, ["--bidir"]), timeout)
        server.wait(timeout=10)
        return received_gbps(report), received_gbps(report, reverse=True)
    if kind == "two_pairs":
        servers = [start_server(BASE_PORT + 2), start_server(BASE_PORT + 3)]
        ups = client(BASE_PORT + 2, seconds)
        downs = client(BASE_PORT + 3, seconds, ["-R"])
        up, down = report_of(ups, timeout), report_of(downs, timeout)
        for s in servers:
            s.wait(timeout=10)
        return received_gbps(up), received_gbps(down)
    raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")


def table(rows):
    """Medians (min - max) per kind, in Gbit/s, and each kind's each-way rate over one_way's."""
    by = {k: [r for r in rows if r["kind"] == k] for k in KINDS}

    def med(rs, key):
        v = [float(r[key]) for r in rs if r.get(key, "") != ""]
        return (statistics.median(v), min(v), max(v)) if v else None

    one = med(by["one_way"], "each_way_gbps")
    lines = ["| load | up Gbit/s | down Gbit/s | each way Gbit/s | each way ÷ one way | runs |",
             "|---|---:|---:|---:|---:|---:|"]
    for k in KINDS:
        rs = by[k]
        if not rs:
            continue
        cells = [k]
        for key in ("up_gbps", "down_gbps", "each_way_gbps"):
            m = med(rs, key)
            cells.append(f"{m[0]:.2f} ({m[1]:.2f} – {m[2]:.2f})" if m else "–")
        each = med(rs, "each_way_gbps")
        cells.append(f"{each[0] / one[0]:.2f}" if one and each else "–")
        cells.append(str(len(rs)))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=3, help="each run (whole seconds, >= 1)")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--append", action="store_true", help="keep the runs already in --csv")
    ap.add_argument("--report", action="store_true", help="only print the table of --csv")
    a = ap.parse_args()
    if a.report:
        print(table(csv_io.read_rows(a.csv)))
        return 0
    if a.seconds < 1 or a.rounds < 1:
        ap.error("--seconds and --rounds must be at least 1")
    rows = csv_io.read_rows(a.csv) if a.append and os.path.exists(a.csv) else []
    first = 1 + max([int(r["round"]) for r in rows] or [0])
    for rnd in range(first, first + a.rounds):
        order = KINDS if rnd % 2 else KINDS[::-1]
        for kind in order:
            load1 = open("/proc/loadavg").read().split()[0]
            up, down = measure(kind, a.seconds)
            rows.append(row(rnd, kind, up, down, a.seconds, load1))
            print(f"round {rnd} {kind}: up {up:.2f}"
                  + ("" if down is None else f", down {down:.2f}") + " Gbit/s", flush=True)
            time.sleep(1)
        folder = os.path.dirname(a.csv)
        if folder:
            os.makedirs(folder, exist_ok=True)
        csv_io.write_rows(a.csv, rows, FIELDS)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The link-fault probe (link_faults.py --probe): what TCP, the links, the bridge and the
qdiscs of one emulated run do from a fault to the end of the run.

Every `interval_s` (0.5 s) one shell reads, in each machine's namespace (p3-<pid>-m<i>):
`ss -tinmoe` (per connection: rto, backoff, retrans, unacked, cwnd, send-q/recv-q, the
timer), `ip -s link` of eth0, `tc -s qdisc` of eth0 and the neighbour table; and in the
bridge's namespace (p3-<pid>-br): `bridge link` (each port's state), `ip -d link` of br0
(stp_state, forward_delay), `ip -s link` and `tc -s qdisc` of every port. Each sample starts
with a line `=== t=+S.SSS` (seconds since the fault went on); mark() adds event lines
(`=== event t=+S.SSS text`: the injection, the undo and its result, the end of the run).

connections() reads a probe log back as one row per (sample, connection): the figures
link_faults.md quotes. Pure, tested in //tests/tools/experiments:link_probe_test. As a
command, it writes them as CSV:

  /usr/bin/python3 tools/experiments/link_probe.py RUN.probe.log --csv out.csv [--shift S]
"""

import argparse
import os
import re
import subprocess
import sys
import threading
import time

# Fields of `ss -tinmoe` picked out per connection; `timer` is (name, seconds left, count).
SS_FIELDS = ["rto", "backoff", "retrans", "unacked", "cwnd", "lost", "lastsnd", "lastrcv",
             "lastack", "bytes_retrans", "pacing_rate", "bw"]


def sample_script(launcher_pid, machines):
    """The shell text of one sample of run `launcher_pid`'s namespaces."""
    run_id = f"p3-{launcher_pid}"
    br = f"{run_id}-br"
    parts = []
    for m in range(machines):
        ns = f"{run_id}-m{m}"
        parts += [f"echo '--- {ns} ss'", f"ss -N {ns} -tinmoe",
                  f"echo '--- {ns} link'", f"ip -n {ns} -s link show eth0",
                  f"echo '--- {ns} qdisc'", f"tc -n {ns} -s qdisc show dev eth0",
                  f"echo '--- {ns} neigh'", f"ip -n {ns} neigh"]
    parts += [f"echo '--- {br} bridge'", f"bridge -n {br} link",
              f"echo '--- {br} br0'", f"ip -n {br} -d link show br0",
              f"echo '--- {br} links'", f"ip -n {br} -s link",
              f"echo '--- {br} qdisc'", f"tc -n {br} -s qdisc"]
    return "; ".join(p + " 2>&1" if not p.startswith("echo") else p for p in parts)


class Probe:
    """Samples run `launcher_pid`'s namespaces into `path` from start() until stop()."""

    def __init__(self, launcher_pid, machines, path, interval_s=0.5):
        self._script = sample_script(launcher_pid, machines)
        self._path = path
        self._interval_s = interval_s
        self._zero = time.monotonic()
        self._stop = threading.Event()
        self._mu = threading.Lock()
        self._out = open(path, "w")
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _write(self, text):
        with self._mu:
            self._out.write(text)
            self._out.flush()

    def since(self):
        return time.monotonic() - self._zero

    def start(self, zero=None):
        """Starts sampling; times are counted from `zero` (monotonic; default: now)."""
        self._zero = time.monotonic() if zero is None else zero
        self._thread.start()

    def mark(self, text):
        self._write(f"=== event t={self.since():+.3f} {text}\n")

    def _loop(self):
        while not self._stop.is_set():
            begin = time.monotonic()
            p = subprocess.run(["sh", "-c", self._script], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=30)
            self._write(f"=== t={begin - self._zero:+.3f}\n{p.stdout}")
            self._stop.wait(max(0.0, self._interval_s - (time.monotonic() - begin)))

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._mu:
            self._out.close()


def _field(text, name):
    """The value of `name:VALUE` in one ss info line ('' when absent)."""
    if name == "pacing_rate":  # "pacing_rate 13664bps", no colon
        m = re.search(r"pacing_rate (\d+bps)", text)
    else:  # bw: inside BBR's "bbr:(bw:11040bps,mrtt:...)"
        m = re.search(r"(?:^|[\s(,])" + re.escape(name) + r":([^\s,)]+)", text)
    return m.group(1) if m else ""


def connections(log):
    """Rows (dict) of every TCP connection in every sample of a probe log: t, ns, state,
    recv_q, send_q, local, peer, timer (e.g. "on,1.2sec,3"), and SS_FIELDS."""
    rows = []
    t = ns = None
    current = None
    in_ss = False
    for line in log.splitlines():
        if line.startswith("=== t="):
            t = float(line.split("=")[-1])
            continue
        if line.startswith("=== event"):
            continue
        if line.startswith("--- "):
            _, ns, what = line.split()
            in_ss = what == "ss"
            current = None
            continue
        if not in_ss or t is None:
            continue
        words = line.split()
        if not words or words[0] == "State":
            continue
        if not line[0].isspace():
            if len(words) < 5 or not (words[1].isdigit() and words[2].isdigit()):
                continue  # e.g. ss's "Failed to find cgroup2 mount"
            timer = re.search(r"timer:\(([^)]*)\)", line)
            current = {"t": t, "ns": ns, "state": words[0], "recv_q": int(words[1]),
                       "send_q": int(words[2]), "local": words[3], "peer": words[4],
                       "timer": timer.group(1) if timer else ""}
            current.update({f: "" for f in SS_FIELDS})
            rows.append(current)
        elif current is not None:
            for f in SS_FIELDS:
                value = _field(line, f)
                if value and not current[f]:
                    current[f] = value
    return rows


def pacing_bits(row):
    """A row's pacing rate in bit/s (None when ss showed none)."""
    return int(row["pacing_rate"][:-3]) if row["pacing_rate"] else None


def stuck(rows, min_unacked=1):
    """The connections (ns, local, peer) whose last sample still has `unacked` data, with
    their rows in time order: the candidates of a stall."""
    last = {}
    for r in rows:
        last[(r["ns"], r["local"], r["peer"])] = r
    keys = [k for k, r in last.items() if r["unacked"] and int(r["unacked"]) >= min_unacked]
    return {k: [r for r in rows if (r["ns"], r["local"], r["peer"]) == k] for k in keys}


class NoProbe:
    """Stands in for a Probe when --probe is off."""

    def start(self, zero=None):
        pass

    def mark(self, text):
        pass

    def stop(self):
        pass


def main(argv=None):
    p = argparse.ArgumentParser(description="a probe log's connections as CSV")
    p.add_argument("log")
    p.add_argument("--csv", required=True)
    p.add_argument("--shift", type=float, default=0,
                   help="seconds subtracted from every t (to count from the fault)")
    args = p.parse_args(argv)
    with open(args.log) as f:
        rows = connections(f.read())
    for r in rows:
        r["t"] = f"{r['t'] - args.shift:.3f}"
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from results_lib import csv_io  # noqa: E402
    csv_io.write_rows(args.csv, rows, ["t", "ns", "state", "recv_q", "send_q", "local", "peer",
                                       "timer"] + SS_FIELDS)


if __name__ == "__main__":
    main()

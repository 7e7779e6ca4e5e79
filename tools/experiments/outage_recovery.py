#!/usr/bin/python3
"""How long one TCP connection takes to carry data again after its link comes back
(docs/results/reliability/link_faults.md, "Outage and brownout").

Two namespaces on a bridge, each link shaped as netem.h builds it (tbf 1 Gbit/s, bucket
128 KiB, bound 20 ms), and one TCP connection from machine a to machine b. After
--before_s seconds, a's bridge-side veth (va) goes down for --outage_s seconds (or both
tbf qdiscs drop to --brownout_rate_bits for --brownout_s), then comes back. The two machines exchange bursts of --burst_kib in turn, as a worker and a server
do; `recovery_s` is the time from the link's return to --recovered_bursts more bursts
received by a (empty if not within --after_s: stuck).

Arms (--arms), each both ends' TCP_CONGESTION and whether they run the nudge of
p3/base/tcp_nudge.h (every --nudge_every_s, a connection with data queued and paced below
100 kbit/s has its congestion control set to reno and back):
  bbr, cubic, bbr+nudge

Needs root. Namespaces are f3-<pid>-{br,a,b}, removed at the end.

  /usr/bin/python3 tools/experiments/outage_recovery.py --trials 10 --csv out.csv
"""

import argparse
import ctypes
import os
import socket
import struct
import subprocess
import sys
import threading
import time

FIELDS = ["fault", "arm", "trial", "recovery_s", "stuck", "nudges", "min_pacing_bits",
          "bursts_before", "load1"]
SLOW_PACING = 12500  # bytes/s, p3/base/tcp_nudge.h's kSlowPacing


def sh(*argv, check=True):
    return subprocess.run(list(argv), check=check, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


def tbf(rate_bits, burst=131072):
    return ["root", "tbf", "rate", f"{rate_bits}bit", "burst", str(burst), "latency", "20ms"]


def setup(run):
    br, a, b = f"{run}-br", f"{run}-a", f"{run}-b"
    sh("ip", "netns", "add", br)
    sh("ip", "-n", br, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", br, "link", "set", "br0", "up")
    for ns, port, address in [(a, "va", "10.78.0.1"), (b, "vb", "10.78.0.2")]:
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", port,
           "netns", br)
        sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        sh("ip", "-n", br, "link", "set", port, "master", "br0")
        sh("ip", "-n", br, "link", "set", port, "up")
        sh("tc", "-n", ns, "qdisc", "add", "dev", "eth0", *tbf(10**9))
        sh("tc", "-n", br, "qdisc", "add", "dev", port, *tbf(10**9))
    return br, a, b


def teardown(run):
    for suffix in ["a", "b", "br"]:
        sh("ip", "netns", "delete", f"{run}-{suffix}", check=False)


LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def enter(ns):
    """Moves the calling thread into network namespace `ns`."""
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    if LIBC.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns {ns}")
    os.close(fd)


def tcp_info(sock):
    """(state, ca_state, backoff, unacked, lost, pacing_rate, notsent) from TCP_INFO."""
    raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    state, ca_state, _, _, backoff = struct.unpack_from("BBBBB", raw, 0)
    unacked, _, lost = struct.unpack_from("III", raw, 24)
    pacing = struct.unpack_from("Q", raw, 104)[0] if len(raw) >= 112 else 0
    notsent = struct.unpack_from("I", raw, 144)[0] if len(raw) >= 148 else 0
    return state, ca_state, backoff, unacked, lost, pacing, notsent


def looks_stuck(info):
    """p3/base/tcp_nudge.h's LooksStuck."""
    state, _, _, unacked, _, pacing, notsent = info
    return state == 1 and (unacked > 0 or notsent > 0) and 0 < pacing < SLOW_PACING


def reset_cc(sock, name):
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"reno")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, name.encode())


def exchange(sock, args, cc, nudge, sends_first, stop, marks, result):
    """Bursts of --burst_kib each way in turn (a worker's gradients, a server's values):
    sends one, then receives one (or the other way round); `marks` gets the time of each
    burst received. Checks the socket every --nudge_every_s (and nudges, with `nudge`)."""
    burst = args.burst_kib << 10
    chunk = b"p" * burst
    sending = sends_first
    done = 0  # bytes of the current burst
    next_check = time.monotonic() + args.nudge_every_s
    sock.settimeout(0.2)
    while not stop.is_set():
        try:
            if sending:
                done += sock.send(chunk[done:])
            else:
                data = sock.recv(burst - done)
                if not data:
                    return
                done += len(data)
        except socket.timeout:
            pass
        except OSError:  # the other end closed first, at the trial's end
            return
        if done == burst:
            if not sending:
                marks.append(time.monotonic())
            sending, done = not sending, 0
        now = time.monotonic()
        if now >= next_check:
            next_check = now + args.nudge_every_s
            info = tcp_info(sock)
            if info[5]:
                result["min_pacing"] = min(result["min_pacing"] or info[5], info[5])
            if nudge and looks_stuck(info):
                reset_cc(sock, cc)
                result["nudges"] += 1


def trial(args, names, fault, arm, port):
    """One connection through one fault; returns the CSV row."""
    br, a, b = names
    cc, nudge = arm.split("+")[0], arm.endswith("+nudge")
    marks = []  # when machine a received each burst
    ready = threading.Event()
    stop = threading.Event()
    result = {"nudges": 0, "min_pacing": None}

    def receive():
        enter(b)
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("10.78.0.2", port))
        lst.listen(1)
        ready.set()
        conn, _ = lst.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        exchange(conn, args, cc, nudge, False, stop, [], result)
        conn.close()
        lst.close()

    def send():
        enter(a)
        s = socket.socket()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        s.connect(("10.78.0.2", port))
        exchange(s, args, cc, nudge, True, stop, marks, result)
        s.close()

    rx = threading.Thread(target=receive)
    rx.start()
    ready.wait(10)
    tx = threading.Thread(target=send)
    tx.start()
    time.sleep(args.before_s)
    if fault == "outage":
        inject = [["ip", "-n", br, "link", "set", "va", "down"]]
        undo = [["ip", "-n", br, "link", "set", "va", "up"]]
        held = args.outage_s
    else:
        inject = [["tc", "-n", a, "qdisc", "change", "dev", "eth0", *tbf(args.brownout_rate_bits, args.brownout_burst)],
                  ["tc", "-n", br, "qdisc", "change", "dev", "va", *tbf(args.brownout_rate_bits, args.brownout_burst)]]
        undo = [["tc", "-n", a, "qdisc", "change", "dev", "eth0", *tbf(10**9)],
                ["tc", "-n", br, "qdisc", "change", "dev", "va", *tbf(10**9)]]
        held = args.brownout_s
    bursts_before = len(marks)
    for argv in inject:
        sh(*argv)
    time.sleep(held)
    for argv in undo:
        sh(*argv)
    back = time.monotonic()
    base = len([t for t in marks if t <= back])
    deadline = back + args.after_s
    recovery = None
    while time.monotonic() < deadline and recovery is None:
        time.sleep(0.01)
        if len(marks) >= base + args.recovered_bursts:
            recovery = marks[base + args.recovered_bursts - 1] - back
    stop.set()
    tx.join()
    rx.join()
    return {"fault": fault, "arm": arm, "recovery_s": "" if recovery is None else f"{recovery:.3f}",
            "stuck": int(recovery is None), "nudges": result["nudges"],
            "min_pacing_bits": (result["min_pacing"] or 0) * 8, "bursts_before": bursts_before,
            "load1": f"{os.getloadavg()[0]:.1f}"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--faults", default="outage,brownout")
    p.add_argument("--arms", default="bbr,bbr+nudge,cubic")
    p.add_argument("--before_s", type=float, default=2)
    p.add_argument("--outage_s", type=float, default=5)
    p.add_argument("--brownout_s", type=float, default=10)
    p.add_argument("--brownout_rate_bits", type=int, default=1_000_000)
    p.add_argument("--brownout_burst", type=int, default=131072,
                   help="the brownout's tbf bucket, bytes (netem.h's and link_faults.py's: 128 KiB)")
    p.add_argument("--after_s", type=float, default=15,
                   help="a flow that has not recovered this long after the link is back is stuck")
    p.add_argument("--recovered_bursts", type=int, default=20)
    p.add_argument("--burst_kib", type=int, default=400,
                   help="each burst, as a worker's gradients of the small cluster's model")
    p.add_argument("--nudge_every_s", type=float, default=2,
                   help="as the link-fault trials' stall_report_s")
    p.add_argument("--csv", default="")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("outage_recovery: needs root (namespaces, tc)")
    run = f"f3-{os.getpid()}"
    names = setup(run)
    rows = []
    try:
        port = 20000
        for t in range(args.trials):
            for fault in args.faults.split(","):
                for arm in args.arms.split(","):
                    port += 1
                    row = trial(args, names, fault, arm, port)
                    row["trial"] = t
                    rows.append(row)
                    print(" ".join(f"{k}={row[k]}" for k in FIELDS), flush=True)
    finally:
        teardown(run)
        if args.csv and rows:
            with open(args.csv, "w") as f:
                f.write(",".join(FIELDS) + "\n")
                for r in rows:
                    f.write(",".join(str(r[k]) for k in FIELDS) + "\n")
    for fault in args.faults.split(","):
        for arm in args.arms.split(","):
            rs = [r for r in rows if r["fault"] == fault and r["arm"] == arm]
            rec = sorted(float(r["recovery_s"]) for r in rs if r["recovery_s"])
            med = f"{rec[len(rec) // 2]:.2f}" if rec else "-"
            print(f"{fault:<8} {arm:<10} stuck {sum(r['stuck'] for r in rs)} of {len(rs)}, "
                  f"median recovery {med} s (of those that recovered)")


if __name__ == "__main__":
    main()

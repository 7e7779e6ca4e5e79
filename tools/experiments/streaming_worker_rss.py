#!/usr/bin/python3
"""The worker's peak resident memory in a bench_streaming run (docs/results/streaming/
streaming.md, "The gradient buffer on first use and copy 6"): starts
<bench> --server_binary=<server> --iperf3_seconds=0 --iterations=4 [extra flags] on
loopback, reads VmHWM from /proc/<pid>/status every 50 ms until the process exits, and
prints the last value in MiB, the exit status and the 1-minute load average.

  /usr/bin/python3 tools/experiments/streaming_worker_rss.py BENCH SERVER [--out_dir=D]

VmHWM is the bench_streaming process alone (the worker library and its model), not the
server it starts. Works with binaries from before bench_streaming reported
worker_max_rss_mb itself.
"""
import os
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    bench, server = sys.argv[1], sys.argv[2]
    p = subprocess.Popen([bench, f"--server_binary={server}", "--iperf3_seconds=0",
                          "--iterations=4"] + sys.argv[3:],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hwm_kib = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm_kib = max(hwm_kib, int(line.split()[1]))
        except OSError:
            pass  # exited between poll() and open()
        time.sleep(0.05)
    print(f"{hwm_kib / 1024:.1f} {p.returncode} {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

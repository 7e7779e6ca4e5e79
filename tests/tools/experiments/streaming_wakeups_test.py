"""tools/experiments/streaming_wakeups.py (docs/results/streaming): perf script's scheduler
and system-call events counted per thread, and per round trip as the difference of a long
and a short run, on canned perf script lines (no perf, no benchmark run)."""
import unittest

import streaming_wakeups as wakeups

NAMES = {0: "read", 1: "write", 46: "sendmsg", 47: "recvmsg", 202: "futex"}


def lines(sends):
    """A run in which the worker's writer sends `sends` messages of 160000 bytes and wakes
    the server's handler for each; the server's main thread starts as the forked
    bench_streaming and is p3_server after its exec."""
    out = [
        "  bench_streaming   200/200   sched:sched_switch: prev_comm=bench_streaming "
        "prev_pid=200 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
        "  p3_server   200/200   sched:sched_switch: prev_comm=p3_server prev_pid=200 "
        "prev_prio=120 prev_state=R+ ==> next_comm=x next_pid=9 next_prio=120",
        "  bench_streaming   100/100   sched:sched_switch: prev_comm=bench_streaming "
        "prev_pid=100 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
    ]
    for _ in range(sends):
        out += [
            "      p3-send-s0   100/101   raw_syscalls:sys_enter: NR 46 (5, 7ffd, 0, 0, 0, 0)",
            "      p3-send-s0   100/101   syscalls:sys_exit_sendmsg: 0x27100",
            "      p3-send-s0   100/101   sched:sched_waking: comm=p3-recv-w0 pid=201 prio=120 "
            "target_cpu=001",
            "      p3-recv-w0   200/201   sched:sched_switch: prev_comm=p3-recv-w0 prev_pid=201 "
            "prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120",
            "      p3-recv-w0   200/201   raw_syscalls:sys_enter: NR 47 (5, 7ffd, 0, 0, 0, 0)",
            "      p3-recv-w0   200/201   syscalls:sys_exit_recvmsg: 0xffffffffffffff0b",
            "      p3-recv-w0   200/201   syscalls:sys_exit_recvmsg: 0x10000",
        ]
    return out


class StreamingWakeupsTest(unittest.TestCase):
    def test_counts_are_per_thread_by_name_and_processes_by_their_last_name(self):
        out, sizes = wakeups.flatten(wakeups.parse(lines(3), NAMES), "bench_streaming")
        self.assertEqual(out[("worker", "p3-send-s0", "sys_sendmsg")], 3)
        self.assertEqual(out[("server", "p3-recv-w0", "sleeps")], 3)
        self.assertEqual(out[("server", "p3_server", "preempted")], 1)
        self.assertEqual(out[("worker", "p3-send-s0", "woke server/p3-recv-w0")], 3)
        self.assertEqual(sizes[("worker", "p3-send-s0", "sendmsg_bytes")], [3, 3 * 160000])
        # A failed call (a negative errno, printed as a large hex number) has no size.
        self.assertEqual(sizes[("server", "p3-recv-w0", "recvmsg_bytes")], [3, 3 * 65536])

    def test_per_round_trip_is_the_long_run_less_the_short_one(self):
        class Args:
            label = "after"
        short = wakeups.flatten(wakeups.parse(lines(2), NAMES), "bench_streaming")
        long_ = wakeups.flatten(wakeups.parse(lines(12), NAMES), "bench_streaming")
        rows = wakeups.rows_p3(Args, "c", 1, short, long_, round_trips=10, load1="1.0")
        by = {(r["process"], r["thread"], r["metric"]): r for r in rows}
        self.assertEqual(float(by[("server", "p3-recv-w0", "sleeps")]["per_round_trip"]), 1.0)
        # Start-up events, in both runs alike, cancel out.
        self.assertEqual(float(by[("worker", "bench_streaming", "sleeps")]["per_round_trip"]), 0.0)
        self.assertEqual(float(by[("worker", "p3-send-s0", "sendmsg_bytes_per_call")]
                               ["per_round_trip"]), 160000.0)
        table = wakeups.thread_table(rows, "after")
        self.assertIn("| server / p3-recv-w0 |", table)
        self.assertIn("| worker / p3-send-s0 | server/p3-recv-w0 | 1.00 |", table)

    def test_the_ab_table_matches_rounds_by_run_and_gives_per_round_ratios(self):
        def row(run, goodput, cpu, load):
            return {"rate_gbps": "0.0", "shared_memory": "0", "run": str(run),
                    "goodput_gbps": str(goodput), "ratio": "0.3", "cpu_s_per_gb": str(cpu),
                    "host_cpu_s_per_gb": "1", "server_cpu_s": "1", "load1_start": str(load)}
        before = [row(0, 4.0, 1.0, 2.0), row(1, 8.0, 1.0, 3.0), row(2, 5.0, 1.0, 2.5)]
        # Round 2 of "after" is missing: only the matched rounds count.
        after = [row(1, 4.0, 0.5, 4.0), row(0, 4.0, 2.0, 2.2)]
        table = wakeups.ab_table(before, after)
        self.assertIn("| loopback | goodput Gbit/s | 6.000 | 4.000 | 0.75 (0.50 – 1.00) | 2 | "
                      "2.0 – 4.0 |", table)
        self.assertIn("| loopback | CPU s/GB, worker + server | 1.000 | 1.250 | 1.25 (0.50 – 2.00) |",
                      table)


if __name__ == "__main__":
    unittest.main()

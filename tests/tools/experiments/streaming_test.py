"""tools/experiments/streaming_cpu_breakdown.py (docs/results/streaming): perf's samples of
the benchmark's two processes grouped by what they do, and the table of medians, on a
canned perf report (no perf, no benchmark run)."""
import csv
import os
import tempfile
import unittest

import streaming_cpu_breakdown as breakdown

# perf report --no-children --sort comm,dso,sym -g none -q --field-separator=<tab>
REPORT = [
    " 20.00%  \tbench_streaming\t[kernel.kallsyms]  \t[k] _copy_from_iter",
    " 10.00%  \tgrpcpp_sync_ser\t[kernel.kallsyms]  \t[k] _raw_spin_unlock_irqrestore",
    " 10.00%  \tgrpcpp_sync_ser\tlibc.so.6          \t[.] __memmove_avx512_unaligned_erms",
    "  5.00%  \tgrpcpp_sync_ser\tp3_server          \t[.] p3::SliceOptimizer::ApplySgd",
    "  5.00%  \tbench_streaming\tlibtorch_cpu.so.1.13.0\t[.] at::native::mean",
    "  5.00%  \tdefault-executo\tlibgrpc.so.29.0.0  \t[.] grpc_chttp2_perform_read",
    " 40.00%  \tcc1plus        \tcc1plus            \t[.] push_to_top_level",
    "  5.00%  \tbench_streaming\t[kernel.kallsyms]  \t[k] tcp_sendmsg_locked",
]


# perf report --tasks: pid tid ppid | comm (indented by depth)
TASKS = [
    "       pid       tid      ppid  comm",
    "       900       900         1 |  cc1plus",
    "       100       100        99 |  perf",
    "       101       101       100 |   dpath-before-be",
    "       140       140       101 |    p3_server",
    "       140       141       140 |     grpcpp_sync_ser",
    "       101       102       101 |    default-executo",
    "       300       300       200 |  p3_server",
]

# perf report --no-children --sort pid,dso,sym -g none -q --field-separator=<tab>
PID_REPORT = [
    " 30.00%  \t   101:dpath-before-be\t[kernel.kallsyms]  \t[k] _copy_from_iter",
    " 10.00%  \t   140:p3_server\tp3_server          \t[.] p3::SliceOptimizer::ApplySgd",
    " 40.00%  \t   300:p3_server\tp3_server          \t[.] p3::SliceOptimizer::ApplySgd",
    " 20.00%  \t   900:cc1plus\tcc1plus            \t[.] push_to_top_level",
]


class StreamingCpuBreakdownTest(unittest.TestCase):
    def test_the_run_is_the_process_perf_started_and_its_descendants_whatever_its_name(self):
        self.assertEqual(breakdown.our_pids(TASKS, "/tmp/dpath-before-bench_streaming"),
                         {101, 102, 140, 141})

    def test_by_process_id_another_servers_samples_are_left_out(self):
        shares = breakdown.group_samples(PID_REPORT, {101, 140})
        self.assertAlmostEqual(shares["kernel: socket copies"], 30 / 40)
        self.assertAlmostEqual(shares["server: the optimizer"], 10 / 40)

    def test_samples_of_other_processes_are_left_out_and_groups_sum_to_one(self):
        shares = breakdown.group_samples(REPORT)
        self.assertAlmostEqual(sum(shares.values()), 1.0)
        self.assertAlmostEqual(shares["kernel: socket copies"], 20 / 60)
        self.assertAlmostEqual(shares["kernel: scheduling and wake-ups"], 10 / 60)
        self.assertAlmostEqual(shares["libc: memcpy / memmove"], 10 / 60)
        self.assertAlmostEqual(shares["server: the optimizer"], 5 / 60)
        self.assertAlmostEqual(shares["libtorch (the worker's model)"], 5 / 60)
        self.assertAlmostEqual(shares["gRPC, protobuf, Abseil"], 5 / 60)
        self.assertAlmostEqual(shares["kernel: TCP and the rest"], 5 / 60)

    def test_no_sample_of_the_benchmark_is_an_error(self):
        with self.assertRaises(SystemExit):
            breakdown.group_samples(REPORT[6:7])

    def test_the_table_gives_medians_per_label_in_cpu_seconds_and_microseconds(self):
        shares = breakdown.group_samples(REPORT)
        rows = []
        for run, cpu in ((1, 1.0), (2, 1.2), (3, 1.1)):
            result = {"cpu_s_per_gb": cpu, "goodput_up_gbps": 5.0, "slice_params": 40000}
            rows += breakdown.rows_for("after", "abc", "loopback", run, shares, result, 100)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "b.csv")
            with open(path, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=breakdown.FIELDS)
                w.writeheader()
                w.writerows(rows)
            text = breakdown.table(list(csv.DictReader(open(path))))
        lines = text.splitlines()
        # 1.1 s/GB x 1/3 = 0.367; a slice's round trip is 320 kB: 0.367 x 320 us = 117.3.
        self.assertIn("| kernel: socket copies | 0.367 (33.3 %) | 117.3 |", lines)
        self.assertIn("| all (the run's cpu_s_per_gb; goodput) | **1.100** (5.00 Gbit/s) | "
                      "**352.0** |", lines)
        self.assertEqual(lines[-1], "Runs per column: 3 (medians).")


if __name__ == "__main__":
    unittest.main()

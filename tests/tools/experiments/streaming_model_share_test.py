"""tools/experiments/streaming_model_share.py: the benchmark model's training thread split
off the host CPU per GB, the rest set against iperf3's, per rate and slice size; the
shared-memory runs and runs without iperf3's CPU left out."""
import os
import tempfile
import unittest

import streaming_model_share as share
from results_lib import csv_io

FIELDS = ["rate_gbps", "slice_params", "shared_memory", "bytes_sent", "bytes_received",
          "host_cpu_s_per_gb", "worker_training_thread_cpu_s", "iperf3_host_cpu_s_per_gb",
          "cpu_ratio_to_iperf3"]


def run(rate, host, thread_s, iperf3, slices=40000, shared=0):
    # 1 GB each way: the thread's CPU per GB is thread_s / 2.
    return dict(zip(FIELDS, [rate, slices, shared, 1e9, 1e9, host, thread_s, iperf3,
                             host / iperf3 if iperf3 else ""]))


class ModelShareTest(unittest.TestCase):
    def test_the_rest_is_the_host_cpu_less_the_training_thread_over_iperf3s(self):
        self.assertEqual(share.per_run(run(0.0, 1.0, 0.4, 0.5)), (1.0, 0.2, 1.6))

    def test_rows_per_rate_and_size_without_shared_memory_or_runs_lacking_iperf3(self):
        rows = [run(0.0, 1.0, 0.4, 0.5), run(0.0, 1.2, 0.4, 0.5), run(0.0, 0.8, 0.4, 0.5),
                run(0.0, 0.6, 0.4, 0.5, slices=640000),
                run(5.0, 2.0, 0.4, 1.0),
                run(0.0, 0.3, 0.2, 0.1, shared=1),  # the colocated path: left out
                run(5.0, 9.0, 0.4, "")]              # no iperf3 figure: left out
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            csv_io.write_rows(path, rows)
            lines = share.table(csv_io.read_rows(path))
        self.assertEqual(len(lines), 5)
        self.assertTrue(lines[2].startswith("| 5 Gbit/s | 40,000 | 2.00 (2.00 – 2.00) | "
                                            "0.20 (0.20 – 0.20) | 2.00 (2.00 – 2.00) | "
                                            "**1.80 (1.80 – 1.80)** | 1 |"))
        self.assertEqual(lines[3], "| loopback | 40,000 | 1.00 (0.80 – 1.20) | 0.20 (0.20 – 0.20) "
                                   "| 2.00 (1.60 – 2.40) | **1.60 (1.20 – 2.00)** | 3 |")
        self.assertTrue(lines[4].startswith("| loopback | 640,000 |"))


if __name__ == "__main__":
    unittest.main()

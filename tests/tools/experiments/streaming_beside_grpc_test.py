"""tools/experiments/streaming_beside_grpc.py: P3's runs paired with the probe's by link,
message size and round; the ratios per round; shared-memory runs and unpaired sizes left
out; a missing iperf3 CPU figure shown as a dash."""
import os
import tempfile
import unittest

import streaming_beside_grpc as beside
from results_lib import csv_io

P3_FIELDS = ["rate_gbps", "slice_params", "shared_memory", "goodput_gbps", "ratio",
             "iperf3_gbps", "bytes_sent", "bytes_received", "host_cpu_s_per_gb",
             "worker_training_thread_cpu_s", "iperf3_host_cpu_s_per_gb", "cpu_ratio_to_iperf3"]
GRPC_FIELDS = ["rate_gbps", "message_bytes", "goodput_gbps", "ratio", "iperf3_gbps",
               "cpu_ratio_to_iperf3"]


def p3(rate, slices, goodput, iperf3, host=2.0, iperf3_cpu=1.0, shared=0):
    # 1 GB each way and a 0.4 s training thread: 0.2 s of the host's CPU per GB is the model's.
    return dict(zip(P3_FIELDS, [rate, slices, shared, goodput, goodput / iperf3, iperf3,
                                1e9, 1e9, host, 0.4, iperf3_cpu,
                                host / iperf3_cpu if iperf3_cpu else ""]))


def grpc(rate, size, goodput, iperf3, cpu_ratio=1.5):
    return dict(zip(GRPC_FIELDS, [rate, size, goodput, goodput / iperf3, iperf3, cpu_ratio]))


def table(p3_rows, grpc_rows):
    with tempfile.TemporaryDirectory() as d:
        a, b = os.path.join(d, "p3.csv"), os.path.join(d, "grpc.csv")
        csv_io.write_rows(a, p3_rows)
        csv_io.write_rows(b, grpc_rows)
        return beside.table(csv_io.read_rows(a), csv_io.read_rows(b))


class BesideGrpcTest(unittest.TestCase):
    def test_the_kth_runs_of_a_link_and_size_are_a_round(self):
        lines = table(
            [p3(5.0, 40000, 4.0, 5.0), p3(5.0, 40000, 3.0, 5.0), p3(5.0, 40000, 4.5, 5.0)],
            [grpc(5.0, 160000, 4.0, 5.0), grpc(5.0, 160000, 4.0, 5.0),
             grpc(5.0, 160000, 5.0, 5.0)])
        self.assertEqual(len(lines), 3)
        # Per round P3 ÷ gRPC alone: 1.00, 0.75, 0.90.
        self.assertEqual(
            lines[2],
            "| 5 Gbit/s | 160 kB | 5.00 (5.00 – 5.00) | 0.80 (0.60 – 0.90) | "
            "0.80 (0.80 – 1.00) | 0.90 (0.75 – 1.00) | 2.00 (2.00 – 2.00) | "
            "1.80 (1.80 – 1.80) | 1.50 (1.50 – 1.50) | 3 |")

    def test_sizes_pair_as_four_bytes_a_value_and_loopback_comes_last(self):
        lines = table([p3(0.0, 640000, 8.0, 20.0), p3(2.5, 640000, 2.3, 2.4),
                       p3(2.5, 160000, 2.3, 2.4)],
                      [grpc(0.0, 2560000, 8.0, 20.0), grpc(2.5, 2560000, 2.3, 2.4)])
        self.assertEqual([line.split(" | ")[:2] for line in lines[2:]],
                         [["| 2.5 Gbit/s", "2,560 kB"], ["| loopback", "2,560 kB"]])

    def test_shared_memory_runs_are_left_out_and_a_missing_cpu_figure_is_a_dash(self):
        lines = table([p3(0.0, 40000, 9.0, 20.0, shared=1),
                       p3(0.0, 40000, 8.0, 20.0, iperf3_cpu="")],
                      [grpc(0.0, 160000, 8.0, 20.0)])
        self.assertEqual(len(lines), 3)
        cells = lines[2].split(" | ")
        self.assertEqual(cells[3], "0.40 (0.40 – 0.40)")  # the TCP run, not shared memory
        self.assertEqual(cells[6:8], ["–", "–"])


if __name__ == "__main__":
    unittest.main()

"""tools/experiments/throughput_ab.py: rounds matched by position in time order, failed
runs left out, the per-round ratio's median, on made-up raw CSVs."""
import csv
import os
import tempfile
import unittest

import throughput_ab

HEADER = ["time_utc", "model", "system", "mode", "bandwidth_gbps", "samples_per_second", "status"]


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(rows)


class ThroughputAbTest(unittest.TestCase):
    def test_rounds_are_matched_in_time_order_and_failures_left_out(self):
        with tempfile.TemporaryDirectory() as d:
            a, b = os.path.join(d, "a.csv"), os.path.join(d, "b.csv")
            # Written out of order; the failed run of `a` is not a round.
            write(a, [["2026-12-05T20:02:00Z", "vgg19", "p3", "p3", "0.0", "8.0", "ok"],
                      ["2026-12-05T20:01:00Z", "vgg19", "p3", "p3", "0.0", "7.0", "ok"],
                      ["2026-12-05T20:01:30Z", "vgg19", "p3", "p3", "0.0", "1.0", "timeout"],
                      ["2026-12-05T20:03:00Z", "vgg19", "p3", "p3", "0.0", "10.0", "ok"]])
            write(b, [["2026-12-05T20:01:10Z", "vgg19", "p3", "p3", "0.0", "7.7", "ok"],
                      ["2026-12-05T20:02:10Z", "vgg19", "p3", "p3", "0.0", "8.0", "ok"],
                      ["2026-12-05T20:03:10Z", "vgg19", "p3", "p3", "0.0", "9.0", "ok"],
                      ["2026-12-05T20:03:20Z", "resnet50", "p3", "p3", "0.0", "50", "ok"]])
            (row,) = throughput_ab.compare(throughput_ab.read(a), throughput_ab.read(b))
        self.assertEqual(row["rounds"], 3)
        self.assertAlmostEqual(row["before"], 8.0)
        self.assertAlmostEqual(row["after"], 8.0)
        # Per round 7.7/7, 8/8, 9/10: 1.1, 1.0, 0.9.
        self.assertAlmostEqual(row["ratio"], 1.0)
        self.assertAlmostEqual(row["ratio_min"], 0.9)
        self.assertAlmostEqual(row["ratio_max"], 1.1)
        self.assertEqual(row["faster_rounds"], 1)
        self.assertIn("**1.000**", throughput_ab.table([row]))

    def test_one_csv_split_by_a_column_pairs_each_layout_with_itself(self):
        header = HEADER + ["workers", "placement", "credit_bytes"]
        rows = [["2026-12-07T00:01:00Z", "resnet50", "p3", "p3", "1.0", "10.0", "ok", "3", "colocated", ""],
                ["2026-12-07T00:02:00Z", "resnet50", "p3", "p3", "1.0", "11.0", "ok", "3", "colocated", "1048576"],
                ["2026-12-07T00:03:00Z", "resnet50", "p3", "p3", "1.0", "8.0", "ok", "2", "separate", "0"],
                ["2026-12-07T00:04:00Z", "resnet50", "p3", "p3", "1.0", "6.0", "ok", "2", "separate", "1048576"]]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "raw.csv")
            with open(path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(header)
                w.writerows(rows)
            got = throughput_ab.compare(*throughput_ab.split(path, "credit_bytes"))
            with open(path, "a", newline="") as f:
                csv.writer(f).writerow(["2026-12-07T00:05:00Z", "resnet50", "p3", "p3", "1.0",
                                        "6.0", "ok", "2", "separate", "4194304"])
            with self.assertRaises(SystemExit):
                throughput_ab.split(path, "credit_bytes")
        self.assertEqual([(r["workers"], r["placement"], r["ratio"]) for r in got],
                         [("3", "colocated", 1.1), ("2", "separate", 0.75)])
        self.assertIn("| 2 | separate |", throughput_ab.table(got))


if __name__ == "__main__":
    unittest.main()

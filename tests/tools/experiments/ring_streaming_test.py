"""tools/experiments/ring_streaming.py: the ring's link figures from an all-reduce's time,
and the medians table from its CSV (the runs themselves need root and namespaces)."""
import contextlib
import io
import os
import tempfile
import unittest

import ring_streaming


class RingStreamingTest(unittest.TestCase):
    def test_two_ranks_send_the_whole_tensor_each_way_and_four_ranks_one_and_a_half(self):
        f = ring_streaming.link_figures(6_553_600, 2, 0.2, 1.0, 0.95)
        self.assertEqual(f["link_bytes"], 26_214_400)
        self.assertAlmostEqual(f["goodput_gbps"], 26_214_400 * 8 / 0.2 / 1e9)
        self.assertAlmostEqual(f["link_share"], f["goodput_gbps"] / 1.0)
        self.assertAlmostEqual(f["ratio_to_iperf3"], f["goodput_gbps"] / 0.95)
        self.assertEqual(ring_streaming.link_figures(1000, 4, 1.0, 2.5, 1.0)["link_bytes"], 6000)
        self.assertIsNone(ring_streaming.link_figures(1000, 2, 1.0, 0, 20.0)["link_share"])

    def test_report_takes_medians_per_rate_size_and_condition_old_csvs_alone(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.csv")
            head = ("rate_gbps,size,seconds,goodput_gbps,link_share,iperf3_gbps,iperf3_share,"
                    "ratio_to_iperf3,cpu_s_per_gb,load1")
            with open(path, "w") as f:  # a CSV from before the beside_compute column
                f.write(head + "\n1.0,bucket25mb,0.22,0.95,0.95,0.95,0.95,1.0,0.7,4.0\n"
                        "1.0,bucket25mb,0.24,0.90,0.90,0.95,0.95,0.95,0.8,5.0\n"
                        "1.0,bucket25mb,0.30,0.70,0.70,0.94,0.94,0.74,0.9,6.0\n")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                ring_streaming.report(path)
            row = [x for x in out.getvalue().splitlines() if x.startswith("| 1 |")]
            self.assertEqual(len(row), 1)
            self.assertIn("| 1 | bucket25mb | no | 3 | 0.2400 | 0.900 | 0.900 |", row[0])
            self.assertIn("4.00 – 6.00", row[0])


if __name__ == "__main__":
    unittest.main()

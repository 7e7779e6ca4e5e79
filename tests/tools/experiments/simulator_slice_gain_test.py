"""The slice-gain what-if's helpers (simulator_slice_gain.py, issue 36): the exponent of
the cost per preemption from two wake-up rates, the cost at a point's rate (clamped to
the measured rates), and the per-message cost from the shaped links' differences
between two slice sizes."""
import math
import os
import tempfile
import unittest

import simulator_calibration as cal
import simulator_slice_gain as sg

PRE_HEADER = "round,condition,us_per_preemption"
STREAM_HEADER = "rate_gbps,run,goodput_gbps,cpu_s_per_gb,worker_cpu_s,server_cpu_s,commit,slice_params"


class PreemptionRateTest(unittest.TestCase):
    def test_exponent_is_the_log_ratio_of_the_two_rates_medians(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.csv")
            with open(path, "w") as f:
                f.write(PRE_HEADER + "\n")
                for r, (a, b) in enumerate(((40, 10), (38, 9), (99, 30))):
                    f.write(f"{r},same:1000:0,{a}\n{r},same:4000:0,{b}\n{r},none,\n")
            k, med = sg.preempt_exponent(path)
        self.assertEqual(med, [40.0, 10.0])
        self.assertAlmostEqual(k, -1.0)

    def test_cost_at_a_rate_is_clamped_to_the_measured_rates(self):
        self.assertAlmostEqual(sg.rate_preempt(30e-6, 2000.0, -1.0), 15e-6)
        self.assertAlmostEqual(sg.rate_preempt(30e-6, 100.0, -1.0), 30e-6)
        self.assertAlmostEqual(sg.rate_preempt(30e-6, 16000.0, -1.0), 7.5e-6)


class WakeBytesTest(unittest.TestCase):
    def test_reference_slice_is_in_bytes_of_the_wire(self):
        self.assertEqual(sg.reference_slice_params({"wire_dtype": ""}, 160000), 40000)
        self.assertEqual(sg.reference_slice_params({"wire_dtype": "bfloat16"}, 160000), 80000)

    def test_points_off_the_shaped_links_or_with_short_messages_keep_the_base(self):
        base = {"preempt_s": 30e-6, "per_message_s": 1e-5}
        for p in ({"system": "p3", "slice_params": 320000, "bandwidth": 0.0},
                  {"system": "p3", "slice_params": 40000, "bandwidth": 4.0},
                  {"system": "ddp", "slice_params": 320000, "bandwidth": 4.0}):
            self.assertEqual(sg.wake_bytes_calibration(p, base, 1.0, {}, 160000), base)


class ShapedPerMessageTest(unittest.TestCase):
    def test_the_shaped_difference_gives_its_per_message_cost_back(self):
        m_shaped, m_loop, b, update = 20e-6, 10e-6, 0.3e-9, 0.05
        small, large = cal.STREAMING_MESSAGE_BYTES, sg.LARGE * 4

        def cpu(m, n_bytes, extra=0.0):
            return 2 * (b + m / n_bytes) * 1e9 + update + extra

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.csv")
            with open(path, "w") as f:
                f.write(STREAM_HEADER + "\n")
                for n, n_bytes in ((40000, small), (sg.LARGE, large)):
                    f.write(f"0.0,0,8,{cpu(m_loop, n_bytes)},1,1,c,{n}\n")
                    for rate in (2.5, 5.0):
                        f.write(f"{rate},0,{rate},{cpu(m_shaped, n_bytes, 0.5)},1,1,c,{n}\n")
            m, per_byte, diffs = sg.shaped_per_message(path, update)
        self.assertAlmostEqual(m, m_shaped, delta=1e-9)
        self.assertEqual(len(diffs), 2)
        # The per-byte cost keeps the 40,000 loopback CPU per GB with the shaped m.
        self.assertTrue(math.isclose(2 * (per_byte + m / small) * 1e9 + update,
                                     cpu(m_loop, small), rel_tol=1e-9))


if __name__ == "__main__":
    unittest.main()

"""tools/experiments/streaming_shared_memory.py (docs/results/streaming): the slice-size
sweep's table and fit, and the before/after table of per-round ratios, on canned CSV rows
(no benchmark run)."""
import unittest

import streaming_shared_memory as shm


def row(slice_params, cpu_s_per_gb, goodput=10.0, shared=True, rate=0.0, busy=3.0,
        seconds=2.0, thread=0.3, load=1.0):
    return {"shared_memory": "1" if shared else "0", "rate_gbps": str(rate),
            "slice_params": str(slice_params), "params": "25000000",
            "cpu_s_per_gb": str(cpu_s_per_gb), "goodput_gbps": str(goodput),
            "goodput_to_memcpy": str(goodput / 80), "host_busy_s": str(busy),
            "seconds": str(seconds), "worker_training_thread_cpu_s": str(thread),
            "load1_start": str(load)}


class SweepTest(unittest.TestCase):
    def test_cpu_per_slice_is_the_round_trip_of_both_directions(self):
        # 0.5 s/GB x 2 x 40,000 x 4 bytes = 160 us.
        self.assertAlmostEqual(shm.slice_cpu_us(row(40000, 0.5)), 160.0)

    def test_the_fit_separates_a_fixed_cost_from_a_per_value_one(self):
        # 50 us per slice + 2 ns per value, as cpu_s_per_gb would report it.
        rows = []
        for size in (10000, 40000, 160000):
            us = 50 + 0.002 * size
            rows.append(row(size, us / (2 * size * 4 / 1e9 * 1e6)))
        lines = shm.sweep_table(rows + [row(40000, 9, shared=False)], cores=2)
        self.assertEqual(len([l for l in lines if l.startswith("| 1")]), 2)  # 10k, 160k
        self.assertIn("| 40,000 | 625 | 10.00 | 0.125 | 0.406 | 130.0 | 0.25 | 1.0 – 1.0 | 1 |",
                      lines)
        self.assertEqual(lines[-1], "Fit over 3 runs: CPU per slice round trip = 50.0 µs + "
                                    "2.000 ns per value (1.000 ns per value each way).")


class AbTest(unittest.TestCase):
    def test_ratios_are_taken_round_by_round_per_path(self):
        before = [row(40000, 0.5, goodput=10), row(40000, 1.0, shared=False, goodput=8),
                  row(40000, 0.4, goodput=12), row(40000, 0.9, shared=False, goodput=9)]
        after = [row(40000, 0.25, goodput=20), row(40000, 1.0, shared=False, goodput=8),
                 row(40000, 0.3, goodput=18), row(40000, 0.9, shared=False, goodput=9)]
        lines = shm.ab_table(before, after)
        self.assertIn("| shared memory | 11.00 → 19.00 | 1.75 (1.50 – 2.00) | 0.450 → 0.275 | "
                      "0.62 (0.50 – 0.75) | 0.300 → 0.300 | 2 | 1.0 – 1.0 |", lines)
        self.assertIn("| loopback | 8.50 → 8.50 | 1.00 (1.00 – 1.00) | 0.950 → 0.950 | "
                      "1.00 (1.00 – 1.00) | 0.300 → 0.300 | 2 | 1.0 – 1.0 |", lines)


if __name__ == "__main__":
    unittest.main()

"""tools/experiments/simulator_model_share.py: the benchmark model's CPU per GB crossing is
the training thread's less copy 1 (half a memcpy of the bytes crossing), from the loopback
runs at slices of 40,000 only, and the factor takes it off the loopback CPU less the
update; a CSV without those runs is refused."""
import unittest

import simulator_model_share as share

FIELDS = ["rate_gbps", "shared_memory", "slice_params", "worker_training_thread_cpu_s",
          "bytes_sent", "bytes_received", "cpu_s_per_gb", "memcpy_cpu_s_per_gb"]


def row(rate, thread_s, cpu, slices=40000, shared=0, memcpy=""):
    # 1 GB each way: thread_s / 2 is the training thread's CPU per GB crossing.
    return {k: str(v) for k, v in zip(FIELDS, [rate, shared, slices, thread_s, 1e9, 1e9,
                                                cpu, memcpy])}


class ModelShareTest(unittest.TestCase):
    def test_the_model_is_the_thread_less_copy_1_and_the_factor_takes_it_off(self):
        rows = [row(0.0, 0.4, 1.05), row(0.0, 0.6, 1.15), row(0.0, 0.5, 1.10),
                row(5.0, 9.0, 9.0),                        # a shaped link: not loopback
                row(0.0, 9.0, 9.0, slices=640000),         # another slice size
                row(0.0, 9.0, 9.0, shared=1, memcpy=0.2)]  # shared memory: its memcpy only
        factor, model, cpu = share.model_share(rows, update_s_per_gb=0.1,
                                               default_memcpy_s_per_gb=0.5)
        self.assertAlmostEqual(cpu, 1.10)
        self.assertAlmostEqual(model, 0.25 - 0.5 * 0.2)   # the CSV's own memcpy, not the default
        self.assertAlmostEqual(factor, 1 - 0.15 / 1.0)

    def test_without_a_memcpy_run_the_default_is_taken_and_the_model_is_never_negative(self):
        factor, model, _ = share.model_share([row(0.0, 0.1, 1.1)], 0.1, default_memcpy_s_per_gb=0.5)
        self.assertEqual((factor, model), (1.0, 0.0))

    def test_a_csv_without_loopback_runs_at_40000_is_refused(self):
        with self.assertRaisesRegex(ValueError, "no loopback runs"):
            share.model_share([row(5.0, 0.4, 1.0)], 0.1, 0.5)


if __name__ == "__main__":
    unittest.main()

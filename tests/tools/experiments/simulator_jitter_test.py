"""tools/experiments/simulator.py's predictions with each block's computation varying
(p3_sim --block_jitter): the median of the seeds' runs, and `local` left out."""
import unittest
from unittest import mock

import simulator
import simulator_points as sp

POINT = {"model": "resnet50", "system": "p3", "bandwidth": 1.0, "workers": 2,
         "slice_params": 40000, "placement": "", "iterations": 13, "warmup": 3}


class SimulatorJitterTest(unittest.TestCase):
    def predict(self, point, jitter):
        calls = []

        def run(config, profile, cal, sets, flags):
            calls.append(flags)
            seed = next((int(f.split("=")[1]) for f in flags if f.startswith("--jitter_seed=")), 0)
            return {"samples_per_second": {0: 9.0, 1: 5.0, 2: 1.0, 3: 4.0, 4: 2.0, 5: 3.0}[seed],
                    "flags": flags}

        with mock.patch.object(simulator.p3_sim, "run", run), \
                mock.patch.dict(simulator.JITTER, jitter):
            return simulator.predict(point, "cal.json", 1.0, {}), calls

    def test_a_prediction_is_the_run_of_the_seeds_median_throughput(self):
        r, calls = self.predict(POINT, {"block_jitter": 0.37, "seeds": 5})
        self.assertEqual(len(calls), 5)
        self.assertEqual([f[-1] for f in calls], [f"--jitter_seed={s}" for s in range(1, 6)])
        self.assertTrue(all("--block_jitter=0.37" in f for f in calls))
        self.assertEqual(r["samples_per_second"], 3.0)  # of 5, 1, 4, 2, 3
        self.assertIn("--jitter_seed=5", r["flags"])

    def test_local_and_the_model_without_jitter_run_once_unjittered(self):
        for point, jitter in ((dict(POINT, system="local", workers=1), {"block_jitter": 0.37}),
                              (POINT, {"block_jitter": 0.0})):
            r, calls = self.predict(point, jitter)
            self.assertEqual(len(calls), 1)
            self.assertFalse(any(f.startswith("--block_jitter") for f in calls[0]))
            self.assertEqual(r["samples_per_second"], 9.0)

    def test_the_models_jitter_is_the_measured_median(self):
        self.assertEqual(simulator.JITTER, {"block_jitter": sp.BLOCK_JITTER,
                                            "seeds": sp.JITTER_SEEDS})
        self.assertGreater(sp.BLOCK_JITTER, 0)


if __name__ == "__main__":
    unittest.main()

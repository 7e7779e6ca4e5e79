"""tools/experiments/default_experiment.py and lr_schedule.py (docs/results/training),
whole, against a stand-in launcher."""
import json
import os
import tempfile
import unittest

import fakes


class TrainingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.launcher = fakes.launcher(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_default_experiment_compares_p3_with_local_and_its_two_runs(self):
        out = os.path.join(self.tmp.name, "default_experiment.json")
        stdout = fakes.run_script("default_experiment.py", f"--launcher={self.launcher}",
                                  f"--out={out}", f"--work_dir={self.tmp.name}/work",
                                  cwd=fakes.ROOT)
        with open(out) as f:
            result = json.load(f)
        self.assertEqual(len(result["runs"]), 9)
        self.assertTrue(result["p3_runs_identical"])
        self.assertEqual([c["iterations"] for c in result["p3_vs_local_param_l2"]],
                         [10, 20, 100])
        # The stand-in trains p3 and local alike, as the real ones do.
        self.assertEqual({c["relative_difference"] for c in result["p3_vs_local_param_l2"]},
                         {0.0})
        self.assertIn("| p3, 1 epoch, run 1 | 640 | 85.00 % |", stdout)
        self.assertIn("| p3, 10 iterations | 640 | — |", stdout)

    def test_lr_schedule_tables_each_schedule_over_the_seeds(self):
        out = os.path.join(self.tmp.name, "lr_schedule.json")
        stdout = fakes.run_script("lr_schedule.py", f"--launcher={self.launcher}",
                                  f"--out={out}", f"--work_dir={self.tmp.name}/work",
                                  cwd=fakes.ROOT)
        with open(out) as f:
            result = json.load(f)
        self.assertEqual(len(result["runs"]), 9)  # 3 schedules x 3 seeds
        cosine = [r for r in result["runs"] if r["schedule"] == "cosine over the epoch"]
        self.assertIn("--set=optimizer.schedule.name=cosine", cosine[0]["command"])
        self.assertIn("--set=training.seed=3", cosine[2]["command"])
        self.assertIn("| constant (today's default) | 85.00 % | 85.00 % | 85.00 % | 85.00 % |",
                      stdout)


if __name__ == "__main__":
    unittest.main()

"""tools/experiments/wire_dtype_accuracy.py (against a stand-in launcher) and
wire_dtype_throughput.py (on a few rows of wire_dtype_vm3_raw.csv)."""
import json
import os
import tempfile
import unittest

import fakes
from results_lib import csv_io


class WireDtypeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_accuracy_runs_every_dtype_per_seed_and_compares_with_float32(self):
        out = os.path.join(self.tmp.name, "acc.json")
        stdout = fakes.run_script("wire_dtype_accuracy.py",
                                  f"--launcher={fakes.launcher(self.tmp.name)}",
                                  "--seeds=1,2", "--epochs=1", f"--out={out}",
                                  f"--work_dir={self.tmp.name}/work", cwd=fakes.ROOT)
        with open(out) as f:
            result = json.load(f)
        self.assertEqual([(r["wire_dtype"], r["seed"]) for r in result["runs"]],
                         [("float32", 1), ("bfloat16", 1), ("float16", 1),
                          ("float32", 2), ("bfloat16", 2), ("float16", 2)])
        self.assertIn("--set=optimizer.schedule.t_max=937", result["runs"][0]["command"])
        self.assertEqual(result["summary"]["seeds_compared"], [1, 2])
        self.assertEqual(result["summary"]["difference_points"]["bfloat16"], 0.0)
        self.assertIn("| bfloat16 | 85.00 % | +0.00 points |", stdout)

    def test_throughput_table_ratio_to_float32_and_the_link_bounds(self):
        csv = os.path.join(self.tmp.name, "t.csv")
        stdout = fakes.run_script(
            "wire_dtype_throughput.py", f"--raw={fakes.TESTDATA}/wire_dtype_raw.csv",
            f"--csv={csv}", f"--plot={self.tmp.name}/t.png")
        rows = {r["wire_dtype"]: r for r in csv_io.read_rows(csv)}
        self.assertEqual(rows["float32"]["median_samples_per_second"], "17.911")
        self.assertEqual(rows["bfloat16"]["ratio_to_float32"], "1.598")
        self.assertEqual(rows["bfloat16"]["bound_2_bytes"], "37.446")
        self.assertEqual(rows["none"]["ratio_to_float32"], "")  # local: no wire
        self.assertIn("| resnet50 | p3 | 1.0 | bfloat16 | 3 | 28.61 (27.49–29.49) | 1.598 |",
                      stdout)
        self.assertTrue(os.path.getsize(f"{self.tmp.name}/t.png") > 0)


if __name__ == "__main__":
    unittest.main()

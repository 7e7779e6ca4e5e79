"""The GPU page's prediction script (docs/results/gpu/predictions_2026-12-05.md): the
compute scales from the H200 inputs, the GPU check's figures filled in beside the
predictions, and the table."""
import json
import os
import tempfile
import unittest
from unittest import mock

import gpu_predictions as g

ZOO = """zoo,resnet50,64,224,25557032,102228128,33.0,1939.4,0.000442
zoo,vgg19,64,224,143667240,574668960,55.177,1159.9,0.00109
"""
EAGER = """# a comment line
ref,resnet50,fp32,64,224,25557032,102228128,32.0,2000.0
ref,resnet50,bf16,64,224,25557032,102228128,16.0,4000.0
"""


class GpuPredictionsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        with open(os.path.join(d, "h200_zoo.csv"), "w") as f:
            f.write(ZOO)
        with open(os.path.join(d, "h200_pytorch_eager.csv"), "w") as f:
            f.write(EAGER)
        with open(os.path.join(d, "profile.json"), "w") as f:
            json.dump({"model": "resnet50", "batch": 64, "blocks": [
                {"forward_s": 0.01, "backward_s": 0.02, "params": [250_000_000]},
                {"forward_s": 0.002, "backward_s": 0.004, "params": [0]}]}, f)
        with open(os.path.join(d, "calibration.json"), "w") as f:
            json.dump({"worker_update_s_per_byte": 1e-12}, f)

    def tearDown(self):
        self.tmp.cleanup()

    def test_compute_scale_is_the_zoo_iteration_less_sgd_over_the_blocks_and_bf16_eager_ratio(self):
        d = self.tmp.name
        with mock.patch.multiple(g, INPUTS=d, PROFILE=os.path.join(d, "profile.json"),
                                 CALIBRATION=os.path.join(d, "calibration.json")):
            fp32, bf16, how = g.compute_scales()
        # SGD: 250 M values x 4 bytes x 1 ps = 1 ms; blocks 36 ms; the zoo's 33 ms.
        self.assertAlmostEqual(fp32, (0.033 - 0.001) / 0.036)
        self.assertAlmostEqual(bf16, fp32 * 0.5)
        self.assertIn("33.000 ms", how)

    def test_fill_takes_matching_items_and_the_two_worker_rates_from_the_ratio_detail(self):
        rows = [{"item": "P3 / local, fp32", "measured": ""},
                {"item": "2 workers at 10 Gbit/s, p3 samples/s", "measured": ""},
                {"item": "2 workers at 10 Gbit/s, baseline samples/s", "measured": ""},
                {"item": "2 workers at 25 Gbit/s, p3 samples/s", "measured": ""},
                {"item": "streaming goodput, loopback (Gbit/s each way)", "measured": ""}]
        check = [{"item": "P3 / local, fp32", "measured": "0.87", "detail": ""},
                 {"item": "2 workers at 10 Gbit/s, P3 / baseline", "measured": "1.05",
                  "detail": "P3 25.0, baseline 23.9 samples/s"},
                 {"item": "2 workers at 25 Gbit/s", "measured": "-",
                  "detail": "a run failed"},
                 {"item": "streaming goodput, loopback (Gbit/s each way)", "measured": "-",
                  "detail": ""}]
        filled = [r["measured"] for r in g.fill(rows, check)]
        self.assertEqual(filled, ["0.87", "25.0", "23.9", "", ""])

    def test_the_table_has_one_line_per_row_and_this_machines_pair_only_where_simulated(self):
        rows = [{"section": "c", "item": "a", "predicted": "1.0", "measured": "",
                 "gpu_unshared_bound": "2.0"},
                {"section": "e", "item": "b", "predicted": "6.28", "measured": "7",
                 "simulated_here_2_cores": "4.37", "measured_here": "5.48"}]
        lines = g.markdown(rows).splitlines()
        self.assertEqual(len(lines), 4)
        self.assertEqual(lines[2], "| c | a | 1.0 |  | 2.0 |  |")
        self.assertEqual(lines[3], "| e | b | 6.28 | 7 |  | 4.37 / 5.48 |")


if __name__ == "__main__":
    unittest.main()

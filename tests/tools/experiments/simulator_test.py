"""The simulator page's scripts (docs/results/simulator): how simulator.py reads measured
points and asks p3_sim for its predictions (against a stand-in p3_sim), the calibration's
readers, the noise statistics, the scale-out grid, and the host-contention table."""
import os
import tempfile
import unittest
from unittest import mock

import fakes
import scaling
import simulator
import simulator_calibration
import simulator_noise
import simulator_points as sp
import simulator_preemption_cost
from results_lib import raw_csv

T = fakes.TESTDATA


class SimulatorTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        os.environ["P3_SIM"] = fakes.p3_sim(self.tmp.name)

    def tearDown(self):
        del os.environ["P3_SIM"]
        self.tmp.cleanup()

    def test_run_points_are_medians_per_point_with_the_wire_dtype(self):
        rows = raw_csv.read(f"{T}/wire_dtype_raw.csv")
        pts = {(p["system"], p["wire_dtype"]): p for p in sp.run_points("wire", "w.csv", rows)}
        self.assertEqual(pts[("p3", "")]["measured"], 17.911)  # float32: ""
        self.assertEqual(pts[("p3", "bfloat16")]["runs"], 3)
        self.assertEqual(pts[("local", "")]["workers"], 1)
        self.assertEqual(pts[("p3", "")]["slice_params"], 40000)
        self.assertEqual(pts[("p3", "")]["source"], "w.csv")

    def test_every_set_names_a_calibration_that_exists(self):
        for name, _ in sp.FRESH_SETS + sp.SWEEP_SETS + sp.CC_SETS + sp.WIRE_SETS:
            self.assertIn("file", sp.calibration_of(name))
        self.assertEqual(sp.calibration_of("cc-bbr")["file"], "configs/sim/calibration_cpu_cc.json")

    def test_compute_scale_interpolates_to_the_measured_local(self):
        # The stand-in's `local` iteration is 0.2 s x compute_scale; ResNet-50's batch is 8.
        self.assertAlmostEqual(simulator_calibration.compute_scale("resnet50", 20.0, "c.json"),
                               2.0)

    def test_predict_asks_for_the_points_system_placement_and_iterations(self):
        p = {"model": "resnet50", "system": "ddp", "bandwidth": 1.0, "workers": 3,
             "slice_params": 40000, "placement": "", "wire_dtype": "bfloat16",
             "iterations": 13, "warmup": 3}
        args = simulator.predict(p, "cal.json", 1.5, {"shared_memory": False})["args"]
        for a in ("--set=mode=p3", "--allreduce", "--set=scheduling.shared_memory=false",
                  "--set=scheduling.wire_dtype=bfloat16", "--set=cluster.workers=3",
                  "--machines_per_host=3", "--compute_scale=1.5", "--iterations=13",
                  "--warmup=3", "--calibration=cal.json"):
            self.assertIn(a, args)
        self.assertNotIn("--machines_per_host=2", args)
        sep = simulator.predict(dict(p, system="p3", workers=2, placement="separate"),
                                "cal.json", 1.0, {})["args"]
        self.assertIn("--set=network.placement=separate", sep)
        self.assertIn("--machines_per_host=4", sep)
        self.assertIn("--set=mode=p3", sep)

    def test_streaming_medians_per_rate(self):
        m = simulator_calibration.streaming_measured(f"{T}/streaming.csv")
        self.assertEqual(sorted(m), [0.0, 1.0, 2.5, 5.0])
        self.assertEqual(m[1.0]["runs"], 2)

    def test_noise_point_runs_and_the_median_variance_table(self):
        with mock.patch.object(sp, "results", lambda name: f"{T}/{os.path.basename(name)}"), \
                mock.patch.object(sp, "FRESH_SETS", []), \
                mock.patch.object(sp, "WIRE_SETS", [("wire", "wire_dtype_raw.csv")]), \
                mock.patch.object(sp, "CC_FILE", "missing.csv"), \
                mock.patch.object(sp, "SWEEP_RAW", {}), \
                mock.patch.object(sp, "AGGREGATED_RAW", {}), \
                mock.patch.object(sp, "SWEEP_SETS", [("2026-11-30", "sweep_aggregated.csv")]):
            with open(f"{T}/sweep_aggregated.csv") as f:
                self.assertIn("median_sps", f.readline())
            runs = simulator_noise.point_runs()
        self.assertEqual(sorted(runs[("wire", "resnet50", "p3", 1.0, 2, 40000, "", "bfloat16")]),
                         [27.486, 28.614, 29.493])
        # An aggregated point of 2 runs stands for them by its min and max.
        self.assertEqual(runs[("2026-11-30", "resnet50", "p3", 1.0, 2, 40000, "", "")],
                         [15.993, 17.183])
        self.assertEqual(simulator_noise.MEDIAN_VAR[1], 1.0)

    def test_scaling_asks_for_each_system(self):
        r = scaling.sim("resnet50", "allreduce", 8, 25, "c.json")
        self.assertIn("--allreduce", r["args"])
        self.assertIn("--set=cluster.workers=8", r["args"])
        self.assertIn("--equal_split", r["args"])
        r = scaling.sim("vgg19", "p3_bfloat16", 4, 10, "c.json")
        self.assertIn("--set=scheduling.wire_dtype=bfloat16", r["args"])
        lines = []
        scaling.wire_table(lines, {("wire", "resnet50", "p3_bfloat16", 4, 10): 300.0,
                                   ("wire", "resnet50", "p3", 4, 10): 200.0}, "wire")
        self.assertIn("| ResNet-50 | 4 | 300 (1.50×) | not run | not run |", lines)

    def test_host_contention_table_from_its_csv(self):
        out = fakes.run_script("simulator_host_contention.py", "--table",
                               f"--csv={T}/host_contention.csv")
        self.assertIn("| 1 | 17.80 / 18.92 | 1.000 | 1.000 |", out)
        self.assertIn("| 2 | 37.02 / 33.12 | 1.915 | 0.958 | 1.00 / 1.00 | 1.00 |", out)

    def test_preemption_conditions_parse_and_bad_ones_are_refused(self):
        self.assertEqual(simulator_preemption_cost.parse_condition("same:1000:0"),
                         ("same", 1000.0, 0))
        self.assertEqual(simulator_preemption_cost.parse_condition("other:64"), ("other", 0, 64))
        with self.assertRaises(SystemExit):
            simulator_preemption_cost.parse_condition("same:fast")

    def test_the_command_lines_start(self):
        for name in ("simulator.py", "simulator_cpu_breakdown.py", "simulator_side_by_side.py",
                     "scaling.py"):
            self.assertIn("usage", fakes.run_script(name, "--help"))


if __name__ == "__main__":
    unittest.main()

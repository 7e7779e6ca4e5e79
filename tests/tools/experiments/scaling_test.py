"""tools/experiments/scaling.py (docs/results/simulator/scaling.md): the scale-out grid's
p3_sim commands, its resume after a kill, the before/after table, the kernel-buffer
what-if and the compute scale from the H200 measurements, against a stand-in p3_sim."""
import csv
import json
import os
import tempfile
import unittest
from unittest import mock

import fakes
import scaling


class ScalingTest(fakes.FakeP3SimTest):
    def test_scaling_asks_for_each_system_on_16_cores_with_the_precisions_profile(self):
        r = scaling.sim("resnet50", "fp32", "allreduce", 8, 25, "c.json")
        self.assertIn("--allreduce", r["args"])
        self.assertIn("--set=cluster.workers=8", r["args"])
        self.assertIn("--equal_split", r["args"])
        self.assertIn("--cpu_cores_per_host=16", r["args"])
        self.assertIn("--machines_per_host=1", r["args"])
        r = scaling.sim("vgg19", "bf16", "baseline", 4, 10, "c.json")
        self.assertIn("--set=mode=baseline", r["args"])
        self.assertIn("--profile=" + scaling.profile_path("vgg19", "bf16"), r["args"])
        self.assertTrue(r["args"][1].endswith("scaling_vgg19_b64_bf16_h200.json"))

    def test_scaling_run_resumes_skipping_written_points_and_drops_a_cut_short_row(self):
        with tempfile.TemporaryDirectory() as d:
            for precision in scaling.PRECISIONS:
                open(os.path.join(d, f"scaling_resnet50_b64_{precision}_h200.json"), "w").close()
            path = os.path.join(d, "scaling.csv")
            with open(path, "w") as f:
                # One whole row (a value the stand-in never gives), then a row cut short by
                # a kill: no newline, 7 of its 12 fields.
                f.write(",".join(scaling.HEADER) + "\n"
                        "measured,resnet50,fp32,p3,4,10,111.0,0.1,0.03,0.07,0.0,0.1\n"
                        "measured,resnet50,fp32,baseline,4,10,95")
            args = mock.Mock(models="resnet50", machines="4", calibrations="measured",
                             fresh=False, jobs=2, sim=None)
            with mock.patch.object(scaling, "RESULTS", d), \
                    mock.patch.object(scaling, "PROFILES", d):
                scaling.run(args)
            with open(path) as f:
                rows = [l.rstrip("\n").split(",") for l in f]
        self.assertEqual(rows[0], scaling.HEADER)
        keys = [tuple(r[:6]) for r in rows[1:]]
        # 2 precisions x 3 bandwidths x 3 systems, each once, every row whole.
        self.assertEqual(len(keys), 18)
        self.assertEqual(len(set(keys)), 18)
        self.assertTrue(all(len(r) == 12 and all(r) for r in rows[1:]))
        sps = {k: r[6] for k, r in zip(keys, rows[1:])}
        self.assertEqual(sps[("measured", "resnet50", "fp32", "p3", "4", "10")], "111.0")
        # The cut-short point was simulated again: the stand-in's 64 x 4 / (0.2 + 0.1 / 10).
        self.assertEqual(sps[("measured", "resnet50", "fp32", "baseline", "4", "10")],
                         str(round(64 * 4 / 0.21, 2)))

    def test_scaling_before_after_pairs_p3_and_baseline_on_4_machines_only(self):
        def rows(p3, base):
            out = []
            for system, sps in (("p3", p3), ("baseline", base)):
                for m, cal in ((4, "measured"), (8, "measured"), (4, "wire")):
                    out.append({"calibration": cal, "model": "vgg19", "precision": "fp32",
                                "system": system, "machines": str(m), "bandwidth_gbps": "10",
                                "samples_per_second": str(sps * (m if cal == "wire" or m == 8
                                                                 else 1))})
            return out
        lines = scaling.before_after(rows(400.0, 200.0), rows(400.0, 250.0))
        self.assertEqual(len(lines), 3)  # header, rule, VGG-19 at 10 Gbit/s: nothing else
        self.assertEqual(lines[2], "| VGG-19 | 10 | 400 → 400 | 200 → 250 (1.25×) | "
                                   "2.00 → 1.60 |")

    def test_scaling_buffer_whatif_replaces_only_the_kernel_buffer_and_writes_each_point(self):
        with tempfile.TemporaryDirectory() as d:
            cal = os.path.join(d, "cal.json")
            with open(cal, "w") as f:
                f.write('{"latency_s": 2.5e-05, "kernel_buffer_bytes": 1048576}')
            copy = scaling.calibration_with_buffer(cal, 4 << 20, d)
            with open(copy) as f:
                self.assertEqual(json.load(f), {"latency_s": 2.5e-05,
                                                "kernel_buffer_bytes": 4194304})
            args = mock.Mock(models="vgg19", calibrations="measured", sim=None)
            with mock.patch.object(scaling, "RESULTS", d), \
                    mock.patch.dict(scaling.CALIBRATIONS, {"measured": cal}):
                scaling.buffer_whatif(args)
            with open(os.path.join(d, "scaling_buffer_whatif.csv")) as f:
                rows = list(csv.DictReader(f))
        # 3 bandwidths x 3 buffers x 2 systems, on 4 machines.
        self.assertEqual(len(rows), 18)
        self.assertEqual({r["kernel_buffer_bytes"] for r in rows},
                         {str(b) for b in scaling.BUFFERS})
        self.assertEqual({r["machines"] for r in rows}, {"4"})

    def test_scaling_compute_scale_fits_the_zoo_iteration_and_bf16_needs_an_eager_ratio(self):
        profile = {"blocks": [{"forward_s": 0.01, "backward_s": 0.03, "params": [1000]}]}
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "h200_zoo.csv"), "w") as f:
                f.write("zoo,resnet50,64,224,1000,4000,36.0,1777.0,0.0004\n"
                        "zoo,seq2seq_lstm,64,0,1000,4000,20.0,3200.0,0.0002\n")
            with open(os.path.join(d, "h200_pytorch_eager.csv"), "w") as f:
                f.write("# torch\nref,resnet50,fp32,64,224,1000,4000,30.0,2133\n"
                        "ref,resnet50,bf16,64,224,1000,4000,15.0,4266\n")
            with mock.patch.object(scaling, "INPUTS", d):
                fp32 = scaling.compute_scale("resnet50", "fp32", profile)
                bf16 = scaling.compute_scale("resnet50", "bf16", profile)
                lstm = scaling.compute_scale("seq2seq_lstm", "bf16", profile)
        sgd = scaling.SGD_S_PER_BYTE * 4000
        self.assertAlmostEqual(fp32, (0.036 - sgd) / 0.04)
        self.assertAlmostEqual(bf16, fp32 / 2)
        self.assertIsNone(lstm)


if __name__ == "__main__":
    unittest.main()

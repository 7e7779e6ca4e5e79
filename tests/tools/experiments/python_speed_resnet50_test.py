"""python_speed_resnet50.py (docs/results/python/python_speed.md): its Python workers'
model is the zoo's resnet50 (blocks, shapes, initial values), its runs go through bench_throughput's
with the worker.command set for the Python kind only, and its summary's medians and
ratios."""
import csv
import os
import subprocess
import tempfile
import unittest

import fakes
import python_speed_resnet50

ZOO_BLOCKS = (["conv1"] + ["layer1.{}".format(i) for i in range(3)] +
              ["layer2.{}".format(i) for i in range(4)] +
              ["layer3.{}".format(i) for i in range(6)] +
              ["layer4.{}".format(i) for i in range(3)] + ["fc"])
# The zoo's model_bench (a data dependency): in the test's runfiles under bazel test.
MODEL_BENCH = os.path.join(os.environ.get("TEST_SRCDIR", "bazel-bin"),
                           "p3" if "TEST_SRCDIR" in os.environ else "", "models", "model_bench")


class PythonSpeedResnet50Test(unittest.TestCase):
    def test_twin_has_the_zoo_resnet50_blocks_shapes_and_initial_values(self):
        model, blocks = python_speed_resnet50.resnet50_twin(num_classes=1000, seed=1)
        self.assertEqual([name for name, _ in blocks], ZOO_BLOCKS)
        in_blocks = [id(p) for _, m in blocks for p in m.parameters()]
        self.assertEqual(sorted(in_blocks), sorted(id(p) for p in model.parameters()))
        dump = subprocess.run(
            [MODEL_BENCH, "--dump=resnet50",
             "--image_size=32"], check=True, capture_output=True, text=True).stdout
        zoo = [line.split() for line in dump.splitlines() if not line.startswith("output")]
        twin = list(model.parameters())
        self.assertEqual(len(twin), len(zoo))
        self.assertEqual(sum(p.numel() for p in twin), 25557032)
        for p, (name, shape, total) in zip(twin, zoo):
            self.assertEqual("x".join(str(s) for s in p.shape), shape, name)
            self.assertAlmostEqual(p.sum().item(), float(total), delta=1e-4, msg=name)

    def test_runs_go_through_the_launcher_with_worker_command_only_for_python(self):
        with tempfile.TemporaryDirectory() as d:
            env = {"P3_LAUNCHER": fakes.launcher(d)}
            table = os.path.join(d, "rows.csv")
            out = fakes.run_script("python_speed_resnet50.py", "--trials=2",
                                   "--bandwidths=1,0", "--kinds=c++,python",
                                   "--iterations=6", "--warmup=2",
                                   "--out=" + os.path.join(d, "out"), "--csv=" + table,
                                   env=env)
            with open(table, newline="") as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([(r["trial"], r["bandwidth_gbps"], r["kind"]) for r in rows],
                             [(t, bw, k) for t in "01" for bw in ("1.0", "0.0")
                              for k in ("c++", "python")])
            for r in rows:
                self.assertEqual(r["status"], "ok")
                self.assertEqual(r["iterations"], "6")
                self.assertEqual(r["first_loss"], "2.0")  # the fake's records
                with open(os.path.join(r["output_dir"], "args")) as f:
                    args = f.read().splitlines()
                command = [a for a in args if a.startswith("--set=worker.command=")]
                self.assertIn("--set=mode=p3", args)
                self.assertIn("--set=training.iterations=6", args)
                if r["kind"] == "c++":
                    self.assertEqual(command, [])
                else:
                    self.assertEqual(len(command), 1)
                    self.assertIn("python_speed_resnet50.py --worker", command[0])
                    self.assertIn("--iterations=6", command[0])
                    self.assertIn("/bazel-bin/worker/python", command[0])
            # Both kinds ran the same (fake) cluster: equal medians, ratio 1.
            self.assertIn("python/c++ 1.000", out)
            self.assertIn("ddp —", out)
            table = fakes.run_script("python_speed_resnet50.py", "--report=" + table)
            # The fake's iterations take 0.5 and 0.6 s in turn (+0.05 s on rank 1): the
            # median of 16 / 0.525 and 16 / 0.625 samples/s.
            self.assertIn("| 1 | 28.0 (28.0–28.0, n=2) | 28.0 (28.0–28.0, n=2) | — | 1.000 | "
                          "— | — | 1.000 (1.000–1.000) | yes |", table)
            self.assertIn("| unlimited | 28.0", table)

    def test_summary_takes_medians_of_finished_runs_per_rate(self):
        def row(kind, bw, rate, status="ok"):
            return dict(kind=kind, bandwidth_gbps=str(bw), samples_per_second=str(rate),
                        status=status)
        rows = [row("c++", 1, 10), row("c++", 1, 12), row("c++", 1, 30),
                row("python", 1, 11), row("python", 1, 0, "failed:1"), row("ddp", 1, 5),
                row("c++", 0, 40), row("python", 0, 38)]
        (bw1, med1, py_cpp1, py_ddp1, cpp_ddp1), (_, med0, py_cpp0, py_ddp0, _) = \
            python_speed_resnet50.summarise(rows, [1.0, 0.0])
        self.assertEqual(med1, {"c++": 12, "python": 11, "ddp": 5})
        self.assertAlmostEqual(py_cpp1, 11 / 12)
        self.assertAlmostEqual(py_ddp1, 11 / 5)
        self.assertAlmostEqual(cpp_ddp1, 12 / 5)
        self.assertIsNone(med0["ddp"])
        self.assertAlmostEqual(py_cpp0, 38 / 40)
        self.assertIsNone(py_ddp0)


if __name__ == "__main__":
    unittest.main()
